"""The predictor interface: scikit-learn's face, Stats in, predicted seconds out.

`fit(X, y)` / `predict(X)` work on feature matrices (perfguard.predict.features); a
predictor also carries `model_id`, recorded with every result so that a verdict never
compares numbers from two models, and `calibrated`, which reports show.
"""

from __future__ import annotations

import abc

import numpy as np

from perfguard.sim.stats import Stats


class Predictor(abc.ABC):
    model_id: str = ""
    calibrated: bool = False

    @abc.abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray) -> "Predictor":
        ...

    @abc.abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        ...

    def features(self, stats: list[Stats]) -> np.ndarray:
        from perfguard.predict.features import raw_matrix

        return raw_matrix(stats)

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return self.predict(self.features(stats))
