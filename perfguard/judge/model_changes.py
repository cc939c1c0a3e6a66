"""A model's kernels between baseline and now, matched as a reviewer would match them.

Kernel names hold a digest of their shapes, so a layer whose shapes change comes back under a new
name: a kernel of the baseline is gone (removed) and a kernel no baseline has appeared (new).
Which new kernel is which old one is decided here, from what the rows carry:

1. **Graph position.** Each side's kernel calls in model order (the current extraction's; the
   baseline's from its model graph file) are aligned like two versions of a text (difflib, on
   kernel names: a kernel both sides have is an anchor). A removed kernel's calls land between
   the anchors around them, at a place in the current call order.
2. **Operator.** Only a new and a removed kernel of the same fused operator (`conv2d_add_relu`) and
   the same anchor layer kind (operator, rank, window, stride, depthwise or not) can be one kernel
   whose shapes changed: a 3x3 convolution swapped for a 1x1 one is a new kernel and a removed one,
   never "the same layer, other shapes".
3. **Shape similarity.** Among those within PAIR_WINDOW calls of each other, the pairing with the
   least distance plus dissimilarity of shapes wins (an optimal assignment, not first come).

A paired kernel is `changed`: its change is said in a reviewer's words ("widened 256 -> 320
channels", "input 8x8 -> 16x16", "output features 1000 -> 10"). An unpaired new kernel within
REPLACE_WINDOW calls of an unpaired removed one is said to replace it; the rest are new or removed.
Changed calls per inference are said with the graph nodes that came or went ("calls 2 -> 3:
+layer3.2.conv2").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from perfguard.document.model_labels import dims

PAIR_WINDOW = 2.0  # calls apart (in the current call order) at most, for two kernels to be one that changed
REPLACE_WINDOW = 1.5  # calls apart at most, for a new kernel to be said to replace a removed one
_NO_PAIR = 1e9


# --- relatedness and change wording ----------------------------------------------------------------


def _kind(layer: dict[str, Any]) -> tuple:
    """What must be equal for two layers to be one layer with other shapes."""
    depthwise = (
        bool(layer.get("groups"))
        and layer.get("groups", 1) > 1
        and layer.get("groups") == (layer.get("in") or [0, 0])[1]
    )
    return (
        layer.get("op"),
        len(layer.get("in") or []),
        len(layer.get("out") or []),
        tuple(layer.get("window") or []),
        tuple(layer.get("stride") or []),
        depthwise,
    )


def related(op_a: str | None, layer_a: dict | None, op_b: str | None, layer_b: dict | None) -> bool:
    """One layer whose shapes changed, not another layer: same fused operator, same layer kind."""
    if op_a != op_b or not layer_a or not layer_b:
        return False
    return _kind(layer_a) == _kind(layer_b)


def _shape_distance(a: dict | None, b: dict | None) -> float:
    """The share of differing dimensions over the layer's shapes (0: equal, 1: all differ)."""
    a, b = a or {}, b or {}  # a kernel outside any layer has no shapes
    pairs = [(x, y) for key in ("in", "out", "weight") for x, y in zip(a.get(key) or [], b.get(key) or [])]
    return sum(x != y for x, y in pairs) / len(pairs) if pairs else 1.0


def _moved(word: str, before: int, after: int, noun: str) -> str:
    verb = {"width": "widened" if after > before else "narrowed"}.get(word, "")
    return f"{verb} {before} -> {after} {noun}".strip()


def describe_change(before: dict | None, after: dict | None) -> str:
    """A layer's change in a reviewer's words: `widened 256 -> 320 channels`, `input 8x8 -> 16x16`."""
    if not before or not after:
        return "shapes changed"
    b_in, a_in = before.get("in") or [], after.get("in") or []
    b_out, a_out = before.get("out") or [], after.get("out") or []
    parts = []
    op = after.get("op") or ""
    if len(b_in) == len(a_in) == len(b_out) == len(a_out) == 4 and (
        op.startswith("conv") or "pool" in op or len(b_in) == 4
    ):
        c_b, c_a, f_b, f_a = b_in[1], a_in[1], b_out[1], a_out[1]
        if c_b != c_a and f_b != f_a and c_b == f_b and c_a == f_a:
            parts.append(_moved("width", c_b, c_a, "channels"))
        else:
            if c_b != c_a:
                parts.append(_moved("width", c_b, c_a, "input channels"))
            if f_b != f_a:
                parts.append(_moved("width", f_b, f_a, "output channels"))
        if b_in[2:] != a_in[2:]:
            parts.append(f"input {dims(b_in[2:])} -> {dims(a_in[2:])}")
        elif b_out[2:] != a_out[2:]:
            parts.append(f"output {dims(b_out[2:])} -> {dims(a_out[2:])}")
        if b_in[0] != a_in[0]:
            parts.append(f"batch {b_in[0]} -> {a_in[0]}")
    elif op in ("matmul", "dense", "linear") and len(b_in) == len(a_in) >= 2 and len(b_out) == len(a_out) >= 2:
        if b_in[-1] != a_in[-1]:
            parts.append(_moved("width", b_in[-1], a_in[-1], "input features"))
        if b_out[-1] != a_out[-1]:
            parts.append(_moved("width", b_out[-1], a_out[-1], "output features"))
        if b_in[:-1] != a_in[:-1]:
            parts.append(f"rows {dims(b_in[:-1])} -> {dims(a_in[:-1])}")
    if not parts:
        if b_in != a_in:
            parts.append(f"input {dims(b_in)} -> {dims(a_in)}")
        if b_out != a_out:
            parts.append(f"output {dims(b_out)} -> {dims(a_out)}")
    return ", ".join(parts) or "shapes changed"


