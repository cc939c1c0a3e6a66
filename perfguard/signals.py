"""SIGTERM stops perfguard the way Ctrl-C does.

CI cancels a job with SIGINT, then SIGTERM; a process pool that breaks terminates its other
workers with SIGTERM. Python's default SIGTERM action ends the process at once, without
unwinding, and leaves a simulator it started (in its own process group) running, orphaned,
for up to the simulation timeout. Raising KeyboardInterrupt instead runs the clean-up on the
way out: the simulator's group is killed, temp files removed, a partial report written.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block (main thread only: elsewhere signals cannot be handled), SIGTERM raises
    KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
