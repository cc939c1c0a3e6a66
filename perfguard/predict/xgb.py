"""XGBoost on the derived features: regression on log time over an offset (see features.py), or a pairwise ranker.

With objective="auto", both are tried in an inner leave-one-group-out loop over the training
groups and the one with the better mean Spearman correlation is kept. A ranker's scores are
mapped to time by isotonic regression (monotone, so the ranking is unchanged), which keeps
the predict-seconds contract.
"""

from __future__ import annotations

import json

import numpy as np
import xgboost
from scipy.stats import spearmanr
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import LeaveOneGroupOut

from perfguard.predict.calibrated import as_log_time, log_ratio, time_from_log_ratio, to_list
from perfguard.predict.estimator import CalibratedPredictor

_PARAMS = {
    "n_estimators": 300,
    "max_depth": 5,
    "learning_rate": 0.05,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "n_jobs": 1,
    "tree_method": "hist",
}


class XGBoostPredictor(CalibratedPredictor):
    name = "xgboost"

    def __init__(self, features: str = "counts", objective: str = "auto", seed: int = 0):
        self.features = features
        self.objective = objective
        self.seed = seed

    def _fit_one(self, X, y, groups, objective):
        if objective == "regression":
            model = xgboost.XGBRegressor(objective="reg:squarederror", random_state=self.seed, **_PARAMS)
            model.fit(X, log_ratio(X, y, self.features))
            return model, None
        t = as_log_time(y)  # a ranker orders by time itself, and its isotonic map gives log time
        order = np.argsort(groups, kind="stable")
        X, t, groups = X[order], t[order], groups[order]
        relevance = np.empty_like(t)
        for g in np.unique(groups):  # faster = more relevant, in [0, 1] within each group
            idx = groups == g
            lo, hi = t[idx].min(), t[idx].max()
            relevance[idx] = (hi - t[idx]) / (hi - lo) if hi > lo else 0.5
        model = xgboost.XGBRanker(objective="rank:pairwise", random_state=self.seed, **_PARAMS)
        _, qid = np.unique(groups, return_inverse=True)
        model.fit(X, relevance, qid=qid)
        iso = IsotonicRegression(increasing=False, out_of_bounds="clip").fit(model.predict(X), t)
        return model, iso

    def _score(self, X, y, groups, objective) -> float:
        rhos = []
        for train, test in LeaveOneGroupOut().split(X, groups=groups):
            model, iso = self._fit_one(X[train], y[train], groups[train], objective)
            raw = model.predict(X[test])
            pred = time_from_log_ratio(X[test], raw, self.features) if iso is None else -raw  # higher score: faster
            rho = spearmanr(pred, y[test]).statistic
            rhos.append(0.0 if np.isnan(rho) else rho)
        return float(np.mean(rhos))

    def fit(self, X, y, groups=None):
        if self.objective not in ("auto", "regression", "ranking"):
            raise ValueError(f"objective must be auto, regression or ranking, not {self.objective!r}")
        X = np.asarray(X, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        y = np.exp(as_log_time(y))  # validates: positive and finite
        groups = np.zeros(len(X), dtype=int) if groups is None else np.asarray(groups)
        objective = self.objective
        if objective == "auto":
            if len(np.unique(groups)) >= 3:
                scores = {o: self._score(X, y, groups, o) for o in ("regression", "ranking")}
                objective = max(scores, key=lambda o: (scores[o], o == "regression"))
                self.inner_spearman_ = scores
            else:
                objective = "regression"
        self.chosen_ = objective
        model, iso = self._fit_one(X, y, groups, objective)
        self.booster_json_ = bytes(model.get_booster().save_raw("json")).decode()
        self._load(iso)
        return self._finish()

    def _load(self, iso: IsotonicRegression | None) -> None:
        self.booster_ = xgboost.Booster()
        self.booster_.load_model(bytearray(self.booster_json_.encode()))
        self.iso_x_ = None if iso is None else np.asarray(iso.X_thresholds_)
        self.iso_y_ = None if iso is None else np.asarray(iso.y_thresholds_)

    def predict(self, X):
        self._check_fitted()
        X = self._columns(X)
        raw = self.booster_.predict(xgboost.DMatrix(X))
        if self.iso_x_ is None:
            return time_from_log_ratio(X, raw, self.features)
        assert self.iso_y_ is not None  # fitted with iso_x_
        order = np.argsort(self.iso_x_)
        return np.exp(np.interp(raw, self.iso_x_[order], self.iso_y_[order]))

    def to_payload(self) -> dict:
        return {
            "features": self.features,
            "objective": self.objective,
            "chosen": self.chosen_,
            "seed": self.seed,
            "n_features": self.n_features_in_,
            "booster": json.loads(self.booster_json_),
            "isotonic_x": None if self.iso_x_ is None else to_list(self.iso_x_),
            "isotonic_y": None if self.iso_y_ is None else to_list(self.iso_y_),
        }

    @classmethod
    def from_payload(cls, payload):
        model = cls(payload["features"], payload["objective"], payload["seed"])
        model.chosen_ = payload["chosen"]
        model.n_features_in_ = int(payload["n_features"])
        model.booster_json_ = json.dumps(payload["booster"])
        model.booster_ = xgboost.Booster()
        model.booster_.load_model(bytearray(model.booster_json_.encode()))
        model.iso_x_ = None if payload["isotonic_x"] is None else np.asarray(payload["isotonic_x"])
        model.iso_y_ = None if payload["isotonic_y"] is None else np.asarray(payload["isotonic_y"])
        return model._finish()
