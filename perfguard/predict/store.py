"""The model store: baselines/models/<target>/<family>.json, one calibrated model each.

A model file holds the predictor's JSON payload and the metadata that says where it came
from: dataset digest, machine(s), date, feature list, hold-out metrics, perfguard version,
simulator, the feature set the predictor reads and, for the pipeline features, the id of the
pipeline model that computed them (a different pipeline model means: retrain). Files are
written atomically and read strictly: a corrupted file, or one written by an unknown schema
version, is an input error naming it, never a silent fall-back.

Schema 1 files (before the predictors followed scikit-learn's estimator contract: counts
features only, payloads without their constructor parameters) are upgraded as they are read,
in one place, `upgrade_v1`: the payload gains its parameters with the values every schema-1
model was fitted with, after the old model_id has been checked; the model then gets the id of
its upgraded payload.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from perfguard import __version__, jsonfile
from perfguard.atomic import atomic_write_text
from perfguard.errors import InputError, newer_format
from perfguard.predict.features import DERIVED_FEATURES, matrix
from perfguard.predict.registry import PREDICTOR_NAMES, predictor_class
from perfguard.sim.stats import Stats

if TYPE_CHECKING:  # scikit-learn is imported with the first model read, not with this module
    from perfguard.predict.estimator import CalibratedPredictor

MODEL_SCHEMA = 2


def _v1_id(name: str, payload: dict) -> str:
    text = json.dumps({"name": name, "payload": payload}, sort_keys=True)
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


# The constructor parameters every schema-1 model was fitted with (they were not stored).
_V1_PARAMS: dict[str, dict[str, Any]] = {
    "mlr": {"positive": True},
    "dnn": {"alpha": 1e-3, "max_iter": 3000, "seed": 0},
    "gp": {"iterations": 16, "initial": 6, "folds": 5, "max_points": 1200, "seed": 0},
    "xgboost": {"objective": "auto", "seed": 0},
}


def upgrade_v1(data: dict, source: str) -> dict:
    """A schema-1 model document as schema 2 (the one place old model files are upgraded)."""
    name, payload = data.get("predictor"), data.get("payload")
    if name not in _V1_PARAMS or not isinstance(payload, dict):
        return data  # the checks below name what is wrong
    if _v1_id(name, payload) != data.get("model_id"):
        raise InputError(f"{source}: model payload does not match its model_id {data.get('model_id')} (edited?)")
    payload = {k: v for k, v in payload.items() if k != "line_bytes"}  # the profile's line size is used
    payload.update(_V1_PARAMS[name], features="counts")
    if name == "xgboost":
        payload["chosen"] = payload["objective"]  # schema 1 stored the objective it chose
        payload["objective"] = "auto"
        payload["n_features"] = len(DERIVED_FEATURES)
    return {**data, "schema": MODEL_SCHEMA, "payload": payload, "model_id": None, "upgraded_from": 1}


@dataclass
class StoredModel:
    predictor: CalibratedPredictor
    meta: dict[str, Any]
    path: Path


class ModelFiles(Protocol):
    """Calibrated models read from somewhere other than the working tree: a git revision's tree
    (`check --base`) or the base revision of `perfguard compare`."""

    def read_file(self, relative: str) -> tuple[str, str] | None:
        """(text, label for messages) of baselines/<relative>; None when there is no such file."""


def model_path(root: Path, target: str, family: str) -> Path:
    return Path(root) / "models" / target / f"{family}.json"


def save_model(path: Path, predictor: CalibratedPredictor, meta: dict[str, Any]) -> Path:
    document = {
        "schema": MODEL_SCHEMA,
        "perfguard_version": __version__,
        "predictor": predictor.name,
        "model_id": predictor.model_id,
        **meta,
        "payload": predictor.to_payload(),
    }
    atomic_write_text(path, json.dumps(document, sort_keys=True) + "\n")
    return path


def load_model(path: Path, text: str | None = None, source: str | None = None) -> StoredModel:
    """Read a model file (or `text` read from elsewhere, e.g. a git revision, named `source`)."""
    source = source or str(path)
    label = "corrupted model file"
    data = jsonfile.read(path, label, source) if text is None else jsonfile.loads(text, source, label)
    if not isinstance(data, dict):
        raise InputError(f"{source}: corrupted model file (not an object)")
    if type(data.get("schema")) is int and data["schema"] == 1:
        data = upgrade_v1(data, source)
    if type(data.get("schema")) is int and data["schema"] > MODEL_SCHEMA:
        raise newer_format(source, "model schema", data["schema"], MODEL_SCHEMA, data.get("perfguard_version"))
    if type(data.get("schema")) is not int or data["schema"] != MODEL_SCHEMA:
        raise InputError(
            f"{source}: model schema {data.get('schema')!r}, this perfguard reads {MODEL_SCHEMA}; "
            f"retrain with 'perfguard calibrate train'"
        )
    for key, kind in (
        ("predictor", str),
        ("model_id", (str, type(None))),
        ("payload", dict),
        ("target", str),
        ("family", str),
        ("simulator", str),
        ("features", list),
    ):
        if key not in data:
            raise InputError(f"{source}: corrupted model file (missing '{key}')")
        if not isinstance(data[key], kind):
            raise InputError(f"{source}: corrupted model file ('{key}' has the wrong type)")
    if data["predictor"] not in PREDICTOR_NAMES:
        raise InputError(
            f"{source}: unknown predictor {data['predictor'][:40]!r} (one of {', '.join(PREDICTOR_NAMES)})"
        )
    cls = predictor_class(data["predictor"])
    try:
        predictor = cls.from_payload(data["payload"])
    except Exception as exc:  # a payload out of shape can fail anywhere in numpy or XGBoost
        raise InputError(f"{source}: corrupted model payload ({type(exc).__name__})") from None
    if data["model_id"] is None:  # upgraded from schema 1: its old id was checked there
        data["model_id"] = predictor.model_id
    if predictor.model_id != data["model_id"]:
        raise InputError(f"{source}: model payload does not match its model_id {data['model_id']} (edited?)")
    if not _scores(predictor):
        raise InputError(
            f"{source}: corrupted model payload (it does not turn statistics into a positive, finite time)"
        )
    meta = {k: v for k, v in data.items() if k != "payload"}
    return StoredModel(predictor, meta, Path(path))


# Statistics of a plausible kernel: a model that loads must score them (an id can be recomputed
# by hand, so a matching model_id says nothing about whether the payload's arrays fit together).
_PROBE = Stats(
    insts=1_000_000,
    loads=300_000,
    stores=100_000,
    branches=100_000,
    cond_branches=90_000,
    indirect_branches=0,
    calls=10,
    returns=10,
    fp_insts=200_000,
    vec_insts=200_000,
    vec_fp_insts=100_000,
    l1i_accesses=1_000_000,
    l1i_misses=100,
    l1d_accesses=400_000,
    l1d_misses=20_000,
    l1d_writebacks=5_000,
    l2_accesses=20_100,
    l2_misses=2_000,
    l2_writebacks=500,
)


# What the pipeline model might say of them: core cycles, stall cycles, core cycles per bound class.
_PROBE_PIPELINE = np.array([[500_000.0, 10_000.0, 200_000.0, 200_000.0, 50_000.0, 50_000.0, 0.0]])


def _scores(predictor: CalibratedPredictor) -> bool:
    try:
        with np.errstate(all="ignore"):
            X = matrix([_PROBE], predictor.features, predictor.view, pipe=_PROBE_PIPELINE)
            times = np.asarray(predictor.predict(X), dtype=np.float64)
    except Exception:
        return False
    return times.shape == (1,) and bool(np.isfinite(times).all() and (times > 0).all())
