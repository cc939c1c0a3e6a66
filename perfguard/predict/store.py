"""The model store: baselines/models/<target>/<family>.json, one calibrated model each.

A model file holds the predictor's JSON payload and the metadata that says where it came
from: dataset digest, machine(s), date, feature list, hold-out metrics, perfguard version,
simulator. Files are written atomically and read strictly: a corrupted file, or one written
by another schema version, is an input error naming it, never a silent fall-back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.atomic import atomic_write_text
from perfguard.errors import InputError
from perfguard.predict.base import CalibratedPredictor
from perfguard.predict.registry import predictor_class

MODEL_SCHEMA = 1


@dataclass
class StoredModel:
    predictor: CalibratedPredictor
    meta: dict[str, Any]
    path: Path


def model_path(root: Path, target: str, family: str) -> Path:
    return Path(root) / "models" / target / f"{family}.json"


def save_model(path: Path, predictor: CalibratedPredictor, meta: dict[str, Any]) -> Path:
    document = {"schema": MODEL_SCHEMA, "perfguard_version": __version__, "predictor": predictor.name,
                "model_id": predictor.model_id, **meta, "payload": predictor.to_payload()}
    atomic_write_text(path, json.dumps(document, sort_keys=True) + "\n")
    return path


def load_model(path: Path, text: str | None = None, source: str | None = None) -> StoredModel:
    """Read a model file (or `text` read from elsewhere, e.g. a git revision, named `source`)."""
    source = source or str(path)
    try:
        data = json.loads(Path(path).read_text() if text is None else text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{source}: corrupted model file (not valid JSON)") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: corrupted model file (not an object)")
    if data.get("schema") != MODEL_SCHEMA:
        raise InputError(f"{source}: model schema {data.get('schema')!r}, this perfguard reads {MODEL_SCHEMA}; "
                         f"retrain with 'perfguard calibrate train'")
    for key in ("predictor", "model_id", "payload", "target", "family", "simulator", "features"):
        if key not in data:
            raise InputError(f"{source}: corrupted model file (missing '{key}')")
    cls = predictor_class(data["predictor"])
    try:
        predictor = cls.from_payload(data["payload"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{source}: corrupted model payload ({type(exc).__name__})") from None
    if predictor.model_id != data["model_id"]:
        raise InputError(f"{source}: model payload does not match its model_id {data['model_id']} (edited?)")
    meta = {k: v for k, v in data.items() if k != "payload"}
    return StoredModel(predictor, meta, Path(path))
