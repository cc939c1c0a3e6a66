"""The predictor interfaces: Stats in, predicted seconds out.

Two kinds of object:
- `Predictor`: what guard/ and report/ use. `predict_stats(stats)` gives seconds; it carries
  `model_id` (recorded with every result, so that a verdict never compares numbers from two
  models), `calibrated` (reports show it) and `needs_blocks` (it cannot score statistics without
  a block profile). The analytical and pipeline models are Predictors directly.
- `CalibratedPredictor`: a scikit-learn estimator (BaseEstimator, RegressorMixin) on feature
  matrices (perfguard.predict.features): parameters in the constructor and nothing else there,
  `get_params`/`set_params`/`sklearn.base.clone` work, learnt state only in attributes with a
  trailing underscore, set by `fit` (or by `from_payload`, which restores a fitted one).
  `CalibratedModel` binds a fitted one to a target profile, which turns Stats into its features.
  It lives in perfguard.predict.estimator, so that scoring with the pipeline or analytical model
  (every check whose kernels have no calibrated model) never imports scikit-learn.
Calibrated predictors persist as plain JSON (`to_payload` / `from_payload`): no pickle, so a
model file in a pull request cannot run code.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from perfguard.sim.stats import Stats

if TYPE_CHECKING:
    from perfguard.predict.estimator import CalibratedPredictor


class Predictor(abc.ABC):
    name: str = ""
    model_id: str = ""
    calibrated: bool = False
    needs_blocks: bool = False  # scores only statistics that carry a block profile

    @abc.abstractmethod
    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        """Predicted seconds per call, one per Stats."""


class CalibratedModel(Predictor):
    """A fitted CalibratedPredictor bound to a target profile: Stats -> features -> seconds."""

    calibrated = True

    def __init__(self, estimator: CalibratedPredictor, profile, cache_dir: Path | None = None):
        from perfguard.predict.features import Featurizer

        self.estimator = estimator
        self.name = estimator.name
        self.model_id = estimator.model_id
        self.featurizer = Featurizer(estimator.features, estimator.view, profile, cache_dir)
        self.needs_blocks = self.featurizer.needs_blocks

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return self.estimator.predict(self.featurizer.matrix(stats))


def log_offset(X: np.ndarray, features: str) -> np.ndarray:
    """What non-linear learners predict relative to (see features.py): log instructions for the
    counts, log pipeline-model cycles with the pipeline features."""
    from perfguard.predict.features import offset_column

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


def __getattr__(name: str):
    """`CalibratedPredictor` from its own module, imported only when asked for (it needs scikit-learn)."""
    if name == "CalibratedPredictor":
        from perfguard.predict.estimator import CalibratedPredictor

        return CalibratedPredictor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
