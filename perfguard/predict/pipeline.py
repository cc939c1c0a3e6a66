"""The pipeline model: LLVM scheduling-model cycles per executed block, weighted by how often
each block ran, plus cache-miss stalls, over the clock.

    cycles = sum over blocks(executions x (llvm-mca cycles x loop scale + 4K-alias penalty))
             + (L1 misses served by L2 x L2 latency + L2 misses served by L3 x L3 latency
                + the other L2 misses x memory latency) / mlp

Block cycles come from perfguard.sim.mca for the profile's `pipeline_cpu`; latencies from
its `cost`, the memory-level parallelism `mlp` from the profile. The simulators model L1s and an
L2; a profile with an `l3_size` has a last-level cache behind them, which serves a call's L2
misses when the lines they bring in fit in it: a call misses each line it touches at most once
per miss, so its L2-miss traffic bounds what it touches, and what fits stays in the L3 from one
call to the next (the warm-up call before the measured one, or the previous call in a loop).
Without that level, a kernel streaming a 4 MiB matrix was charged memory latency on every line
its 1 MiB L2 missed, natively L3 hits: the same large stall on both sides of a change compressed
the ratio (gemv and dense_relu losing their vectors: +458 % and +935 % predicted, +1109 % and
+1396 % native). The 4K-alias penalty
(perfguard.predict.memdeps) charges x86 loads that falsely depend on an older store, which
llvm-mca, assuming no aliasing, does not see; the loop scale puts the blocks of a loop body
that QEMU split into several blocks at llvm-mca's cycles for the whole body. It needs the block profile
(the QEMU back end records it): statistics without one (gem5, cachegrind, a baseline written
before block profiles) cannot be scored by it, and it says so rather than guessing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from perfguard.errors import InputError
from perfguard.fingerprints import logic_digest
from perfguard.predict.base import Predictor
from perfguard.sim.mca import LATENCY_BOUND, BlockTiming, McaTarget, block_timings, llvm_version, loop_cycles
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
    loop_scale: float = 1.0  # the block's loop body scheduled whole / its blocks scheduled alone

    @property
    def cycles_per_execution(self) -> float:
        return self.timing.cycles * self.loop_scale + self.penalty

    @property
    def cycles(self) -> float:
        return self.block.count * self.cycles_per_execution

    @property
    def bound(self) -> str:
        """The scheduling model's bound, or "4K aliasing" where that penalty is the larger part."""
        if self.penalty > self.timing.cycles * self.loop_scale:
            return "4K aliasing"
        return "loop latency" if self.loop_scale >= LATENCY_BOUND else self.timing.bound


# A conditional branch back to an earlier address (the displacement as llvm-mc prints it: from
# the end of the instruction on x86, from its start on aarch64 and riscv64).
_BACK_BRANCH = {
    "x86_64": re.compile(r"^j(?!mp)[a-z]+ (-\d+)$"),
    "aarch64": re.compile(r"^(?:b\.[a-z]+|cbn?z|tbn?z) .*#(-\d+)$"),
    "riscv64": re.compile(r"^(?:b[a-z]+|c\.bn?ez) .*, (-\d+)$"),
}
LOOP_COUNT_SPREAD = 1.05  # a loop body's blocks ran (about) equally often: one straight-line body
QEMU_PAGE = 4096  # a QEMU block never crosses a guest page (4 KiB on every target here)


def _last_insn_offset(block: Block, isa: str) -> int:
    """Where the block's last instruction starts, in bytes from its start."""
    if isa == "aarch64":
        return block.size - 4
    at = last = 0
    while at < block.size:  # riscv64: 4-byte instructions have both low bits set, compressed ones do not
        last = at
        at += 4 if int(block.code[2 * at:2 * at + 2], 16) & 3 == 3 else 2
    return last


def loop_bodies(costs: list[BlockCost], triple: str) -> list[list[int]]:
    """Loops whose body is several blocks in a row (QEMU ends a block at a page end or after
    its maximum size): indices into `costs`, in address order, the back branch's block last.
    A loop in one block is left alone: llvm-mca already runs every block back to back."""
    isa = triple.split("-")[0]
    back = _BACK_BRANCH.get(isa)
    if back is None:
        return []
    starting: dict[int, list[int]] = {}
    for i, c in enumerate(costs):
        starting.setdefault(c.block.addr, []).append(i)
    bodies = []
    for i, c in enumerate(costs):
        found = back.match(c.timing.asm[-1]) if c.timing.asm and len(c.timing.asm) == c.block.insns else None
        if not found:
            continue
        branch_at = c.block.end if isa == "x86_64" else c.block.addr + _last_insn_offset(c.block, isa)
        target = branch_at + int(found.group(1))
        if target >= c.block.addr:
            continue
        body, at = [], target
        while at < c.block.end:
            fits = [j for j in starting.get(at, []) if costs[j].block.end <= c.block.end]
            if not fits:
                break
            j = max(fits, key=lambda k: (costs[k].block.count, -k))
            body.append(j)
            at = costs[j].block.end
        if body and at == c.block.end and body[-1] == i and _runs_as_one_body(body, costs) \
                and all(costs[j].timing.bound != "rep string" for j in body):
            bodies.append(body)
    return bodies


