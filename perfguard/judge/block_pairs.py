"""Blocks of the baseline and of this run paired by what they are, not where they sit.

A site is what one side ran from one start address: usually one block, sometimes several (QEMU
translated the code there again, in another length). Sites pair, in this order:

1. `same code`: same function, same disassembly once addresses, pc-relative displacements and
   branch targets are masked (judge.code_identity.normalised), same executions;
2. `same code, other registers`: the same with registers renumbered and stack slots masked
   (code_identity.renamed): an unchanged nest of a function whose other nest changed;
3. `same code split differently`: one site on one side is the same code as consecutive sites
   on the other (QEMU ends a block at a page boundary, and moved code meets other boundaries);
4. `same code, other count`: the same code run a different number of times (a C library
   routine called more or less often);
5. `same loop`: changed code that both sides place in the same loop (the callers' `loop_key`),
   the most alike first (shared instructions);
6. `same offset`: changed code at the same offset from its function's first executed block;
7. one-sided: code only one side ran.

Within a step, candidates are taken in address order, so the result is deterministic. The
first three are unchanged code: whatever their cycles did, it is not a change of the code
(judge.differential keeps it out of every "where").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from perfguard.judge.code_identity import normalised, renamed
from perfguard.predict.pipeline import BlockCost

SAME = "same code"
RENAMED = "same code, other registers"
SPLIT = "same code split differently"
RECOUNTED = "same code, other count"
SAME_LOOP = "same loop"
SAME_OFFSET = "same offset"
ONLY_BASELINE = "only in the baseline"
ONLY_CURRENT = "only in this run"
UNCHANGED = (SAME, RENAMED, SPLIT)
MAX_SPLIT = 4  # sites one block may have been split into


@dataclass(frozen=True)
class Site:
    """The blocks one side ran from one start address."""

    costs: tuple[BlockCost, ...]  # longest first

    @property
    def addr(self) -> int:
        return self.costs[0].block.addr

    @property
    def end(self) -> int:
        return max(c.block.end for c in self.costs)

    @property
    def symbol(self) -> str:
        return self.costs[0].block.symbol

    @property
    def executions(self) -> int:
        return sum(c.block.count for c in self.costs)

    @property
    def cycles(self) -> float:
        return sum(c.cycles for c in self.costs)


@dataclass(frozen=True)
class BlockPair:
    """Sites of the baseline and of this run that are the same code, or its changed version."""

    baseline: tuple[Site, ...]
    current: tuple[Site, ...]
    how: str  # one of the step names above

    @property
    def unchanged(self) -> bool:
        return self.how in UNCHANGED

    @property
    def baseline_cycles(self) -> float:
        return sum(s.cycles for s in self.baseline)

    @property
    def current_cycles(self) -> float:
        return sum(s.cycles for s in self.current)

    @property
    def delta(self) -> float:
        return self.current_cycles - self.baseline_cycles

    @property
    def start(self) -> int:
        """Where the pair is shown: this run's address, else the baseline's."""
        return (self.current or self.baseline)[0].addr


def sites(costs: list[BlockCost]) -> list[Site]:
    """One side's blocks grouped by start address, in address order."""
    by_addr: dict[int, list[BlockCost]] = defaultdict(list)
    for c in costs:
        by_addr[c.block.addr].append(c)
    return [
        Site(tuple(sorted(group, key=lambda c: (-c.block.size, c.block.count)))) for _, group in sorted(by_addr.items())
    ]


class _Forms:
    """A side's sites with their normalised and renamed forms, computed once."""

    def __init__(self, side: list[Site], isa: str):
        self.isa = isa
        self.norm = {s.addr: tuple(normalised(c.timing.asm, isa) for c in s.costs) for s in side}
        self.renamed = {addr: tuple(renamed(f, isa) for f in forms) for addr, forms in self.norm.items()}

    def key(self, site: Site, step: str) -> Hashable:
        counts = tuple(c.block.count for c in site.costs)
        if step == SAME:
            return site.symbol, self.norm[site.addr], counts
        if step == RENAMED:
            return site.symbol, self.renamed[site.addr], counts
        return site.symbol, self.renamed[site.addr]  # RECOUNTED

    def joined(self, run: list[Site]) -> tuple:
        """The renamed form of consecutive single-block sites read as one block."""
        return renamed(tuple(line for s in run for line in self.norm[s.addr][0]), self.isa)


