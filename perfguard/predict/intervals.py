"""A calibrated interval on every predicted change: split-conformal prediction from the verdict
benchmark's residuals.

A model predicts a kernel's change as a ratio R^ = current time / baseline time. On pairs whose
native ratio R is known (benchmarks/verdicts.py: one-knob schedule edits, both sides timed on
the host), its error is r = ln R - ln R^. Errors grow with the size of the change (a model that
is off by a factor 1.5 on a 15x slowdown is off by 1 % on a 2 % edit), so each pair's
conformity score is the error relative to the size of the predicted change:

    s = |ln R - ln R^| / (SCALE + |ln R^|)

and the interval of a new prediction at level L is

    ln R^ +- q (SCALE + |ln R^|),  q = the ceil((n + 1) L)-th smallest of the n calibration scores

(split-conformal prediction: for a pair exchangeable with the n calibration pairs, the interval
holds the native ratio with probability at least L, whatever the model's error distribution; with
too few pairs for the level, q is infinite and no interval is given). SCALE is fixed, not fitted
on the residuals a quantile comes from: any value keeps the guarantee, it only shapes the widths.

The calibration of a check comes from the machine profile its target chose (perfguard.machines:
`[target.NAME] machine`), the section of the target's ISA: per target and model (its model_id,
and its kind: pipeline, analytical, calibrated), the quantile, the number of pairs it came from
and the level. A result is given the entry of the model that scored it on its target; else the
entry of the same kind on that target (the model changed since: `exact` False); else the same kind
on another target of the same ISA (`exact` False and the basis names the target). Never another
ISA's: residuals of other code on another CPU say nothing of this one's error, and such a result
has no interval (the report says it is uncalibrated and why). benchmarks/verdicts.py --intervals
still writes a bare calibration file (for a look at one ISA's quantiles). Deterministic: the same profile and
prediction give the same bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from perfguard.atomic import atomic_write_text
from perfguard.machines import MachineProfile

INTERVALS_SCHEMA = 1
LEVEL = 0.90
# The errors of the verdict pairs grow less than in proportion to the predicted change (about 0.03
# on no change, 0.1 to 0.25 in log ratio on 1.5x to 10x): a floor of 0.15 keeps the intervals of
# small changes narrow and those of large ones honest. Chosen on the even-numbered pairs of
# benchmarks/verdict_pairs.py (the narrowest mean leave-one-out interval among 0.05 .. 1);
# coverage is measured on held-out pairs (benchmarks/RESULTS.md). Any value keeps the guarantee.
SCALE = 0.15
KINDS = ("pipeline", "analytical", "calibrated")


def model_kind(model_id: str, calibrated: bool) -> str:
    if calibrated:
        return "calibrated"
    return "pipeline" if model_id.startswith("pipeline-") else "analytical"


def score(predicted_ratio: float, native_ratio: float, scale: float = SCALE) -> float:
    """How far a prediction was off, relative to the size of the predicted change."""
    log_pred = math.log(predicted_ratio)
    return abs(math.log(native_ratio) - log_pred) / (scale + abs(log_pred))


def conformal_quantile(scores: Sequence[float], level: float = LEVEL) -> float:
    """The ceil((n + 1) level)-th smallest score (split-conformal); infinite when n is too small."""
    ordered = sorted(scores)
    rank = math.ceil((len(ordered) + 1) * level - 1e-12)
    return ordered[rank - 1] if 1 <= rank <= len(ordered) else math.inf


def ratio_bounds(predicted_ratio: float, quantile: float, scale: float = SCALE) -> tuple[float, float]:
    log_pred = math.log(predicted_ratio)
    half = quantile * (scale + abs(log_pred))
    return math.exp(log_pred - half), math.exp(log_pred + half)


@dataclass(frozen=True)
class Entry:
    """One model's calibration on one target."""

    target: str
    model_id: str
    kind: str
    pairs: int  # calibration pairs the quantile came from
    quantile: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class IntervalCalibration:
    level: float
    scale: float
    entries: tuple[Entry, ...]
    source: dict  # what produced it: command, native timings file, CPU, date
    machine: str = ""  # the machine profile it is a section of ("": a bare calibration file)

    def find(self, target: str, model_id: str, kind: str) -> tuple[Entry, bool] | None:
        """(the entry for this model, whether it is this very model on this target), or None."""
        for e in self.entries:
            if e.target == target and e.model_id == model_id and e.kind == kind:
                return e, True
        for same_target in (True, False):
            for e in self.entries:
                if e.kind == kind and (e.target == target) == same_target:
                    return e, False
        return None

    def to_json(self) -> str:
        doc = {
            "schema": INTERVALS_SCHEMA,
            "level": self.level,
            "scale": self.scale,
            "source": self.source,
            "entries": [e.to_dict() for e in sorted(self.entries, key=lambda e: (e.target, e.kind, e.model_id))],
        }
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"

    def save(self, path: Path) -> Path:
        atomic_write_text(path, self.to_json())
        return path


