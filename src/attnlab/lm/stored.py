"""The stored run of chapter 11: packaged weights, log and record of a longer training.

``python -m attnlab.lm train`` made them (the exact command is in ``STORED_COMMAND`` and on
the chapter's page); :func:`load_stored` rebuilds the model from ``files/stored_model.pt``,
:func:`stored_log` reads ``files/stored_log.csv`` and :func:`stored_record` the JSON record.
"""

from __future__ import annotations

import csv
import io
import json
from importlib import resources

__all__ = ["load_stored", "stored_log", "stored_record", "STORED_COMMAND"]

#: The command that made the stored files (then copied into ``src/attnlab/lm/files/``).
STORED_COMMAND = "python -m attnlab.lm train --out runs/stored"


def _file(name: str):
    return resources.files("attnlab.lm").joinpath("files", name)


def stored_record() -> dict:
    """The stored run's ``config.json``: model, training options, results, machine."""
    return json.loads(_file("stored_config.json").read_text())


def stored_log() -> list[dict]:
    """The stored run's ``log.csv`` as rows of floats (``valid_bpc`` NaN where not measured)."""
    rows = csv.DictReader(io.StringIO(_file("stored_log.csv").read_text()))
    return [{k: float(v) for k, v in row.items()} for row in rows]


def load_stored():
    """The stored :class:`~attnlab.lm.model.CharTransformer`, in eval mode, on the CPU."""
    import torch

    from attnlab.lm.model import CharTransformer, LMConfig

    with _file("stored_model.pt").open("rb") as f:
        saved = torch.load(io.BytesIO(f.read()), map_location="cpu", weights_only=True)
    model = CharTransformer(LMConfig.from_dict(saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.eval()
