"""Feature matrices from Stats.

Two views of the same statistics:
- `raw_matrix`: the counts themselves in STAT_FIELDS order (None -> NaN). The analytical
  model and multiple linear regression use these: time is a weighted sum of event counts.
- `derived_matrix`: what non-linear learners see. log1p of every count (run times and
  counts span orders of magnitude across shapes; logs make a power law linear), plus the
  rates that say *how* the kernel runs whatever its size: miss rates per level, the vector,
  floating-point, memory and branch shares of the instruction mix, instructions per load,
  and the DRAM traffic in bytes (L2 misses x line).
Non-linear learners predict log(time / instructions), a log CPI, and add log(instructions)
back: the shape's size then scales the prediction and the learner models only how well the
instructions run, which is what transfers to shapes it has not seen.
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

# Per unit of arithmetic work: how much memory traffic and overhead each FP instruction carries.
_PER_FLOP_INST = ("loads", "stores", "l1d_misses", "l2_misses", "insts", "branches")

DERIVED_FEATURES = tuple(f"log_{name}" for name in STAT_FIELDS) + tuple(r[0] for r in _RATES) + (
    "log_dram_bytes",
    "log_l1_misses",
) + tuple(f"{name}_per_fp_inst" for name in _PER_FLOP_INST) + ("writebacks_per_l1d_miss", "accesses_per_mem_inst")

LOG_INSTS = 0  # column of log1p(insts) in derived matrices: the offset of a log-CPI target


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
    fp = np.maximum(column(raw, "vec_fp_insts") + column(raw, "fp_insts"), 1.0)
    per_fp = [column(raw, name) / fp for name in _PER_FLOP_INST]
    writebacks = column(raw, "l1d_writebacks") / np.maximum(column(raw, "l1d_misses"), 1.0)
    accesses = column(raw, "l1d_accesses") / np.maximum(column(raw, "loads") + column(raw, "stores"), 1.0)
    return np.column_stack([logs, *rates, dram, l1_misses, *per_fp, writebacks, accesses])
