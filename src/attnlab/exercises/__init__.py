"""Self-checks for the book's exercises.

A learner writes an answer in the notebook and calls::

    from attnlab.exercises import check
    check("01.1", moving_average_kernel)

The check tests the answer's *behaviour* on fresh random cases against references computed
before the answer runs (never against a stored output), prints what passed or what was
expected on which input (naming the common mistake when it recognises one), and returns
``True`` or ``False``. Each chapter's exercise specs live in their own module (``ch01.py``,
``ch02.py``, …), declared with ``attnlab.course.spec.exercise``; the same specs drive
the grader (``python -m attnlab.grade``).
"""

from attnlab.course.spec import Case, exercise
from attnlab.exercises._registry import ExerciseFailure, check, exercise_ids, register

__all__ = ["Case", "ExerciseFailure", "check", "exercise", "exercise_ids", "register"]
