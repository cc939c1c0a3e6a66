"""One writer of a baselines folder at a time: an exclusive flock on <baselines>/.perfguard.lock.

Every baseline update (`perfguard baseline update`, `pytest --perfguard-update`, its xdist
workers) takes it around its writes, so two updates never interleave: the folder holds one
update or the other, whole. A second writer waits, saying for whom, up to
PERFGUARD_LOCK_TIMEOUT seconds (default 600), then fails with exit 3 naming the lock file.

The lock is held only while files are written (milliseconds), never while simulating. It is
re-entrant within a process (and serialises its threads). The file holds the holder's pid and
is removed on release; a waiter that then gets the lock on the removed file opens it again.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from perfguard.errors import InfraError, InputError

LOCK_NAME = ".perfguard.lock"
TIMEOUT_ENV = "PERFGUARD_LOCK_TIMEOUT"
DEFAULT_TIMEOUT = 600.0
_POLL = 0.05

_guard = threading.Lock()
_held: dict[str, tuple[threading.RLock, int, int | None]] = {}  # path -> (thread lock, depth, fd)


def lock_timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    if text is None or text == "":
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise InputError(f"{TIMEOUT_ENV}={text!r}: must be a number of seconds >= 0")
    return value


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return "another perfguard process"
    return f"perfguard process {pid}" if pid.isdigit() else "another perfguard process"


def _say(message: str) -> None:
    sys.stderr.write(f"perfguard: {message}\n")
    sys.stderr.flush()


def _acquire(path: Path, timeout: float, notify: Callable[[str], None]) -> int:
    deadline = time.monotonic() + timeout
    told = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                raise InfraError(
                    f"{path}: {_holder(path)} has been updating these baselines for more than "
                    f"{timeout:g} s; try again when it is done (or raise {TIMEOUT_ENV})"
                ) from None
            if not told:
                notify(f"waiting for {_holder(path)} to finish updating the baselines ({path})")
                told = True
            time.sleep(_POLL)
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its holder removed it as we opened it: the lock now lives in a new file
            os.close(fd)
            continue
        try:  # who holds it, for a waiter's message; a full disk must not stop the update here
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass
        return fd


@contextmanager
def baselines_lock(root: Path, timeout: float | None = None, notify: Callable[[str], None] = _say) -> Iterator[Path]:
    """Hold the exclusive lock of the baselines folder `root` (created if missing)."""
    root = Path(root)
    path = root / LOCK_NAME
    key = str(path.resolve())
    with _guard:
        entry = _held.setdefault(key, (threading.RLock(), 0, None))
    thread_lock = entry[0]
    with thread_lock:
        _, depth, fd = _held[key]
        if depth == 0:
            try:
                root.mkdir(parents=True, exist_ok=True)
                fd = _acquire(path, lock_timeout() if timeout is None else timeout, notify)
            except OSError as exc:
                raise InfraError(f"{path}: cannot lock the baselines: {exc.strerror or exc}") from None
        _held[key] = (thread_lock, depth + 1, fd)
        try:
            yield path
        finally:
            _, depth, fd = _held[key]
            if depth == 1:
                try:
                    path.unlink()
                except OSError:
                    pass
                if fd is not None:
                    os.close(fd)
            _held[key] = (thread_lock, depth - 1, fd)
