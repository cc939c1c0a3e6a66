"""Feature matrices from Stats, for the calibrated predictors.

Two feature sets, each in two views:
- "counts": the statistics alone.
  - raw view (multiple linear regression): the counts in STAT_FIELDS order (None -> 0): time
    is a weighted sum of event counts.
  - derived view (non-linear learners): log1p of every count (run times and counts span orders
    of magnitude across shapes; logs make a power law linear), plus the rates that say *how*
    the kernel runs whatever its size: miss rates per level, the vector, floating-point, memory
    and branch shares of the instruction mix, per-FP-instruction traffic, DRAM bytes.
- "pipeline": the counts plus what the pipeline model (perfguard.predict.pipeline) says of the
  block profile: core cycles (llvm-mca cycles per block x executions), those cycles split by
  the bound of each block (which resource limits it: a dependency chain, FP/vector pipes,
  load/store, integer ALUs, other), and the cache-miss stall cycles.
  - raw view: those cycles as extra columns (a cost per cycle of each class).
  - derived view: log core cycles, log stall cycles, log of their sum, each bound class's share
    of the core cycles, and cycles per instruction.
Non-linear learners predict log(time) minus an offset and add it back: log(instructions) for
the counts (a log CPI), log(pipeline cycles) for the pipeline set (the log of seconds per
modelled cycle). The shape's size then scales the prediction and the learner models only how
well the work runs, which is what transfers to shapes it has not seen.
Features come from Stats alone (no kernel parameters): a baseline's stored raw statistics (and
block profile) can always be re-scored by a newer model, and the pipeline columns are computed
through the pipeline model at fit and at predict time, so a changed pipeline model needs only
a retrain, not a new dataset.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from perfguard.config import default_cache_dir
from perfguard.errors import InputError
from perfguard.predict.pipeline import PipelineModel
from perfguard.sim.mca import block_timings
from perfguard.sim.mca_tools import timing_cache_dir
from perfguard.sim.stats import STAT_FIELDS, Stats

FEATURE_SETS = ("counts", "pipeline")
VIEWS = ("raw", "derived")

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

DERIVED_FEATURES = (
    tuple(f"log_{name}" for name in STAT_FIELDS)
    + tuple(r[0] for r in _RATES)
    + (
        "log_dram_bytes",
        "log_l1_misses",
    )
    + tuple(f"{name}_per_fp_inst" for name in _PER_FLOP_INST)
    + ("writebacks_per_l1d_miss", "accesses_per_mem_inst")
)

# The bound of a block (perfguard.sim.mca): "latency", "dispatch", "rep string" or a
# scheduling-model resource, whose names differ per CPU model (Zn4FP45, Zn4ALU0, A57UnitL,
# SiFive7PipeA, ...): grouped into classes by what the resource does.
BOUND_CLASSES = ("latency", "fp", "memory", "integer", "other")
_MEMORY = re.compile(r"(St|Store|LSU|AGU|Load|Ld|UnitL|UnitS|LS)\d*$|Store|Load", re.I)
_FP = re.compile(r"FP|Vec|UnitV|UnitX|UnitW|VPU|PipeV", re.I)
_INTEGER = re.compile(r"ALU|Int|BRU|Branch|UnitI|UnitB|UnitM|Pipe[AB]$", re.I)

PIPELINE_RAW = ("pipeline_core_cycles", "pipeline_stall_cycles") + tuple(f"cycles_{c}_bound" for c in BOUND_CLASSES)
PIPELINE_DERIVED = (
    "log_pipeline_cycles",
    "log_pipeline_core_cycles",
    "log_pipeline_stall_cycles",
    "pipeline_cpi",
) + tuple(f"{c}_bound_share" for c in BOUND_CLASSES)


def bound_class(bound: str) -> str:
    if bound == "latency":
        return "latency"
    if bound in ("dispatch", "rep string"):
        return "other"
    if _MEMORY.search(bound):
        return "memory"
    if _FP.search(bound):
        return "fp"
    if _INTEGER.search(bound):
        return "integer"
    return "other"


def feature_names(features: str, view: str) -> tuple[str, ...]:
    _check(features, view)
    base = STAT_FIELDS if view == "raw" else DERIVED_FEATURES
    if features == "counts":
        return tuple(base)
    return tuple(base) + (PIPELINE_RAW if view == "raw" else PIPELINE_DERIVED)


def offset_column(features: str) -> int:
    """The derived column non-linear learners predict relative to: log insts, or log pipeline cycles."""
    if features == "counts":
        return 0
    return feature_names(features, "derived").index("log_pipeline_cycles")


def _check(features: str, view: str) -> None:
    if features not in FEATURE_SETS:
        raise InputError(f"unknown feature set {features!r} (one of {', '.join(FEATURE_SETS)})")
    if view not in VIEWS:
        raise InputError(f"unknown feature view {view!r} (one of {', '.join(VIEWS)})")


def raw_matrix(stats: list[Stats]) -> np.ndarray:
    rows = [[np.nan if v is None else float(v) for v in s.to_dict().values()] for s in stats]
    return np.asarray(rows, dtype=np.float64).reshape(len(stats), len(STAT_FIELDS))


def column(X: np.ndarray, name: str) -> np.ndarray:
    return X[:, STAT_FIELDS.index(name)]


def _derived_from_raw(raw: np.ndarray, line_bytes: int) -> np.ndarray:
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


def pipeline_columns(stats: list[Stats], model) -> np.ndarray:
    """PIPELINE_RAW per Stats, from a PipelineModel: core cycles, stall cycles, core cycles by bound class.

    All blocks of all the statistics go to the model's cache in one batch first (one llvm-mc and
    one llvm-mca run for a whole dataset, not one per row); then every row reads its blocks back.
    """
    unique: dict[tuple, Any] = {}  # (code, address, size) -> the block
    for s in stats:
        if s.blocks is None:
            break  # block_costs below names the statistics
        for b in s.blocks.blocks:
            unique.setdefault((b.code, b.addr, b.size), b)
    # A block that ends within 16 bytes of a page end may hold an x86 instruction QEMU cut short:
    # in a batch it makes llvm-mc's count disagree and block_timings then disassembles every block
    # of the batch alone (one llvm-mc run each). Such blocks get their own batch.
    near_page_end = [b for b in unique.values() if -b.end % 4096 < 16]
    rest = [b for b in unique.values() if -b.end % 4096 >= 16]
    for batch in (rest, near_page_end):
        if batch:
            block_timings(batch, model.mca, model.cache_dir, f"pipeline features ({model.profile.name})")
    out = np.zeros((len(stats), len(PIPELINE_RAW)))
    for i, s in enumerate(stats):
        by_class = dict.fromkeys(BOUND_CLASSES, 0.0)
        for cost in model.block_costs(s, "statistics for the pipeline features"):
            by_class[bound_class(cost.timing.bound)] += cost.cycles
        out[i] = [sum(by_class.values()), model.stall_cycles(s), *by_class.values()]
    return out


def pipeline_derived(raw_counts: np.ndarray, pipe: np.ndarray) -> np.ndarray:
    core, stall = pipe[:, 0], pipe[:, 1]
    total = core + stall
    shares = pipe[:, 2:] / np.maximum(core, 1.0)[:, None]
    cpi = total / np.maximum(column(raw_counts, "insts"), 1.0)
    return np.column_stack([np.log1p(total), np.log1p(core), np.log1p(stall), cpi, shares])


def matrix(
    stats: list[Stats], features: str, view: str, line_bytes: int = 64, pipeline=None, pipe: np.ndarray | None = None
) -> np.ndarray:
    """The feature matrix. The pipeline set needs `pipeline` (a PipelineModel), or its columns
    already computed (`pipe`, PIPELINE_RAW per row)."""
    _check(features, view)
    raw = np.nan_to_num(raw_matrix(stats), nan=0.0)
    base = raw if view == "raw" else _derived_from_raw(raw, line_bytes)
    if features == "counts":
        return base
    if pipe is None:
        pipe = pipeline_columns(stats, pipeline)
    return np.column_stack([base, pipe if view == "raw" else pipeline_derived(raw, pipe)])


class Featurizer:
    """Stats -> the feature matrix of one feature set and view, for one target profile."""

    def __init__(self, features: str, view: str, profile, cache_dir: Path | None = None):
        _check(features, view)
        self.features, self.view, self.profile = features, view, profile
        self.needs_blocks = features == "pipeline"
        self._pipeline = None
        if self.needs_blocks:
            self._pipeline = PipelineModel(
                profile, timing_cache_dir(default_cache_dir() if cache_dir is None else cache_dir)
            )

    @property
    def pipeline_id(self) -> str | None:
        return None if self._pipeline is None else self._pipeline.model_id

    def matrix(self, stats: list[Stats]) -> np.ndarray:
        return matrix(stats, self.features, self.view, self.profile.l2.line, self._pipeline)
