"""Regression attribution: where a change of predicted cycles happened, and in which code.

Blocks of the baseline and of this run are paired by what they are (judge.block_pairs: the same
code once addresses and registers are taken out, else the same loop, else the same offset in
the function), so code that only moved is never a change. The pairs make the differential view
(judge.differential: function > loop nest > loop > block, each with both sides' cycles) and the
list of changed blocks with both sides side by side: function, address range, instructions,
executions, cycles per execution, the limiting resource, the disassembly and the loop.

Where that side's build recorded its loop nest (compile.loops: the build's, or a baseline's
copy of it), a side names the TIR loop its block runs in (LoopNamer): the loop whose body runs
as often per kernel call as the block did, told apart from others of the same count by the
order of the nests in the function and by the object's debug information; otherwise the ones
that fit are candidates, none of them shown as the answer. A block outside the kernel's
functions (the harness, the C library) is never named. A baseline recorded before nests were
kept names no loop on its side. `perfguard check` and `compare` attach the view and the blocks
to each result; `perfguard bisect` prints the same view's top loops for the last good and the
first bad revision.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard.compile.loops import LoopLayout, LoopMatch, LoopNest
from perfguard.document.result import EITHER_NEST, Attribution, BlockChange, BlockLoop, BlockSide, InsnCycles, LoopStep
from perfguard.judge.block_pairs import Site, pair_blocks
from perfguard.judge.differential import NO_SYMBOL, NOT_IN_LOOP, UNDECIDED, Place, differential
from perfguard.predict.pipeline import PipelineModel
from perfguard.sim.mca_insns import instruction_costs
from perfguard.sim.mca_tools import timing_cache_dir
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

MAX_BLOCKS = 40  # kept per result: the kernel page lists them all, the comment the top 3
MAX_CANDIDATES = 4  # loops shown for a block several loops fit


def _covering_counts(stats: Stats, sites: dict[int, tuple[str, int, int]]) -> dict[int, int]:
    """How often the first instruction of each site ran: the executions of every block that
    covers its address. QEMU starts a block at a loop's head only when it branches there; the
    first iteration runs on from the block before it (which covers the head too), so a head
    block alone counts one iteration per entry short."""
    blocks = sorted((b.addr, b.end, b.count) for b in stats.blocks.blocks) if stats.blocks is not None else []
    starts = [b[0] for b in blocks]
    longest = max((end - addr for addr, end, _ in blocks), default=0)
    out = {}
    for addr in sites:
        total, j = 0, bisect.bisect_right(starts, addr) - 1
        while j >= 0 and blocks[j][0] > addr - longest - 1:
            if blocks[j][1] > addr:
                total += blocks[j][2]
            j -= 1
        out[addr] = total
    return out


class LoopNamer:
    """Names the loop of one side's blocks from how often their code ran per kernel call.

    Every kernel site (the blocks run from one start address) is fitted to the loops its count
    fits (compile.loops.LoopLayout): the count of its first instruction, from every block that
    covers it. Where several fit, two more facts decide:

    - the order of the nests: LLVM lays a function's loops out in the nest's order, so a site
      lies after every site of a loop before its own and before every site of a loop after it.
      Anchors are the sites only one loop fits and the first address where the debug
      information locates a loop variable that names one loop only; a candidate an anchor
      contradicts is dropped, until nothing changes. A function whose anchors contradict each
      other (the layout is not in the nest's order there) is not narrowed this way. Before the
      first location of a variable only one loop has, that loop's body has not begun: a block
      there is neither that loop nor one inside it;
    - the debug information: of the loops left, the one whose variable alone is located in
      the block.

    What is still not decided keeps its candidates, none of them shown as the answer.
    """

    def __init__(self, nest: dict | None, stats: Stats, what: str):
        self.nest = LoopNest.from_dict(nest, what) if nest is not None else None
        self.functions = set(self.nest.functions) if self.nest else set()
        self.sites: dict[int, tuple[str, int, int]] = {}  # start address -> (symbol, executions, end)
        for b in stats.blocks.blocks if stats.blocks is not None and self.nest else ():
            if self.in_kernel(b.symbol, b.addr):
                symbol, runs, end = self.sites.get(b.addr, (b.symbol, 0, b.end))
                self.sites[b.addr] = (symbol, runs + b.count, max(end, b.end))
        self.runs = _covering_counts(stats, self.sites)
        self.layout = LoopLayout(self.nest, set(self.runs.values())) if self.nest else None
        self.decided = self._decide() if self.layout else {}
        self._points: dict[str, list[tuple[int, int]]] | None = None

    def in_kernel(self, symbol: str | None, addr: int | None = None) -> bool:
        """Whether a block is the kernel object's. QEMU knows no symbol ("") for a private
        function of the object (a parallel lambda) and for a C library stub (x86's IFUNC PLT):
        where the nest recorded the object's code, the address tells them apart."""
        if symbol:
            return symbol in self.functions
        if self.nest is not None and self.nest.code and addr is not None:
            return any(lo <= addr < hi for lo, hi in self.nest.code)
        return self.nest is not None

    def name(
        self, symbol: str | None, executions: int, start: int = 0, end: int = 0
    ) -> tuple[BlockLoop | None, list[BlockLoop]]:
        """(the loop, []) when one is decided, (None, candidates) otherwise. A site of this
        side's profile (`start` with its `executions`) is named as decided for the whole
        profile; any other block by its count and the debug information alone."""
        if self.layout is None or not self.in_kernel(symbol, start or None):
            return None, []
        site = self.sites.get(start)
        if site is not None and site[1] == executions and start in self.decided:
            found, how = self.decided[start]
        else:  # a block this profile did not run: its own count (nothing covers it)
            found, how = self._fitted(executions, start, end)
        named = [self.describe(m) for m in found]
        if len(named) == 1:
            named[0].located, named[0].ordered = how == "located", how == "ordered"
            return named[0], []
        return None, named[:MAX_CANDIDATES]

    def _fitted(self, executions: int, start: int, end: int) -> tuple[list[LoopMatch], str]:
        assert self.layout is not None
        found = self.layout.matches(executions)
        if len(found) > 1 and end > start:
            located = [m for m in found if self.layout.nest.located(self.layout.nest.loops[m.loop].var, start, end)]
            if len(located) == 1:
                return located, "located"
        return found, ""

    def _decide(self) -> dict[int, tuple[list[LoopMatch], str]]:
        """Each site's loops left (one: decided) and what decided it ("" the count alone,
        "ordered", "located", "plainest"). Every way a count fits is kept until the order of the
        nests and the debug information have spoken; only then does the plainest way (as it is,
        else peeled, else unrolled) choose among what is left."""
        assert self.layout is not None
        nest, layout = self.layout.nest, self.layout
        left = {addr: (layout.fits(self.runs[addr]), "") for addr in self.sites}
        anchors: dict[str, list[tuple[float, int]]] = {}  # function -> (address, loop)
        for addr, (found, _) in left.items():
            if len(found) == 1:
                anchors.setdefault(self.sites[addr][0], []).append((addr, found[0].loop))
        for symbol, at, loop in self._variable_anchors():
            # the variable's loop begins at (or before) its first location: a block starting
            # right there is already past the nests before it
            anchors.setdefault(symbol, []).append((at - 0.5, loop))
        ordered = {symbol: points for symbol, points in anchors.items() if self._in_order(points)}
        # where a variable only one loop has is first located, that loop's body has not begun:
        # a block before it is neither that loop nor a loop inside it
        starts = {symbol: [(at, loop) for s, at, loop in self._variable_anchors() if s == symbol] for symbol in ordered}
        for pass_ in ("ordered", "located", "ordered"):
            changed = True
            while changed:
                changed = False
                for addr, (found, how) in left.items():
                    if len(found) < 2:
                        continue
                    symbol, _, end = self.sites[addr]
                    if pass_ == "located":
                        keep = [m for m in found if nest.located(nest.loops[m.loop].var, addr, end)]
                        keep = keep if len(keep) == 1 else found
                    else:
                        points = ordered.get(symbol, [])
                        keep = [
                            m
                            for m in found
                            if not any(
                                (nest.before(a, m.loop) and at > addr) or (nest.before(m.loop, a) and at < addr)
                                for at, a in points
                            )
                            and not any(addr < at and a in nest.path(m.loop) for at, a in starts.get(symbol, []))
                        ]
                    if keep and len(keep) < len(found):
                        left[addr] = (keep, pass_ if len(keep) == 1 else how)
                        if len(keep) == 1 and symbol in ordered:
                            ordered[symbol].append((addr, keep[0].loop))
                        changed = True
        for addr, (found, how) in left.items():
            if len(found) > 1:
                plainest = min(layout.plainness(m) for m in found)
                kept = [m for m in found if layout.plainness(m) == plainest]
                left[addr] = (kept, "plainest" if len(kept) == 1 else how)
            elif not found:
                located = self._located_rewritten(addr)
                if located is not None:
                    left[addr] = ([located], "located")
        for addr, match in self._copy_code(left).items():
            left[addr] = ([match], "")
        return left

    def _copy_code(self, left: dict[int, tuple[list[LoopMatch], str]]) -> dict[int, LoopMatch]:
        """Sites no loop fits that are the own code of a loop LLVM unrolled completely: code that
        runs once per iteration of it (each copy's, outside the loops inside: their set-up and
        exit; a site is placed by its first instruction, so one that runs on into the first pass
        of the loop after it is this code too), between decided sites of loops inside it. Its count fits no loop (once per call
        when the unrolled loop is outermost), but the nest's order places it: the nearest decided
        sites on both sides in the function are of loops inside that one (an embedding gather's
        column chunks moved outside its rows: `j_0[8]` unrolled, 8 copies of `i` with their own
        set-up between them). The deepest such loop whose iterations the count is."""
        assert self.layout is not None
        layout, nest = self.layout, self.layout.nest
        decided = {addr: found[0].loop for addr, (found, _) in left.items() if len(found) == 1}
        functions: dict[str, list[int]] = {}
        for addr in sorted(self.sites):
            functions.setdefault(self.sites[addr][0], []).append(addr)
        out = {}
        for addr, (found, _) in left.items():
            if found:
                continue
            addrs = functions[self.sites[addr][0]]
            at = addrs.index(addr)
            below = next((decided[a] for a in reversed(addrs[:at]) if a in decided), None)
            above = next((decided[a] for a in addrs[at + 1 :] if a in decided), None)
            if below is None or above is None:
                continue
            around = [nest.origin(j) for j in nest.path(below)[:-1]]
            flat = [
                j
                for j in nest.path(above)[:-1]
                if nest.origin(j) in around and j in layout.flat and layout.outer.get(j) == self.runs[addr]
            ]
            if flat:
                out[addr] = LoopMatch(flat[-1], self.runs[addr], copy=True)
        return out

    def _located_rewritten(self, addr: int) -> LoopMatch | None:
        """For a site no count fits: the deepest loop whose variable the debug information places
        in it and whose entries its count is a whole number of runs of (LoopLayout.rewritten),
        when exactly one is deepest."""
        assert self.layout is not None
        nest, end = self.layout.nest, self.sites[addr][2]
        found = [
            m
            for i, loop in enumerate(nest.loops)
            if nest.located(loop.var, addr, end) and (m := self.layout.rewritten(i, self.runs[addr])) is not None
        ]
        deepest = [m for m in found if not any(o.loop != m.loop and m.loop in nest.path(o.loop) for o in found)]
        distinct = {nest.origin(m.loop): m for m in deepest}
        return next(iter(distinct.values())) if len(distinct) == 1 else None

    def roots(self) -> list[int]:
        """The outermost loop of each nest, in order."""
        return [] if self.nest is None else [i for i, loop in enumerate(self.nest.loops) if loop.parent is None]

    def nest_key(self, index: int, names: bool) -> str:
        """What names nest `index` (1-based) in the view: the buffers it writes where both sides
        recorded them, else its place and outermost loop."""
        assert self.nest is not None
        root = self.roots()[index - 1]
        name = self.nest.nest_name(root)
        return name if names and name else f"#{index} ({self.nest.loops[root].var})"

    def nest_of(self, symbol: str | None, addr: int, executions: int) -> int | None:
        """The nest (1-based) of a kernel site no loop was decided for, where the layout tells:
        every loop that fits its count is in one nest, or the nearest decided sites (or first
        debug locations) on both sides of it in its function are in one nest (a nest's code is
        one stretch of the function); None otherwise."""
        if self.layout is None:
            return None
        nest = self.layout.nest
        found = self.decided.get(addr, (self.layout.matches(self.runs.get(addr, executions)), ""))[0]
        nests = {nest.nest_index(m.loop) for m in found}
        if len(nests) == 1:
            return nests.pop()
        points = sorted(self._nest_points().get(symbol or "", []))
        below = [n for at, n in points if at <= addr]
        above = [n for at, n in points if at > addr]
        if below and above and below[-1] == above[0] and (not nests or below[-1] in nests):
            return below[-1]
        return None

    def _nest_points(self) -> dict[str, list[tuple[int, int]]]:
        """Per function, (address, nest) of every decided site and first debug location."""
        if self._points is None:
            assert self.layout is not None
            nest = self.layout.nest
            self._points = {}
            for addr, (found, _) in self.decided.items():
                if len(found) == 1:
                    self._points.setdefault(self.sites[addr][0], []).append((addr, nest.nest_index(found[0].loop)))
            for symbol, at, loop in self._variable_anchors():
                self._points.setdefault(symbol, []).append((at, nest.nest_index(loop)))
        return self._points

    def _variable_anchors(self) -> list[tuple[str, int, int]]:
        """(function, address, loop): where the debug information first locates a variable that
        only one loop (and its copies) has, in the function whose sites span that address."""
        assert self.layout is not None
        nest = self.layout.nest
        spans: dict[str, tuple[int, int]] = {}
        for addr, (symbol, _, end) in self.sites.items():
            lo, hi = spans.get(symbol, (addr, end))
            spans[symbol] = (min(lo, addr), max(hi, end))
        out = []
        for var, ranges in sorted(nest.ranges.items()):
            # a loop TVM vectorised has no variable in the code: the location is another loop's
            loops = {
                nest.origin(i) for i, loop in enumerate(nest.loops) if loop.var == var and loop.kind != "vectorized"
            }
            if len(loops) != 1 or not ranges:
                continue
            first = min(lo for lo, _ in ranges)
            inside = [symbol for symbol, (lo, hi) in spans.items() if lo <= first < hi]
            if len(inside) == 1:
                out.append((inside[0], first, loops.pop()))
        return out

    def _in_order(self, points: list[tuple[float, int]]) -> bool:
        """Whether no two anchors of a function contradict the nest's order."""
        assert self.layout is not None
        nest = self.layout.nest
        return not any(nest.before(a, b) and x > y for x, a in points for y, b in points)

    def describe(self, match: LoopMatch) -> BlockLoop:
        layout = self.layout
        assert layout is not None
        loops = layout.nest.loops
        return BlockLoop(
            var=loops[match.loop].var,
            path=[
                LoopStep(
                    loops[j].var, loops[j].extent, loops[j].kind, j in layout.flat and (j != match.loop or match.copy)
                )
                for j in layout.nest.path(match.loop)
            ],
            trips=match.executions,
            per_execution=match.per_execution,
            peeled=match.peeled,
            approximate=match.approximate,
            unrolled=[loops[j].var for j in layout.unrolled_inside(match.loop)],
            vectorized=list(dict.fromkeys(loops[j].var for j in layout.vectorised_inside(match.loop))),
            nest_name=layout.nest.nest_name(match.loop),
            nest_index=layout.nest.nest_index(match.loop),
        )


def _side(site: Site, namer: LoopNamer) -> BlockSide:
    first = site.costs[0]
    executions = site.executions
    loop, candidates = namer.name(site.symbol or None, executions, site.addr, site.end)
    return BlockSide(
        symbol=site.symbol or None,
        start=site.addr,
        end=site.end,
        insns=first.block.insns,
        executions=executions,
        cycles_per_execution=site.cycles / executions if executions else 0.0,
        cycles=site.cycles,
        bound=first.bound,
        asm=list(first.timing.asm),
        loop=loop,
        loop_candidates=candidates,
    )


def _placer(namer: LoopNamer, names: bool) -> Callable[[Site], Place]:
    """Where a site of this side sits; `names`: nests are keyed by the buffers they store to
    (both sides recorded them), else by their outermost loop's variable."""
    memo: dict[int, Place] = {}

    def place(site: Site) -> Place:
        if site.addr not in memo:
            memo[site.addr] = placed(site)
        return memo[site.addr]

    def placed(site: Site) -> Place:
        function = site.symbol or NO_SYMBOL
        if not namer.in_kernel(site.symbol, site.addr):
            return Place(function)
        loop, candidates = namer.name(site.symbol or None, site.executions, site.addr, site.end)
        if loop is None:
            shared = _shared(namer, candidates, names, function)
            if shared is not None:
                return shared
            root = namer.nest_of(site.symbol, site.addr, site.executions)
            if root is None and not candidates:
                between = _between_shared(namer, site, names, function)
                if between is not None:
                    return between
            nest = None if root is None else namer.nest_key(root, names)
            return Place(function, nest, group=UNDECIDED if candidates else NOT_IN_LOOP)
        return Place(function, namer.nest_key(loop.nest_index, names), (loop.var,), loop)  # its variable

    return place


def _shared(namer: LoopNamer, candidates: list[BlockLoop], names: bool, function: str) -> Place | None:
    """The loop of one variable that every candidate is, each in a nest of its own: nests of one
    shape whose blocks nothing told apart (an arg-max's partial results and their combination once
    LLVM unrolled the chunk loop between them: both `i[16] > k_1[64]`). Named as that loop of either
    nest, never as one of them; None when the candidates are of several variables (or cut off)."""
    if len(candidates) < 2 or len(candidates) >= MAX_CANDIDATES:
        return None
    if len({c.var for c in candidates}) != 1 or len({c.nest_index for c in candidates}) != len(candidates):
        return None
    if any(c.nest_index < 1 for c in candidates):
        return None
    nests = EITHER_NEST.join(
        namer.nest_key(c.nest_index, names) for c in sorted(candidates, key=lambda c: c.nest_index)
    )
    return Place(function, nests, (candidates[0].var,))


def _between_shared(namer: LoopNamer, site: Site, names: bool, function: str) -> Place | None:
    """A kernel block no count fits (a branch taken as the data say: an arg-max's update) whose
    nearest blocks on both sides in its function that a loop fits are of one shared loop (_shared)
    and run at least as often: that loop's code, of either nest."""
    if site.addr not in namer.sites:
        return None
    symbol, runs, _ = namer.sites[site.addr]
    addrs = sorted(a for a, s in namer.sites.items() if s[0] == symbol)
    at = addrs.index(site.addr)
    around = []
    for side in (reversed(addrs[:at]), addrs[at + 1 :]):
        place = None
        for neighbour in side:
            _, count, end = namer.sites[neighbour]
            loop, candidates = namer.name(symbol or None, count, neighbour, end)
            if loop is None and not candidates:
                continue  # fits no loop either: look further
            place = None if loop is not None else _shared(namer, candidates, names, function)
            if place is not None and namer.runs.get(site.addr, runs) > namer.runs.get(neighbour, count):
                place = None
            break
        if place is None:
            return None
        around.append(place)
    return around[0] if around[0] == around[1] else None


@dataclass
class Attributed:
    """A result's differential view and its changed blocks (the view's block nodes index them)."""

    attribution: Attribution
    blocks: list[BlockChange]


def attribute(
    model: PipelineModel, baseline: Stats, current: Stats, loops: tuple[dict | None, dict | None] = (None, None)
) -> Attributed:
    """The differential view of a change and its changed blocks, largest change in cycles first
    (at most MAX_BLOCKS); `loops`: each side's loop nest (compile.loops, plain JSON) or None."""
    whats = ("the baseline", "this run")
    namers = [LoopNamer(nest, stats, what) for nest, stats, what in zip(loops, (baseline, current), whats)]
    names = all(n.nest is not None and any(loop.stores for loop in n.nest.loops) for n in namers)
    places = (_placer(namers[0], names), _placer(namers[1], names))

    def loop_key(side: int) -> Callable[[Site], tuple | None]:
        return lambda site: (p.nest, p.loop) if (p := places[side](site)).loop is not None else None

    pairs = pair_blocks(
        model.block_costs(baseline, whats[0]),
        model.block_costs(current, whats[1]),
        model.profile.triple.split("-")[0],
        (loop_key(0), loop_key(1)),
    )
    changed = sorted(
        (i for i, p in enumerate(pairs) if not p.unchanged and p.delta != 0),
        key=lambda i: (-abs(pairs[i].delta), pairs[i].start),
    )[:MAX_BLOCKS]
    view = differential(
        pairs,
        places,
        {i: n for n, i in enumerate(changed)},
        model.name,
        model.model_id,
        model.profile.clock_hz,
        (model.stall_cycles(baseline), model.stall_cycles(current)),
    )
    blocks = []
    for i in changed:
        pair = pairs[i]
        blocks.append(
            BlockChange(
                start=pair.start,
                delta_cycles=pair.delta,
                share_pct=view.share(pair.delta),
                baseline=_side(pair.baseline[0], namers[0]) if pair.baseline else None,
                current=_side(pair.current[0], namers[1]) if pair.current else None,
                paired=pair.how,
            )
        )
    _add_insn_cycles(blocks, model)
    return Attributed(view, blocks)


def _add_insn_cycles(blocks: list[BlockChange], model: PipelineModel) -> None:
    """Each changed block's instructions with llvm-mca's cycles (the side-by-side disassembly's
    column), for the CPU the pipeline model scheduled them on; one llvm-mca run for all of them."""
    target, cache_dir = getattr(model, "mca", None), getattr(model, "cache_dir", None)
    if target is None or cache_dir is None:  # block costs without llvm-mca behind them: nothing to ask
        return
    sides = [s for b in blocks for s in (b.baseline, b.current) if s is not None and s.asm]
    costs = instruction_costs([s.asm for s in sides], target, cache_dir)
    for side, rows in zip(sides, costs):
        side.insn_cycles = [InsnCycles(r.latency, r.rthroughput, r.uops) for r in rows or []]


def attribution_between(before: Any, after: Any, profile: TargetProfile, cache_dir: Path) -> Attributed | None:
    """The attribution of the change between two JobResults (bisect's last good and first bad
    revision), scored by the pipeline model; None without both block profiles."""
    stats_before, stats_after = getattr(before, "stats", None), getattr(after, "stats", None)
    if stats_before is None or stats_after is None or stats_before.blocks is None or stats_after.blocks is None:
        return None
    loops = (getattr(before, "loops", None), getattr(after, "loops", None))
    return attribute(PipelineModel(profile, timing_cache_dir(cache_dir)), stats_before, stats_after, loops)
