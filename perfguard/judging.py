"""How a change is judged: the [perfguard] keys judge/ applies (the `Judging` section: the timing
model, the threshold on predicted time, the gate, per-metric limits) and the per-metric limits
themselves, `limits = { insts = 1.0, l2_misses = "500 count" }`.

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
from dataclasses import dataclass, field
from typing import Any, ClassVar

from perfguard.errors import InputError
from perfguard.sections import KeyDocs, Table, flag, number
from perfguard.sim.stats import STAT_FIELDS

_TEXT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(?:(%)|([kMG]?)\s*(counts?))\s*$")
_MULTIPLIER = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
SYNTAX = 'a percentage (1.0 or "1 %") or an absolute count ("500 count", "2k count")'


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
        return {
            "baseline": baseline,
            "current": current,
            "delta": current - baseline,
            "delta_pct": pct,
            "limit": str(self),
        }


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


DEFAULT_THRESHOLD = 2.0
GATES = ("estimate", "lower", "upper")
MODEL_NAMES = ("auto", "pipeline", "analytical")


@dataclass(frozen=True)
class Judging:
    """The [perfguard] keys a verdict is made with (runs/check.py, compare and bisect hand them to judge/)."""

    threshold: float = DEFAULT_THRESHOLD  # percent of predicted time
    gate: str = "estimate"  # estimate | lower | upper: the interval's end that must exceed a threshold
    limits: dict[str, Limit] = field(default_factory=dict)  # the global per-metric limits
    model: str = "auto"  # auto (calibrated, else pipeline, else analytical) | pipeline | analytical
    # a result measured with another toolchain than its baseline's, whose base revision cannot be
    # measured again with this one (runs.rebase): an error (False) or `toolchain`, not judged (True)
    allow_unjudged: bool = False

    KEYS: ClassVar[KeyDocs] = {
        "threshold": (
            "number, percent",
            str(DEFAULT_THRESHOLD),
            "a kernel whose predicted time grows by more than this is a regression (exit 1)",
        ),
        "gate": (
            "`estimate`, `lower` or `upper`",
            '"estimate"',
            "what of a predicted change must exceed the threshold: the estimate, or the lower or upper end "
            "of its calibrated 90 % interval (see Reports)",
        ),
        "model": (
            "string",
            '"auto"',
            "the timing model: `auto` (a calibrated model where one exists, else "
            "`pipeline`), `pipeline` (llvm-mca on the executed blocks) or `analytical`",
        ),
        "limits": (
            "table metric -> limit",
            "none",
            'per-metric limits for every kernel: `{ insts = 1.0 }` (percent) or `{ l2_misses = "500 count" }`',
        ),
        "allow_unjudged": (
            "boolean",
            "false",
            "a kernel measured with another toolchain than its baseline's is judged "
            "against the base revision measured again with this one; when that "
            "revision cannot be measured (no git history, a shallow clone, a "
            "commit gone) it is an error (exit 3); `true`: it is reported as "
            "`toolchain` (not judged) and passes (see Toolchain)",
        ),
    }

    @classmethod
    def parse(cls, table: Table) -> Judging:
        threshold = number(table.get("threshold", DEFAULT_THRESHOLD), table.where("threshold"))
        limits = parse_limits(table.get("limits"), table.where("limits")) if "limits" in table else {}
        model = table.get("model", "auto")
        if model not in MODEL_NAMES:
            raise InputError(f"{table.where('model')}: unknown model {model!r} (one of {', '.join(MODEL_NAMES)})")
        gate = table.get("gate", "estimate")
        if gate not in GATES:
            raise InputError(
                f"{table.where('gate')}: unknown gate {gate!r} (one of {', '.join(GATES)}: the "
                f"predicted change's estimate, or its interval's lower or upper end)"
            )
        allow_unjudged = flag(table.get("allow_unjudged", False), table.where("allow_unjudged"))
        return cls(threshold, gate, limits, model, allow_unjudged)

    def threshold_for(self, own: float | None, override: float | None = None, marker: float | None = None) -> float:
        """A kernel's or model's threshold: a test's own (`@pytest.mark.perfguard(threshold=...)` or
        `perfguard_check(..., threshold=...)`), else the command line's, else the kernel's or model's,
        else the global one (`--threshold 0` is a threshold, not "unset"). The one precedence rule."""
        imposed = self.imposed(override, marker)
        if imposed is not None:
            return imposed
        return own if own is not None else self.threshold

    @staticmethod
    def imposed(override: float | None, marker: float | None = None) -> float | None:
        """The threshold a run imposes over every kernel's and model's own: a test's, else the command
        line's; None: each keeps its own."""
        return marker if marker is not None else override

    def limits_for(self, own: dict[str, Limit]) -> dict[str, Limit]:
        """The global limits with a kernel's own on top (a kernel's limit on a metric replaces the global one)."""
        return {**self.limits, **own}

    def resolve(
        self,
        own_threshold: float | None,
        own_limits: dict[str, Limit],
        override: float | None = None,
        marker: float | None = None,
        machine: str | None = None,
    ) -> Judgement:
        """How one kernel x target is judged, decided once: what its job carries, its result record is
        keyed by, and judge/ applies (check, compare, bisect and the pytest plugin alike). `machine`:
        the machine profile the target chose (`[target.NAME] machine`), whose intervals apply."""
        limits = self.limits_for(own_limits)
        return Judgement(
            self.threshold_for(own_threshold, override, marker),
            tuple(sorted(limits.items())),
            self.gate,
            self.model,
            machine,
        )


@dataclass(frozen=True)
class Judgement:
    """A kernel x target's resolved judgement (Judging.resolve): the threshold on predicted time,
    the per-metric limits, the gate, the timing model and the machine profile its interval comes
    from. judge.decide applies it."""

    threshold_pct: float
    limits: tuple[tuple[str, Limit], ...] = ()
    gate: str = "estimate"
    model: str = "auto"
    machine: str | None = None  # the machine profile whose intervals apply; None: uncalibrated

    @property
    def limits_by_metric(self) -> dict[str, Limit]:
        return dict(self.limits)

    def key(self) -> str:
        """Its bytes for a record key: a change of any part re-judges."""
        return repr(
            (self.threshold_pct, [(m, str(limit)) for m, limit in self.limits], self.gate, self.model, self.machine)
        )


def threshold_override(value: float | None, option: str = "--threshold") -> float | None:
    """A command line's threshold (check, compare, bisect, pytest's --perfguard-threshold): None or a
    finite percentage >= 0 (a NaN threshold would pass everything); else an input error naming it."""
    if value is not None and not 0 <= value < math.inf:
        raise InputError(f"{option} {value}: must be a finite number >= 0")
    return value
