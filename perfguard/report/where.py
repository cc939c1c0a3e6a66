"""The differential view in words: where a change of predicted cycles happened.

Every output that explains a change says it this way, from the report's Attribution
(document.report, built by judge.differential): the terminal's `where` line, the Markdown top 3 (the
pull-request comment), the pytest failure message, `perfguard bisect` and `compare`.

A place is a loop of a kernel nest, kernel code not placed in a loop, or another function (the C
library, the harness). The places shown are those whose changed code moved the most in the
direction of the whole change; code that only moved is never one. Shares are of the whole change
the model predicts, so the top places, the rest, the cache-miss stalls and the moved code add up to
100 %; a place past 100 % says what offset it, and one past SHARE_MAX gives cycles, not a share.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfguard.document.result import EITHER_NEST, Attribution, BlockLoop, DiffNode
from perfguard.report.numbers import signed_count

MOST = 3  # places in the Markdown and bisect's answer
OFFSETS = 2  # places named as offsetting one past 100 %
# Past this share of the whole change a place's share says little (2438 % of a net -29 cycles):
# the where line gives its cycles and what offset them (the model's net change closes the line)
SHARE_MAX = 300.0


@dataclass(frozen=True)
class Place:
    path: tuple[DiffNode, ...]  # from the function node down to `node`

    @property
    def node(self) -> DiffNode:
        return self.path[-1]

    def of(self, kind: str) -> DiffNode | None:
        return next((n for n in self.path if n.kind == kind), None)


def _sign(a: Attribution) -> int:
    return 1 if a.change_cycles >= 0 else -1


def places(a: Attribution) -> list[Place]:
    """Every place with changed code, the largest change in the whole change's direction first
    (then the largest change the other way), ties by name."""
    out: list[Place] = []

    def walk(nodes: list[DiffNode], path: tuple[DiffNode, ...]) -> None:
        for n in nodes:
            here = path + (n,)
            if n.unchanged or n.kind == "more":
                continue
            loops = [c for c in n.children if c.kind in ("nest", "loop", "unplaced")]
            if n.kind in ("loop", "unplaced") or (n.kind == "function" and not loops):
                if n.delta_cycles:
                    out.append(Place(here))
            else:
                walk(n.children, here)

    walk(a.nodes, ())
    sign = _sign(a)
    return sorted(out, key=lambda p: (-sign * p.node.delta_cycles, -abs(p.node.delta_cycles), name(p)))


def loop_brief(loop: BlockLoop) -> str:
    """`[i[64] > j[64]; 8 iterations per execution: unrolled or vectorised by LLVM]`."""
    return f"[{'; '.join([loop.nest, *loop.llvm_notes()])}]"


def name(place: Place) -> str:
    """`loop j of nest scores in main_compute_`, `nest depthwise in main_compute_, no loop named`,
    `main_compute_, loop not decided`, `memset`."""
    function = place.of("function")
    fn = function.name if function else "?"
    node, nest = place.node, place.of("nest")
    if node.kind == "loop":
        either = " (nests of one shape: their blocks were not told apart)" if nest and EITHER_NEST in nest.name else ""
        return f"loop {node.name} of nest {nest.name if nest else '?'} in {fn}{either}"
    if node.kind == "unplaced":
        return f"nest {nest.name} in {fn}, {node.name}" if nest else f"{fn}, {node.name}"
    return fn


def _share(a: Attribution, cycles: float) -> str:
    share = a.share(cycles)
    return "-" if share is None else f"{share:.0f} %".replace("-0 %", "0 %")


def _offsets(a: Attribution, place: Place, found: list[Place]) -> str:
    """What offset a place whose share is past 100 %: the largest changes the other way."""
    share = a.share(place.node.delta_cycles)
    if share is None or share <= 100.5:
        return ""
    sign = _sign(a)
    excess = abs(place.node.delta_cycles) - abs(a.change_cycles)
    against = sorted(
        (p for p in found if p.node.delta_cycles * sign < 0 and abs(p.node.delta_cycles) >= 0.1 * excess),
        key=lambda p: sign * p.node.delta_cycles,
    )[:OFFSETS]
    parts = [f"{signed_count(round(p.node.delta_cycles))} in {name(p)}" for p in against]
    if a.stall_cycles * sign < 0 and abs(a.stall_cycles) >= 0.1 * excess and len(parts) < OFFSETS:
        parts.append(f"{signed_count(round(a.stall_cycles))} in cache-miss stalls")
    return f", offset by {' and '.join(parts)}" if parts else ""


def model_total(a: Attribution) -> str:
    """`pipeline model: +18,000 cycles per call`."""
    return f"{a.model} model: {signed_count(round(a.change_cycles))} cycles per call"


def where_line(a: Attribution) -> str:
    """The one line that says where: the place with the largest change, its share, what offset it,
    and the model whose cycles these are. Cache-miss stalls lead when they moved more than any
    place (the simulator counts misses per run, not per block), the code's largest change after them."""
    found = places(a)
    sign = _sign(a)
    top = found[0] if found and found[0].node.delta_cycles * sign > 0 else None
    stalls = signed_count(round(a.stall_cycles))
    if a.stall_cycles * sign > 0 and (top is None or abs(a.stall_cycles) > abs(top.node.delta_cycles)):
        text = (
            f"cache-miss stalls: {stalls} cycles = {_share(a, a.stall_cycles)} of the change (misses are "
            f"counted per run, not per block)"
        )
        largest = max(found, key=lambda p: (abs(p.node.delta_cycles), -found.index(p)), default=None)
        if largest is not None:  # the code's largest change, whichever way it went
            text += f"; in the code: {_place_text(a, largest, found)}"
        return f"{text} ({model_total(a)})"
    top = top or (found[0] if found else None)
    if top is None:
        return f"no changed code ({model_total(a)}; code that only moved: {signed_count(round(a.moved_cycles))})"
    return f"{_place_text(a, top, found)} ({model_total(a)})"


