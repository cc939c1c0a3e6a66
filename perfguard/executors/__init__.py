"""Executors of simulation jobs: a local process pool (default) or Dask distributed.

`perfguard check`, `calibrate collect` and `tune` take `--executor local|dask`; with dask,
`--scheduler ADDRESS` connects to an existing cluster, and without it a local cluster is
started. Results come back in submission order, so they are the same whichever ran them.
"""

from __future__ import annotations

import argparse

from perfguard.errors import InputError
from perfguard.executors.base import Executor, default_workers, pool_size
from perfguard.executors.local import LocalExecutor
from perfguard.registry import Registry

EXECUTORS = Registry("executor", {  # dask imported only when asked for
    "local": "perfguard.executors.local:LocalExecutor",
    "dask": "perfguard.executors.dask:DaskExecutor",
})

EXECUTOR_NAMES = EXECUTORS.names

__all__ = ["EXECUTORS", "EXECUTOR_NAMES", "Executor", "LocalExecutor", "add_executor_options", "default_workers",
           "executor_from_args", "make_executor", "pool_size"]


def make_executor(name: str = "local", workers: int | None = None, scheduler: str | None = None) -> Executor:
    if workers is not None and workers < 1:
        raise InputError(f"workers = {workers}: must be at least 1")
    cls = EXECUTORS.load(name)
    if name == "local":
        if scheduler:
            raise InputError("--scheduler needs --executor dask")
        return cls(workers)
    return cls(scheduler, workers)


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", choices=EXECUTOR_NAMES, default="local",
                        help="where simulation jobs run: local process pool (default) or Dask distributed")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="Dask scheduler address (tcp://host:8786) or scheduler file; default: "
                             "DASK_SCHEDULER_ADDRESS, else a local cluster")


def executor_from_args(args: argparse.Namespace, workers: int | None = None) -> Executor:
    """The executor the --executor/--scheduler options (and a worker count) ask for."""
    return make_executor(getattr(args, "executor", "local") or "local", workers, getattr(args, "scheduler", None))
