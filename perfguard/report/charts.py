"""Charts as inline SVG (matplotlib's SVG back end): no script, no font file, no request.

Every function takes parts of the typed report (or plain rows built from it) and returns an SVG string that the HTML
templates embed as is. Text stays text (svg.fonttype "none") and matplotlib escapes it;
mathtext is off, so a `$` in a kernel name is just a character. Each chart has its own id
salt, so the ids of several charts on one page never collide, and the same data gives the
same bytes. Data points carry ids "<chart id>-points" (a group of markers) or
"<chart id>-points-N" (one bar each).
"""

from __future__ import annotations

import io
import math
import re
from typing import Any, Sequence

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import Formatter, FuncFormatter, LogLocator, MaxNLocator, NullLocator

from perfguard.guard.analysis import ROOF_FRACTION
from perfguard.guard.report import ChangePoint, HistoryPoint, TargetSummary
from perfguard.report.numbers import seconds

VERDICT_COLOURS = {"regression": "#c62828", "error": "#b26a00", "toolchain": "#6a1b9a", "improvement": "#2e7d32",
                   "new": "#1565c0", "removed": "#6a1b9a", "unchanged": "#616161"}
BOUND_COLOURS = {"compute": "#6a1b9a", "memory": "#1565c0", "latency": "#e65100", None: "#757575"}
PHASE_COLOURS = {"compute": "#5c6bc0", "memory": "#ef6c00"}
BASELINE_COLOUR = "#9e9e9e"
_RC = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e0e0e0",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#9e9e9e",
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "legend.frameon": False,
    "legend.fontsize": 8,
}
_GLOBAL_STYLE = re.compile(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>", re.S)
_IDS = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')


def _figure(width: float, height: float, left: float = 0.7, right: float = 0.15, top: float = 0.3,
            bottom: float = 0.5) -> Figure:
    """A figure with fixed margins in inches (a layout engine would cost a second draw per chart)."""
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height)
    return fig


