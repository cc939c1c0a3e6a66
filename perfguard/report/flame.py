"""A differential icicle of one result's Attribution, as self-contained SVG (no script, no load).

Rows from the top: the whole prediction, then function, loop nest, loop (or kernel code not
placed in a loop), block. Each node is as wide as the larger of its two sides' cycles (a node
with children as wide as they are together, so every row nests in the one above), hottest
first from the left. Colour says what its changed code did: red got slower, blue faster, the
deeper the larger its share of the whole change (so the culprit is the darkest, whatever its
own size); striped red is code only this build has, striped grey code only the baseline had
(removed: not "faster"); plain grey is code that is the same on both sides (it may have moved).
The top row is the whole prediction, said by the model that gave the verdict when it is not the
one whose cycles the rows are. Every node carries a tooltip with both sides' cycles and its share
of the change; a changed block links to its disassembly on the page (`block_anchor`). `legend()`
is the key, as HTML for the figure's caption.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from perfguard.document.result import Attribution, DiffNode
from perfguard.report.numbers import signed_count

WIDTH = 1100
ROW = 22
FONT = 12
CHAR = 6.6  # average glyph width at FONT px, for fitting labels
MIN_LABEL = 36  # px: narrower nodes carry no label (the tooltip still names them)
UNCHANGED, MORE = "#cfd8dc", "#eceff1"


def _width(node: DiffNode) -> float:
    return (
        sum(_width(c) for c in node.children) if node.children else max(node.baseline_cycles, node.current_cycles, 0.0)
    )


ADDED, REMOVED = "added", "removed"
_HUE = {1: 4, -1: 210}  # slower: red, faster: blue
_LIGHT = (88, 42)  # lightness of a change that is a sliver of the whole change, and of all of it


def state(node: DiffNode) -> str:
    """What a node's changed code did: same | added | removed | slower | faster (| more)."""
    if node.kind == "more" and node.unchanged:
        return "more"
    if node.unchanged or not round(node.delta_cycles):
        return "same"
    if node.baseline_cycles <= 0 < node.current_cycles:
        return ADDED
    if node.current_cycles <= 0 < node.baseline_cycles:
        return REMOVED
    return "slower" if node.delta_cycles > 0 else "faster"


def _colour(node: DiffNode, a: Attribution, chart_id: str = "") -> str:
    kind = state(node)
    if kind == "more":
        return MORE
    if kind == "same":
        return UNCHANGED
    if kind in (ADDED, REMOVED):
        return f"url(#{chart_id}-{kind})"
    whole = abs(a.change_cycles) or max(abs(node.delta_cycles), 1.0)
    strength = min(1.0, abs(node.delta_cycles) / whole)  # its share of the whole change
    light = round(_LIGHT[0] - (_LIGHT[0] - _LIGHT[1]) * strength)
    return f"hsl({_HUE[1 if node.delta_cycles > 0 else -1]}, 75%, {light}%)"


def _patterns(chart_id: str) -> str:
    """The stripes of added (red) and removed (grey) code."""
    out = ["<defs>"]
    for kind, ground, stripe in ((ADDED, "hsl(4, 75%, 80%)", "hsl(4, 75%, 45%)"), (REMOVED, "#f5f5f5", "#9e9e9e")):
        out.append(
            f'<pattern id="{escape(chart_id)}-{kind}" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{ground}"/>'
            f'<rect width="2.5" height="6" fill="{stripe}"/></pattern>'
        )
    return "".join(out) + "</defs>"


def legend() -> str:
    """The key of every icicle, as HTML (no text from a report: nothing to escape)."""

    def swatch(background: str) -> str:
        return (
            f'<span style="display:inline-block;width:2.2em;height:.8em;vertical-align:middle;'
            f'border:1px solid #bdbdbd;background:{background}"></span>'
        )

    ramp = "linear-gradient(to right, hsl({h}, 75%, {a}%), hsl({h}, 75%, {b}%))"
    stripes = "repeating-linear-gradient(45deg, {s} 0 2px, {g} 2px 6px)"
    keys = [
        (ramp.format(h=_HUE[1], a=_LIGHT[0], b=_LIGHT[1]), "slower (deeper: a larger share of the whole change)"),
        (ramp.format(h=_HUE[-1], a=_LIGHT[0], b=_LIGHT[1]), "faster"),
        (stripes.format(s="hsl(4, 75%, 45%)", g="hsl(4, 75%, 80%)"), "added: code only this build has"),
        (stripes.format(s="#9e9e9e", g="#f5f5f5"), "removed: code only the baseline had"),
        (UNCHANGED, "the same code on both sides"),
    ]
    return " ".join(f'<span class="key">{swatch(b)} {t}</span>' for b, t in keys)


