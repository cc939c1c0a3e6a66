"""The base class of calibrated predictors: a scikit-learn estimator (see perfguard.predict.base).

Apart from the Predictor interface so that importing perfguard.predict.base, which every
verdict needs, does not import scikit-learn (about a second of CPU) when no calibrated model is used.
"""

from __future__ import annotations

import abc
import hashlib
import json

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import NotFittedError


class CalibratedPredictor(RegressorMixin, BaseEstimator):
    """A predictor learnt from (features, native time) pairs of one target and family.

    `features` names the feature set ("counts" or "pipeline", perfguard.predict.features); each
    class says which view of it it reads (`view`: "raw" counts or "derived" logs and rates).
    """

    name: str = ""
    view: str = "derived"

    @abc.abstractmethod
    def fit(self, X, y, groups=None) -> CalibratedPredictor: ...

    @abc.abstractmethod
    def predict(self, X) -> np.ndarray: ...

    @abc.abstractmethod
    def to_payload(self) -> dict:
        """Everything predict() needs, as JSON-compatible values."""

    @classmethod
    @abc.abstractmethod
    def from_payload(cls, payload: dict) -> CalibratedPredictor: ...

    def _finish(self) -> CalibratedPredictor:
        """Called at the end of fit (and from_payload): the id is the digest of what was learnt."""
        text = json.dumps({"name": self.name, "payload": self.to_payload()}, sort_keys=True)
        self.model_id_ = f"{self.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_id_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet: call fit(X, y) or load a model file before predict"
            )

    @property
    def model_id(self) -> str:
        self._check_fitted()
        return self.model_id_

    def _columns(self, X) -> np.ndarray:
        """X as floats, checked against the width fit saw (a model file for another feature set)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{type(self).__name__} was fitted on {self.n_features_in_} features "
                f"({self.features!r}), got an array of shape {X.shape}"
            )
        return X
