"""Verdicts: current predicted time against the baseline's, both from the same model.

The baseline's stored prediction is informational; the comparison re-scores the baseline's
raw statistics with the model that scores the current run, so a recalibration never shows
up as a regression or an improvement.

Statistics measured with another toolchain (cross compiler, C library, TVM, LLVM's tools,
harness, QEMU and its plugin) than the baseline's are not comparable: a change beyond the
threshold then gets the verdict `toolchain` (not judged), never regression or improvement, and
the run's summary says once which tools differ and how to re-baseline (toolchain_summary).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from perfguard.baselines.store import Baseline
from perfguard.document.verdicts import IMPROVEMENT, NEW, REGRESSION, TOOLCHAIN, UNCHANGED
from perfguard.errors import InputError
from perfguard.judging import Limit, limit_breaches
from perfguard.predict.base import Predictor
from perfguard.predict.intervals import DeltaInterval, IntervalCalibration, delta_interval
from perfguard.sim.stats import STAT_FIELDS, Stats

# Recorded in every baseline but not compared: perfguard's own version. What of perfguard shapes
# the statistics is recorded on its own (harness, build recipe, the simulator's plugin and recipe);
# a new version alone is no difference, but beside one it is named (the likely cause).
NOT_COMPARED = frozenset({"perfguard"})
REBASELINE = "perfguard baseline update"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    threshold_pct: float
    current_time_s: float | None = None
    baseline_time_s: float | None = None
    delta_pct: float | None = None
    stat_deltas: dict[str, dict] = field(default_factory=dict)  # field -> {baseline, current, delta_pct}
    # tool -> {baseline, current} for each part of the toolchain (cross compiler, C library, TVM,
    # LLVM's tools, harness, simulator) that is not the one the baseline was measured with.
    toolchain_changed: dict[str, dict] = field(default_factory=dict)
    # Per-metric limits (perfguard.limits) this result went over: metric -> {baseline, current, delta,
    # delta_pct, limit}. Any breach makes the verdict a regression, whatever the predicted time did.
    limit_breaches: dict[str, dict] = field(default_factory=dict)
    # The calibrated interval of delta_pct (predict.intervals), and what the regression gate compared
    # with the threshold: "estimate" (delta_pct), or the interval's "lower" or "upper" end.
    interval: DeltaInterval | None = None
    gate: str = "estimate"

    @property
    def straddles(self) -> bool:
        """The interval holds a threshold (+ or -): the native change may be on either side of it."""
        return straddles(self.interval, self.threshold_pct)


def straddles(interval: DeltaInterval | None, threshold_pct: float | None) -> bool:
    if interval is None or threshold_pct is None:
        return False
    return any(interval.low_pct <= t < interval.high_pct for t in (threshold_pct, -threshold_pct))


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
    """Each tool both recorded whose version differs. A tool the baseline did not record (it is
    older than that field) is no difference: re-baselining records it. perfguard's own version is
    one only beside another (`perfguard 0.1.0 -> 0.2.0` with the harness it changed)."""
    changed = {
        tool: {"baseline": baseline[tool], "current": current[tool]}
        for tool in sorted((set(baseline) & set(current)) - NOT_COMPARED)
        if baseline[tool] != current[tool]
    }
    for tool in sorted(NOT_COMPARED & set(baseline) & set(current) if changed else ()):
        if baseline[tool] != current[tool]:
            changed[tool] = {"baseline": baseline[tool], "current": current[tool]}
    return changed


def toolchain_summary(changes: Iterable[tuple[str, dict]]) -> dict:
    """The run's one statement about its toolchain, from (target, toolchain_changed) per result:
    each tool that differs with its distinct {baseline, current} pairs, the targets concerned and
    the command that re-baselines them; {} when every result matched its baseline's toolchain."""
    tools: dict[str, list[dict]] = {}
    targets: set[str] = set()
    for target, changed in changes:
        for tool, pair in changed.items() if isinstance(changed, dict) else ():
            if not isinstance(pair, dict):
                continue
            targets.add(target)
            pair = {"baseline": pair.get("baseline"), "current": pair.get("current")}
            if pair not in tools.setdefault(tool, []):
                tools[tool].append(pair)
    if not targets:
        return {}
    ordered = sorted(targets)
    return {
        "tools": {tool: tools[tool] for tool in sorted(tools)},
        "targets": ordered,
        "rebaseline": f"{REBASELINE} --targets {','.join(ordered)}",
    }