def _label(text: str, width: float) -> str:
    fits = int((width - 6) / CHAR)
    if width < MIN_LABEL or fits < 3:
        return ""
    return text if len(text) <= fits else text[: max(1, fits - 1)] + "\u2026"


def _title(node: DiffNode, a: Attribution) -> str:
    share = a.share(node.delta_cycles)
    what = {
        "function": "function",
        "nest": "loop nest",
        "loop": "loop",
        "unplaced": "kernel code,",
        "block": "block",
        "more": "folded:",
        "stalls": "",
    }.get(node.kind, node.kind)
    line = (
        f"{what} {node.name}: ".lstrip()
        + f"{node.baseline_cycles:,.0f} \u2192 {node.current_cycles:,.0f} cycles per call"
    )
    if node.unchanged:
        return line + " (the same code on both sides)"
    kind = state(node)
    if kind in (ADDED, REMOVED):
        line += "; code only this build has" if kind == ADDED else "; code only the baseline had (removed)"
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
    return DiffNode(
        "stalls",
        "cache-miss stalls",
        before,
        after,
        after - before,
        a.share(after - before),
        unchanged=not round(after - before),
    )


def icicle(
    a: Attribution, chart_id: str, block_anchor: Callable[[int], str | None] | None = None, verdict: str = ""
) -> str:
    """The SVG of `a`; `block_anchor(i)`: the page anchor of Result.blocks[i] (None: no link); `verdict`:
    the whole change as the model that gave the verdict says it, when that is another model than `a`'s."""
    nodes = [*a.nodes, stalls(a)]
    total = sum(_width(n) for n in nodes)
    scale = WIDTH / total if total > 0 else 0.0
    height = ROW * (_depth(nodes) + 1)
    ident = escape(chart_id)
    parts = [
        f'<svg class="flame" id="{ident}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="differential icicle of predicted cycles per call">',
        f"<style>#{ident} text{{font:{FONT}px sans-serif;fill:#212121;pointer-events:none}}"
        f"#{ident} rect{{stroke:#fff;stroke-width:1}}</style>",
        _patterns(chart_id),
    ]
    whole = DiffNode("all", "all", a.baseline_cycles, a.current_cycles, a.change_cycles - a.moved_cycles)
    head = (
        f"{a.model} model: {a.baseline_cycles:,.0f} \u2192 {a.current_cycles:,.0f} cycles per call "
        f"({signed_count(round(a.change_cycles))})"
    )
    if verdict:
        head = f"{verdict}; placed by the {head}"
    parts.append(_rect(0, 0, WIDTH, _colour(whole, a, chart_id), head, _label(head, WIDTH), None, f"{chart_id}-all"))
    x = 0.0
    for node in nodes:
        x = _draw(node, x, 1, scale, a, parts, block_anchor, chart_id)
    parts.append("</svg>")
    return "".join(parts)


def _depth(nodes: list[DiffNode]) -> int:
    return max((1 + _depth(n.children) for n in nodes), default=0)


def _draw(
    node: DiffNode,
    x: float,
    row: int,
    scale: float,
    a: Attribution,
    parts: list[str],
    block_anchor: Callable[[int], str | None] | None,
    chart_id: str,
) -> float:
    w = _width(node) * scale
    kind = state(node)
    text = node.name if kind == "same" else f"{node.name} {signed_count(round(node.delta_cycles))}"
    if kind in (ADDED, REMOVED):
        text = f"{kind}: {text}"
    if node.kind == "nest":
        text = "nest " + text
    elif node.kind == "loop":
        text = "loop " + text
    link = block_anchor(node.block) if block_anchor is not None and node.block is not None else None
    parts.append(_rect(x, row * ROW, w, _colour(node, a, chart_id), _title(node, a), _label(text, w), link, None))
    inner = x
    for child in node.children:
        inner = _draw(child, inner, row + 1, scale, a, parts, block_anchor, chart_id)
    return x + w


def _rect(
    x: float, y: float, w: float, colour: str, title: str, label: str, link: str | None, element_id: str | None
) -> str:
    ident = f' id="{escape(element_id)}"' if element_id else ""
    body = (
        f"<g{ident}><title>{escape(title)}</title>"
        f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.0):.1f}" height="{ROW}" fill="{colour}"/>'
        + (f'<text x="{x + 3:.1f}" y="{y + ROW - 7}">{escape(label)}</text>' if label else "")
        + "</g>"
    )
    return f'<a href="#{escape(link)}">{body}</a>' if link else body
