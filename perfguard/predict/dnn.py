"""A multi-layer perceptron on the derived features, predicting log CPI (see features.py)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor

from perfguard.predict.base import CalibratedPredictor, log_cpi, time_from_log_cpi, to_list


class NeuralNetwork(CalibratedPredictor):
    name = "dnn"

    def __init__(self, line_bytes: int = 64, hidden: tuple[int, ...] = (64, 32), alpha: float = 1e-3,
                 max_iter: int = 3000, seed: int = 0):
        super().__init__(line_bytes)
        self.hidden, self.alpha, self.max_iter, self.seed = tuple(hidden), alpha, max_iter, seed

    def fit(self, X, y, groups=None):
        X = np.asarray(X, dtype=np.float64)
        t = log_cpi(X, y)
        self.x_mean_, self.x_scale_ = X.mean(axis=0), X.std(axis=0)
        self.x_scale_[self.x_scale_ == 0] = 1.0
        self.y_mean_, self.y_scale_ = float(t.mean()), float(t.std() or 1.0)
        net = MLPRegressor(hidden_layer_sizes=self.hidden, alpha=self.alpha, max_iter=self.max_iter,
                           random_state=self.seed, learning_rate_init=1e-3, tol=1e-7, n_iter_no_change=50)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            net.fit((X - self.x_mean_) / self.x_scale_, (t - self.y_mean_) / self.y_scale_)
        standardized = (t - self.y_mean_) / self.y_scale_
        # A ReLU net extrapolates linearly; outside the shapes it saw that can run away. Keep its
        # output within the training targets' range, widened by one standard deviation.
        self.y_low_, self.y_high_ = float(standardized.min() - 1.0), float(standardized.max() + 1.0)
        self.weights_ = [np.asarray(w) for w in net.coefs_]
        self.biases_ = [np.asarray(b) for b in net.intercepts_]
        return self.finish()

    def predict(self, X):
        X = np.asarray(X, dtype=np.float64)
        h = (X - self.x_mean_) / self.x_scale_
        for i, (w, b) in enumerate(zip(self.weights_, self.biases_)):
            h = h @ w + b
            if i < len(self.weights_) - 1:
                h = np.maximum(h, 0.0)  # ReLU, as MLPRegressor's default
        out = np.clip(h[:, 0], self.y_low_, self.y_high_)
        return time_from_log_cpi(X, out * self.y_scale_ + self.y_mean_)

    def to_payload(self) -> dict:
        return {
            "line_bytes": self.line_bytes, "hidden": list(self.hidden),
            "x_mean": to_list(self.x_mean_), "x_scale": to_list(self.x_scale_),
            "y_mean": self.y_mean_, "y_scale": self.y_scale_, "y_low": self.y_low_, "y_high": self.y_high_,
            "weights": [to_list(w) for w in self.weights_], "biases": [to_list(b) for b in self.biases_],
        }

    @classmethod
    def from_payload(cls, payload):
        model = cls(payload["line_bytes"], tuple(payload["hidden"]))
        model.x_mean_ = np.asarray(payload["x_mean"])
        model.x_scale_ = np.asarray(payload["x_scale"])
        model.y_mean_, model.y_scale_ = float(payload["y_mean"]), float(payload["y_scale"])
        model.y_low_, model.y_high_ = float(payload["y_low"]), float(payload["y_high"])
        model.weights_ = [np.asarray(w, dtype=np.float64) for w in payload["weights"]]
        model.biases_ = [np.asarray(b, dtype=np.float64) for b in payload["biases"]]
        return model.finish()
