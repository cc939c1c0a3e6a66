"""A multi-layer perceptron on the derived features, predicting log time over an offset (see features.py)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor

from perfguard.predict.calibrated import log_ratio, time_from_log_ratio, to_list
from perfguard.predict.estimator import CalibratedPredictor


class NeuralNetwork(CalibratedPredictor):
    name = "dnn"

    def __init__(
        self,
        features: str = "counts",
        hidden: tuple[int, ...] = (64, 32),
        alpha: float = 1e-3,
        max_iter: int = 3000,
        seed: int = 0,
    ):
        self.features = features
        self.hidden = hidden
        self.alpha = alpha
        self.max_iter = max_iter
        self.seed = seed

    def fit(self, X, y, groups=None):
        X = np.asarray(X, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        t = log_ratio(X, y, self.features)
        self.x_mean_, self.x_scale_ = X.mean(axis=0), X.std(axis=0)
        self.x_scale_[self.x_scale_ == 0] = 1.0
        self.y_mean_, self.y_scale_ = float(t.mean()), float(t.std() or 1.0)
        net = MLPRegressor(
            hidden_layer_sizes=tuple(self.hidden),
            alpha=self.alpha,
            max_iter=self.max_iter,
            random_state=self.seed,
            learning_rate_init=1e-3,
            tol=1e-7,
            n_iter_no_change=50,
        )
        standardized = (t - self.y_mean_) / self.y_scale_
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            net.fit((X - self.x_mean_) / self.x_scale_, standardized)
        # A ReLU net extrapolates linearly; outside the shapes it saw that can run away. Keep its
        # output within the training targets' range, widened by one standard deviation.
        self.y_low_, self.y_high_ = float(standardized.min() - 1.0), float(standardized.max() + 1.0)
        self.weights_ = [np.asarray(w) for w in net.coefs_]
        self.biases_ = [np.asarray(b) for b in net.intercepts_]
        return self._finish()

    def predict(self, X):
        self._check_fitted()
        X = self._columns(X)
        h = (X - self.x_mean_) / self.x_scale_
        for i, (w, b) in enumerate(zip(self.weights_, self.biases_)):
            h = h @ w + b
            if i < len(self.weights_) - 1:
                h = np.maximum(h, 0.0)  # ReLU, as MLPRegressor's default
        out = np.clip(h[:, 0], self.y_low_, self.y_high_)
        return time_from_log_ratio(X, out * self.y_scale_ + self.y_mean_, self.features)

    def to_payload(self) -> dict:
        return {
            "features": self.features,
            "hidden": list(self.hidden),
            "alpha": self.alpha,
            "max_iter": self.max_iter,
            "seed": self.seed,
            "x_mean": to_list(self.x_mean_),
            "x_scale": to_list(self.x_scale_),
            "y_mean": self.y_mean_,
            "y_scale": self.y_scale_,
            "y_low": self.y_low_,
            "y_high": self.y_high_,
            "weights": [to_list(w) for w in self.weights_],
            "biases": [to_list(b) for b in self.biases_],
        }

    @classmethod
    def from_payload(cls, payload):
        model = cls(
            payload["features"], tuple(payload["hidden"]), payload["alpha"], payload["max_iter"], payload["seed"]
        )
        model.x_mean_ = np.asarray(payload["x_mean"], dtype=np.float64)
        model.x_scale_ = np.asarray(payload["x_scale"], dtype=np.float64)
        model.n_features_in_ = len(model.x_mean_)
        model.y_mean_, model.y_scale_ = float(payload["y_mean"]), float(payload["y_scale"])
        model.y_low_, model.y_high_ = float(payload["y_low"]), float(payload["y_high"])
        model.weights_ = [np.asarray(w, dtype=np.float64) for w in payload["weights"]]
        model.biases_ = [np.asarray(b, dtype=np.float64) for b in payload["biases"]]
        return model._finish()
