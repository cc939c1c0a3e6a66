"""The error types every layer raises, each bound to one exit code of the CLI contract, and the
"did you mean" every message about a misspelt name ends with."""

import difflib
from collections.abc import Iterable

from perfguard import __version__

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_INFRA = 3
EXIT_WRONG_RESULT = 4  # the code under test computes a wrong answer: never an infrastructure failure

# Every exit code of the CLI contract, and what it means (docs: "Exit codes").
EXIT_CODES = {
    EXIT_OK: "ok: no regression, every kernel measured and checked (also when the toolchain differs from the "
    "baselines': the kernels are then judged against their base revision measured again with this "
    "toolchain, and the headline says so and names the command that re-baselines)",
    EXIT_REGRESSION: "a regression: a kernel (or a [[model]]'s total) got slower than its threshold, or went over "
    "a per-metric limit",
    EXIT_USAGE: "usage or input error: bad config, bad file, unknown kernel or target, a misspelt name (the message "
    "names the closest one); a committed baseline that no configured kernel has (`removed`: rename or "
    "prune it)",
    EXIT_INFRA: "infrastructure failure: toolchain missing, build failed, simulator crashed or timed out, a QEMU "
    "whose plugin API perfguard's plugin does not support, the check interrupted; a kernel that moved "
    "under another toolchain than its baseline's whose base revision cannot be measured again (unless "
    "allow_unjudged = true); with --fail-on-toolchain-change, a toolchain other than the baselines'",
    EXIT_WRONG_RESULT: "wrong result: a kernel's output differs from its reference, so the code under test is wrong; "
    "it beats every other code, and --allow-errors does not hide it",
}


class PerfguardError(Exception):
    """Base class: the message is one line that names the file, key or value at fault."""

    exit_code = EXIT_INFRA

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(PerfguardError):
    """Bad configuration, bad file, unknown kernel or target: the user can fix it (exit 2)."""

    exit_code = EXIT_USAGE


class NewerFormat(InputError):
    """A file written in a format version newer than this perfguard reads (exit 2): it is refused,
    never guessed at and never written over; the message names the file, the version, the perfguard
    that wrote it (where the file says) and this one."""


def newer_format(source: str, what: str, version: object, readable: int, written_by: object = None) -> NewerFormat:
    """The error for `source`, whose `what` (e.g. 'baseline schema') is `version`, above `readable`:
    'F: baseline schema 5, written by perfguard 0.3.0; this is perfguard 0.2.0 (reads up to baseline
    schema 4): upgrade perfguard'."""
    by = f"perfguard {written_by}" if isinstance(written_by, str) and written_by else "a newer perfguard"
    return NewerFormat(
        f"{source}: {what} {version}, written by {by}; this is perfguard {__version__} (reads up to "
        f"{what} {readable}): upgrade perfguard"
    )


class InfraError(PerfguardError):
    """Toolchain missing, build failed, simulator crashed or timed out (exit 3)."""

    exit_code = EXIT_INFRA


class WrongResult(PerfguardError):
    """A kernel's output differs from its reference: the code under test failed (exit 4), which
    neither a retry nor --allow-errors can make go away. `mismatch` says where and by how much."""

    exit_code = EXIT_WRONG_RESULT

    def __init__(self, message: str, mismatch: dict):
        super().__init__(message)
        self.mismatch = mismatch


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' with the known name closest to a misspelt one, or '' when none is close."""
    found = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return f" (did you mean '{found[0]}'?)" if found else ""