def _reaches_a_page(block: Block) -> bool:
    """Whether the block starts a page or runs into the next one (an x86 instruction straddling a
    page end: QEMU gives it a block of its own)."""
    return block.addr % QEMU_PAGE == 0 or block.addr // QEMU_PAGE != (block.end - 1) // QEMU_PAGE


def _runs_as_one_body(body: list[int], costs: list[BlockCost]) -> bool:
    """Whether the blocks of a would-be loop body ran (about) equally often, as one straight-line
    body does. A page end inside the body lets the blocks from it on run more: other paths into
    the same code (QEMU blocks that enter it at other addresses) end at that page end too and go
    on into them. Before the first page end, a block that ran more often than the rest is entered
    from outside the body: not one body."""
    counts = [costs[j].block.count for j in body]
    split = next((k for k in range(1, len(body)) if _reaches_a_page(costs[body[k]].block)), len(body))
    head, tail = counts[:split], counts[split:]
    return max(head) <= LOOP_COUNT_SPREAD * min(head) and all(n * LOOP_COUNT_SPREAD >= min(head) for n in tail)


# The same block is analysed for every result, baseline and report that holds it.
_aliased_loads = functools.lru_cache(maxsize=1 << 16)(aliased_loads)


# The modules whose code turns a block profile into a time: an edit to their logic is a new model
# (new id: stored intervals and calibrated models made with the old one are refused, not misused).
MODEL_CODE = ("predict/pipeline.py", "predict/memdeps.py", "sim/mca.py")


class PipelineModel(Predictor):
    name = "pipeline"
    calibrated = False
    needs_blocks = True

    def __init__(self, profile: TargetProfile, cache_dir: Path):
        self.profile = profile
        self.cache_dir = Path(cache_dir)
        self.mca = McaTarget(profile.triple, profile.pipeline_cpu, profile.mattr)
        constants = json.dumps({"cpu": self.mca.describe(), "llvm": llvm_version(self.cache_dir), "mlp": profile.mlp,
                                "l2": profile.cost.l2_latency, "mem": profile.cost.mem_latency,
                                "l3": [profile.l3_size, profile.cost.l3_latency],
                                "clock_hz": profile.clock_hz, "alias_penalty": ALIAS_PENALTY,
                                "code": logic_digest(*MODEL_CODE)},
                               sort_keys=True)
        self.model_id = "pipeline-v3-" + hashlib.sha256(constants.encode()).hexdigest()[:12]

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> "PipelineModel":
        return self  # a scheduling model and profile constants, not learnt from data

    def predict(self, X: np.ndarray) -> np.ndarray:
        raise InputError("the pipeline model scores block profiles (predict_stats), not feature matrices")

    def block_costs(self, stats: Stats, what: str = "statistics") -> list[BlockCost]:
        if stats.blocks is None:
            raise InputError(f"{what} " + NO_PROFILE.format(simulator="a back end without one"))
        timings = block_timings(stats.blocks.blocks, self.mca, self.cache_dir,
                                f"pipeline model ({self.profile.name}, {what})")
        costs = [BlockCost(b, t, ALIAS_PENALTY * _aliased_loads(t.asm, self.profile.triple))
                 for b, t in zip(stats.blocks.blocks, timings)]
        bodies = loop_bodies(costs, self.profile.triple)
        if not bodies:
            return costs
        whole = loop_cycles([[(costs[j].block, costs[j].timing) for j in body] for body in bodies], self.mca,
                            self.cache_dir, f"pipeline model ({self.profile.name}, {what})")
        scale: dict[int, float] = {}
        for body, cycles in zip(bodies, whole):
            alone = sum(costs[j].timing.cycles for j in body)
            for j in body:  # a block in two bodies (nested loops sharing a tail) takes the slower
                scale[j] = max(scale.get(j, 0.0), cycles / alone if alone else 1.0)
        return [replace(c, loop_scale=scale[i]) if i in scale else c for i, c in enumerate(costs)]

    def stall_cycles(self, stats: Stats) -> float:
        l1 = (stats.l1d_misses or 0) + (stats.l1i_misses or 0)
        l2 = stats.l2_misses or 0
        cost = self.profile.cost
        in_l3 = min(l2, self.profile.l3_size // self.profile.l2.line)  # the missed lines that fit in the L3
        return (max(l1 - l2, 0) * cost.l2_latency + in_l3 * cost.l3_latency
                + (l2 - in_l3) * cost.mem_latency) / self.profile.mlp

    def cycles(self, stats: Stats, what: str = "statistics") -> float:
        return sum(c.cycles for c in self.block_costs(stats, what)) + self.stall_cycles(stats)

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return np.array([self.cycles(s) / self.profile.clock_hz for s in stats], dtype=np.float64)
