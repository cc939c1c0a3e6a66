"""Gaussian-process regression on log time over an offset (see features.py), its hyperparameters tuned by Bayesian optimisation.

The GP has an isotropic RBF kernel on standardised features plus white noise: three
hyperparameters (signal amplitude, length-scale, noise), all in log space. Instead of
gradient ascent on the marginal likelihood (which overfits small, clustered calibration sets),
they are chosen by Bayesian optimisation of the cross-validated RMSE of log time (leave one
group out when there are three groups or more, else K-fold): a
second GP (Matern 5/2) models that error over the hyperparameter box and expected improvement
picks the next point to try.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.stats import norm
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import Matern
from sklearn.model_selection import KFold, LeaveOneGroupOut

from perfguard.predict.calibrated import log_ratio, time_from_log_ratio, to_list
from perfguard.predict.estimator import CalibratedPredictor

# log10 bounds of (amplitude, length-scale, noise) for standardised inputs and outputs
_BOUNDS = np.array([[-1.0, 1.0], [-1.0, 2.0], [-6.0, -0.5]])


def _rbf(a: np.ndarray, b: np.ndarray, amplitude: float, length: float) -> np.ndarray:
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return amplitude * np.exp(-0.5 * np.maximum(d2, 0.0) / (length * length))


def _fit_dual(X: np.ndarray, t: np.ndarray, theta: np.ndarray) -> np.ndarray:
    amplitude, length, noise = 10.0**theta
    K = _rbf(X, X, amplitude, length) + (noise + 1e-10) * np.eye(len(X))
    return cho_solve(cho_factor(K, lower=True), t)


def _cv_rmse(X: np.ndarray, t: np.ndarray, theta: np.ndarray, folds: list[np.ndarray]) -> float:
    amplitude, length, _ = 10.0**theta
    errors = []
    for test in folds:
        train = np.setdiff1d(np.arange(len(X)), test)
        alpha = _fit_dual(X[train], t[train], theta)
        pred = _rbf(X[test], X[train], amplitude, length) @ alpha
        errors.append((pred - t[test]) ** 2)
    return float(np.sqrt(np.mean(np.concatenate(errors))))


class GaussianProcess(CalibratedPredictor):
    name = "gp"

    def __init__(
        self,
        features: str = "counts",
        iterations: int = 16,
        initial: int = 6,
        folds: int = 5,
        max_points: int = 1200,
        seed: int = 0,
    ):
        self.features = features
        self.iterations = iterations
        self.initial = initial
        self.folds = folds
        self.max_points = max_points
        self.seed = seed

    def _folds(self, X: np.ndarray, groups: np.ndarray | None) -> list[np.ndarray]:
        """Test indices per fold: whole groups when there are enough (generalise across shapes)."""
        if groups is not None and len(np.unique(groups)) >= 3:
            return [test for _, test in LeaveOneGroupOut().split(X, groups=groups)]
        splitter = KFold(n_splits=min(self.folds, len(X)), shuffle=True, random_state=self.seed)
        return [test for _, test in splitter.split(X)]

    def fit(self, X, y, groups=None):
        rng = np.random.default_rng(self.seed)
        X = np.asarray(X, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        t = log_ratio(X, y, self.features)
        if len(X) > self.max_points:  # O(n^3): subsample deterministically
            keep = np.sort(rng.choice(len(X), self.max_points, replace=False))
            X, t = X[keep], t[keep]
            groups = None if groups is None else np.asarray(groups)[keep]
        self.x_mean_, self.x_scale_ = X.mean(0), X.std(0)
        self.x_scale_[self.x_scale_ == 0] = 1.0
        self.y_mean_, self.y_scale_ = float(t.mean()), float(t.std() or 1.0)
        Xs, ts = (X - self.x_mean_) / self.x_scale_, (t - self.y_mean_) / self.y_scale_
        folds = self._folds(Xs, None if groups is None else np.asarray(groups))

        low, high = _BOUNDS[:, 0], _BOUNDS[:, 1]
        tried = [low + (high - low) * rng.random(3) for _ in range(self.initial)]
        scores = [_cv_rmse(Xs, ts, th, folds) for th in tried]
        surrogate = GaussianProcessRegressor(Matern(nu=2.5), alpha=1e-6, normalize_y=True, random_state=self.seed)
        for _ in range(self.iterations):
            with warnings.catch_warnings():  # the surrogate's own length-scale fit may hit its bounds
                warnings.simplefilter("ignore")
                surrogate.fit(np.array(tried), np.array(scores))
            candidates = low + (high - low) * rng.random((512, 3))
            mu, sigma = surrogate.predict(candidates, return_std=True)
            best = min(scores)
            z = (best - mu) / np.maximum(sigma, 1e-12)
            ei = (best - mu) * norm.cdf(z) + sigma * norm.pdf(z)
            theta = candidates[int(np.argmax(ei))]
            tried.append(theta)
            scores.append(_cv_rmse(Xs, ts, theta, folds))
        self.theta_ = tried[int(np.argmin(scores))]
        self.cv_rmse_ = float(min(scores))
        self.x_train_ = Xs
        self.alpha_ = _fit_dual(Xs, ts, self.theta_)
        return self._finish()

    def predict(self, X):
        self._check_fitted()
        amplitude, length, _ = 10.0**self.theta_
        X = self._columns(X)
        Xs = (X - self.x_mean_) / self.x_scale_
        return time_from_log_ratio(
            X, (_rbf(Xs, self.x_train_, amplitude, length) @ self.alpha_) * self.y_scale_ + self.y_mean_, self.features
        )

    def to_payload(self) -> dict:
        return {
            "features": self.features,
            "iterations": self.iterations,
            "initial": self.initial,
            "folds": self.folds,
            "max_points": self.max_points,
            "seed": self.seed,
            "theta_log10": to_list(self.theta_),
            "x_mean": to_list(self.x_mean_),
            "x_scale": to_list(self.x_scale_),
            "y_mean": self.y_mean_,
            "y_scale": self.y_scale_,
            "x_train": to_list(self.x_train_),
            "alpha": to_list(self.alpha_),
        }

    @classmethod
    def from_payload(cls, payload):
        model = cls(
            payload["features"],
            payload["iterations"],
            payload["initial"],
            payload["folds"],
            payload["max_points"],
            payload["seed"],
        )
        model.theta_ = np.asarray(payload["theta_log10"], dtype=np.float64)
        model.x_mean_, model.x_scale_ = np.asarray(payload["x_mean"]), np.asarray(payload["x_scale"])
        model.n_features_in_ = len(model.x_mean_)
        model.y_mean_, model.y_scale_ = float(payload["y_mean"]), float(payload["y_scale"])
        model.x_train_ = np.asarray(payload["x_train"], dtype=np.float64)
        model.alpha_ = np.asarray(payload["alpha"], dtype=np.float64)
        return model._finish()