def _svg(fig: Figure, chart_id: str, label: str) -> str:
    """The figure as an <svg> element, ready to inline (no XML prolog, no global CSS).

    Every id in it gets the chart's id as a prefix (and every reference to one follows), so
    several charts on one page never share an id.
    """
    buf = io.StringIO()
    with rc_context({**_RC, "svg.hashsalt": chart_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = _GLOBAL_STYLE.sub("", text[text.index("<svg"):], count=1)
    text = _IDS.sub(lambda m: f"{m.group(1)}{chart_id}-{m.group(2)}", text)
    # Scalable in the page; an accessible name for screen readers.
    return text.replace("<svg ", f'<svg class="chart" id="{chart_id}" role="img" aria-label="{_attr(label)}" ', 1)


def _compact(value: float, _pos: object = None) -> str:
    """Log-axis tick labels without mathtext: 0.01, 1, 10, 1k, 100k, 1M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _log_axes(ax) -> None:
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, numticks=8))
        axis.set_major_formatter(FuncFormatter(_compact))
        axis.set_minor_locator(NullLocator())


def _attr(text: str) -> str:
    return (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;"))


def _point_ids(artists) -> None:
    """Ids "points-N" on data artists drawn one element each (bars)."""
    for i, artist in enumerate(artists):
        artist.set_gid(f"points-{i}")


class _TimeFormatter(Formatter):
    """Seconds in one unit per axis (s, ms, us, ns) with just enough decimals to tell ticks apart."""

    ticks: list[float] = []

    def set_locs(self, locs) -> None:
        self.ticks = [float(v) for v in locs]

    def __call__(self, value: float, pos: int | None = None) -> str:
        if value == 0:
            return "0"
        ticks = sorted(v for v in self.ticks if v > 0) or [abs(value)]
        unit, scale = next(((u, f) for u, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if ticks[-1] >= f),
                           ("ns", 1e-9))
        if ticks[-1] > 20 * ticks[0]:  # a log axis: each tick on its own
            return f"{value / scale:g} {unit}"
        scaled = [t / scale for t in ticks]
        tolerance = 1e-9 * max(scaled)
        decimals = next((d for d in range(7) if all(abs(round(t, d) - t) <= tolerance for t in scaled)), 6)
        return f"{value / scale:.{decimals}f} {unit}"


def _time_axis(ax, axis: str = "y") -> None:
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(_TimeFormatter())


def _log_limits(values: Sequence[float], pad: float = 3.0) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    return lo / pad, hi * pad


def roofline(target: TargetSummary, series: list[dict[str, Any]], chart_id: str, title: str,
             arrow: bool = False) -> str:
    """The roofs of `target` and kernel points.

    `series`: [{name, colour, hollow, points: [{label, intensity, gflops}]}], one legend entry
    each; a point without intensity (no DRAM traffic) sits at the right edge. The dashed line
    is half the roof: below it a kernel is latency-bound. With `arrow`, an arrow runs from the
    first series' first point (baseline) to the second's (current).
    """
    with rc_context({**_RC, "svg.hashsalt": chart_id}):
        peak, bw = target.peak_gflops, target.peak_bandwidth_gbs
        ridge = peak / bw
        placed = [p for s in series for p in s["points"] if p.get("gflops")]
        x_lo, x_hi = _log_limits([ridge, *[p["intensity"] for p in placed if p["intensity"]]], pad=6.0)
        x_lo = min(x_lo, 0.05)
        y_lo = min([peak / 1000.0] + [p["gflops"] / 3.0 for p in placed])
        y_hi = peak * 2.5
        fig = _figure(5.6, 3.5)
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axes(ax)
        xs = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
        roof = [min(peak, x * bw) for x in xs]
        ax.plot(xs, roof, color="#212121", linewidth=1.6, label="roofline", gid="roof")
        ax.plot(xs, [r * ROOF_FRACTION for r in roof], color="#212121", linewidth=0.8, linestyle=(0, (4, 3)),
                label=f"{ROOF_FRACTION:.0%} of the roof")
        ax.axvline(ridge, color="#bdbdbd", linewidth=0.8, linestyle=":")
        ax.annotate(f"ridge {ridge:.3g} flop/B", (ridge, y_hi / 1.3), fontsize=7, color="#616161",
                    ha="left", va="top", xytext=(3, 0), textcoords="offset points")
        ax.annotate(f"peak {peak:g} GFLOP/s", (x_hi / 1.1, peak), fontsize=7, color="#424242", ha="right",
                    va="bottom", xytext=(0, 2), textcoords="offset points")
        x_bw = max(x_lo * 1.5, y_lo * 3.0 / bw)
        if x_bw < ridge / 2:
            ax.annotate(f"{bw:g} GB/s", (x_bw, x_bw * bw), fontsize=7, color="#424242", ha="right",
                        va="bottom", xytext=(-2, 3), textcoords="offset points")
        ends, far_noted = [], False
        for k, s in enumerate(series):
            pts = [p for p in s["points"] if p.get("gflops")]
            xy = [(p["intensity"] or x_hi / 1.6, p["gflops"]) for p in pts]
            ends.append(xy[0] if xy else None)
            if not xy:
                continue
            ax.scatter([x for x, _ in xy], [y for _, y in xy], s=40, color="white" if s.get("hollow") else s["colour"],
                       edgecolors=s["colour"], linewidths=1.4, zorder=3, label=s["name"], gid=f"points-{k}")
            for p, (x, y) in zip(pts, xy):
                if p["intensity"] is None and not far_noted:
                    far_noted = True
                    ax.annotate("no DRAM traffic \u2192", (x, y), fontsize=6.5, color="#616161", ha="right",
                                va="center", xytext=(-6, 0), textcoords="offset points")
                if p.get("label"):
                    ax.annotate(p["label"], (x, y), fontsize=7, color="#212121", xytext=(4, 4),
                                textcoords="offset points")
        if arrow and len(ends) >= 2 and ends[0] and ends[1] and ends[0] != ends[1]:
            ax.annotate("", ends[1], ends[0],
                        arrowprops={"arrowstyle": "->", "color": "#616161", "shrinkA": 5, "shrinkB": 5})
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        ax.set_xlabel("arithmetic intensity (flop / DRAM byte)")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(title, loc="left")
        ax.legend(loc="lower right", fontsize=7)
        return _svg(fig, chart_id, f"Roofline: {title}")


def phases(rows: list[dict[str, Any]], chart_id: str, title: str) -> str:
    """Stacked horizontal bars: rows of {label, compute_s, memory_s}, first row on top."""
    with rc_context({**_RC, "svg.hashsalt": chart_id}):
        fig = _figure(5.6, 0.95 + 0.38 * len(rows), left=0.75, top=0.5, bottom=0.35)
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        compute = [r["compute_s"] for r in rows]
        memory = [r["memory_s"] for r in rows]
        bars = ax.barh(ys, compute, height=0.6, color=PHASE_COLOURS["compute"], label="compute phase")
        bars += ax.barh(ys, memory, left=compute, height=0.6, color=PHASE_COLOURS["memory"], label="memory phase")
        _point_ids(bars)
        for y, c, m in zip(ys, compute, memory):
            total = c + m
            share = 100.0 * m / total if total else 0.0
            ax.annotate(f"{seconds(total)} ({share:.0f} % memory)", (total, y), fontsize=7, va="center",
                        xytext=(4, 0), textcoords="offset points")
        ax.set_yticks(ys, [r["label"] for r in rows])
        ax.set_xlim(0, max([c + m for c, m in zip(compute, memory)] + [1e-12]) * 1.5)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        _time_axis(ax, "x")
        ax.grid(axis="y", visible=False)
        ax.set_title(title, loc="left")
        fig.legend(loc="upper right", ncols=2, fontsize=7)
        return _svg(fig, chart_id, title)


def history(points: list[HistoryPoint], change_points: list[ChangePoint], current: float | None,
            chart_id: str, title: str) -> str:
    """Predicted time per baseline commit (oldest left), change points marked, this run last."""
    with rc_context({**_RC, "svg.hashsalt": chart_id}):
        fig = _figure(5.6, 2.7, left=0.95, bottom=0.65)
        ax = fig.add_subplot()
        xs = list(range(len(points)))
        ys = [p.time_s for p in points]
        ax.plot(xs, ys, color="#1565c0", linewidth=1.2, marker="o", markersize=4, label="baseline commits",
                gid="points")
        edges = [0, *[c.index for c in change_points], len(points)]
        levels = [c.before_s for c in change_points[:1]] + [c.after_s for c in change_points]
        for (a, b), level in zip(zip(edges, edges[1:]), levels):
            ax.hlines(level, a - 0.3, b - 0.7, color="#90caf9", linewidth=3, zorder=1)
        for c in change_points:
            ax.axvline(c.index - 0.5, color="#c62828", linewidth=1, linestyle="--")
            step = c.step_pct
            ax.annotate("change" + (f" {step:+.1f} %" if step is not None else ""), (c.index - 0.5, 1.0),
                        xycoords=("data", "axes fraction"), fontsize=7, color="#c62828", ha="left", va="top",
                        xytext=(3, 0), textcoords="offset points")
        if current is not None:
            ax.plot([len(points)], [current], marker="*", markersize=10, color="#212121", linestyle="none",
                    label="this run")
        ticks = [p.commit[:7] for p in points] + (["this run"] if current is not None else [])
        step = max(1, math.ceil(len(ticks) / 12))
        ax.set_xticks(range(0, len(ticks), step), ticks[::step], rotation=30, ha="right", fontsize=7)
        ax.set_xlim(-0.6, len(ticks) - 0.4)
        values = ys + ([current] if current is not None else [])
        lo, hi = min(values), max(values)
        pad = max((hi - lo) * 0.15, hi * 0.02) or 1e-9  # flat stays flat: at least +-2 %
        ax.set_ylim(max(0.0, lo - pad), hi + pad)
        ax.yaxis.set_major_locator(MaxNLocator(5))
        _time_axis(ax)
        ax.set_ylabel("predicted time")
        ax.set_title(title, loc="left")
        ax.legend(loc="best", ncols=2)
        return _svg(fig, chart_id, title)


def calibration(points: list[Sequence[float]], chart_id: str, title: str, limit: int = 2000) -> str:
    """Predicted against native time, one point per hold-out sample, with the y = x line."""
    with rc_context({**_RC, "svg.hashsalt": chart_id}):
        pairs = [(float(p), float(n)) for p, n in points if p > 0 and n > 0]
        if len(pairs) > limit:  # an SVG of 100 k markers helps nobody: an even, deterministic sample
            pairs = pairs[:: math.ceil(len(pairs) / limit)]
        fig = _figure(4.2, 3.6, left=0.85)
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axes(ax)
        if pairs:
            lo, hi = _log_limits([v for pair in pairs for v in pair], pad=1.5)
            ax.plot([lo, hi], [lo, hi], color="#9e9e9e", linewidth=0.8, linestyle="--", label="predicted = native")
            ax.scatter([n for _, n in pairs], [p for p, _ in pairs], s=12, color="#1565c0", alpha=0.7,
                       gid="points", label="hold-out kernels")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
        _time_axis(ax, "x")
        _time_axis(ax, "y")
        ax.set_xlabel("native time")
        ax.set_ylabel("predicted time")
        ax.set_title(title, loc="left")
        ax.legend(loc="upper left")
        return _svg(fig, chart_id, title)


def deltas(rows: list[dict[str, Any]], chart_id: str, title: str) -> str:
    """Horizontal bars of delta % per result {label, delta_pct, threshold_pct, verdict}, each with
    grey ticks at +-its threshold."""
    with rc_context({**_RC, "svg.hashsalt": chart_id}):
        fig = _figure(5.6, 0.75 + 0.2 * len(rows), left=0.25 + 0.055 * max([len(r["label"]) for r in rows] + [4]),
                      bottom=0.3, top=0.3)
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        values = [r["delta_pct"] for r in rows]
        _point_ids(ax.barh(ys, values, height=0.65, color=[VERDICT_COLOURS[r["verdict"]] for r in rows]))
        limits = [(y, r["threshold_pct"]) for y, r in zip(ys, rows) if r.get("threshold_pct") is not None]
        if limits:
            ax.scatter([t for _, t in limits] + [-t for _, t in limits], [y for y, _ in limits] * 2, marker="|",
                       s=60, color="#757575", zorder=3, label="threshold")
            ax.legend(loc="lower right")
        ax.axvline(0, color="#616161", linewidth=0.8)
        ax.set_yticks(ys, [r["label"] for r in rows], fontsize=7)
        ax.grid(axis="y", visible=False)
        span = max([abs(v) for v in values] + [t for _, t in limits] + [1.0]) * 1.15
        ax.set_xlim(-span, span)
        ax.xaxis.set_major_locator(MaxNLocator(5, symmetric=True))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:+.3g} %" if v else "0"))
        ax.set_title(title, loc="left")
        return _svg(fig, chart_id, title)