def calls_change(before: list[str], after: list[str], calls_before: int | None, calls_after: int | None) -> str:
    """`calls 2 -> 3: +layer3.2.conv2` (the anchor nodes that came or went, where both sides know them)."""
    text = f"calls {calls_before} -> {calls_after}"
    gained = [n for n in after if n not in before]
    lost = [n for n in before if n not in after]
    named = [f"+{n}" for n in gained] + [f"-{n}" for n in lost]
    if named and before and after:
        text += ": " + ", ".join(named[:4]) + (f" +{len(named) - 4} more" if len(named) > 4 else "")
    return text


# --- pairing -------------------------------------------------------------------------------------


@dataclass
class Side:
    """One kernel on one side, as the pairing sees it."""

    kernel: str
    op: str | None
    layer: dict | None
    positions: list[int]


def _sequence(sides: Iterable[Side]) -> list[str]:
    calls = sorted((p, s.kernel) for s in sides for p in s.positions)
    return [kernel for _, kernel in calls]


def _mapping(base: list[str], head: list[str]) -> list[float]:
    """Each base call's place in the head's call order (fractional between anchors)."""
    out = [0.0] * len(base)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, base, head, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            if tag == "equal":
                out[i] = float(j1 + (i - i1))
            elif tag == "replace":
                out[i] = j1 + (i - i1) * (j2 - j1) / (i2 - i1)
            else:  # delete: between the head's neighbours
                out[i] = j1 - 0.5
    return out


@dataclass(frozen=True)
class Pairs:
    changed: dict[str, str]  # new kernel -> the removed kernel it is, shapes changed
    replaces: dict[str, list[str]]  # unpaired new kernel -> unpaired removed kernels at its place


def pair(new: list[Side], removed: list[Side], base_calls: list[Side], head_calls: list[Side]) -> Pairs:
    """Match new kernels with removed ones (see the module docstring). `base_calls` / `head_calls`:
    every kernel of each side with its call positions (an empty positions list: unknown, a baseline
    recorded before positions were kept; then only operator and shapes decide)."""
    if not new or not removed:
        return Pairs({}, {})
    base_seq, head_seq = _sequence(base_calls), _sequence(head_calls)
    known = bool(base_seq) and bool(head_seq) and all(s.positions for s in removed) and all(s.positions for s in new)
    places: dict[str, list[float]] = {}
    if known:
        mapped = _mapping(base_seq, head_seq)
        for i, kernel in enumerate(base_seq):
            places.setdefault(kernel, []).append(mapped[i])
    head_places = {s.kernel: sorted(float(p) for p in s.positions) for s in new}

    def distance(r: Side, n: Side) -> float:
        if not known:
            return 0.0
        return min(abs(a - b) for a in places.get(r.kernel, [_NO_PAIR]) for b in head_places[n.kernel])

    cost = [[_NO_PAIR] * len(new) for _ in removed]
    for i, r in enumerate(removed):
        for j, n in enumerate(new):
            d = distance(r, n)
            if related(r.op, r.layer, n.op, n.layer) and d <= PAIR_WINDOW:
                cost[i][j] = d + _shape_distance(r.layer, n.layer)
    changed = {}
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    for i, j in zip(rows, cols):
        if cost[i][j] < _NO_PAIR:
            changed[new[j].kernel] = removed[i].kernel
    left = [r for r in removed if r.kernel not in changed.values()]
    replaces: dict[str, list[str]] = {}
    if known:
        for n in new:
            if n.kernel in changed:
                continue
            near = [r.kernel for r in left if distance(r, n) <= REPLACE_WINDOW]
            if near:
                replaces[n.kernel] = sorted(near)
    return Pairs(changed, replaces)
