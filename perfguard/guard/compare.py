"""Verdicts: current predicted time against the baseline's, both from the same model.

The baseline's stored prediction is informational; the comparison re-scores the baseline's
raw statistics with the model that scores the current run, so a recalibration never shows
up as a regression or an improvement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfguard.guard.baselines import Baseline
from perfguard.predict.base import Predictor
from perfguard.sim.stats import STAT_FIELDS, Stats

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
ERROR = "error"
VERDICTS = (REGRESSION, ERROR, IMPROVEMENT, NEW, UNCHANGED)  # report order: worst first


@dataclass(frozen=True)
class Verdict:
    verdict: str
    threshold_pct: float
    current_time_s: float | None = None
    baseline_time_s: float | None = None
    delta_pct: float | None = None
    stat_deltas: dict[str, dict] = field(default_factory=dict)  # field -> {baseline, current, delta_pct}


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


def judge(current: Stats, baseline: Baseline | None, predictor: Predictor, threshold_pct: float) -> Verdict:
    current_time = float(predictor.predict_stats([current])[0])
    if baseline is None:
        return Verdict(NEW, threshold_pct, current_time_s=current_time)
    baseline_time = float(predictor.predict_stats([baseline.stats])[0])
    delta = 0.0 if baseline_time == current_time else 100.0 * (current_time - baseline_time) / baseline_time
    if delta > threshold_pct:
        verdict = REGRESSION
    elif delta < -threshold_pct:
        verdict = IMPROVEMENT
    else:
        verdict = UNCHANGED
    return Verdict(verdict, threshold_pct, current_time, baseline_time, delta, stat_deltas(baseline.stats, current))
