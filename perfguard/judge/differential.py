"""The differential view: both sides' cycles per call by function > loop nest > loop > block.

Each block pair (judge.block_pairs) is placed by each side's own loop names (judge.attribution):
a kernel block under its nest (named by the buffers it writes, so a reordered nest is the same
nest in both builds) and its loop (by its variable: a loop moved inside the nest is the same loop), or under "not in a loop" / "loop not decided"; a block of any
other function (the C library, the harness) under that function only. A pair both of whose sides
sit in the same place is one leaf; otherwise each side is a leaf of its own place.

A node's `delta_cycles` is the change of its changed code only: a pair that is the same code on
both sides (it only moved, or got other registers) never adds to it, whatever the model scored;
what such pairs gained or lost is `Attribution.moved_cycles`, shown apart and never named as the
place of a change. Children are sorted hottest first (the larger side's cycles); past
MAX_CHILDREN, those neither among the hottest nor among the largest changes fold into one "more"
node, so every level still adds up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from perfguard.document.result import Attribution, BlockLoop, DiffNode
from perfguard.judge.block_pairs import BlockPair, Site

HOTTEST = 8  # children kept per node by cycles
LARGEST = 4  # ... and by the size of their change
NOT_IN_LOOP = "no loop named"
UNDECIDED = "loop not decided"
NO_SYMBOL = "(no symbol)"


@dataclass(frozen=True)
class Place:
    """Where one side's site sits: its function, and for kernel code its nest and loop, or the
    group of kernel code no loop was named for (in its nest where the layout tells which)."""

    function: str
    nest: str | None = None  # the nest's key and name; None: not kernel code, or no nest known
    loop: tuple[str, ...] | None = None  # the loop's key in its nest (its variable: the same loop in both builds)
    info: BlockLoop | None = field(default=None, compare=False)
    group: str = ""  # kernel code no loop was named for: NOT_IN_LOOP or UNDECIDED

    @property
    def key(self) -> tuple:
        return self.function, self.nest, self.loop, self.group


@dataclass
class _Node:
    kind: str
    name: str
    baseline: float = 0.0
    current: float = 0.0
    delta: float = 0.0
    unchanged: bool = True
    loop: BlockLoop | None = None
    block: int | None = None
    children: dict[tuple, _Node] = field(default_factory=dict)

    def add(self, baseline: float, current: float, changed: bool) -> None:
        self.baseline += baseline
        self.current += current
        if changed:
            self.delta += current - baseline
            self.unchanged = False


def differential(
    pairs: list[BlockPair],
    places: tuple[Callable[[Site], Place], Callable[[Site], Place]],
    blocks: dict[int, int],
    model: str,
    model_id: str,
    clock_hz: float,
    stalls: tuple[float, float],
) -> Attribution:
    """The view of `pairs`; `places`: per side, where a site sits; `blocks`: pair index -> index
    of its BlockChange in the result's list; `stalls`: both sides' cache-miss stall cycles."""
    roots: dict[tuple, _Node] = {}
    moved = 0.0
    for index, pair in enumerate(pairs):
        changed = not pair.unchanged
        if not changed:
            moved += pair.delta
        sides = [
            (places[0](pair.baseline[0]) if pair.baseline else None, pair.baseline_cycles, 0),
            (places[1](pair.current[0]) if pair.current else None, pair.current_cycles, 1),
        ]
        if sides[0][0] is not None and sides[1][0] is not None and sides[0][0].key == sides[1][0].key:
            _leaf(roots, sides[1][0], pair, index, blocks, pair.baseline_cycles, pair.current_cycles, changed)
            continue
        for place, cycles, side in sides:
            if place is not None:
                _leaf(roots, place, pair, index, blocks, cycles if side == 0 else 0.0, cycles if side else 0.0, changed)
    base_code = sum(n.baseline for n in roots.values())
    cur_code = sum(n.current for n in roots.values())
    out = Attribution(
        model=model,
        model_id=model_id,
        clock_hz=clock_hz,
        baseline_cycles=base_code + stalls[0],
        current_cycles=cur_code + stalls[1],
        code_cycles=sum(n.delta for n in roots.values()),
        stall_cycles=stalls[1] - stalls[0],
        moved_cycles=moved,
        unchanged_blocks=sum(len(p.current) for p in pairs if p.unchanged),
    )
    out.nodes = _finish(roots, out)
    return out


def _leaf(
    roots: dict[tuple, _Node],
    place: Place,
    pair: BlockPair,
    index: int,
    blocks: dict[int, int],
    baseline: float,
    current: float,
    changed: bool,
) -> None:
    path: list[tuple[tuple, str]] = [(("function", place.function), place.function)]
    if place.nest is not None:
        path.append((("nest", place.nest), place.nest))
    if place.loop is not None:
        path.append((("loop", place.loop), place.loop[-1]))
    elif place.group:
        path.append((("unplaced", place.group), place.group))
    sites = pair.current if current or not pair.baseline else pair.baseline
    path.append((("block", sites[0].addr, index), f"0x{sites[0].addr:x}"))
    level = roots
    for (kind, *_), name in path:
        node = level.get((kind, *_))
        if node is None:
            node = level[(kind, *_)] = _Node(kind, name)
        node.add(baseline, current, changed)
        if kind == "loop" and place.info is not None and (node.loop is None or pair.current):
            node.loop = place.info
        if kind == "block" and changed:
            node.block = blocks.get(index)
        level = node.children


def _finish(level: dict[tuple, _Node], out: Attribution) -> list[DiffNode]:
    nodes = sorted(level.values(), key=lambda n: (-max(n.baseline, n.current), n.name))
    keep = set(range(min(HOTTEST, len(nodes))))
    keep |= set(sorted(range(len(nodes)), key=lambda i: (-abs(nodes[i].delta), i))[:LARGEST])
    if len(nodes) <= len(keep) + 1:
        keep = set(range(len(nodes)))
    shown = [_done(n, out) for i, n in enumerate(nodes) if i in keep]
    rest = [n for i, n in enumerate(nodes) if i not in keep]
    if rest:
        delta = sum(n.delta for n in rest)
        shown.append(
            DiffNode(
                "more",
                f"{len(rest)} more",
                sum(n.baseline for n in rest),
                sum(n.current for n in rest),
                delta,
                out.share(delta),
                unchanged=all(n.unchanged for n in rest),
                folded=len(rest),
            )
        )
    return shown


def _done(node: _Node, out: Attribution) -> DiffNode:
    return DiffNode(
        node.kind,
        node.name,
        node.baseline,
        node.current,
        node.delta,
        out.share(node.delta),
        unchanged=node.unchanged,
        loop=node.loop,
        block=node.block,
        children=_finish(node.children, out) if node.children else [],
    )
