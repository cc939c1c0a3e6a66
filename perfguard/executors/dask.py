"""Jobs on a Dask distributed cluster: an existing one (its scheduler's address or scheduler
file) or a local one started for the run.

A worker needs perfguard (the same code) and the target toolchains (cross compilers, qemu-user,
llvm-mca), nothing of the project: the submitting machine runs the user's code and ships each
job with its kernel lowered (pipeline.ship). Each worker is checked once, when its first jobs
are sent (`admit`): one whose perfguard, packages or tools differ from this machine's would
give other statistics, so it is refused by name and its share goes to the others. Workers keep
their own build and simulation cache; PERFGUARD_WORKER_CACHE_DIR in a worker's environment
overrides the cache folder jobs name (the submitting machine's).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perfguard.errors import InfraError, InputError
from perfguard.executors.base import Executor, J, R, default_workers, workers_text

WORKER_CACHE_ENV = "PERFGUARD_WORKER_CACHE_DIR"
_STARTED = "perfguard-job-started"  # the worker event each job logs as it starts: a second one is a re-run


def _import_distributed():
    try:
        import distributed
    except ImportError:
        raise InfraError("--executor dask needs Dask distributed (pip install 'distributed')") from None
    return distributed


def on_worker(fn: Callable[[Any], Any], job: Any, key: str = "") -> Any:
    """What a Dask worker runs: fn(job), with the worker's own cache folder if it names one; a
    result with a `worker` field says which worker it came from."""
    cache = os.environ.get(WORKER_CACHE_ENV)
    if cache and dataclasses.is_dataclass(job) and not isinstance(job, type) and hasattr(job, "cache_dir"):
        job = dataclasses.replace(job, cache_dir=Path(cache))
    name = _worker_name()
    if name and key:
        _import_distributed().get_worker().log_event(_STARTED, {"key": key, "worker": name})
    result = fn(job)
    if name and dataclasses.is_dataclass(result) and hasattr(result, "worker"):
        result.worker = name
    return result


def _worker_name() -> str | None:
    """The worker's address (the client names it: DaskExecutor.worker_name)."""
    try:
        return _import_distributed().get_worker().address
    except ValueError:  # not inside a worker (a test calling on_worker directly)
        return None


def identify(check: Callable[[Any], dict[str, str]], arg: Any) -> dict[str, str]:
    """What a worker answers when admitted (and this machine, to compare): check(arg), without the
    thread-count variables a Dask nanny sets in every worker it starts (OMP_NUM_THREADS=1, ...):
    Dask's doing, the same on every worker, and no simulated statistic depends on them."""
    import dask.config  # what the nanny sets is Dask's configuration

    nanny = {str(k) for k in (dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})}
    nanny |= {str(k) for k in (dask.config.get("distributed.nanny.environ", {}) or {})}
    answer = dict(check(arg))
    for key, value in answer.items():
        if key == "tool variables":
            answer[key] = ";".join(v for v in value.split(";") if v and v.partition("=")[0] not in nanny)
    return answer


