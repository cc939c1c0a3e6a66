"""Regression attribution: the blocks whose pipeline-model cycles changed most between the
baseline and this run.

Blocks are paired by start address (a schedule edit usually rewrites the code in place, so the
block at an address before and after is the natural pair to show side by side); blocks at an
address only one side executed pair with nothing. Each entry carries both sides: function,
address range, instructions, executions, cycles per execution, the limiting resource and the
disassembly, and the change in total cycles with its share of the whole change.

Where that side's build recorded its loop nest (compile.loops: the build's, or a baseline's
copy of it), a side also names the TIR loop its block runs in: the loop whose body runs as often
per kernel call as the block did, when exactly one fits, or when of several that fit the
object's debug information places only one's variable in the block; otherwise the ones that fit
are candidates, none of them shown as the answer. A block outside the kernel's functions (the harness, the C library)
is never named. A baseline recorded before nests were kept names no loop on its side.
`perfguard check` and `compare` attach them to each result; `perfguard bisect` prints
`changed_blocks` for the last good and the first bad revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfguard.compile.loops import LoopLayout, LoopMatch, LoopNest
from perfguard.guard.report import BlockChange, BlockLoop, BlockSide, LoopStep
from perfguard.predict.pipeline import BlockCost, PipelineModel
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

MAX_BLOCKS = 40  # kept per result: the kernel page lists them all, the comment the top 3
MAX_CANDIDATES = 4  # loops shown for a block several loops fit


class LoopNamer:
    """Names the loop of one side's blocks from their executions per kernel call."""

    def __init__(self, nest: dict | None, stats: Stats, what: str):
        self.nest = LoopNest.from_dict(nest, what) if nest is not None else None
        self.functions = set(self.nest.functions) if self.nest else set()
        runs: dict[int, int] = {}  # executions per start address, as a block side counts them
        for b in stats.blocks.blocks if stats.blocks is not None and self.nest else ():
            if self.in_kernel(b.symbol):
                runs[b.addr] = runs.get(b.addr, 0) + b.count
        self.layout = LoopLayout(self.nest, set(runs.values())) if self.nest else None

    def in_kernel(self, symbol: str | None) -> bool:
        # "": QEMU knows no symbol there (a private function of the object, e.g. a parallel lambda)
        return not symbol or symbol in self.functions

    def name(self, symbol: str | None, executions: int, start: int = 0, end: int = 0
             ) -> tuple[BlockLoop | None, list[BlockLoop]]:
        """(the loop, []) when exactly one fits, (None, candidates) otherwise. Of several that
        fit, the one whose variable alone the object's debug information places in the block's
        [start, end) is the loop."""
        if self.layout is None or not self.in_kernel(symbol):
            return None, []
        found = [self.describe(m) for m in self.layout.matches(executions)]
        if len(found) > 1:
            located = [loop for loop in found if self.layout.nest.located(loop.var, start, end)]
            if len(located) == 1:
                located[0].located = True
                return located[0], []
        return (found[0], []) if len(found) == 1 else (None, found[:MAX_CANDIDATES])

    def describe(self, match: LoopMatch) -> BlockLoop:
        layout = self.layout
        assert layout is not None
        loops = layout.nest.loops
        return BlockLoop(var=loops[match.loop].var,
                         path=[LoopStep(loops[j].var, loops[j].extent, loops[j].kind, j in layout.flat)
                               for j in layout.nest.path(match.loop)],
                         trips=match.executions, per_execution=match.per_execution, peeled=match.peeled,
                         unrolled=[loops[j].var for j in layout.unrolled_inside(match.loop)])


def _side(costs: list[BlockCost], namer: LoopNamer) -> BlockSide | None:
    if not costs:
        return None
    first = costs[0]
    executions = sum(c.block.count for c in costs)
    total = sum(c.cycles for c in costs)
    loop, candidates = namer.name(first.block.symbol or None, executions, first.block.addr,
                                  max(c.block.end for c in costs))
    return BlockSide(
        symbol=first.block.symbol or None,
        start=first.block.addr,
        end=max(c.block.end for c in costs),
        insns=first.block.insns,
        executions=executions,
        cycles_per_execution=total / executions if executions else 0.0,
        cycles=total,
        bound=first.bound,
        asm=list(first.timing.asm),
        loop=loop,
        loop_candidates=candidates,
    )


def block_changes(model: PipelineModel, baseline: Stats, current: Stats,
                  loops: tuple[dict | None, dict | None] = (None, None)) -> list[BlockChange]:
    """Changed blocks, largest change in cycles first (at most MAX_BLOCKS); `loops`: each side's
    loop nest (compile.loops, plain JSON) or None."""
    namers = [LoopNamer(nest, stats, what) for nest, stats, what in
              zip(loops, (baseline, current), ("the baseline", "this run"))]
    by_addr: dict[int, tuple[list[BlockCost], list[BlockCost]]] = {}
    for side, stats, what in ((0, baseline, "the baseline"), (1, current, "this run")):
        for cost in model.block_costs(stats, what):
            by_addr.setdefault(cost.block.addr, ([], []))[side].append(cost)
    base_total = sum(c.cycles for pair in by_addr.values() for c in pair[0])
    cur_total = sum(c.cycles for pair in by_addr.values() for c in pair[1])
    change = cur_total - base_total
    out = []
    for addr, (before, after) in by_addr.items():
        delta = sum(c.cycles for c in after) - sum(c.cycles for c in before)
        if delta == 0:
            continue
        out.append(BlockChange(start=addr, delta_cycles=delta, share_pct=100.0 * delta / change if change else None,
                               baseline=_side(before, namers[0]), current=_side(after, namers[1])))
    out.sort(key=lambda d: (-abs(d.delta_cycles), d.start))
    return out[:MAX_BLOCKS]


def changed_blocks(before: Any, after: Any, profile: TargetProfile, cache_dir: Path, most: int = 5) -> list[str] | None:
    """One line per block whose cycles changed most between two JobResults; None without block profiles."""
    stats_before, stats_after = getattr(before, "stats", None), getattr(after, "stats", None)
    if stats_before is None or stats_after is None or stats_before.blocks is None or stats_after.blocks is None:
        return None
    lines = []
    loops = (getattr(before, "loops", None), getattr(after, "loops", None))
    for c in block_changes(PipelineModel(profile, cache_dir), stats_before, stats_after, loops)[:most]:
        side = c.current or c.baseline
        per = [f"{s.cycles_per_execution:.1f}" if s else "-" for s in (c.baseline, c.current)]
        where = next((s.loop_text for s in (c.current, c.baseline) if s and s.loop_text), "")
        lines.append(f"{c.delta_cycles:+,.0f} cycles at 0x{c.start:x}"
                     + (f" ({side.symbol})" if side.symbol else "")
                     + (f" in {where}" if where else "")
                     + f": {per[0]} -> {per[1]} cycles per execution, bound by {side.bound}")
    return lines
