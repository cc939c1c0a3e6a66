"""Charts as inline SVG: no script, no font file, no request.

Each function takes parts of the typed report (or plain rows built from it), lays the chart out
here (canvas size, margins, scales from perfguard.report.scales, where every mark goes) and
draws it with a jinja2 template of templates/charts/ (frame.svg.j2: title, grid, axes, legend;
one template per chart for its marks). The templates escape every text they write, so kernel
names, targets and commit ids are inert. The same data gives the same bytes; every id in a
chart starts with the chart's id, so several charts on one page never share one.

Data marks sit in groups with ids "<chart id>-points" (or "-points-N", one group per series)
and class "points"; each mark has a <title> naming its value (a tooltip).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import jinja2

from perfguard.document.report import TargetSummary
from perfguard.document.result import ROOF_FRACTION, ChangePoint, HistoryPoint
from perfguard.report.numbers import seconds
from perfguard.report.scales import (
    Linear,
    Log,
    compact,
    labelled,
    linear_ticks,
    padded_log_limits,
    signed_pct,
    time_labels,
)

VERDICT_COLOURS = {
    "regression": "#c62828",
    "error": "#b26a00",
    "toolchain": "#6a1b9a",
    "improvement": "#2e7d32",
    "new": "#1565c0",
    "removed": "#6a1b9a",
    "unchanged": "#616161",
}
BOUND_COLOURS = {"compute": "#6a1b9a", "memory": "#1565c0", "latency": "#e65100", None: "#757575"}
PHASE_COLOURS = {"compute": "#5c6bc0", "memory": "#ef6c00"}
BASELINE_COLOUR = "#9e9e9e"

FONT = 11  # tick labels and legends; titles 13 (bold), notes 9.5, axis labels 12
TITLE_ROW = 18  # the baseline of the title (and of a legend beside it)
MAX_LABEL = 44  # characters of a bar label; a longer one loses its middle (its full text is in the bar's tooltip)


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("perfguard.report", "templates/charts"),
        autoescape=True,
        auto_reload=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["n"] = coordinate
    return env


def coordinate(value: float) -> str:
    """A canvas coordinate as the SVG carries it: a tenth of a unit is finer than a screen pixel."""
    text = f"{value:.1f}"
    text = text[:-2] if text.endswith(".0") else text
    return "0" if text == "-0" else text


def text_width(text: str, size: float = FONT, bold: bool = False) -> float:
    """A generous estimate of the width of `text` in a sans-serif font (DejaVu Sans is among the
    widest): enough to keep labels apart, with no font file to measure."""
    return len(text) * size * (0.66 if bold else 0.6)


def _cut(label: str) -> str:
    """A label of at most MAX_LABEL characters: its start and its end (the target, a model kernel's hash)."""
    if len(label) <= MAX_LABEL:
        return label
    return label[: (MAX_LABEL - 1) // 2] + "\u2026" + label[-(MAX_LABEL // 2) :]


class _Frame:
    """The canvas and the plot area in it (margins in canvas units, 100 to the inch of the old charts)."""

    def __init__(self, width: float, height: float, left: float, right: float, top: float, bottom: float):
        self.width, self.height = width, height
        self.x0, self.x1 = left, width - right
        self.y0, self.y1 = top, height - bottom

    def grow_top(self, by: float) -> None:
        """More room above the plot (a second title row), the plot keeping its size."""
        self.height += by
        self.y0 += by
        self.y1 += by


# What the templates draw. Objects with attributes, not dicts: a template reads thousands of them.


@dataclass(slots=True)
class Tick:
    pos: float  # on the canvas
    text: str


@dataclass(slots=True)
class Axis:
    kind: str  # linear | log | band (the rows of a bar chart: labels, no tick lines)
    ticks: list[Tick]
    label: str = ""
    grid: bool = True
    rotate: bool = False  # x tick labels at 30 degrees (commit ids)
    size: float = FONT


@dataclass(slots=True)
class Entry:
    """One legend entry: its swatch (line, marker, dot, marker-line, star, bar or tick) and text."""

    kind: str
    colour: str
    text: str
    dash: str = ""
    width: float = 1.0
    hollow: bool = False
    x: float = 0.0
    y: float = 0.0
    path: str = ""  # a star's outline


@dataclass(slots=True)
class Mark:
    """One data point on the canvas, its tooltip and an optional label beside it (at lx, ly: the
    start of its baseline, placed by `_place_labels`)."""

    x: float
    y: float
    tip: str
    label: str | None = None
    lx: float = 0.0
    ly: float = 0.0


LABEL_SIZE = 9.5
# where a point's label may go, tried in turn: right above, right below, left above, left below, then
# further out; (dx, dy) of the label's baseline start from the point, dx < 0 meaning "ends left of it"
_LABEL_SPOTS = [
    (5, -5),
    (5, 12),
    (-5, -5),
    (-5, 12),
    *((dx, dy) for dx in (9, -9, -20, -32, -44) for dy in (3, -8, 14, -19, 25)),
]


def _place_labels(marks: list[Mark], frame: _Frame, notes: Sequence[SimpleNamespace] = ()) -> None:
    """Each labelled mark's label where it overlaps no label placed before it, no note and no other mark,
    inside the plot if it can be; else at the first spot (the tooltip still names the point)."""
    taken: list[tuple[float, float, float, float]] = []
    for note in notes:
        width = text_width(note.text, LABEL_SIZE)
        x = note.x - width if note.anchor == "end" else note.x
        taken.append((x, note.y - LABEL_SIZE, x + width, note.y + 2))
    dots = [(m.x - 5, m.y - 5, m.x + 5, m.y + 5) for m in marks]

    def clear(box: tuple[float, float, float, float], own: int) -> bool:
        inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
        return inside and not any(
            box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
            for b in taken + [d for i, d in enumerate(dots) if i != own]
        )

    for i, m in enumerate(marks):
        if not m.label:
            continue
        width = text_width(m.label, LABEL_SIZE)
        boxes = []
        farther = ((-dx, dy) for dx in range(56, int(frame.x1 - frame.x0), 12) for dy in (3, -8, 14, -19, 25))
        for dx, dy in [*_LABEL_SPOTS, *farther]:  # near first, then farther left along its row
            x = m.x + dx if dx > 0 else m.x + dx - width
            boxes.append((x, m.y + dy - LABEL_SIZE, x + width, m.y + dy + 2))
        box = next((b for b in boxes if clear(b, i)), boxes[0])
        taken.append(box)
        m.lx, m.ly = box[0], box[3] - 2


def _axis(scale, ticks: list[tuple[float, str]], label: str = "", grid: bool = True, rotate: bool = False) -> Axis:
    """The ticks of `scale` that fall on the plot."""
    lo, hi = sorted((scale.start, scale.end))
    placed = [Tick(scale(v), text) for v, text in ticks]
    return Axis(scale.kind, [t for t in placed if lo - 0.5 <= t.pos <= hi + 0.5], label, grid, rotate)


def _bands(bars: list[SimpleNamespace], size: float = FONT) -> Axis:
    """A y axis of labelled rows (bar charts): one label per bar, at its middle."""
    return Axis("band", [Tick(b.mid, b.label) for b in bars], grid=False, size=size)


def _entry_width(e: Entry) -> float:
    return 24 + text_width(e.text)


def _legend_row(frame: _Frame, title: str, entries: list[Entry]) -> list[Entry]:
    """Legend entries in one row at the right of the title, or on a row of their own below it."""
    width = sum(_entry_width(e) + 12 for e in entries) - 12
    y = TITLE_ROW - 4
    if frame.x0 + text_width(title, 13, bold=True) + 16 + width > frame.x1:
        frame.grow_top(18)
        y += 18
    x = frame.x1 - width
    for e in entries:
        e.x, e.y = x, y
        x += _entry_width(e) + 12
    return entries


def _legend_column(frame: _Frame, entries: list[Entry], corner: str) -> list[Entry]:
    """Legend entries stacked inside the plot, in its lower-right or upper-left corner."""
    width = max(map(_entry_width, entries))
    x = frame.x1 - width - 6 if corner == "lower right" else frame.x0 + 8
    y = frame.y1 - 8 - 15 * (len(entries) - 1) if corner == "lower right" else frame.y0 + 10
    for i, e in enumerate(entries):
        e.x, e.y = x, y + 15 * i
    return entries


def _render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context)


def roofline(
    target: TargetSummary, series: list[dict[str, Any]], chart_id: str, title: str, arrow: bool = False
) -> str:
    """The roofs of `target` and kernel points.

    `series`: [{name, colour, hollow, points: [{label, intensity, gflops}]}], one legend entry
    each; a point without intensity (no DRAM traffic) sits at the right edge. The dashed line
    is half the roof: below it a kernel is latency-bound. With `arrow`, an arrow runs from the
    first series' first point (baseline) to the second's (current).
    """
    peak, bw = target.peak_gflops, target.peak_bandwidth_gbs
    ridge = peak / bw
    placed = [p for s in series for p in s["points"] if p.get("gflops")]
    x_lo, x_hi = padded_log_limits([ridge, *[p["intensity"] for p in placed if p["intensity"]]], pad=6.0)
    x_lo = min(x_lo, 0.05)
    y_lo = min([peak / 1000.0] + [p["gflops"] / 3.0 for p in placed])
    y_hi = peak * 2.5
    frame = _Frame(560, 350, left=70, right=15, top=30, bottom=50)
    xs, ys = Log(x_lo, x_hi, frame.x0, frame.x1), Log(y_lo, y_hi, frame.y1, frame.y0)

    # On log axes both parts of the roof are straight: its corners are enough.
    corners = [x_lo, *([ridge] if x_lo < ridge < x_hi else []), x_hi]
    roof = [(xs(x), ys(min(peak, x * bw))) for x in corners]
    half = [(xs(x), ys(min(peak, x * bw) * ROOF_FRACTION)) for x in corners]
    notes = [
        SimpleNamespace(
            x=xs(ridge) + 4, y=ys(y_hi / 1.3) + 9, anchor="start", fill="#616161", text=f"ridge {ridge:.3g} flop/B"
        ),
        SimpleNamespace(x=xs(x_hi / 1.1), y=ys(peak) - 4, anchor="end", fill="#424242", text=f"peak {peak:g} GFLOP/s"),
    ]
    x_bw = max(x_lo * 1.5, y_lo * 3.0 / bw)
    if x_bw < ridge / 2:
        notes.append(
            SimpleNamespace(x=xs(x_bw) - 3, y=ys(x_bw * bw) - 5, anchor="end", fill="#424242", text=f"{bw:g} GB/s")
        )

    groups, ends, far_noted = [], [], False
    for k, s in enumerate(series):
        marks = []
        for p in s["points"]:
            if not p.get("gflops"):
                continue
            where = f"{p['intensity']:.3g} flop/B" if p["intensity"] else "no DRAM traffic"
            label = p.get("label")
            mark = Mark(
                xs(p["intensity"] or x_hi / 1.6),
                ys(p["gflops"]),
                f"{s['name']}{': ' + label if label else ''}: {p['gflops']:.3g} GFLOP/s at {where}",
                label,
            )
            marks.append(mark)
            if p["intensity"] is None and not far_noted:
                far_noted = True
                notes.append(
                    SimpleNamespace(
                        x=mark.x - 8, y=mark.y + 3, anchor="end", fill="#616161", text="no DRAM traffic \u2192"
                    )
                )
        ends.append(marks[0] if marks else None)
        if marks:
            groups.append(
                SimpleNamespace(
                    id=f"{chart_id}-points-{k}",
                    name=s["name"],
                    colour=s["colour"],
                    hollow=bool(s.get("hollow")),
                    marks=marks,
                )
            )
    _place_labels([m for g in groups for m in g.marks], frame, notes)
    line = None
    if arrow and len(ends) >= 2 and ends[0] and ends[1]:
        (ax, ay), (bx, by) = (ends[0].x, ends[0].y), (ends[1].x, ends[1].y)
        length = math.hypot(bx - ax, by - ay)
        if length > 16:  # room for an arrow between the two markers
            ux, uy = (bx - ax) / length, (by - ay) / length
            line = SimpleNamespace(x1=ax + 7 * ux, y1=ay + 7 * uy, x2=bx - 8 * ux, y2=by - 8 * uy)

    legend = [
        Entry("line", "#212121", "roofline", width=1.8),
        Entry("line", "#212121", f"{ROOF_FRACTION:.0%} of the roof", dash="5 4"),
        *(Entry("marker", g.colour, g.name, hollow=g.hollow) for g in groups),
    ]
    return _render(
        "roofline.svg.j2",
        id=chart_id,
        label=f"Roofline: {title}",
        title=title,
        width=frame.width,
        height=frame.height,
        plot=frame,
        x=_axis(xs, labelled(xs.ticks(), compact), "arithmetic intensity (flop / DRAM byte)"),
        y=_axis(ys, labelled(ys.ticks(), compact), "GFLOP/s"),
        legend=_legend_column(frame, legend, "lower right"),
        roof=roof,
        half=half,
        ridge=xs(ridge),
        notes=notes,
        groups=groups,
        arrow=line,
    )


def phases(rows: list[dict[str, Any]], chart_id: str, title: str) -> str:
    """Stacked horizontal bars: rows of {label, compute_s, memory_s}, first row on top."""
    labels = [r["label"] for r in rows]
    frame = _Frame(
        560,
        95 + 38 * len(rows),
        left=max(75, 16 + max(map(text_width, labels), default=0)),
        right=15,
        top=30,
        bottom=35,
    )
    legend = _legend_row(
        frame,
        title,
        [
            Entry("bar", PHASE_COLOURS["compute"], "compute phase"),
            Entry("bar", PHASE_COLOURS["memory"], "memory phase"),
        ],
    )
    totals = [r["compute_s"] + r["memory_s"] for r in rows]
    xs = Linear(0.0, max(totals + [1e-12]) * 1.5, frame.x0, frame.x1)
    band = (frame.y1 - frame.y0) / max(len(rows), 1)
    bars = []
    for i, (r, total) in enumerate(zip(rows, totals)):
        mid = frame.y0 + band * (i + 0.5)
        share = 100.0 * r["memory_s"] / total if total else 0.0
        bars.append(
            SimpleNamespace(
                label=r["label"],
                y=mid - 0.3 * band,
                h=0.6 * band,
                mid=mid,
                x0=xs(0.0),
                x1=xs(r["compute_s"]),
                x2=xs(total),
                compute=seconds(r["compute_s"]),
                memory=seconds(r["memory_s"]),
                note=f"{seconds(total)} ({share:.0f} % memory)",
            )
        )
    return _render(
        "phases.svg.j2",
        id=chart_id,
        label=title,
        title=title,
        width=frame.width,
        height=frame.height,
        plot=frame,
        x=_axis(xs, labelled(linear_ticks(xs.lo, xs.hi, 5), labels=time_labels)),
        y=_bands(bars),
        legend=legend,
        colours=PHASE_COLOURS,
        bars=bars,
    )


def history(
    points: list[HistoryPoint], change_points: list[ChangePoint], current: float | None, chart_id: str, title: str
) -> str:
    """Predicted time per baseline commit (oldest left), change points marked, this run last."""
    frame = _Frame(560, 270, left=95, right=15, top=30, bottom=65)
    entries = [Entry("marker-line", "#1565c0", "baseline commits")]
    if current is not None:
        entries.append(Entry("star", "#212121", "this run"))
    legend = _legend_row(frame, title, entries)
    for e in legend:
        if e.kind == "star":
            e.path = _star(e.x + 9, e.y, 6.0)
    ticks = [p.commit[:7] for p in points] + (["this run"] if current is not None else [])
    values = [p.time_s for p in points] + ([current] if current is not None else [])
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.15, hi * 0.02) or 1e-9  # flat stays flat: at least +-2 %
    xs = Linear(-0.6, len(ticks) - 0.4, frame.x0, frame.x1)
    ys = Linear(max(0.0, lo - pad), hi + pad, frame.y1, frame.y0)
    step = max(1, math.ceil(len(ticks) / 12))
    edges = [0, *[c.index for c in change_points], len(points)]
    levels = [c.before_s for c in change_points[:1]] + [c.after_s for c in change_points]
    star = None
    if current is not None:
        x, y = xs(len(points)), ys(current)
        star = SimpleNamespace(path=_star(x, y, 7.0), tip=f"this run: {seconds(current)}")
    return _render(
        "history.svg.j2",
        id=chart_id,
        label=title,
        title=title,
        width=frame.width,
        height=frame.height,
        plot=frame,
        x=_axis(xs, [(float(i), ticks[i]) for i in range(0, len(ticks), step)], rotate=True),
        y=_axis(ys, labelled(ys.ticks(5), labels=time_labels), "predicted time"),
        legend=legend,
        marks=[Mark(xs(i), ys(p.time_s), f"{p.commit[:10]}: {seconds(p.time_s)}") for i, p in enumerate(points)],
        levels=[
            SimpleNamespace(x1=xs(a - 0.3), x2=xs(b - 0.7), y=ys(level))
            for (a, b), level in zip(zip(edges, edges[1:]), levels)
        ],
        changes=[
            SimpleNamespace(
                x=xs(c.index - 0.5), text="change" + (f" {c.step_pct:+.1f} %" if c.step_pct is not None else "")
            )
            for c in change_points
        ],
        star=star,
    )


