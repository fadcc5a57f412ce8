"""Self-checks for the book's exercises.

A learner writes an answer in the notebook and calls::

    from attnlab.exercises import check
    check("01.2", moving_average_kernel)

The check tests the answer's *behaviour* on fresh random cases against attnlab's reference
implementation (never against a stored output), prints what passed or what was expected on
which input, and returns ``True`` or ``False``. Each chapter's checks live in their own module
(``ch01.py``, ``ch02.py``, …), registered with :func:`register`.
"""

from attnlab.exercises._registry import ExerciseFailure, check, exercise_ids, register

__all__ = ["ExerciseFailure", "check", "exercise_ids", "register"]
