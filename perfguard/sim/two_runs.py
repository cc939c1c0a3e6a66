"""Kernel-only counts from two runs of the harness, for back ends that cannot start and stop
counting at the region of interest (gem5, cachegrind).

The harness runs as `harness R WARMUP` and as `harness 0 WARMUP`; the same WARMUP, so both
runs do the same start-up, set-up, warm-up and output writing, and every count of the first
minus the second is what R kernel calls (and R trips of the harness loop) add. Both runs share
one timeout. Cache misses caused by the code after the region may differ by a few between the
runs: a count that shrinks by at most max(64, 0.5 % of the shorter run's count) becomes 0; one
that shrinks more, or an exact count (instructions) that shrinks at all, means the two runs did
not execute the same program.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from perfguard.errors import InputError

ROI_METHOD = "difference of REPS=R and REPS=0 runs"  # in the back ends' fingerprints


def reps_warmup(args: Sequence[object], simulator: str, *, more: bool = False) -> tuple[int, int, list[str]]:
    """(REPS, WARMUP, the arguments after them) from the harness arguments `REPS WARMUP`, REPS >= 1;
    `more`: further arguments are passed on, else there must be none."""
    head = [str(a) for a in args[:2]]
    if (len(args) == 2 or (more and len(args) > 2)) and all(a.isascii() and a.isdigit() and len(a) < 19 for a in head):
        reps, warmup = int(head[0]), int(head[1])
        if reps >= 1:
            return reps, warmup, [str(a) for a in args[2:]]
    raise InputError(f"{simulator}: the harness arguments must be 'REPS WARMUP' with REPS >= 1, got {list(args)!r}")


@dataclass(frozen=True)
class TwoRuns:
    """The two runs of one measurement: their arguments and the time they share."""

    reps: int
    warmup: int
    rest: tuple[str, ...]
    timeout: float
    deadline: float  # time.monotonic() by which both runs must have ended

    @classmethod
    def start(cls, args: Sequence[object], timeout: float, simulator: str, *, more: bool = False) -> TwoRuns:
        reps, warmup, rest = reps_warmup(args, simulator, more=more)
        return cls(reps, warmup, tuple(rest), timeout, time.monotonic() + timeout)

    def argv(self, reps: int) -> list[str]:
        """The harness arguments of one run; REPS with as many digits as the measured run's (REPS=0 as
        "000" against REPS=100), so that parsing it costs both runs the same instructions."""
        return [str(reps).zfill(len(str(self.reps))), str(self.warmup), *self.rest]

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    @property
    def timeout_note(self) -> str:
        return f"both runs together have {self.timeout:g} s"


def kernel_counts(
    longer: Mapping[str, int | None],
    shorter: Mapping[str, int | None],
    names: Sequence[str],
    exact: Collection[str],
    refuse: Callable[[str, int, int], Exception],
) -> dict[str, int | None]:
    """longer - shorter for each of `names` (None where either is None). A count in `exact`
    may not shrink at all, another by at most max(64, 0.5 %) of the shorter run's (it becomes
    0); otherwise `refuse(name, longer value, shorter value)` is raised."""
    kernel: dict[str, int | None] = {}
    for name in names:
        a, b = longer[name], shorter[name]
        if a is None or b is None:
            kernel[name] = None
            continue
        delta = a - b
        if delta < 0:
            if name in exact or -delta > max(64, b // 200):
                raise refuse(name, a, b)
            delta = 0
        kernel[name] = delta
    return kernel
