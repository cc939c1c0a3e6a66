"""Executors of simulation jobs: a local process pool (default) or Dask distributed.

Every command that runs jobs (check, baseline update, compare, bisect, calibrate collect and
resimulate, tune) takes the options `add_executor_options` defines: `--executor local|dask`;
with dask, `--scheduler ADDRESS` connects to an existing cluster (default: DASK_SCHEDULER_ADDRESS,
else a local cluster is started) and `--join-timeout` bounds the wait for a worker. Results come
back in submission order, so they are the same whichever ran them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from perfguard.errors import InputError
from perfguard.executors.base import Executor, default_workers, pool_size
from perfguard.executors.local import LocalExecutor
from perfguard.registry import Registry

EXECUTORS = Registry(
    "executor",
    {  # dask imported only when asked for
        "local": "perfguard.executors.local:LocalExecutor",
        "dask": "perfguard.executors.dask:DaskExecutor",
    },
)

EXECUTOR_NAMES = EXECUTORS.names

__all__ = [
    "EXECUTORS",
    "EXECUTOR_NAMES",
    "Executor",
    "ExecutorChoice",
    "LocalExecutor",
    "add_executor_options",
    "default_workers",
    "executor_choice",
    "executor_from_args",
    "make_executor",
    "pool_size",
]


JOIN_TIMEOUT = 60.0  # seconds a Dask run waits for a worker to join (or to come back)


@dataclass(frozen=True)
class ExecutorChoice:
    """What the executor options asked for, plain enough to pass to another process (compare's
    and bisect's measuring process makes its executor from it)."""

    name: str = "local"
    scheduler: str | None = None
    join_timeout: float = JOIN_TIMEOUT

    def make(self, workers: int | None = None) -> Executor:
        return make_executor(self.name, workers, self.scheduler, self.join_timeout)


def make_executor(
    name: str = "local", workers: int | None = None, scheduler: str | None = None, join_timeout: float = JOIN_TIMEOUT
) -> Executor:
    if workers is not None and workers < 1:
        raise InputError(f"workers = {workers}: must be at least 1")
    if join_timeout <= 0:
        raise InputError(f"--join-timeout {join_timeout:g}: must be more than 0 seconds")
    cls = EXECUTORS.load(name)
    if name == "local":
        if scheduler:
            raise InputError("--scheduler needs --executor dask")
        return cls(workers)
    return cls(scheduler, workers, join_timeout=join_timeout)


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that runs jobs: one definition, so they read the same everywhere."""
    parser.add_argument(
        "--executor",
        choices=EXECUTOR_NAMES,
        default="local",
        help="where jobs run: a local process pool (default) or Dask distributed",
    )
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address (tcp://host:8786) or scheduler JSON file; default: "
        "DASK_SCHEDULER_ADDRESS, else a local cluster started for the run",
    )
    parser.add_argument(
        "--join-timeout",
        type=float,
        default=JOIN_TIMEOUT,
        metavar="SECONDS",
        help=f"with --executor dask: how long to wait for a worker to join (or to come back "
        f"when all left) before failing (default {JOIN_TIMEOUT:g})",
    )


def executor_choice(args: argparse.Namespace) -> ExecutorChoice:
    """What the executor options of `args` ask for (local for a command without them)."""
    return ExecutorChoice(
        getattr(args, "executor", "local") or "local",
        getattr(args, "scheduler", None),
        getattr(args, "join_timeout", JOIN_TIMEOUT),
    )


def executor_from_args(args: argparse.Namespace, workers: int | None = None) -> Executor:
    """The executor the executor options (and a worker count) ask for."""
    return executor_choice(args).make(workers)
