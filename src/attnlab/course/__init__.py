"""Coursework: exercise specs and self-checks, the sandboxed grader, student versions.

* :mod:`attnlab.course.spec` — one spec per exercise (cases, references, common mistakes);
* :mod:`attnlab.course.check` — running a spec in the learner's kernel (``check``);
* :mod:`attnlab.course.adapters` — calling an answer, plain data on disk;
* :mod:`attnlab.course.sandbox` — bubblewrap isolation and resource limits;
* :mod:`attnlab.course.runner` — the notebook runner that executes inside the sandbox;
* :mod:`attnlab.course.grade` — grading one notebook (:mod:`~attnlab.course.assigned`: what
  was assigned; :mod:`~attnlab.course.capture`: the grader's call of each answer, in the
  sandbox; :mod:`~attnlab.course.verdicts`: reading what the sandbox sends back;
  :mod:`~attnlab.course.rlimits`: the resource limits);
* :mod:`attnlab.course.lms`, :mod:`attnlab.course.reports`, :mod:`attnlab.course.gradescope`
  — LMS downloads and rosters; gradebook, Canvas import, feedback; a Gradescope bundle;
* :mod:`attnlab.course.grade_cli` — the command ``python -m attnlab.grade``;
* :mod:`attnlab.course.assign`, :mod:`attnlab.course.student` — student versions
  (``python -m attnlab.assign``).
* :mod:`attnlab.course.markup` — the notebooks' plain-Markdown exercise markup, and the
  sphinx-exercise directives the book makes of it.
"""
