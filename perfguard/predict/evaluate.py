"""Leave-one-group-out evaluation: train on the other shapes, predict the held-out one.

Per predictor and held-out group:
- MAPE: mean |predicted - native| / native, in percent;
- RMSE: root mean squared error, in seconds;
- Spearman rho between predicted and native times;
- best_rank_pct: where the truly fastest variant lands in the predicted order, as a
  percentile: (its 0-based position + 1) / n x 100, so 0.5 means first of 200 (the paper's
  "top 3 %" measure is best_rank_pct <= 3);
- regret: native time of the predicted best / native time of the true best (1.0 = found it).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class GroupMetrics:
    group: str
    n: int
    mape: float
    rmse: float
    spearman: float
    best_rank_pct: float
    regret: float

    def to_dict(self) -> dict:
        return asdict(self)


def metrics(group: str, predicted: np.ndarray, native: np.ndarray) -> GroupMetrics:
    from scipy.stats import spearmanr  # slow to import: only when evaluating

    predicted, native = np.asarray(predicted, float), np.asarray(native, float)
    mape = float(np.mean(np.abs(predicted - native) / native) * 100.0)
    rmse = float(np.sqrt(np.mean((predicted - native) ** 2)))
    with warnings.catch_warnings():  # a constant prediction has no rank correlation: report 0
        warnings.simplefilter("ignore")
        rho = spearmanr(predicted, native).statistic if len(native) > 1 else 1.0
    order = np.argsort(predicted, kind="stable")
    true_best = int(np.argmin(native))
    position = int(np.flatnonzero(order == true_best)[0])
    return GroupMetrics(
        group,
        len(native),
        mape,
        rmse,
        float(0.0 if np.isnan(rho) else rho),
        100.0 * (position + 1) / len(native),
        float(native[order[0]] / native[true_best]),
    )


def leave_one_group_out(estimator, X: np.ndarray, native: np.ndarray, groups: np.ndarray) -> list[GroupMetrics]:
    """Each group is predicted by a fresh clone of `estimator` that never saw any of its rows.

    `X` is the feature matrix of every row (computed once: the features of a row do not depend
    on the other rows); the folds are scikit-learn's LeaveOneGroupOut, in sorted group order.
    """
    from sklearn.base import clone
    from sklearn.model_selection import LeaveOneGroupOut

    X, native, groups = np.asarray(X, dtype=np.float64), np.asarray(native, float), np.asarray(groups)
    results = []
    for train, test in LeaveOneGroupOut().split(X, native, groups):
        predictor = clone(estimator).fit(X[train], native[train], groups[train])
        results.append(metrics(str(groups[test][0]), predictor.predict(X[test]), native[test]))
    return results


def summarize(rows: list[GroupMetrics]) -> dict:
    """Mean over groups, and the worst group for the ranking measures."""
    return {
        "mape": float(np.mean([r.mape for r in rows])),
        "rmse": float(np.mean([r.rmse for r in rows])),
        "spearman": float(np.mean([r.spearman for r in rows])),
        "min_spearman": float(min(r.spearman for r in rows)),
        "best_rank_pct": float(np.mean([r.best_rank_pct for r in rows])),
        "worst_best_rank_pct": float(max(r.best_rank_pct for r in rows)),
        "regret": float(np.mean([r.regret for r in rows])),
        "worst_regret": float(max(r.regret for r in rows)),
    }
