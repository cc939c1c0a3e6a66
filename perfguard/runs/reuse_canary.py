"""The reuse canary: reused job results run again from scratch and compared with their records.

A job record is reused when its key and its recorded inputs match (perfguard.job.record). If the
key missed an input (a file read some way the recording cannot see, a tool changed behind the
same bytes), the record would give a stale answer with nothing to show for it. `perfguard check
--verify-reuse[=N]` therefore takes N of the results it would reuse (all by default), runs their
jobs again ignoring every cache (build, simulation, output check, llvm-mca), and compares what
decides a verdict: the build, the statistics, the output check, the flop count, the loop nest.
A difference fails the check (exit 3), naming the job, what differs and, where the two runs'
recorded inputs differ, the input; the fresh answer is what the check judges and records.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from dataclasses import dataclass

from perfguard.job.run import JobResult

# What a reused result must give exactly as a fresh run does.
COMPARED = (
    "ok",
    "content_hash",
    "binary_hash",
    "stats",
    "max_error",
    "reference",
    "flops",
    "tensor_bytes",
    "loops",
    "params",
    "toolchain",
)


@dataclass(frozen=True)
class Mismatch:
    label: str  # kernel[target]
    fields: tuple[str, ...]  # of COMPARED
    inputs: tuple[str, ...]  # inputs whose digests differ between the record and the fresh run

    def message(self) -> str:
        where = (
            f"inputs that differ: {', '.join(self.inputs)}"
            if self.inputs
            else "every recorded input is as it was: the record's key misses an input of this job"
        )
        return (
            f"{self.label}: the reused result differs from a fresh run in {', '.join(self.fields)} ({where}); "
            f"the fresh result is judged and recorded"
        )


def pick(reused: list[tuple[int, str]], count: int, day: datetime.date | None = None) -> list[int]:
    """Which of the reused jobs ([(index, label)]) to run again: all when count is 0, else
    `count` of them, chosen by a digest of the label and the day (a scheduled canary covers
    every job over the days, and one day's runs choose the same)."""
    if count <= 0 or count >= len(reused):
        return [i for i, _ in reused]
    stamp = (day or datetime.datetime.now(datetime.UTC).date()).isoformat()
    order = sorted(reused, key=lambda item: hashlib.sha256(f"{stamp}\0{item[1]}".encode()).hexdigest())
    return sorted(i for i, _ in order[:count])


def _comparable(result: JobResult, name: str) -> str:
    value = getattr(result, name)
    if name == "stats" and value is not None:
        value = value.to_record()
    return json.dumps(value, sort_keys=True, default=str)


def _inputs(depends: list[list[str]] | None) -> dict[str, str]:
    out = {}
    for item in depends or []:
        if len(item) == 3:
            out[f"{item[0]} {item[1]}".strip()] = item[2]
        elif len(item) == 2:
            out[f"file {item[0]}"] = item[1]
    return out


def compare(recorded: JobResult, fresh: JobResult) -> Mismatch | None:
    """What differs between a reused result and a fresh run of its job (None: nothing)."""
    if not fresh.ok:  # the fresh run failed (a timeout, a tool missing): that is its own error, reported as such
        return None
    fields = tuple(name for name in COMPARED if _comparable(recorded, name) != _comparable(fresh, name))
    if not fields:
        return None
    before, after = _inputs(recorded.depends), _inputs(fresh.depends)
    inputs = tuple(sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name)))
    return Mismatch(f"{fresh.kernel}[{fresh.target}]", fields, inputs)
