"""Feature matrices from Stats.

Two views of the same statistics:
- `raw_matrix`: the counts themselves in STAT_FIELDS order (None -> NaN). The analytical
  model and multiple linear regression use these: time is a weighted sum of event counts.
- `derived_matrix`: what non-linear learners see. log1p of every count (run times and
  counts span orders of magnitude across shapes; logs make a power law linear), plus the
  rates that say *how* the kernel runs whatever its size: miss rates per level, the vector,
  floating-point, memory and branch shares of the instruction mix, instructions per load,
  and the DRAM traffic in bytes (L2 misses x line).
Features come from Stats alone (no kernel parameters), so a baseline's stored raw
statistics can always be re-scored by a newer model.
"""

from __future__ import annotations

import numpy as np

from perfguard.sim.stats import STAT_FIELDS, Stats

_RATES = (
    ("l1d_miss_rate", "l1d_misses", "l1d_accesses"),
    ("l1i_miss_rate", "l1i_misses", "l1i_accesses"),
    ("l2_miss_rate", "l2_misses", "l2_accesses"),
    ("vec_share", "vec_insts", "insts"),
    ("vec_fp_share", "vec_fp_insts", "insts"),
    ("fp_share", "fp_insts", "insts"),
    ("load_share", "loads", "insts"),
    ("store_share", "stores", "insts"),
    ("branch_share", "branches", "insts"),
    ("cond_branch_share", "cond_branches", "insts"),
)

DERIVED_FEATURES = tuple(f"log_{name}" for name in STAT_FIELDS) + tuple(r[0] for r in _RATES) + (
    "log_dram_bytes",
    "log_l1_miss_cycles_proxy",
)


def raw_matrix(stats: list[Stats]) -> np.ndarray:
    rows = [[np.nan if v is None else float(v) for v in s.to_dict().values()] for s in stats]
    return np.asarray(rows, dtype=np.float64).reshape(len(stats), len(STAT_FIELDS))


def column(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, STAT_FIELDS.index(name)]


def derived_matrix(stats: list[Stats], line_bytes: int = 64) -> np.ndarray:
    raw = np.nan_to_num(raw_matrix(stats), nan=0.0)
    logs = np.log1p(raw)
    rates = []
    for _, num, den in _RATES:
        d = column(raw, den)
        rates.append(np.divide(column(raw, num), d, out=np.zeros_like(d), where=d > 0))
    dram = np.log1p(column(raw, "l2_misses") * line_bytes)
    l1_misses = np.log1p(column(raw, "l1d_misses") + column(raw, "l1i_misses"))
    return np.column_stack([logs, *rates, dram, l1_misses])
