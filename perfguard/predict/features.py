"""Feature matrices from Stats. Raw counts keep STAT_FIELDS order; missing values are NaN."""

from __future__ import annotations

import numpy as np

from perfguard.sim.stats import STAT_FIELDS, Stats


def raw_matrix(stats: list[Stats]) -> np.ndarray:
    rows = [[np.nan if v is None else float(v) for v in s.to_dict().values()] for s in stats]
    return np.asarray(rows, dtype=np.float64).reshape(len(stats), len(STAT_FIELDS))


def column(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, STAT_FIELDS.index(name)]