def _place_text(a: Attribution, top: Place, found: list[Place]) -> str:
    node = top.node
    brief = f" {loop_brief(node.loop)}" if node.loop is not None else ""
    share = a.share(node.delta_cycles)
    if share is not None and abs(share) > SHARE_MAX:  # a net change much smaller than its parts: cycles, not a share
        return f"{name(top)}{brief}: {signed_count(round(node.delta_cycles))} cycles{_offsets(a, top, found)}"
    return (
        f"{name(top)}{brief}: {signed_count(round(node.delta_cycles))} cycles = "
        f"{_share(a, node.delta_cycles)} of the change{_offsets(a, top, found)}"
    )


def top_lines(a: Attribution, most: int = MOST) -> tuple[list[str], str]:
    """The `most` places with the largest change (the where line's first, then the largest either
    way) and one line for everything else, so the shares add up to 100 % of the change."""
    found = places(a)
    shown = found[:1] + sorted(found[1:], key=lambda p: (-abs(p.node.delta_cycles), name(p)))[: most - 1]
    out = [
        f"{name(p)}{' ' + loop_brief(p.node.loop) if p.node.loop else ''}: "
        f"{signed_count(round(p.node.delta_cycles))} cycles ({_share(a, p.node.delta_cycles)})"
        for p in shown
    ]
    rest = a.code_cycles - sum(p.node.delta_cycles for p in shown)
    parts = []
    if len(found) > len(shown) or abs(rest) >= 0.5:
        parts.append(f"other changed code {signed_count(round(rest))} ({_share(a, rest)})")
    if a.stall_cycles:
        parts.append(f"cache-miss stalls {signed_count(round(a.stall_cycles))} ({_share(a, a.stall_cycles)})")
    if round(a.moved_cycles):
        parts.append(f"code that only moved {signed_count(round(a.moved_cycles))} ({_share(a, a.moved_cycles)})")
    return out, "; ".join(parts)


def ledger(a: Attribution) -> str:
    """How the model's whole change splits: `pipeline model: +18,000 cycles per call = changed code
    +17,997 + cache-miss stalls +12 + code that only moved -9`."""
    parts = [
        f"changed code {signed_count(round(a.code_cycles))}",
        f"cache-miss stalls {signed_count(round(a.stall_cycles))}",
    ]
    if round(a.moved_cycles):
        parts.append(f"code that only moved {signed_count(round(a.moved_cycles))}")
    return (
        f"{model_total(a)} = "
        + " + ".join(parts)
        + f" ({a.unchanged_blocks} blocks are the same code as the baseline's)"
    )
