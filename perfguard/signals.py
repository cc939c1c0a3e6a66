"""SIGTERM stops perfguard the way Ctrl-C does.

CI cancels a job with SIGINT, then SIGTERM; a process pool that breaks terminates its other
workers with SIGTERM. Python's default SIGTERM action ends the process at once, without
unwinding, and leaves a simulator it started (in its own process group) running, orphaned,
for up to the simulation timeout. Raising KeyboardInterrupt instead runs the clean-up on the
way out: the simulator's group is killed, temp files removed, a partial report written.
"""

from __future__ import annotations

import os
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



_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies.

    Runs as the initialiser of pool workers and as the pre-exec hook of every simulator and
    native run. A parent killed outright (SIGKILL from the OOM killer, a CI runner that kills
    only the main process) runs no clean-up; without this its workers, each holding TVM, and
    the simulators they started (in sessions of their own) would live on as orphans. SIGKILL
    rather than SIGTERM: a worker that unwound would be caught by the pool's own loop and wait
    forever for work from the dead parent. A parent that died before the request took effect
    is caught by comparing the parent pid afterwards.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: no such request; orphans stay possible there
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
