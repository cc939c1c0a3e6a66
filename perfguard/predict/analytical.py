"""The analytical model: cycles from instruction classes and cache misses, over the clock.

    cycles = sum(class count x class cost) + L1 misses x L2 latency + L2 misses x memory latency

Per-target constants live in the target profile (`cost`). It needs no training data, so it
scores every target from the first run, and it stays the baseline that calibrated
predictors are compared against.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

import numpy as np

from perfguard.predict.base import Predictor
from perfguard.predict.features import column, raw_matrix
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

_COMPUTE_TERMS = (
    ("insts", "inst"),
    ("loads", "load"),
    ("stores", "store"),
    ("branches", "branch"),
    ("fp_insts", "fp"),
    ("vec_insts", "vec"),
    ("vec_fp_insts", "vec_fp"),
)


class AnalyticalModel(Predictor):
    calibrated = False

    def __init__(self, profile: TargetProfile):
        self.profile = profile
        constants = json.dumps({"cost": asdict(profile.cost), "clock_hz": profile.clock_hz}, sort_keys=True)
        self.model_id = "analytical-v1-" + hashlib.sha256(constants.encode()).hexdigest()[:12]

    def fit(self, X: np.ndarray, y: np.ndarray) -> AnalyticalModel:
        return self  # constants come from the target profile, not from data

    def phases(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cost = self.profile.cost
        X = np.nan_to_num(X, nan=0.0)
        compute = sum(column(X, stat) * getattr(cost, knob) for stat, knob in _COMPUTE_TERMS)
        l1_misses = column(X, "l1i_misses") + column(X, "l1d_misses")
        memory = l1_misses * cost.l2_latency + column(X, "l2_misses") * cost.mem_latency
        return compute / self.profile.clock_hz, memory / self.profile.clock_hz

    def predict(self, X: np.ndarray) -> np.ndarray:
        compute, memory = self.phases(X)
        return compute + memory

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return self.predict(raw_matrix(stats))
