"""Writes that never leave a file half-written: a temp file in the same folder, then rename.

`atomic_write_many` writes several files as one change: every temp file is written and synced
before the first rename, so a full disk (or any other write error) leaves every old file as it
was. A failed write is an InfraError naming the file (exit 3), not a bare OSError.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from perfguard.errors import InfraError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _unlink(name: str) -> None:
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass


def _write_temp(path: Path, data: bytes) -> str:
    """A synced temp file beside `path` holding `data`; its name."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; the file should look like any other
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return tmp
    except BaseException as exc:
        if tmp is not None:
            _unlink(tmp)
        if isinstance(exc, OSError):
            raise InfraError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise


def atomic_write_many(files: dict[Path, bytes]) -> None:
    """Write every file or, when one cannot be written, none (all temp files first, then renames)."""
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            temps.append((_write_temp(Path(path), data), Path(path)))
        while temps:
            tmp, path = temps[0]
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise InfraError(f"{path}: cannot write: {exc.strerror or exc}") from None
            temps.pop(0)
    finally:
        for tmp, _ in temps:
            _unlink(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write_many({Path(path): data})


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
