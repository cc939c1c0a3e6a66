"""Multiple linear regression: time = sum(weight x event count) + intercept.

The calibrated twin of the analytical model: the same additive form, with non-negative
per-event costs learnt from native runs instead of guessed (negative costs would let an
extra cache miss make a kernel faster).
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LinearRegression

from perfguard.predict.base import CalibratedPredictor, to_list
from perfguard.predict.features import raw_matrix
from perfguard.sim.stats import Stats

_SCALE = 1e-6  # counts in millions keep the solver well conditioned


class MultipleLinearRegression(CalibratedPredictor):
    name = "mlr"

    def __init__(self, line_bytes: int = 64, positive: bool = True):
        super().__init__(line_bytes)
        self.positive = positive
        self.coef_: np.ndarray | None = None
        self.intercept_ = 0.0

    def features(self, stats: list[Stats]) -> np.ndarray:
        return np.nan_to_num(raw_matrix(stats), nan=0.0)

    def fit(self, X, y, groups=None):
        model = LinearRegression(positive=self.positive).fit(np.asarray(X) * _SCALE, np.asarray(y, dtype=float))
        self.coef_, self.intercept_ = model.coef_, float(model.intercept_)
        return self.finish()

    def predict(self, X):
        y = np.asarray(X) * _SCALE @ self.coef_ + self.intercept_
        return np.maximum(y, 1e-12)  # a time is never zero or negative

    def to_payload(self) -> dict:
        return {"coef": to_list(self.coef_), "intercept": self.intercept_, "line_bytes": self.line_bytes}

    @classmethod
    def from_payload(cls, payload):
        model = cls(payload["line_bytes"])
        model.coef_ = np.asarray(payload["coef"], dtype=np.float64)
        model.intercept_ = float(payload["intercept"])
        return model.finish()