def _star(cx: float, cy: float, r: float) -> str:
    """A five-pointed star's outline around (cx, cy)."""
    corners = []
    for i in range(10):
        radius = r if i % 2 == 0 else r * 0.4
        angle = math.pi / 2 + i * math.pi / 5
        corners.append(f"{coordinate(cx + radius * math.cos(angle))},{coordinate(cy - radius * math.sin(angle))}")
    return "M" + " L".join(corners) + " Z"


def calibration(points: Sequence[Sequence[float]], chart_id: str, title: str, limit: int = 2000) -> str:
    """Predicted against native time, one point per hold-out sample, with the y = x line."""
    pairs = [(float(p), float(n)) for p, n in points if p > 0 and n > 0]
    if len(pairs) > limit:  # an SVG of 100 k markers helps nobody: an even, deterministic sample
        pairs = pairs[:: math.ceil(len(pairs) / limit)]
    frame = _Frame(420, 360, left=85, right=15, top=30, bottom=50)
    lo, hi = padded_log_limits([v for pair in pairs for v in pair], pad=1.5) if pairs else (1e-6, 1e-3)
    xs, ys = Log(lo, hi, frame.x0, frame.x1), Log(lo, hi, frame.y1, frame.y0)
    ticks = labelled(xs.ticks(), labels=time_labels) if pairs else []
    legend = [Entry("line", "#9e9e9e", "predicted = native", dash="5 4"), Entry("dot", "#1565c0", "hold-out kernels")]
    return _render(
        "calibration.svg.j2",
        id=chart_id,
        label=title,
        title=title,
        width=frame.width,
        height=frame.height,
        plot=frame,
        x=_axis(xs, ticks, "native time"),
        y=_axis(ys, ticks, "predicted time"),
        legend=_legend_column(frame, legend, "upper left") if pairs else [],
        diagonal=SimpleNamespace(x1=xs(lo), y1=ys(lo), x2=xs(hi), y2=ys(hi)) if pairs else None,
        marks=[Mark(xs(n), ys(p), f"native {seconds(n)}, predicted {seconds(p)}") for p, n in pairs],
    )