def pair_blocks(
    before: list[BlockCost],
    after: list[BlockCost],
    isa: str,
    loop_key: tuple[Callable[[Site], Hashable | None], Callable[[Site], Hashable | None]] | None = None,
) -> list[BlockPair]:
    """Every site of both sides in exactly one pair, in the order the steps found them.
    `loop_key`: per side, the loop a site runs in (None: not known); sites of equal keys pair
    in step 5."""
    left, right = sites(before), sites(after)
    starts = [_function_starts(left), _function_starts(right)]
    forms = (_Forms(left, isa), _Forms(right, isa))
    pairs: list[BlockPair] = []
    free = [dict((s.addr, s) for s in left), dict((s.addr, s) for s in right)]

    def take(a: list[Site], b: list[Site], how: str) -> None:
        for s in a:
            del free[0][s.addr]
        for s in b:
            del free[1][s.addr]
        pairs.append(BlockPair(tuple(a), tuple(b), how))

    for step in (SAME, RENAMED):
        _pair_by_key(free, _keyed(forms, step), step, take)
    _pair_splits(free, forms, take)
    _pair_by_key(free, lambda side, s: forms[side].key(s, RECOUNTED), RECOUNTED, take)
    if loop_key is not None:
        _pair_alike(
            free, lambda side, s: None if (k := loop_key[side](s)) is None else (s.symbol, k), SAME_LOOP, forms, take
        )
    _pair_by_key(free, lambda side, s: (s.symbol, s.addr - starts[side][s.symbol]), SAME_OFFSET, take)
    for s in list(free[0].values()):
        take([s], [], ONLY_BASELINE)
    for s in list(free[1].values()):
        take([], [s], ONLY_CURRENT)
    return pairs


def _keyed(forms: tuple[_Forms, _Forms], step: str) -> Callable[[int, Site], Hashable | None]:
    """Each side's key of a site at `step` (SAME or RENAMED)."""
    return lambda side, s: forms[side].key(s, step)


def _pair_by_key(free: list[dict[int, Site]], key: Callable[[int, Site], Hashable | None], how: str, take) -> None:
    """Sites of equal keys pair, the n-th of one side with the n-th of the other in address order."""
    groups: list[dict[Hashable, list[Site]]] = [defaultdict(list), defaultdict(list)]
    for side in (0, 1):
        for s in sorted(free[side].values(), key=lambda s: s.addr):
            k = key(side, s)
            if k is not None:
                groups[side][k].append(s)
    for k, mine in groups[0].items():
        for a, b in zip(mine, groups[1].get(k, [])):
            take([a], [b], how)


def _pair_alike(
    free: list[dict[int, Site]],
    key: Callable[[int, Site], Hashable | None],
    how: str,
    forms: tuple[_Forms, _Forms],
    take,
) -> None:
    """Sites of equal keys pair, the most alike first (instructions in common, by mnemonic),
    ties broken by address."""
    groups: list[dict[Hashable, list[Site]]] = [defaultdict(list), defaultdict(list)]
    for side in (0, 1):
        for s in sorted(free[side].values(), key=lambda s: s.addr):
            k = key(side, s)
            if k is not None:
                groups[side][k].append(s)
    for k, mine in groups[0].items():
        theirs = groups[1].get(k, [])
        if not theirs:
            continue
        words = [
            {s.addr: _mnemonics(forms[side].norm[s.addr]) for s in group} for side, group in ((0, mine), (1, theirs))
        ]
        scored = sorted(
            ((-_alike(words[0][a.addr], words[1][b.addr]), a.addr, b.addr, a, b) for a in mine for b in theirs),
            key=lambda t: t[:3],
        )
        used: tuple[set[int], set[int]] = (set(), set())
        for _, x, y, a, b in scored:
            if x not in used[0] and y not in used[1]:
                used[0].add(x)
                used[1].add(y)
                take([a], [b], how)


def _mnemonics(forms: tuple) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for form in forms[:1]:
        for line in form:
            out[line.split(" ", 1)[0]] += 1
    return out


def _alike(a: dict[str, int], b: dict[str, int]) -> float:
    shared = sum(min(n, b.get(m, 0)) for m, n in a.items())
    return shared / max(1, max(sum(a.values()), sum(b.values())))


def _pair_splits(free: list[dict[int, Site]], forms: tuple[_Forms, _Forms], take) -> None:
    """A single-block site of one side that is the same code as 2..MAX_SPLIT consecutive
    single-block sites of the other, each run as often."""
    for whole_side in (0, 1):
        parts_side = 1 - whole_side
        parts = sorted((s for s in free[parts_side].values() if len(s.costs) == 1), key=lambda s: s.addr)
        following = {s.addr: s for s in parts}
        for whole in sorted(free[whole_side].values(), key=lambda s: s.addr):
            if len(whole.costs) != 1 or whole.addr not in free[whole_side]:
                continue
            target = forms[whole_side].joined([whole])
            for first in parts:
                if (
                    first.addr not in free[parts_side]
                    or first.symbol != whole.symbol
                    or first.executions != whole.executions
                ):
                    continue
                run = [first]
                while len(run) < MAX_SPLIT and len(forms[parts_side].joined(run)) < len(target):
                    nxt = following.get(run[-1].end)
                    if nxt is None or nxt.addr not in free[parts_side] or nxt.executions != whole.executions:
                        break
                    run.append(nxt)
                if len(run) > 1 and forms[parts_side].joined(run) == target:
                    take([whole], run, SPLIT) if whole_side == 0 else take(run, [whole], SPLIT)
                    break


def _function_starts(side) -> dict[str, int]:
    starts: dict[str, int] = {}
    for s in side:
        starts[s.symbol] = min(starts.get(s.symbol, s.addr), s.addr)
    return starts
