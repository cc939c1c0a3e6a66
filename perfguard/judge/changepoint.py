"""Change points in a kernel's predicted time across commits.

Method: penalised optimal partitioning, then merging of levels that are too close.

1. The series is taken in log space, so a step is a ratio and the penalty does not depend on
   the kernel's scale. Among all ways to cut the series into segments, dynamic programming
   finds the one that minimises  sum over segments of sum |y_i - median(segment)|  +  penalty
   x (number of segments), with penalty = log(1 + min_step). The L1 cost around the median
   makes a single odd commit cheap to leave alone and a lasting step expensive to ignore.
2. Neighbouring segments whose medians differ by less than min_step (relative) are merged,
   smallest difference first, until every remaining boundary is a step of at least min_step.

Each remaining boundary is a change point: the first commit of the new level. A flat stretch,
even with noise well below min_step, has none; a step of at least min_step is found at the
commit that made it. Simulated statistics are deterministic, so min_step is naturally the
regression threshold of the kernel: a smaller step would not have failed a check.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new level
    before: float  # median of the level before
    after: float  # median of the level after

    @property
    def step_pct(self) -> float | None:
        return 100.0 * (self.after - self.before) / self.before if self.before else None


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _partition(y: list[float], penalty: float) -> list[int]:
    """Start indexes of the optimal segments (the first is always 0)."""
    n = len(y)
    best = [0.0] + [math.inf] * n  # best[j]: cost of y[:j]
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        window: list[float] = []
        for i in range(j - 1, -1, -1):  # segment y[i:j], grown leftwards
            bisect.insort(window, y[i])
            m = window[len(window) // 2]
            cost = best[i] + sum(abs(v - m) for v in window) + penalty
            if cost < best[j]:
                best[j], start[j] = cost, i
    cuts, j = [], n
    while j > 0:
        cuts.append(start[j])
        j = start[j]
    return sorted(cuts)


def detect(values: list[float], min_step_pct: float) -> list[ChangePoint]:
    """Change points of a series of positive values (oldest first)."""
    if len(values) < 2:
        return []
    step = max(min_step_pct, 1e-6) / 100.0
    positive = all(v > 0 for v in values)
    y = [math.log(v) if positive else v for v in values]
    bounds = _partition(y, math.log1p(step))[1:]

    def levels(cuts: list[int]) -> list[float]:
        edges = [0, *cuts, len(values)]
        return [_median(values[a:b]) for a, b in zip(edges, edges[1:])]

    def gap(a: float, b: float) -> float:
        return abs(b - a) / abs(a) if a else math.inf if b else 0.0

    while bounds:
        lv = levels(bounds)
        gaps = [gap(a, b) for a, b in zip(lv, lv[1:])]
        k = min(range(len(gaps)), key=gaps.__getitem__)
        if gaps[k] >= step:
            break
        del bounds[k]
    lv = levels(bounds)
    return [ChangePoint(i, lv[k], lv[k + 1]) for k, i in enumerate(bounds)]