def change_pct(baseline: float, current: float) -> float:
    """Relative change in percent (0 when equal). One formula for kernels and model totals: the
    same two numbers must get the same verdict, to the last bit."""
    return 0.0 if baseline == current else 100.0 * (current - baseline) / baseline


def classify(delta_pct: float, threshold_pct: float) -> str:
    """Beyond the threshold either way, else unchanged: a change exactly at it passes."""
    if delta_pct > threshold_pct:
        return REGRESSION
    if delta_pct < -threshold_pct:
        return IMPROVEMENT
    return UNCHANGED


def _score(predictor: Predictor, stats: Stats, what: str) -> float:
    """Predicted seconds; a model that gives no time (NaN, infinite, negative) is an error: a NaN
    delta is neither above nor below a threshold, so it would pass as unchanged."""
    with np.errstate(all="ignore"):
        value = float(predictor.predict_stats([stats])[0])
    if not math.isfinite(value) or value < 0:
        raise InputError(
            f"model {predictor.model_id} scores {what} as {value!r} s, not a time (a model file out of shape?)"
        )
    return value


def judge(
    current: Stats,
    baseline: Baseline | None,
    predictor: Predictor,
    threshold_pct: float,
    toolchain: dict[str, str] | None = None,
    source: str = "baseline",
    limits: dict[str, Limit] | None = None,
    limits_source: str = "limits",
    intervals: IntervalCalibration | None = None,
    target: str = "",
    gate: str = "estimate",
) -> Verdict:
    """The verdict; InputError (naming `source`, the baseline's file) when the two runs cannot be compared.

    With `intervals`, the change carries its calibrated interval; `gate` says what is compared with
    the threshold for a regression: the estimate, or the interval's lower end (only a regression
    the model is sure of fails) or upper end (any change that may be a regression fails). Without
    an interval the estimate is gated, and the verdict's `gate` says so."""
    current_time = _score(predictor, current, "this run's statistics")
    if baseline is None:
        return Verdict(NEW, threshold_pct, current_time_s=current_time)
    for name in STAT_FIELDS:
        b, c = getattr(baseline.stats, name), getattr(current, name)
        if (b is None) != (c is None):
            have, lack = ("this run", "the baseline") if b is None else ("the baseline", "this run")
            raise InputError(
                f"{source}: {have} has a '{name}' count and {lack} has none: cannot compare like "
                f"with like (re-record it with 'perfguard baseline update')"
            )
    baseline_time = _score(predictor, baseline.stats, "the baseline's statistics")
    if baseline_time == 0 and current_time != 0:
        raise InputError(
            f"{source}: the baseline's statistics score 0 s under {predictor.model_id}: "
            f"no relative change can be computed (corrupted baseline?)"
        )
    delta = change_pct(baseline_time, current_time)
    interval = delta_interval(
        intervals,
        target,
        predictor.model_id,
        predictor.calibrated,
        baseline_time,
        current_time,
        same_statistics=baseline.stats == current,
    )
    gated = delta
    if gate != "estimate" and interval is not None:
        gated = interval.low_pct if gate == "lower" else interval.high_pct
    else:
        gate = "estimate"
    verdict = classify(delta, threshold_pct)
    if gated > threshold_pct:
        verdict = REGRESSION
    elif verdict == REGRESSION:
        verdict = UNCHANGED  # the estimate is above, the gated end of its interval is not
    breaches = limit_breaches(limits or {}, baseline.stats, current, limits_source)
    if breaches:
        verdict = REGRESSION
    changed = toolchain_changes(baseline.toolchain, toolchain or {})
    if changed and verdict in (REGRESSION, IMPROVEMENT):
        verdict = TOOLCHAIN  # counts from another toolchain explain a breach as well as a time change
    return Verdict(
        verdict,
        threshold_pct,
        current_time,
        baseline_time,
        delta,
        stat_deltas(baseline.stats, current),
        changed,
        breaches,
        interval,
        gate,
    )
