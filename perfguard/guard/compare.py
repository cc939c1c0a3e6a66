"""Verdicts: current predicted time against the baseline's, both from the same model.

The baseline's stored prediction is informational; the comparison re-scores the baseline's
raw statistics with the model that scores the current run, so a recalibration never shows
up as a regression or an improvement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from perfguard.errors import InputError
from perfguard.guard.baselines import Baseline
from perfguard.limits import Limit, limit_breaches
from perfguard.predict.base import Predictor
from perfguard.sim.stats import STAT_FIELDS, Stats

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
REMOVED = "removed"  # `perfguard compare`: the kernel exists in the base revision only
ERROR = "error"
VERDICTS = (REGRESSION, ERROR, IMPROVEMENT, NEW, REMOVED, UNCHANGED)  # report order: worst first


@dataclass(frozen=True)
class Verdict:
    verdict: str
    threshold_pct: float
    current_time_s: float | None = None
    baseline_time_s: float | None = None
    delta_pct: float | None = None
    stat_deltas: dict[str, dict] = field(default_factory=dict)  # field -> {baseline, current, delta_pct}
    # On a regression or an improvement: tool -> {baseline, current} for each part of the toolchain
    # (cross compiler, TVM, perfguard, simulator) that is not the one the baseline was measured with.
    toolchain_changed: dict[str, dict] = field(default_factory=dict)
    # Per-metric limits (perfguard.limits) this result went over: metric -> {baseline, current, delta,
    # delta_pct, limit}. Any breach makes the verdict a regression, whatever the predicted time did.
    limit_breaches: dict[str, dict] = field(default_factory=dict)


def stat_deltas(baseline: Stats, current: Stats) -> dict[str, dict]:
    out = {}
    for name in STAT_FIELDS:
        b, c = getattr(baseline, name), getattr(current, name)
        if b is None and c is None:
            continue
        pct = None
        if b is not None and c is not None:
            pct = 0.0 if b == c else (100.0 * (c - b) / b if b else None)  # from zero: no percentage
        out[name] = {"baseline": b, "current": c, "delta_pct": pct}
    return out


def toolchain_changes(baseline: dict[str, str], current: dict[str, str]) -> dict[str, dict]:
    """Each tool whose version differs; nothing when the baseline recorded no toolchain (too old)."""
    if not baseline or not current:
        return {}
    return {tool: {"baseline": baseline.get(tool), "current": current.get(tool)}
            for tool in sorted(set(baseline) | set(current)) if baseline.get(tool) != current.get(tool)}


def _score(predictor: Predictor, stats: Stats, what: str) -> float:
    """Predicted seconds; a model that gives no time (NaN, infinite, negative) is an error: a NaN
    delta is neither above nor below a threshold, so it would pass as unchanged."""
    with np.errstate(all="ignore"):
        value = float(predictor.predict_stats([stats])[0])
    if not math.isfinite(value) or value < 0:
        raise InputError(f"model {predictor.model_id} scores {what} as {value!r} s, not a time "
                         f"(a model file out of shape?)")
    return value


def judge(current: Stats, baseline: Baseline | None, predictor: Predictor, threshold_pct: float,
          toolchain: dict[str, str] | None = None, source: str = "baseline",
          limits: dict[str, Limit] | None = None, limits_source: str = "limits") -> Verdict:
    """The verdict; InputError (naming `source`, the baseline's file) when the two runs cannot be compared."""
    current_time = _score(predictor, current, "this run's statistics")
    if baseline is None:
        return Verdict(NEW, threshold_pct, current_time_s=current_time)
    for name in STAT_FIELDS:
        b, c = getattr(baseline.stats, name), getattr(current, name)
        if (b is None) != (c is None):
            have, lack = ("this run", "the baseline") if b is None else ("the baseline", "this run")
            raise InputError(f"{source}: {have} has a '{name}' count and {lack} has none: cannot compare like "
                             f"with like (re-record it with 'perfguard baseline update')")
    baseline_time = _score(predictor, baseline.stats, "the baseline's statistics")
    if baseline_time == 0 and current_time != 0:
        raise InputError(f"{source}: the baseline's statistics score 0 s under {predictor.model_id}: "
                         f"no relative change can be computed (corrupted baseline?)")
    delta = 0.0 if baseline_time == current_time else 100.0 * (current_time - baseline_time) / baseline_time
    if delta > threshold_pct:
        verdict = REGRESSION
    elif delta < -threshold_pct:
        verdict = IMPROVEMENT
    else:
        verdict = UNCHANGED
    breaches = limit_breaches(limits or {}, baseline.stats, current, limits_source)
    if breaches:
        verdict = REGRESSION
    changed = toolchain_changes(baseline.toolchain, toolchain or {}) if verdict in (REGRESSION, IMPROVEMENT) else {}
    return Verdict(verdict, threshold_pct, current_time, baseline_time, delta, stat_deltas(baseline.stats, current),
                   changed, breaches)
