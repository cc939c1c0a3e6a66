"""Jobs in this process (one worker) or in a pool of spawned local processes.

Workers are spawned, not forked: TVM starts threads at import, and forking a process with
threads can deadlock the child. Inside a `with` block the pool is started once and reused
by every `map` and `submit` (a tuner sends many small batches); outside one, each `map`
starts and stops its own pool.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Callable, Sequence

from perfguard.executors.base import Executor, J, R, default_workers
from perfguard.signals import die_with_parent


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
            self._pool = ProcessPoolExecutor(max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=die_with_parent, initargs=(os.getpid(),))
        return self._pool

    def __enter__(self) -> "LocalExecutor":
        self._entered = True
        return self

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._entered = False

    def submit(self, fn: Callable[[J], R], job: J) -> Future:
        if self._workers == 1:  # inline: the result is ready when submit returns
            future: Future = Future()
            try:
                future.set_result(fn(job))
            except BaseException as exc:  # the caller sees it from result(), as with a pool
                future.set_exception(exc)
            return future
        return self._start().submit(fn, job)

    def map(self, fn: Callable[[J], R], jobs: Sequence[J],
            on_result: Callable[[int, R], None] | None = None) -> list[R]:
        results: list[R | None] = [None] * len(jobs)
        if self._workers == 1 or len(jobs) <= 1:
            for i, job in enumerate(jobs):
                results[i] = fn(job)
                if on_result:
                    on_result(i, results[i])
            return results  # type: ignore[return-value]
        transient = not self._entered and self._pool is None
        if transient:  # size a one-off pool to the work, as the old executor did
            saved, self._workers = self._workers, min(self._workers, len(jobs))
        pool = self._start()
        pending = {pool.submit(fn, job): i for i, job in enumerate(jobs)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    i = pending.pop(future)
                    results[i] = future.result()
                    if on_result:
                        on_result(i, results[i])
        except BaseException:
            for future in pending:
                future.cancel()
            raise
        finally:
            if transient:
                self.close()
                self._workers = saved
        return results  # type: ignore[return-value]
