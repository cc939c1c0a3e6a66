"""Runs independent jobs: in this process (-j 1) or in a local process pool.

Workers are spawned, not forked: TVM starts threads at import, and forking a process with
threads can deadlock the child. Results come back in completion order through `on_result`
and are returned in submission order, so output never depends on scheduling.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

J = TypeVar("J")
R = TypeVar("R")


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = workers or default_workers()

    def map(self, fn: Callable[[J], R], jobs: Sequence[J], on_result: Callable[[int, R], None] | None = None) -> list[R]:
        results: list[R | None] = [None] * len(jobs)
        if self.workers == 1 or len(jobs) <= 1:
            for i, job in enumerate(jobs):
                results[i] = fn(job)
                if on_result:
                    on_result(i, results[i])
            return results  # type: ignore[return-value]
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)), mp_context=context) as pool:
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
        return results  # type: ignore[return-value]
