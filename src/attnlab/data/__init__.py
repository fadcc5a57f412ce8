"""Everything that makes or loads data (numpy only; nothing is downloaded).

One module per kind of data:

- :mod:`attnlab.data.generators`: the seeded sequence-to-sequence tasks, :func:`lookup_task`
  (chapter 01) and :func:`date_task` (chapter 07), with :func:`format_date`.
- :mod:`attnlab.data.sequences`: the containers and helpers those tasks share,
  :class:`Vocab`, :class:`SequenceTask`, :func:`pad_sequences`, :func:`batch_indices`.
- :mod:`attnlab.data.images`: images as patch tokens, and chapter 06's colour/texture task.
- :mod:`attnlab.data.tasks`: the token-labelling tasks of chapter 10's study.

The names of the first two are re-exported here, so ``from attnlab.data import date_task``
works; they are documented on this page.
"""

# The generators and the containers they fill (generators.py re-exports those of sequences.py).
from attnlab.data.generators import *  # noqa: F403
from attnlab.data.generators import __all__  # noqa: F401