def calibrate(
    residuals: dict[tuple[str, str, str], list[tuple[float, float]]],
    source: dict,
    level: float = LEVEL,
    scale: float = SCALE,
) -> IntervalCalibration:
    """From (target, model_id, kind) -> [(predicted ratio, native ratio), ...]; models whose pairs
    are too few for the level get no entry."""
    entries = []
    for (target, model_id, kind), pairs in sorted(residuals.items()):
        q = conformal_quantile([score(p, n, scale) for p, n in pairs], level)
        if math.isfinite(q):
            entries.append(Entry(target, model_id, kind, len(pairs), round(q, 6)))
    return IntervalCalibration(level, scale, tuple(entries), source)


def coverage(pairs: Iterable[tuple[float, float]], quantile: float, scale: float = SCALE) -> tuple[int, int]:
    """(covered, total) of (predicted ratio, native ratio) pairs by intervals of `quantile`."""
    covered = total = 0
    for p, n in pairs:
        low, high = ratio_bounds(p, quantile, scale)
        covered += int(low <= n <= high)
        total += 1
    return covered, total


def for_machine(profile: MachineProfile | None, isa: str) -> IntervalCalibration | None:
    """The calibration of `isa`'s section of a machine profile; None without a profile, or where the
    profile's CPU has no native runs on that ISA."""
    section = None if profile is None else profile.isas.get(isa)
    if profile is None or section is None:
        return None
    return IntervalCalibration(
        profile.level, profile.scale, tuple(Entry(**e) for e in section.entries), section.source, profile.name
    )


@dataclass(frozen=True)
class DeltaInterval:
    """The interval of one predicted change, in percent, and where it came from."""

    low_pct: float
    high_pct: float
    level: float
    basis: str  # e.g. "pipeline-v3-0123abcd on x86_64, 85 verdict pairs timed on intel-6-167"
    exact: bool  # calibrated for this very model on this target


def delta_interval(
    calibration: IntervalCalibration | None,
    target: str,
    model_id: str,
    calibrated: bool,
    baseline_s: float,
    current_s: float,
    same_statistics: bool = False,
) -> DeltaInterval | None:
    """The interval of the change baseline_s -> current_s scored by `model_id`, or None (no entry).
    Identical statistics are the same code run the same way: the interval is the point 0."""
    if calibration is None or baseline_s <= 0 or current_s <= 0:
        return None
    found = calibration.find(target, model_id, model_kind(model_id, calibrated))
    if found is None:
        return None
    entry, exact = found
    basis = f"{entry.model_id} on {entry.target}, {entry.pairs} verdict pairs" + (
        f" timed on {calibration.machine}" if calibration.machine else ""
    )
    if same_statistics:
        return DeltaInterval(0.0, 0.0, calibration.level, basis, exact)
    low, high = ratio_bounds(current_s / baseline_s, entry.quantile, calibration.scale)
    return DeltaInterval(round(100.0 * (low - 1.0), 6), round(100.0 * (high - 1.0), 6), calibration.level, basis, exact)
