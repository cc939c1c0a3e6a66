"""Jobs on a Dask distributed cluster: an existing one (its scheduler's address or scheduler
file) or a local one started for the run.

Every worker needs what a local worker has: perfguard installed (same version), the target
toolchains (cross compilers, qemu-user; `perfguard doctor` on the worker says what is
missing), and, for user kernels, their modules at the same path as on the submitting
machine. Workers keep their own build and simulation cache; PERFGUARD_WORKER_CACHE_DIR in a
worker's environment overrides the cache folder jobs name (the submitting machine's). The
same binary gives the same statistics anywhere, so results do not depend on where a job ran,
provided the workers' cross compilers are the same versions (each result records them).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

from perfguard.errors import InfraError, InputError
from perfguard.executors.base import Executor, J, R, default_workers, workers_text

WORKER_CACHE_ENV = "PERFGUARD_WORKER_CACHE_DIR"


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise InfraError("--executor dask needs Dask distributed (pip install 'distributed')") from None
    return distributed


def on_worker(fn: Callable[[Any], Any], job: Any) -> Any:
    """What a Dask worker runs: fn(job), with the worker's own cache folder if it names one."""
    cache = os.environ.get(WORKER_CACHE_ENV)
    if cache and dataclasses.is_dataclass(job) and hasattr(job, "cache_dir"):
        job = dataclasses.replace(job, cache_dir=Path(cache))
    return fn(job)


class DaskExecutor(Executor):
    """`scheduler`: "tcp://host:8786", a scheduler JSON file, or None for the address in Dask's
    configuration (DASK_SCHEDULER_ADDRESS) or, failing that, a LocalCluster of `workers`
    single-threaded worker processes on this machine."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int | None = None, timeout: float = 30.0):
        distributed = _import_distributed()
        import dask.config

        self._cluster = None
        address = scheduler or dask.config.get("scheduler-address", None)
        try:
            if address and Path(address).suffix == ".json":
                if not Path(address).is_file():
                    raise InputError(f"--scheduler {address}: scheduler file not found")
                self.client = distributed.Client(scheduler_file=address, timeout=timeout, set_as_default=False)
            elif address:
                self.client = distributed.Client(address, timeout=timeout, set_as_default=False)
            else:
                self._cluster = distributed.LocalCluster(
                    n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
                    host="127.0.0.1", dashboard_address=":0", silence_logs=40)
                self.client = distributed.Client(self._cluster, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            self._close_cluster()
            where = address or "a local cluster"
            raise InfraError(f"cannot reach the Dask scheduler at {where}: {exc}".splitlines()[0]) from None
        self.address = self.client.scheduler.address

    @property
    def workers(self) -> int:
        """Threads across the cluster's workers now (at least 1: jobs queue until one joins)."""
        return max(1, sum(self.client.nthreads().values()))

    def describe(self) -> str:
        kind = "local cluster" if self._cluster is not None else "cluster"
        return f"dask {kind} {self.address} ({workers_text(self.workers)})"

    def submit(self, fn: Callable[[J], R], job: J):
        key = f"perfguard-{getattr(fn, '__name__', 'job')}-{uuid.uuid4().hex}"
        return self.client.submit(on_worker, fn, job, key=key, pure=False)

    def map(self, fn: Callable[[J], R], jobs: Sequence[J],
            on_result: Callable[[int, R], None] | None = None) -> list[R]:
        distributed = _import_distributed()
        futures = [self.submit(fn, job) for job in jobs]
        index = {future.key: i for i, future in enumerate(futures)}
        results: list[R | None] = [None] * len(jobs)
        try:
            for future in distributed.as_completed(futures, loop=self.client.loop):
                i = index[future.key]
                results[i] = future.result()
                if on_result:
                    on_result(i, results[i])
        except BaseException:
            self.client.cancel(futures)
            raise
        return results  # type: ignore[return-value]

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
            self.client = None
        self._close_cluster()