class DaskExecutor(Executor):
    """`scheduler`: "tcp://host:8786", a scheduler JSON file, or None for the address in Dask's
    configuration (DASK_SCHEDULER_ADDRESS) or, failing that, a LocalCluster of `workers`
    single-threaded worker processes on this machine."""

    name = "dask"
    ships_work = True

    def __init__(
        self,
        scheduler: str | None = None,
        workers: int | None = None,
        timeout: float = 30.0,
        join_timeout: float = 60.0,
    ):
        distributed = _import_distributed()
        import dask.config

        self._cluster = None
        self.join_timeout = join_timeout
        self._admitted: dict[str, str] = {}  # worker address -> its name
        self._names: dict[str, str] = {}  # worker address -> what messages call it (worker_name)
        self._refused: dict[str, str] = {}  # worker address -> why
        self._checked: set[tuple] = set()  # the requirements workers were checked against
        self.reruns: list[str] = []  # what a lost worker's jobs cost: one line per job run again
        self.usage: dict[str, dict[str, float]] = {}  # worker name -> {"jobs", "cpu_s"} (results with cpu_seconds)
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
                    n_workers=workers or default_workers(),
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=":0",
                    silence_logs=40,
                )
                self.client = distributed.Client(self._cluster, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            self._close_cluster()
            where = address or "a local cluster"
            raise InfraError(f"cannot reach the Dask scheduler at {where}: {exc}".splitlines()[0]) from None
        self.address = self.client.scheduler.address
        self._wait_for_a_worker("no Dask worker has joined")

    def _wait_for_a_worker(self, what: str) -> None:
        if self.client.nthreads():
            return
        _say(f"waiting up to {self.join_timeout:.0f} s for a Dask worker to join the scheduler at {self.address}")
        try:
            self.client.wait_for_workers(1, timeout=self.join_timeout)
        except TimeoutError:
            self.close()
            raise InfraError(
                f"{what} the scheduler at {self.address} in {self.join_timeout:.0f} s: start one "
                f"(`dask worker {self.address} --nthreads 1`) or run with --executor local"
            ) from None

    @property
    def workers(self) -> int:
        """Threads across the cluster's admitted workers (all of them before `admit`; at least 1)."""
        threads = self.client.nthreads()
        if self._checked:
            threads = {a: n for a, n in threads.items() if a in self._admitted}
        return max(1, sum(threads.values()))

    def describe(self) -> str:
        kind = "local cluster" if self._cluster is not None else "cluster"
        refused = f", {len(self._refused)} refused" if self._refused else ""
        return f"dask {kind} {self.address} ({workers_text(self.workers)}{refused})"

    def admit(self, check: Callable[[Any], dict[str, str]], arg: Any) -> None:
        """Run check(arg) here and on every worker; a worker whose answer differs is refused, named
        with what differs, and gets no job. InfraError when no worker is left."""
        requirement = (check.__module__, check.__qualname__, repr(arg))
        if requirement in self._checked:
            return
        mine = identify(check, arg)
        answers = self.client.run(identify, check, arg, on_error="return")
        names = self._learn_names()
        for address, theirs in sorted(answers.items()):
            name = names.get(address, address)
            if isinstance(theirs, BaseException):
                why = f"its check failed: {type(theirs).__name__}: {theirs}".splitlines()[0]
            else:
                differ = [k for k in mine if theirs.get(k) != mine[k]]
                why = "; ".join(f"{k} {_short(theirs.get(k))} (here {_short(mine[k])})" for k in differ[:3])
                if len(differ) > 3:
                    why += f"; and {len(differ) - 3} more"
            if why and address not in self._refused:
                self._refused[address] = why
                self._admitted.pop(address, None)
                _say(f"Dask worker {name} refused, its jobs go to the others: {why}")
            elif not why and address not in self._refused:
                self._admitted[address] = name
        self._checked.add(requirement)
        if not self._admitted:
            refused = "; ".join(f"{names.get(a, a)}: {w}" for a, w in sorted(self._refused.items()))
            raise InfraError(f"no Dask worker at {self.address} can run these jobs as this machine would: {refused}")

    def _learn_names(self) -> dict[str, str]:
        """Each present worker's name (`dask worker --name`; a LocalCluster's are numbers, so its
        address), remembered: a worker that left is still named in what is said of its jobs."""
        for address, info in self.client.scheduler_info(n_workers=-1)["workers"].items():
            name = info.get("name")
            self._names[address] = name if isinstance(name, str) and name not in ("", address) else address
        return dict(self._names)

    def worker_name(self, address: str) -> str:
        if address not in self._names:
            self._learn_names()
        return self._names.get(address, address)

    def submit(self, fn: Callable[[J], R], job: J):
        key = f"perfguard-{getattr(fn, '__name__', 'job')}-{uuid.uuid4().hex}"
        where = sorted(self._admitted) if self._checked else None
        return self.client.submit(
            on_worker, fn, job, key, key=key, pure=False, workers=where, allow_other_workers=False
        )

    def map(
        self, fn: Callable[[J], R], jobs: Sequence[J], on_result: Callable[[int, R], None] | None = None
    ) -> list[R]:
        futures = [self.submit(fn, job) for job in jobs]
        self._learn_names()
        index = {future.key: i for i, future in enumerate(futures)}
        results: list[R | None] = [None] * len(jobs)
        pending = list(futures)
        alone_since: float | None = None
        checked_at = time.monotonic()
        try:
            while pending:
                done = [f for f in pending if f.done()]
                if not done:
                    if time.monotonic() - checked_at >= 1.0:  # asking the scheduler costs: once a second
                        alone_since, checked_at = self._check_workers_left(alone_since), time.monotonic()
                    time.sleep(0.05)
                    continue
                finished = {f.key for f in done}
                pending = [f for f in pending if f.key not in finished]
                for future in done:
                    i = index[future.key]
                    try:
                        results[i] = result = future.result()
                    except Exception as exc:  # the worker process died on it more than Dask allows
                        raise InfraError(
                            f"Dask gave up on job {i + 1} of {len(jobs)}: {type(exc).__name__}: {exc}".splitlines()[0]
                        ) from None
                    self._count(result)
                    if on_result:
                        on_result(i, result)
        except BaseException:
            self.client.cancel(futures)
            raise
        finally:
            self._note_reruns({future.key for future in futures}, len(jobs), index)
        return results  # type: ignore[return-value]

    def _check_workers_left(self, alone_since: float | None) -> float | None:
        """None while an admitted worker is there; raises when none came back in join_timeout."""
        present = set(self.client.nthreads())
        if present & (set(self._admitted) if self._checked else present):
            return None
        now = time.monotonic()
        if alone_since is None:
            _say(
                f"every Dask worker left the scheduler at {self.address}: waiting up to "
                f"{self.join_timeout:.0f} s for one to come back"
            )
            return now
        if now - alone_since > self.join_timeout:
            raise InfraError(
                f"every Dask worker left the scheduler at {self.address} and none came back in "
                f"{self.join_timeout:.0f} s"
            )
        return alone_since

    def _count(self, result: Any) -> None:
        worker = getattr(result, "worker", None)
        if worker:
            worker = result.worker = self.worker_name(worker)
            used = self.usage.setdefault(worker, {"jobs": 0, "cpu_s": 0.0})
            used["jobs"] += 1
            used["cpu_s"] += float(getattr(result, "cpu_seconds", 0.0) or 0.0)

    def _note_reruns(self, keys: set[str], total: int, index: dict[str, int]) -> None:
        """Dask runs a lost worker's job again elsewhere: say so (a job started twice)."""
        try:
            events = self.client.get_events(_STARTED)
        except Exception:  # noqa: BLE001 - the scheduler is gone: nothing to tell
            return
        starts: dict[str, list[str]] = {}
        for _, event in events:
            if isinstance(event, dict) and event.get("key") in keys:
                starts.setdefault(event["key"], []).append(self.worker_name(str(event.get("worker"))))
        for key, workers in sorted(starts.items(), key=lambda kv: index[kv[0]]):
            if len(workers) > 1:
                line = (
                    f"job {index[key] + 1} of {total} ran {len(workers)} times: started on "
                    f"{', then '.join(workers)} (a worker left while running it)"
                )
                self.reruns.append(line)
                _say(line)

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


def _say(line: str) -> None:
    """What a user must know of the cluster (a refused worker, a job run twice), on stderr at once."""
    sys.stderr.write(f"perfguard: {line}\n")
    sys.stderr.flush()


def _short(value: str | None) -> str:
    if value is None:
        return "missing"
    if value == "":
        return "none"
    return value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value
