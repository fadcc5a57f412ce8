"""The stored run of chapter 11: packaged weights, log and record of a longer training.

``python -m attnlab.lm train`` made them and ``scripts/package_lm_run.py`` copied them here,
adding the baselines of the same test split (the exact command is the record's
``"command"``); :func:`load_stored` rebuilds the model from ``files/stored_model.pt``,
:func:`stored_log` reads ``files/stored_log.csv`` and :func:`stored_record` the JSON record.
"""

from __future__ import annotations

import csv
import io
import json
from importlib import resources

__all__ = ["load_stored", "stored_log", "stored_record"]


def _file(name: str):
    return resources.files("attnlab.lm").joinpath("files", name)


def stored_record() -> dict:
    """The stored run's ``config.json``: model, training options, results, machine."""
    return json.loads(_file("stored_config.json").read_text())


def stored_log() -> list[dict]:
    """The stored run's ``log.csv`` as rows of floats (``valid_bpc`` NaN where not measured)."""
    rows = csv.DictReader(io.StringIO(_file("stored_log.csv").read_text()))
    return [{k: float(v) for k, v in row.items()} for row in rows]


def load_stored(attention: str | None = None):
    """The stored :class:`~attnlab.lm.model.CharTransformer`, in eval mode, on the CPU.

    ``attention`` (``"book"`` or ``"sdpa"``) overrides the stored path; the weights are the
    same, and ``"book"`` can return the attention weights.
    """
    import torch

    from attnlab.lm.model import CharTransformer, LMConfig

    with _file("stored_model.pt").open("rb") as f:
        saved = torch.load(io.BytesIO(f.read()), map_location="cpu", weights_only=True)
    config = dict(saved["config"])
    if attention is not None:  # the same weights through the other attention path
        config["attention"] = attention
    model = CharTransformer(LMConfig.from_dict(config))
    model.load_state_dict(saved["state_dict"])
    return model.eval()
