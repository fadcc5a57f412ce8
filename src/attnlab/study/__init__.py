"""The study of chapter 10: GAM against standard attention on small synthetic tasks.

Pandya's GAM paper ends by promising a comparison with standard attention that, as far as we
know, was never published. This package runs a small, honest version of it on a CPU (or a
GPU with ``--device cuda``):

- ``attnlab.study.slots``: the attention variants (``ATTENTIONS``), the embedding
  choices of GAM's relative branch (``EMBEDDINGS``) and the slot adapter;
- ``attnlab.study.models``: :class:`StudyModel`, a pre-norm transformer encoder whose
  self-attention is chosen by name, with learned absolute or relative positions;
- ``attnlab.study.runner``: :class:`RunConfig`, :func:`run_one` (train, then validation,
  test and length-generalisation accuracy) and :func:`read_results`;
- ``attnlab.study.engine``: the resumable :func:`run_grid`, in this process or on a Dask
  cluster (:func:`dask_executor`), with one writer of the CSV (:class:`DriverLock`);
- ``attnlab.study.grids``: the named grids (``"full"``, ``"reduced"``), in priority order;
- ``attnlab.study.stats``: means with 95 % t-intervals over seeds, the learning rate chosen
  on the validation split, and the rule "different only when the intervals separate";
- ``attnlab.study.report``: tables and figures from the CSV, side-by-side step times;
- ``attnlab.study.packaged``: the finished results shipped with the package
  (:func:`packaged_results`, :func:`packaged_text`), which chapter 10 reads.

Command line (writes ``results.csv``, ``summary.md``, ``timing.md`` and PNG figures into
``--out``)::

    python -m attnlab.study --grid full --out src/attnlab/study/results

(``make study``; that folder is package data, so the wheel ships what the command wrote).
"""

from attnlab.study.engine import DriverLock, GridLocked, dask_executor, run_grid
from attnlab.study.grids import GRIDS, grid
from attnlab.study.models import Block, StudyModel
from attnlab.study.packaged import packaged_results, packaged_text
from attnlab.study.report import (
    accuracy_markdown,
    plot_accuracy,
    plot_curves,
    plot_embedding_ablation,
    summary_markdown,
    time_attentions,
    timing_markdown,
    write_report,
)
from attnlab.study.runner import (
    COLUMNS,
    CONFIG_COLUMNS,
    CURVE_POINTS,
    RESULT_COLUMNS,
    TEST_SIZE,
    VAL_SIZE,
    RunConfig,
    build_model,
    evaluate,
    parse_results,
    read_results,
    resolve_device,
    run_one,
    task_loss,
    token_cross_entropy,
)
from attnlab.study.slots import (
    ATTENTIONS,
    EMBEDDINGS,
    POSITIONS,
    AttentionSpec,
    CorpusShawAttention,
    LuongSelfAttention,
    SelfAttentionSlot,
    make_attention,
    uses_embedding,
)
from attnlab.study.stats import find, separated, summarize, t_interval

__all__ = [
    "ATTENTIONS", "COLUMNS", "CONFIG_COLUMNS", "CURVE_POINTS", "EMBEDDINGS", "GRIDS",
    "DriverLock", "GridLocked", "dask_executor",
    "POSITIONS", "RESULT_COLUMNS", "TEST_SIZE", "VAL_SIZE", "AttentionSpec", "Block",
    "CorpusShawAttention", "LuongSelfAttention", "RunConfig", "SelfAttentionSlot", "StudyModel",
    "accuracy_markdown", "build_model", "evaluate", "grid", "make_attention", "plot_accuracy",
    "packaged_results", "packaged_text", "parse_results", "plot_curves",
    "plot_embedding_ablation", "read_results", "resolve_device", "run_grid",
    "run_one", "find", "separated", "summarize", "summary_markdown", "t_interval", "task_loss",
    "time_attentions", "timing_markdown", "token_cross_entropy", "uses_embedding",
    "write_report",
]  # fmt: skip
