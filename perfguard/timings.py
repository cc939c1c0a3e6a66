"""Wall and CPU time of a check's stages and of each job, always measured.

CPU time is this process's (all its threads) plus that of its children that have ended (a
compiler, a simulator, llvm-mca, the pool's workers once the pool is shut down), so a stage
that waits on a child process is charged the child's work. On a shared machine CPU seconds
are the figure to compare: wall time grows with the machine's load, CPU time hardly does.

Stages of a check, in the order the table lists them (STAGES). "jobs" is the whole job phase
as the check saw it; the stages of a job run in a worker (or inline with -j 1) and are summed
over the jobs; "workers" is what the job phase cost beyond its jobs (starting processes,
imports, passing jobs and results).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# (name, what it covers) in table order
STAGES: tuple[tuple[str, str], ...] = (
    ("startup", "Python and perfguard's imports"),
    ("config", "perfguard.toml, kernel selection, [[model]] extraction"),
    ("reuse", "looking up earlier checks' records, re-hashing their files"),
    ("jobs", "the job phase as a whole (jobs run side by side)"),
    ("lower", "kernel entries called, TVM modules printed (summed over jobs)"),
    ("compile", "TVM's LLVM back end, harness, cross linker (summed)"),
    ("simulate", "the simulator (summed)"),
    ("verify", "output checks against the references (summed)"),
    ("timing_model", "llvm-mca on newly simulated blocks (summed)"),
    ("workers", "the pool beyond its jobs: worker start-up, TVM's import"),
    ("judge", "verdicts: timing model, limits, attribution, model totals"),
    ("explain", "the report's analysis, baseline history, calibration"),
    ("render", "perfguard.json, HTML pages, summary.md"),
)
JOB_STAGES = ("lower", "compile", "simulate", "verify", "timing_model")
STAGE_NAMES = tuple(name for name, _ in STAGES)


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children that have ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def process_age() -> float | None:
    """Wall seconds since this process started (Linux), or None where that is not known."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of stat(5), counted after the command's ")"
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Span:
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def add(self, other: Span) -> None:
        self.wall_s += other.wall_s
        self.cpu_s += other.cpu_s


@contextmanager
def measured(into: dict[str, Span], name: str) -> Iterator[None]:
    """Add the block's wall and CPU time to `into[name]` (even when it raises)."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    try:
        yield
    finally:
        into.setdefault(name, Span()).add(Span(time.perf_counter() - wall, cpu_seconds() - cpu))


@dataclass
class StageClock:
    """The stages of one check, measured from its start."""

    stages: dict[str, Span] = field(default_factory=dict)
    started_wall: float = field(default_factory=time.perf_counter)
    started_cpu: float = field(default_factory=cpu_seconds)

    def __post_init__(self) -> None:
        age = process_age() if launched_as_command() else None
        if age is not None:  # the imports before the check: what a user waits for too
            self.stages["startup"] = Span(age, self.started_cpu)

    def stage(self, name: str):
        return measured(self.stages, name)

    def total(self) -> Span:
        """Since the process started where that is known (start-up included), else since the clock did."""
        startup = self.stages.get("startup", Span())
        return Span(
            startup.wall_s + time.perf_counter() - self.started_wall, startup.cpu_s + cpu_seconds() - self.started_cpu
        )


def launched_as_command() -> bool:
    """Whether this process is the `perfguard` command (its start-up is then the command's), not
    a process that calls perfguard.shells.cli.main among other work (a test session, a notebook)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return Path(sys.argv[0] if sys.argv else "").name == "perfguard" or (
        spec is not None and spec.name == "perfguard.shells.cli"
    )
