"""Regression attribution: the blocks whose pipeline-model cycles changed most between the
baseline and this run.

Blocks are paired by start address (a schedule edit usually rewrites the code in place, so the
block at an address before and after is the natural pair to show side by side); blocks at an
address only one side executed pair with nothing. Each entry carries both sides: function,
address range, instructions, executions, cycles per execution, the limiting resource and the
disassembly, and the change in total cycles with its share of the whole change.
`perfguard check` and `compare` attach them to each result; `perfguard bisect` prints
`changed_blocks` for the last good and the first bad revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfguard.guard.report import BlockChange, BlockSide
from perfguard.predict.pipeline import BlockCost, PipelineModel
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

MAX_BLOCKS = 40  # kept per result: the kernel page lists them all, the comment the top 3


def _side(costs: list[BlockCost]) -> BlockSide | None:
    if not costs:
        return None
    first = costs[0]
    executions = sum(c.block.count for c in costs)
    total = sum(c.cycles for c in costs)
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
    )


def block_changes(model: PipelineModel, baseline: Stats, current: Stats) -> list[BlockChange]:
    """Changed blocks, largest change in cycles first (at most MAX_BLOCKS)."""
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
                               baseline=_side(before), current=_side(after)))
    out.sort(key=lambda d: (-abs(d.delta_cycles), d.start))
    return out[:MAX_BLOCKS]


def changed_blocks(before: Any, after: Any, profile: TargetProfile, cache_dir: Path, most: int = 5) -> list[str] | None:
    """One line per block whose cycles changed most between two JobResults; None without block profiles."""
    stats_before, stats_after = getattr(before, "stats", None), getattr(after, "stats", None)
    if stats_before is None or stats_after is None or stats_before.blocks is None or stats_after.blocks is None:
        return None
    lines = []
    for c in block_changes(PipelineModel(profile, cache_dir), stats_before, stats_after)[:most]:
        side = c.current or c.baseline
        per = [f"{s.cycles_per_execution:.1f}" if s else "-" for s in (c.baseline, c.current)]
        lines.append(f"{c.delta_cycles:+,.0f} cycles at 0x{c.start:x}"
                     + (f" ({side.symbol})" if side.symbol else "")
                     + f": {per[0]} -> {per[1]} cycles per execution, bound by {side.bound}")
    return lines
