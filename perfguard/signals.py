"""Ctrl-C and SIGTERM stop perfguard, whatever it inherited, and children die with it.

CI cancels a job with SIGINT, then SIGTERM; a terminal's Ctrl-C sends SIGINT to the whole
foreground group; a process pool that breaks terminates its other workers with SIGTERM.
Python's default SIGTERM action ends the process at once, without unwinding, and leaves a
simulator it started (in its own process group) running, orphaned, for up to the simulation
timeout. Raising KeyboardInterrupt instead runs the clean-up on the way out: the simulator's
group is killed, temp files removed, a partial report written.

SIGINT needs the same care: Python turns it into KeyboardInterrupt only when it was not
ignored at start-up, and a process started in the background by a non-interactive shell (as CI
runners and test harnesses start jobs) inherits it ignored. perfguard then ran every hanging
simulation to its timeout after a Ctrl-C (issue 30). Within `interruptible()` both signals
raise KeyboardInterrupt whatever the inherited disposition or signal mask.

With PERFGUARD_VERBOSE=1 every child process perfguard starts and how it ended, and every
signal it turns into an interruption, are logged on stderr (`log`), pool workers included.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def verbose() -> bool:
    return os.environ.get("PERFGUARD_VERBOSE", "") not in ("", "0")


def log(message: str) -> None:
    """One line on stderr, stamped with the process and a monotonic clock, when PERFGUARD_VERBOSE is set."""
    if verbose():
        sys.stderr.write(f"perfguard[{os.getpid()}] {time.monotonic():.3f}: {message}\n")
        sys.stderr.flush()


_deferring: list[list[int]] = []  # the main thread's open `deferred()` blocks, each its held signals


def _interrupt(signum, frame) -> None:
    if _deferring:
        log(f"got {signal.Signals(signum).name}: held until the child it interrupts can be stopped")
        _deferring[-1].append(signum)
        return
    log(f"got {signal.Signals(signum).name}: interrupting")
    raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[list[int]]:
    """Within the block an interruption is held, not raised: the list it yields holds the signals
    that came, for the caller to raise once it can clean up (a child started in the block but
    not yet known to the caller would otherwise outlive the interruption). Main thread only,
    as signal handlers are; elsewhere the list stays empty."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    _deferring.append(held)
    try:
        yield held
    finally:
        _deferring.remove(held)


@contextmanager
def interruptible() -> Iterator[None]:
    """Within the block (main thread only: elsewhere signals cannot be handled), SIGINT and SIGTERM
    raise KeyboardInterrupt, even when they were inherited ignored or blocked."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _interrupt) for signum in INTERRUPT_SIGNALS}
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPT_SIGNALS) & set(INTERRUPT_SIGNALS)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, blocked)


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
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: no such request; orphans stay possible there
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
