"""Search over a kernel family's own knob space, Bayesian-optimisation style.

The objective is the predicted run time of a simulated candidate (the calibrated predictor
stands in for the hardware). Because every evaluation costs a simulation, a second, cheap
surrogate chooses which knob sets to simulate: a Gaussian process over encoded knobs (log2
of sizes, one-hot loop orders and flags) fitted to log predicted time, and expected
improvement picks each round's batch, one candidate per simulator slot, with the "kriging
believer" trick (a chosen point counts as observed at its predicted mean) keeping a batch
diverse. The configured schedule is always evaluated first, so the result is never worse
than it; a space no larger than the budget is searched exhaustively. Rounds are
synchronous and seeded, so the same budget gives the same trials on any executor.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np

from perfguard.config import KernelSpec
from perfguard.kernels.base import Family
from perfguard.tune.measure import Measurer, Trial

POOL = 3000  # unevaluated candidates scored by the acquisition per round (a random subset)


def knob_label(params: dict[str, Any], shape_keys: tuple[str, ...]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in shape_keys)


class Encoder:
    """Knob sets -> feature vectors: log2(1 + n) for integers, 0/1 for flags, one-hot for choices."""

    def __init__(self, family: Family, sample: list[dict]):
        self.columns: list[tuple[str, Any]] = []
        for key, knob in family.knobs.items():
            if key in family.shape_keys:
                continue
            values = {p[key] for p in sample}
            if len(values) < 2:
                continue  # constant over the space: carries no information
            if knob.kind is str:
                self.columns += [(key, choice) for choice in sorted(values)]
            else:
                self.columns.append((key, None))

    def __call__(self, params: list[dict]) -> np.ndarray:
        X = np.zeros((len(params), len(self.columns)))
        for i, p in enumerate(params):
            for j, (key, choice) in enumerate(self.columns):
                value = p[key]
                if choice is not None:
                    X[i, j] = float(value == choice)
                elif isinstance(value, bool):
                    X[i, j] = float(value)
                else:
                    X[i, j] = math.log2(1 + value)
        return X


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """EI of minimisation below `best`."""
    from scipy.stats import norm

    std = np.maximum(std, 1e-9)
    z = (best - mean) / std
    return (best - mean) * norm.cdf(z) + std * norm.pdf(z)


def _gp(X: np.ndarray, y: np.ndarray, seed: int, kernel=None):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    if kernel is None:
        kernel = ConstantKernel(1.0, (1e-2, 1e2)) * Matern(np.ones(X.shape[1]), (1e-2, 1e2), nu=2.5) + WhiteKernel(
            1e-3, (1e-6, 1e-1)
        )
        gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=1, random_state=seed)
    else:
        gp = GaussianProcessRegressor(kernel, normalize_y=True, optimizer=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter on tiny samples
        return gp.fit(X, y)


def propose(X_seen: np.ndarray, y_seen: np.ndarray, X_pool: np.ndarray, count: int, seed: int) -> list[int]:
    """Indices into X_pool of the next batch, by expected improvement with kriging believer."""
    gp = _gp(X_seen, y_seen, seed)
    chosen: list[int] = []
    X, y = X_seen, y_seen
    for _ in range(min(count, len(X_pool))):
        mean, std = gp.predict(X_pool, return_std=True)
        ei = expected_improvement(mean, std, float(y.min()))
        ei[chosen] = -np.inf
        pick = int(np.argmax(ei))
        chosen.append(pick)
        X, y = np.vstack([X, X_pool[pick]]), np.append(y, mean[pick])
        gp = _gp(X, y, seed, kernel=gp.kernel_)
    return chosen


def search(
    family: Family,
    default: dict[str, Any],
    spec: KernelSpec,
    measurer: Measurer,
    trials: int,
    batch: int,
    seed: int = 0,
) -> list[Trial]:
    """Evaluate up to `trials` knob sets (the configured one first); returns every trial."""
    resolve = family.extra["resolve"]
    assert family.space is not None  # tune refuses a family without a space
    shape = {k: default[k] for k in family.shape_keys}
    space: list[dict] = []
    seen_keys: set[str] = set()
    for params in [default, *family.space(**shape)]:
        full = resolve(**params)
        key = json.dumps(full, sort_keys=True)
        if key not in seen_keys:
            seen_keys.add(key)
            space.append(full)
    encode = Encoder(family, space)
    X_all = encode(space)
    rng = np.random.default_rng(seed)
    budget = min(trials, len(space))
    evaluated: list[int] = []
    scores: dict[int, float] = {}

    def run(indices: list[int]) -> None:
        entry = spec.entry
        specs = [
            KernelSpec(
                f"{spec.name}-k{len(evaluated) + n}",
                entry,
                family.name,
                space[i],
                spec.threshold,
                None,
                None,
                spec.outputs,
                spec.rtol,
                spec.atol,
            )
            for n, i in enumerate(indices)
        ]
        labels = [knob_label(space[i], family.shape_keys) for i in indices]
        for i, trial in zip(indices, measurer.measure(specs, labels, [space[i] for i in indices])):
            evaluated.append(i)
            if trial.ok and trial.predicted_s is not None:
                scores[i] = math.log(trial.predicted_s)

    if budget >= len(space):
        order = [0, *rng.permutation(np.arange(1, len(space))).tolist()]
        for start in range(0, len(order), batch):
            run(order[start : start + batch])
        return measurer.trials
    initial = min(budget, max(batch, min(10, budget // 4)))
    run([0, *rng.choice(np.arange(1, len(space)), size=initial - 1, replace=False).tolist()])
    while len(evaluated) < budget:
        count = min(batch, budget - len(evaluated))
        remaining = np.setdiff1d(np.arange(len(space)), evaluated)
        pool = remaining if len(remaining) <= POOL else rng.choice(remaining, size=POOL, replace=False)
        if len(scores) < 3:  # nothing to model yet (most candidates failed): sample at random
            picks = rng.choice(pool, size=min(count, len(pool)), replace=False).tolist()
        else:
            idx = sorted(scores)
            picks = [
                int(pool[j]) for j in propose(X_all[idx], np.array([scores[i] for i in idx]), X_all[pool], count, seed)
            ]
        run(picks)
    return measurer.trials
