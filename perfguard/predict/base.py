"""The predictor interface: scikit-learn's face, Stats in, predicted seconds out.

`fit(X, y)` / `predict(X)` work on feature matrices (perfguard.predict.features) and times in
seconds; parameters go in the constructor. A predictor also carries `model_id`, recorded with
every result so that a verdict never compares numbers from two models, and `calibrated`,
which reports show. Calibrated predictors persist as plain JSON (`to_payload` /
`from_payload`): no pickle, so a model file in a pull request cannot run code.
"""

from __future__ import annotations

import abc
import hashlib
import json

import numpy as np

from perfguard.sim.stats import Stats


class Predictor(abc.ABC):
    name: str = ""
    model_id: str = ""
    calibrated: bool = False

    @abc.abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> "Predictor":
        ...

    @abc.abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        ...

    def features(self, stats: list[Stats]) -> np.ndarray:
        from perfguard.predict.features import raw_matrix

        return raw_matrix(stats)

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return self.predict(self.features(stats))


class CalibratedPredictor(Predictor):
    """A predictor learnt from (statistics, native time) pairs of one target and family."""

    calibrated = True

    def __init__(self, line_bytes: int = 64):
        self.line_bytes = line_bytes

    def features(self, stats: list[Stats]) -> np.ndarray:
        from perfguard.predict.features import derived_matrix

        return derived_matrix(stats, self.line_bytes)

    @abc.abstractmethod
    def to_payload(self) -> dict:
        """Everything predict() needs, as JSON-compatible values."""

    @classmethod
    @abc.abstractmethod
    def from_payload(cls, payload: dict) -> "CalibratedPredictor":
        ...

    def finish(self) -> "CalibratedPredictor":
        """Called at the end of fit: the id is the digest of what was learnt."""
        text = json.dumps({"name": self.name, "payload": self.to_payload()}, sort_keys=True)
        self.model_id = f"{self.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
        return self


def log_cpi(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The learning target of non-linear predictors: log(time) - log(instructions)."""
    from perfguard.predict.features import LOG_INSTS

    return as_log_time(y) - np.asarray(X)[:, LOG_INSTS]


def time_from_log_cpi(X: np.ndarray, t: np.ndarray) -> np.ndarray:
    from perfguard.predict.features import LOG_INSTS

    return np.exp(np.asarray(t) + np.asarray(X)[:, LOG_INSTS])


def as_log_time(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("run times must be positive and finite")
    return np.log(y)


def to_list(a: np.ndarray) -> list:
    return np.asarray(a, dtype=np.float64).tolist()