def _whisker(xs: Linear, span: float, low: float | None, high: float | None) -> tuple[float, float] | None:
    """An interval's line on the canvas, clipped to the axis (its ends past the edge are in the tooltip)."""
    if low is None or high is None:
        return None
    return xs(max(low, -span)), xs(min(high, span))


def deltas(rows: list[dict[str, Any]], chart_id: str, title: str) -> str:
    """Horizontal bars of delta % per result {label, delta_pct, threshold_pct, verdict, and its
    interval's low_pct and high_pct where it has one}, each with grey ticks at +-its threshold and
    a whisker over its interval."""
    labels = [_cut(r["label"]) for r in rows]
    frame = _Frame(
        760,
        75 + 22 * len(rows),
        left=16 + max([text_width(x, FONT) for x in labels] + [30]),
        right=15,
        top=30,
        bottom=30,
    )
    limits = [r["threshold_pct"] for r in rows if r.get("threshold_pct") is not None]
    legend = _legend_row(frame, title, [Entry("tick", "#757575", "threshold")] if limits else [])
    span = max([abs(r["delta_pct"]) for r in rows] + limits + [1.0]) * 1.15
    xs = Linear(-span, span, frame.x0, frame.x1)
    band = (frame.y1 - frame.y0) / max(len(rows), 1)
    bars = []
    for i, (r, label) in enumerate(zip(rows, labels)):
        mid = frame.y0 + band * (i + 0.5)
        v, t = r["delta_pct"], r.get("threshold_pct")
        bars.append(
            SimpleNamespace(
                label=label,
                mid=mid,
                y=mid - 0.325 * band,
                h=0.65 * band,
                x=xs(min(0.0, v)),
                w=abs(xs(v) - xs(0.0)),
                colour=VERDICT_COLOURS[r["verdict"]],
                limits=None if t is None else (xs(-t), xs(t)),
                tick=min(band * 0.8, 12.0),
                whisker=_whisker(xs, span, r.get("low_pct"), r.get("high_pct")),
                tip=f"{r['label']}: {v:+.2f} % ({r['verdict']}"
                + (f", threshold {t:.2f} %" if t is not None else "")
                + (
                    f", interval {r['low_pct']:+.1f} .. {r['high_pct']:+.1f} %)"
                    if r.get("low_pct") is not None
                    else ")"
                ),
            )
        )
    return _render(
        "deltas.svg.j2",
        id=chart_id,
        label=title,
        title=title,
        width=frame.width,
        height=frame.height,
        plot=frame,
        x=_axis(xs, labelled(linear_ticks(-span, span, 5), signed_pct)),
        y=_bands(bars, FONT),
        legend=legend,
        zero=xs(0.0),
        bars=bars,
    )
