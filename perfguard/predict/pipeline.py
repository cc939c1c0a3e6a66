"""The pipeline model: LLVM scheduling-model cycles per executed block, weighted by how often
each block ran, plus cache-miss stalls, over the clock.

    cycles = sum over blocks(executions x (llvm-mca cycles + 4K-alias penalty) per execution)
             + (L1 misses served by L2 x L2 latency + L2 misses x memory latency) / mlp

Block cycles come from perfguard.predict.mca for the profile's `pipeline_cpu`; latencies from
its `cost`, the memory-level parallelism `mlp` from the profile. The 4K-alias penalty
(perfguard.predict.memdeps) charges x86 loads that falsely depend on an older store, which
llvm-mca, assuming no aliasing, does not see. It needs the block profile
(the QEMU back end records it): statistics without one (gem5, cachegrind, a baseline written
before block profiles) cannot be scored by it, and it says so rather than guessing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfguard.errors import InputError
from perfguard.predict.base import Predictor
from perfguard.predict.mca import BlockTiming, McaTarget, block_timings, llvm_version
from perfguard.predict.memdeps import ALIAS_PENALTY, aliased_loads
from perfguard.sim.blocks import Block
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

NO_PROFILE = ("has no block profile (simulated by {simulator} or recorded before perfguard kept block "
              "profiles): the pipeline model cannot score it")


@dataclass(frozen=True)
class BlockCost:
    block: Block
    timing: BlockTiming
    penalty: float = 0.0  # cycles per execution llvm-mca does not see (4K-aliased loads)

    @property
    def cycles_per_execution(self) -> float:
        return self.timing.cycles + self.penalty

    @property
    def cycles(self) -> float:
        return self.block.count * self.cycles_per_execution

    @property
    def bound(self) -> str:
        """The scheduling model's bound, or "4K aliasing" where that penalty is the larger part."""
        return "4K aliasing" if self.penalty > self.timing.cycles else self.timing.bound


class PipelineModel(Predictor):
    name = "pipeline"
    calibrated = False

    def __init__(self, profile: TargetProfile, cache_dir: Path):
        self.profile = profile
        self.cache_dir = Path(cache_dir)
        self.mca = McaTarget(profile.triple, profile.pipeline_cpu, profile.mattr)
        constants = json.dumps({"cpu": self.mca.describe(), "llvm": llvm_version(self.cache_dir), "mlp": profile.mlp,
                                "l2": profile.cost.l2_latency, "mem": profile.cost.mem_latency,
                                "clock_hz": profile.clock_hz, "alias_penalty": ALIAS_PENALTY},
                               sort_keys=True)
        self.model_id = "pipeline-v2-" + hashlib.sha256(constants.encode()).hexdigest()[:12]

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> "PipelineModel":
        return self  # a scheduling model and profile constants, not learnt from data

    def predict(self, X: np.ndarray) -> np.ndarray:
        raise InputError("the pipeline model scores block profiles (predict_stats), not feature matrices")

    def block_costs(self, stats: Stats, what: str = "statistics") -> list[BlockCost]:
        if stats.blocks is None:
            raise InputError(f"{what} " + NO_PROFILE.format(simulator="a back end without one"))
        timings = block_timings(stats.blocks.blocks, self.mca, self.cache_dir,
                                f"pipeline model ({self.profile.name}, {what})")
        return [BlockCost(b, t, ALIAS_PENALTY * aliased_loads(t.asm, self.profile.triple))
                for b, t in zip(stats.blocks.blocks, timings)]

    def stall_cycles(self, stats: Stats) -> float:
        l1 = (stats.l1d_misses or 0) + (stats.l1i_misses or 0)
        l2 = stats.l2_misses or 0
        cost = self.profile.cost
        return (max(l1 - l2, 0) * cost.l2_latency + l2 * cost.mem_latency) / self.profile.mlp

    def cycles(self, stats: Stats, what: str = "statistics") -> float:
        return sum(c.cycles for c in self.block_costs(stats, what)) + self.stall_cycles(stats)

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return np.array([self.cycles(s) / self.profile.clock_hz for s in stats], dtype=np.float64)
