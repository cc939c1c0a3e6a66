"""Multiple linear regression: time = sum(weight x event count) + intercept.

The calibrated twin of the analytical model: the same additive form, with non-negative
per-event costs learnt from native runs instead of guessed (negative costs would let an
extra cache miss make a kernel faster). With the pipeline features the events include the
pipeline model's cycles per bound class and its stall cycles: a learnt cost per cycle of each.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LinearRegression

from perfguard.predict.calibrated import to_list
from perfguard.predict.estimator import CalibratedPredictor

_SCALE = 1e-6  # counts in millions keep the solver well conditioned


class MultipleLinearRegression(CalibratedPredictor):
    name = "mlr"
    view = "raw"

    def __init__(self, features: str = "counts", positive: bool = True):
        self.features = features
        self.positive = positive

    def fit(self, X, y, groups=None):
        X = np.asarray(X, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        model = LinearRegression(positive=self.positive).fit(X * _SCALE, np.asarray(y, dtype=float))
        self.coef_, self.intercept_ = model.coef_, float(model.intercept_)
        return self._finish()

    def predict(self, X):
        self._check_fitted()
        y = self._columns(X) * _SCALE @ self.coef_ + self.intercept_
        return np.maximum(y, 1e-12)  # a time is never zero or negative

    def to_payload(self) -> dict:
        return {
            "features": self.features,
            "positive": self.positive,
            "coef": to_list(self.coef_),
            "intercept": self.intercept_,
        }

    @classmethod
    def from_payload(cls, payload):
        model = cls(payload["features"], bool(payload["positive"]))
        model.coef_ = np.asarray(payload["coef"], dtype=np.float64)
        model.n_features_in_ = len(model.coef_)
        model.intercept_ = float(payload["intercept"])
        return model._finish()
