"""A fitted calibrated predictor bound to a target profile, and what the calibrated predictors
share: they learn log(time) relative to an offset column of their feature matrix (log
instructions, or log pipeline-model cycles with the pipeline features).

Imports no scikit-learn itself: `CalibratedPredictor` (perfguard.predict.estimator) is only a
type here, so binding a stored model costs scikit-learn's import once, where it is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perfguard.predict.base import Predictor
from perfguard.predict.features import Featurizer, offset_column
from perfguard.sim.stats import Stats

if TYPE_CHECKING:
    from perfguard.predict.estimator import CalibratedPredictor


class CalibratedModel(Predictor):
    """A fitted CalibratedPredictor bound to a target profile: Stats -> features -> seconds."""

    calibrated = True

    def __init__(
        self, estimator: CalibratedPredictor, profile, cache_dir: Path | None = None, meta: dict | None = None
    ):
        self.estimator = estimator
        self.meta = meta or {}  # the stored model's file: its hold-out metrics go into the report
        self.name = estimator.name
        self.model_id = estimator.model_id
        self.featurizer = Featurizer(estimator.features, estimator.view, profile, cache_dir)
        self.needs_blocks = self.featurizer.needs_blocks

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return self.estimator.predict(self.featurizer.matrix(stats))


def log_offset(X: np.ndarray, features: str) -> np.ndarray:
    """What non-linear learners predict relative to (see features.py): log instructions for the
    counts, log pipeline-model cycles with the pipeline features."""
    return np.asarray(X)[:, offset_column(features)]


def log_ratio(X: np.ndarray, y: np.ndarray, features: str) -> np.ndarray:
    """The learning target of non-linear predictors: log(time) - the offset."""
    return as_log_time(y) - log_offset(X, features)


def time_from_log_ratio(X: np.ndarray, t: np.ndarray, features: str) -> np.ndarray:
    return np.exp(np.asarray(t) + log_offset(X, features))


def as_log_time(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("run times must be positive and finite")
    return np.log(y)


def to_list(a: np.ndarray) -> list:
    return np.asarray(a, dtype=np.float64).tolist()
