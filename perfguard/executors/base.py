"""The one interface every executor of simulation jobs implements.

A job is any picklable object and `fn` a module-level function (importable where the job
runs), so the same `run_job(Job)` goes to a local process pool or to a Dask cluster.
Executors never reorder results: `map` returns them in submission order whatever order they
finished in, so a report, a dataset or a tuning log does not depend on which executor ran
it or how the work was scheduled.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")


class Handle(Protocol):
    """What `submit` returns: concurrent.futures.Future and distributed.Future both fit."""

    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> Any: ...


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


JOBS_PER_WORKER = 4  # a worker imports TVM (one to three CPU-seconds): worth it for a few jobs, not for one


def pool_size(asked: int | None, todo: int) -> int:
    """Workers for `todo` jobs: what -j or the config's `jobs` asks (never more than the jobs), else
    one per JOBS_PER_WORKER jobs up to the CPU count (one: the jobs run in this process, no pool)."""
    if asked:
        return max(1, min(asked, todo))
    return max(1, min(default_workers(), -(-todo // JOBS_PER_WORKER)))


def workers_text(n: int) -> str:
    return f"{n} worker" + ("" if n == 1 else "s")


class Executor(abc.ABC):
    """Runs independent jobs; use as a context manager so that workers are started once."""

    name: str = ""
    # whether a job may run where the project is not (another machine): pipeline.run_jobs then
    # resolves the user's code here and ships the result (pipeline.ship)
    ships_work: bool = False
    reruns: list[str] = []  # jobs run again because a worker was lost (one line each)
    usage: dict[str, dict[str, float]] = {}  # per remote worker: {"jobs", "cpu_s"} of the jobs it ran

    @property
    @abc.abstractmethod
    def workers(self) -> int:
        """How many jobs run at once (a tuner sizes its batches on this)."""

    @abc.abstractmethod
    def submit(self, fn: Callable[[J], R], job: J) -> Handle:
        """Start one job; the handle's result() is fn(job)."""

    @abc.abstractmethod
    def map(
        self, fn: Callable[[J], R], jobs: Sequence[J], on_result: Callable[[int, R], None] | None = None
    ) -> list[R]:
        """fn over every job; on_result(i, result) as each finishes; results in job order."""

    def admit(self, check: Callable[[Any], dict[str, str]], arg: Any) -> None:  # noqa: B027 (optional hook)
        """Refuse the workers on which check(arg) answers other than here (they would give other
        statistics); nothing to do where every worker is this machine."""

    def describe(self) -> str:
        """One line for logs and reports: what ran the jobs."""
        return f"{self.name} ({workers_text(self.workers)})"

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release workers; the executor may not be used afterwards."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
