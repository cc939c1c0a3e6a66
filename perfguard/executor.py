"""Moved to perfguard.executors (local pool and Dask behind one interface); kept for importers."""

from perfguard.executors.base import default_workers
from perfguard.executors.local import LocalExecutor

__all__ = ["LocalExecutor", "default_workers"]
