"""One way to run a simulator or a native timing run as a child process.

Every back end (QEMU, gem5, cachegrind) and native timing start their program here: in a
process group of its own (a simulator's helpers and the guest go with it), asking the kernel
to kill it when perfguard dies (signals.die_with_parent), with a timeout after which the whole
group is killed, and killed as well when perfguard is interrupted (Ctrl-C, SIGTERM) while
waiting. What ended the run is classified in the result (exit status, signal, timeout); the
caller words the error, since only it knows what ran.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from perfguard.signals import deferred, die_with_parent, log

# SIGKILL is what the kernel's OOM killer sends: the likeliest cause when nobody else would.
OOM_HINT = " (out of memory? the kernel's OOM killer sends SIGKILL)"
# The longest a wait for a child goes without returning to Python (where signal handlers run).
WAIT_SLICE = 0.2


@dataclass(frozen=True)
class Finished:
    """How a child run ended, and what it wrote to the pipes perfguard gave it."""

    status: int | None  # exit status; negative: killed by that signal; None: timed out, group killed
    stdout: bytes  # b"" when the caller sent stdout to a file
    stderr: bytes

    @property
    def timed_out(self) -> bool:
        return self.status is None

    @property
    def signal(self) -> int | None:
        """The signal that killed the program, or None."""
        return -self.status if self.status is not None and self.status < 0 else None

    @property
    def signal_name(self) -> str:
        """SIGSEGV, SIGKILL, ... ("signal N" for a number the host does not name)."""
        number = self.signal
        if number is None:
            return ""
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"

    @property
    def oom_hint(self) -> str:
        return OOM_HINT if self.signal == signal.SIGKILL else ""


def one_line(text: str, limit: int = 400) -> str:
    """`text` on one line, whitespace runs collapsed, cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def last_lines(output: bytes | str, count: int = 1, limit: int = 400) -> str:
    """The last `count` non-empty lines of a program's output joined by " | " on one line
    ("" if it wrote nothing): the error a failed run ends with."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return one_line(" | ".join(kept[-count:]), limit) if kept else ""


def run(
    command: Sequence[str],
    timeout: float,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
    in_child: Callable[[], None] | None = None,
) -> Finished:
    """Run `command` to its end or for `timeout` seconds, whichever comes first.

    A new session (so a process group) of its own; an empty environment unless `env` is given;
    no stdin. stdout and stderr are captured unless a file is given for them. `in_child` runs
    in the child before the program starts, after the request to die with perfguard (e.g. pin
    to a core). At the timeout, or if waiting is interrupted (KeyboardInterrupt, SystemExit),
    the whole group is killed; an interruption is then raised again. OSError if the program
    cannot be started.
    """

    def child_setup() -> None:
        die_with_parent()
        if in_child is not None:
            in_child()

    name = Path(command[0]).name
    proc = None
    try:
        # A Ctrl-C while Popen returns (the child already runs, its group not yet known here)
        # is held until the group can be killed below: raised then, it would orphan the child.
        with deferred() as held:
            proc = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout is None else stdout,
                stderr=subprocess.PIPE if stderr is None else stderr,
                cwd=cwd,
                env=dict(env) if env is not None else {},
                start_new_session=True,
                preexec_fn=child_setup,
            )
            log(f"started {name} as pid {proc.pid} (timeout {timeout:g} s)")
        if held:
            raise KeyboardInterrupt
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            # Waited on in short slices: a signal the kernel hands to another thread of this
            # process (TVM's, a progress bar's) does not wake this one, and its handler runs
            # only once this thread is back in Python, at the latest one slice later.
            try:
                out, err = proc.communicate(timeout=min(WAIT_SLICE, max(0.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    _kill_group(proc)
                    out, err = proc.communicate()
                    log(f"pid {proc.pid} ({name}) timed out: its group killed")
                    return Finished(None, out or b"", err or b"")
    except BaseException as exc:
        if proc is None:  # not started (OSError), or interrupted before it was
            raise
        _kill_group(proc)
        proc.wait()
        log(f"pid {proc.pid} ({name}) killed with its group: {type(exc).__name__}")
        raise
    log(f"pid {proc.pid} ({name}) ended with status {proc.returncode}")
    return Finished(proc.returncode, out or b"", err or b"")


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another file system
        shutil.copy2(source, dest)


@contextlib.contextmanager
def fixed_path(binary: Path, tool: str) -> Iterator[Path]:
    """`binary` as /tmp/perfguard-<tool>-XXXXXXXX/harness for as long as the block runs.

    The program's path is laid out on its stack (QEMU resolves it first), so its length shifts
    every address after it and with them cache conflicts: the same length every time, whatever
    TMPDIR says, and a hard link or copy, never a symlink (that would resolve to the original)."""
    with tempfile.TemporaryDirectory(prefix=f"perfguard-{tool}-", dir="/tmp") as tmp:
        guest = Path(tmp) / "harness"
        link_or_copy(Path(binary).resolve(), guest)
        yield guest
