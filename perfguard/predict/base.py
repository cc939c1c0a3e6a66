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
Calibrated predictors persist as plain JSON (`to_payload` / `from_payload`): no pickle, so a
model file in a pull request cannot run code.
"""

from __future__ import annotations

import abc
import hashlib
import json
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError

from perfguard.sim.stats import Stats


class Predictor(abc.ABC):
    name: str = ""
    model_id: str = ""
    calibrated: bool = False
    needs_blocks: bool = False  # scores only statistics that carry a block profile

    @abc.abstractmethod
    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        """Predicted seconds per call, one per Stats."""


class CalibratedPredictor(RegressorMixin, BaseEstimator):
    """A predictor learnt from (features, native time) pairs of one target and family.

    `features` names the feature set ("counts" or "pipeline", perfguard.predict.features); each
    class says which view of it it reads (`view`: "raw" counts or "derived" logs and rates).
    """

    name: str = ""
    view: str = "derived"

    @abc.abstractmethod
    def fit(self, X, y, groups=None) -> "CalibratedPredictor":
        ...

    @abc.abstractmethod
    def predict(self, X) -> np.ndarray:
        ...

    @abc.abstractmethod
    def to_payload(self) -> dict:
        """Everything predict() needs, as JSON-compatible values."""

    @classmethod
    @abc.abstractmethod
    def from_payload(cls, payload: dict) -> "CalibratedPredictor":
        ...

    def _finish(self) -> "CalibratedPredictor":
        """Called at the end of fit (and from_payload): the id is the digest of what was learnt."""
        text = json.dumps({"name": self.name, "payload": self.to_payload()}, sort_keys=True)
        self.model_id_ = f"{self.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_id_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(X, y) or load a model "
                                 f"file before predict")

    @property
    def model_id(self) -> str:
        self._check_fitted()
        return self.model_id_

    def _columns(self, X) -> np.ndarray:
        """X as floats, checked against the width fit saw (a model file for another feature set)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"{type(self).__name__} was fitted on {self.n_features_in_} features "
                             f"({self.features!r}), got an array of shape {X.shape}")
        return X


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
