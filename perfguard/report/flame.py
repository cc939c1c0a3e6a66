"""A differential icicle of one result's Attribution, as self-contained SVG (no script, no load).

Rows from the top: the whole prediction, then function, loop nest, loop (or kernel code not
placed in a loop), block. Each node is as wide as the larger of its two sides' cycles (a node
with children as wide as they are together, so every row nests in the one above), hottest
first from the left. Colour says what its changed code did: red got slower, blue faster, the
deeper the larger the change against the node's own cycles; grey is code that is the same on
both sides (it may have moved). Every node carries a tooltip with both sides' cycles and its
share of the change; a changed block links to its disassembly on the page (`block_anchor`).
"""

from __future__ import annotations

from html import escape
from typing import Callable

from perfguard.document.report import Attribution, DiffNode
from perfguard.report.numbers import signed_count

WIDTH = 1100
ROW = 22
FONT = 12
CHAR = 6.6  # average glyph width at FONT px, for fitting labels
MIN_LABEL = 36  # px: narrower nodes carry no label (the tooltip still names them)
UNCHANGED, MORE = "#cfd8dc", "#eceff1"


def _width(node: DiffNode) -> float:
    return sum(_width(c) for c in node.children) if node.children else max(node.baseline_cycles,
                                                                            node.current_cycles, 0.0)


def _colour(node: DiffNode) -> str:
    if node.kind == "more" and node.unchanged:
        return MORE
    if node.unchanged or not node.delta_cycles:
        return UNCHANGED
    scale = max(node.baseline_cycles, node.current_cycles, abs(node.delta_cycles))
    strength = min(1.0, abs(node.delta_cycles) / scale) if scale else 0.0
    light = round(88 - 46 * strength)  # 88 %: a faint change, 42 %: all of the node
    hue = 4 if node.delta_cycles > 0 else 210
    return f"hsl({hue}, 75%, {light}%)"


def _label(text: str, width: float) -> str:
    fits = int((width - 6) / CHAR)
    if width < MIN_LABEL or fits < 3:
        return ""
    return text if len(text) <= fits else text[:max(1, fits - 1)] + "\u2026"


def _title(node: DiffNode, a: Attribution) -> str:
    share = a.share(node.delta_cycles)
    what = {"function": "function", "nest": "loop nest", "loop": "loop", "unplaced": "kernel code,",
            "block": "block", "more": "folded:", "stalls": ""}.get(node.kind, node.kind)
    line = (f"{what} {node.name}: ".lstrip() + f"{node.baseline_cycles:,.0f} \u2192 {node.current_cycles:,.0f} cycles per call")
    if node.unchanged:
        return line + " (the same code on both sides)"
    line += f"; its changed code {signed_count(round(node.delta_cycles))}"
    if share is not None:
        line += f" = {share:.0f} % of the change"
    if node.loop is not None:
        line += f"; {node.loop.describe()}"
    return line


def stalls(a: Attribution) -> DiffNode:
    """The cache-miss stalls as a node of their own (no block holds them)."""
    before = a.baseline_cycles - sum(n.baseline_cycles for n in a.nodes)
    after = a.current_cycles - sum(n.current_cycles for n in a.nodes)
    return DiffNode("stalls", "cache-miss stalls", before, after, after - before, a.share(after - before),
                    unchanged=not round(after - before))


def icicle(a: Attribution, chart_id: str, block_anchor: Callable[[int], str] | None = None) -> str:
    """The SVG of `a`; `block_anchor(i)`: the page anchor of Result.blocks[i], or None for no links."""
    nodes = [*a.nodes, stalls(a)]
    total = sum(_width(n) for n in nodes)
    scale = WIDTH / total if total > 0 else 0.0
    height = ROW * (_depth(nodes) + 1)
    ident = escape(chart_id)
    parts = [f'<svg class="flame" id="{ident}" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
             f'aria-label="differential icicle of predicted cycles per call">',
             f'<style>#{ident} text{{font:{FONT}px sans-serif;fill:#212121;pointer-events:none}}'
             f'#{ident} rect{{stroke:#fff;stroke-width:1}}</style>']
    whole = DiffNode("all", "all", a.baseline_cycles, a.current_cycles, a.change_cycles - a.moved_cycles)
    head = (f"{a.model} model: {a.baseline_cycles:,.0f} \u2192 {a.current_cycles:,.0f} cycles per call "
            f"({signed_count(round(a.change_cycles))})")
    parts.append(_rect(0, 0, WIDTH, _colour(whole), head, _label(head, WIDTH), None, f"{chart_id}-all"))
    x = 0.0
    for node in nodes:
        x = _draw(node, x, 1, scale, a, parts, block_anchor)
    parts.append("</svg>")
    return "".join(parts)


def _depth(nodes: list[DiffNode]) -> int:
    return max((1 + _depth(n.children) for n in nodes), default=0)


def _draw(node: DiffNode, x: float, row: int, scale: float, a: Attribution, parts: list[str],
          block_anchor: Callable[[int], str] | None) -> float:
    w = _width(node) * scale
    text = node.name if node.unchanged or not node.delta_cycles else f"{node.name} {signed_count(round(node.delta_cycles))}"
    if node.kind == "nest":
        text = "nest " + text
    elif node.kind == "loop":
        text = "loop " + text
    link = block_anchor(node.block) if block_anchor is not None and node.block is not None else None
    parts.append(_rect(x, row * ROW, w, _colour(node), _title(node, a), _label(text, w), link, None))
    inner = x
    for child in node.children:
        inner = _draw(child, inner, row + 1, scale, a, parts, block_anchor)
    return x + w


def _rect(x: float, y: float, w: float, colour: str, title: str, label: str, link: str | None,
          element_id: str | None) -> str:
    ident = f' id="{escape(element_id)}"' if element_id else ""
    body = (f'<g{ident}><title>{escape(title)}</title>'
            f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.0):.1f}" height="{ROW}" fill="{colour}"/>'
            + (f'<text x="{x + 3:.1f}" y="{y + ROW - 7}">{escape(label)}</text>' if label else "") + "</g>")
    return f'<a href="#{escape(link)}">{body}</a>' if link else body
