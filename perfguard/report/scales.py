"""The axes of the report's charts: where a value lands on the canvas, which ticks an axis shows
and how they read. Arithmetic only; perfguard.report.charts lays the charts out and its
templates draw them.

A scale maps a data interval onto a canvas interval (y grows downwards in SVG, so a y scale
runs from the bottom of the plot to its top). Ticks follow the usual rules of plotting
libraries: a linear axis gets at most a handful of ticks at 1, 2, 2.5 or 5 x 10^k steps, a log
axis one tick per decade (every n-th decade when there are too many).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


class Linear:
    kind = "linear"

    def __init__(self, lo: float, hi: float, start: float, end: float):
        if not hi > lo:
            hi = lo + (abs(lo) or 1.0)
        self.lo, self.hi, self.start, self.end = lo, hi, start, end

    def __call__(self, value: float) -> float:
        return self.start + (value - self.lo) / (self.hi - self.lo) * (self.end - self.start)

    def ticks(self, most: int = 5) -> list[float]:
        return linear_ticks(self.lo, self.hi, most)


class Log:
    kind = "log"

    def __init__(self, lo: float, hi: float, start: float, end: float):
        if not lo > 0:
            raise ValueError(f"a log scale needs a positive lower limit, got {lo!r}")
        if not hi > lo:
            hi = lo * 10.0
        self.lo, self.hi, self.start, self.end = lo, hi, start, end
        self._span = math.log10(hi) - math.log10(lo)

    def __call__(self, value: float) -> float:
        return self.start + (math.log10(value) - math.log10(self.lo)) / self._span * (self.end - self.start)

    def ticks(self, most: int = 8) -> list[float]:
        return log_ticks(self.lo, self.hi, most)


def linear_ticks(lo: float, hi: float, most: int = 5) -> list[float]:
    """Round ticks inside [lo, hi], at most `most` intervals apart (a 1, 2, 2.5, 5 x 10^k step)."""
    span = hi - lo
    if not span > 0:
        return [lo]
    raw = span / most
    power = 10.0 ** math.floor(math.log10(raw))
    for mult in _STEPS:
        step = mult * power
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        if last - first <= most:
            break
    return [_clean(i * step) for i in range(first, last + 1)]


def log_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """Powers of ten inside [lo, hi] (every n-th when more than `most`); when fewer than two fit,
    1-2-5 ticks, and failing those, linear ones."""
    first, last = math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9)
    decades = list(range(first, last + 1))
    if len(decades) >= 2:
        stride = math.ceil(len(decades) / most)
        return [_clean(10.0**e) for e in decades if e % stride == 0] or [_clean(10.0**first)]
    ticks = [_clean(m * 10.0**e) for e in range(first - 1, last + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
    return ticks if len(ticks) >= 2 else [t for t in linear_ticks(lo, hi, 4) if t > 0]


def _clean(value: float) -> float:
    """A tick without float noise (0.30000000000000004 -> 0.3), and no -0."""
    return float(f"{value:.12g}") + 0.0


def padded_log_limits(values: Sequence[float], pad: float) -> tuple[float, float]:
    return min(values) / pad, max(values) * pad


# -- tick labels ---------------------------------------------------------------------------------


def compact(value: float) -> str:
    """Log-axis labels: 0.01, 1, 10, 1k, 100k, 1M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def signed_pct(value: float) -> str:
    return f"{value:+.3g} %" if value else "0"


def time_labels(ticks: Sequence[float]) -> list[str]:
    """Seconds in one unit for the whole axis (s, ms, us, ns: the largest tick decides), with just
    enough decimals to tell the ticks apart; on a log axis (ticks spanning more than 20x) each
    tick is written on its own."""
    positive = sorted(v for v in ticks if v > 0)
    if not positive:
        return ["0" if v == 0 else f"{v:g}" for v in ticks]
    largest = positive[-1]
    unit, scale = next(((u, f) for u, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)) if largest >= f), ("ns", 1e-9))
    if largest > 20 * positive[0]:
        return ["0" if v == 0 else f"{v / scale:g} {unit}" for v in ticks]
    scaled = [t / scale for t in positive]
    tolerance = 1e-9 * max(scaled)
    decimals = next((d for d in range(7) if all(abs(round(t, d) - t) <= tolerance for t in scaled)), 6)
    return ["0" if v == 0 else f"{v / scale:.{decimals}f} {unit}" for v in ticks]


def labelled(
    ticks: Sequence[float],
    label: Callable[[float], str] | None = None,
    labels: Callable[[Sequence[float]], list[str]] | None = None,
) -> list[tuple[float, str]]:
    """(value, text) per tick, from a per-tick `label` or an axis-wide `labels`."""
    texts = labels(ticks) if labels else [(label or compact)(t) for t in ticks]
    return list(zip(ticks, texts))
