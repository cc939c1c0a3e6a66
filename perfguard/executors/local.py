"""Jobs in this process (one worker) or in a pool of spawned local processes.

Workers are spawned, not forked: TVM starts threads at import, and forking a process with
threads can deadlock the child. Inside a `with` block the pool is started once and reused
by every `map` and `submit` (a tuner sends many small batches); outside one, each `map`
starts and stops its own pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

from perfguard.executors.base import Executor, J, R, default_workers
from perfguard.process import WAIT_SLICE
from perfguard.signals import die_with_parent, log

# Interrupted: how long running jobs get to return by themselves before their workers are sent
# SIGTERM, and how long the workers then get in all before they are killed.
SIGNAL_GRACE = 0.25
STOP_GRACE = 0.6


def _alive(pid: int) -> bool:
    """True while `pid` runs (a dead child not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, workers: int | None = None):
        self._workers = workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None
        self._entered = False

    @property
    def workers(self) -> int:
        return self._workers

    def _start(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=die_with_parent,
                initargs=(os.getpid(),),
            )
        return self._pool

    def __enter__(self) -> LocalExecutor:
        self._entered = True
        return self

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._entered = False

    def _stop_workers(self, running: list[Future]) -> None:
        """Interrupted: stop the running jobs now rather than wait for them to end. Workers that got
        the signal too (Ctrl-C in a terminal reaches the whole group) kill their simulators and
        return at once; those still running after a short grace are told to (SIGTERM: see
        signals.interruptible), and those still alive after STOP_GRACE are killed, their
        simulators with them (signals.die_with_parent)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        workers = list(getattr(pool, "_processes", None) or {})  # pids: the pool keeps no public list
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            _, still = wait(running, timeout=SIGNAL_GRACE)
            if still:
                log(
                    f"{len(still)} job(s) still running {SIGNAL_GRACE:g} s after the interruption: SIGTERM to the workers"
                )
                for pid in workers:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
                time.sleep(0.02)
        except KeyboardInterrupt:  # interrupted again: no more grace
            pass
        finally:
            for pid in workers:
                if _alive(pid):
                    log(f"worker {pid} still running after the interruption: killed")
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)

    def submit(self, fn: Callable[[J], R], job: J) -> Future:
        if self._workers == 1:  # inline: the result is ready when submit returns
            future: Future = Future()
            try:
                future.set_result(fn(job))
            except BaseException as exc:  # the caller sees it from result(), as with a pool
                future.set_exception(exc)
            return future
        return self._start().submit(fn, job)

    def map(
        self, fn: Callable[[J], R], jobs: Sequence[J], on_result: Callable[[int, R], None] | None = None
    ) -> list[R]:
        results: list[R | None] = [None] * len(jobs)
        if self._workers == 1 or len(jobs) <= 1:
            for i, job in enumerate(jobs):
                results[i] = result = fn(job)
                if on_result:
                    on_result(i, result)
            return results  # type: ignore[return-value]
        transient = not self._entered and self._pool is None
        if transient:  # size a one-off pool to the work, as the old executor did
            saved, self._workers = self._workers, min(self._workers, len(jobs))
        pool = self._start()
        pending = {pool.submit(fn, job): i for i, job in enumerate(jobs)}
        try:
            while pending:
                # short slices: see process.WAIT_SLICE
                done, _ = wait(pending, timeout=WAIT_SLICE, return_when=FIRST_COMPLETED)
                for future in done:
                    i = pending.pop(future)
                    results[i] = result = future.result()
                    if on_result:
                        on_result(i, result)
        except BaseException as exc:
            for future in pending:
                future.cancel()
            if isinstance(exc, KeyboardInterrupt):
                self._stop_workers([f for f in pending if not f.cancelled()])
            raise
        finally:
            if transient:
                self.close()
                self._workers = saved
        return results  # type: ignore[return-value]
