"""Per-metric limits: `limits = { insts = 1.0, l2_misses = "500 count" }` in perfguard.toml.

Beside the threshold on predicted time, a kernel may fail on a single statistic growing too
much. A limit is either relative or absolute:

    insts = 1.0             # percent of the baseline's count (a bare number is a percentage)
    insts = "1 %"           # the same, spelt out
    l2_misses = "500 count" # at most 500 more per kernel call
    l1d_misses = "2k count" # SI multipliers: k = 1e3, M = 1e6, G = 1e9

Only growth counts (current above baseline + allowance); a shrinking count never breaches.
A relative limit on a count that was 0 in the baseline breaches on any increase.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from perfguard.errors import InputError
from perfguard.sim.stats import STAT_FIELDS

_TEXT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(?:(%)|([kMG]?)\s*(counts?))\s*$")
_MULTIPLIER = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
SYNTAX = "a percentage (1.0 or \"1 %\") or an absolute count (\"500 count\", \"2k count\")"


@dataclass(frozen=True)
class Limit:
    metric: str
    value: float
    percent: bool  # False: an absolute count per kernel call

    def __str__(self) -> str:
        return f"{self.value:g} %" if self.percent else f"{self.value:g} count"

    def allowance(self, baseline: int) -> float:
        return baseline * self.value / 100.0 if self.percent else self.value

    def breach(self, baseline: int, current: int) -> dict[str, Any] | None:
        """What went over the limit, or None."""
        if current <= baseline + self.allowance(baseline):
            return None
        pct = 100.0 * (current - baseline) / baseline if baseline else None
        return {"baseline": baseline, "current": current, "delta": current - baseline, "delta_pct": pct,
                "limit": str(self)}


def parse_limit(metric: str, value: Any, where: str) -> Limit:
    if metric not in STAT_FIELDS:
        raise InputError(f"{where}: unknown metric '{metric}' (one of: {', '.join(STAT_FIELDS)})")
    at = f"{where}.{metric}"
    if isinstance(value, bool):
        raise InputError(f"{at}: must be {SYNTAX}, got {value!r}")
    if isinstance(value, (int, float)):
        number, percent = float(value), True
    elif isinstance(value, str):
        if value.strip().startswith("-"):
            raise InputError(f"{at}: must not be negative, got {value!r}")
        match = _TEXT.fullmatch(value)
        if match is None:
            raise InputError(f"{at}: must be {SYNTAX}, got {value!r}")
        number, percent = float(match.group(1)), match.group(2) == "%"
        if not percent:
            number *= _MULTIPLIER[match.group(3)]
    else:
        raise InputError(f"{at}: must be {SYNTAX}, got {value!r}")
    if not math.isfinite(number):
        raise InputError(f"{at}: must be a finite number, got {value!r}")
    if number < 0:
        raise InputError(f"{at}: must not be negative, got {value!r}")
    return Limit(metric, number, percent)


def parse_limits(table: Any, where: str) -> dict[str, Limit]:
    """A `limits` table of perfguard.toml: metric -> Limit; `where` names the file and the key."""
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table of metric = limit, e.g. {{ insts = 1.0 }}")
    return {metric: parse_limit(metric, value, where) for metric, value in sorted(table.items())}


def limit_breaches(limits: dict[str, Limit], baseline, current, where: str) -> dict[str, dict]:
    """metric -> breach for every limit `current` (Stats) went over against `baseline` (Stats).

    A limit on a statistic the simulator does not measure is an input error: it could never fire."""
    out = {}
    for metric, limit in sorted(limits.items()):
        b, c = getattr(baseline, metric), getattr(current, metric)
        if b is None or c is None:
            raise InputError(f"{where}: limits.{metric}: this simulator does not measure '{metric}'")
        breach = limit.breach(b, c)
        if breach is not None:
            out[metric] = breach
    return out
