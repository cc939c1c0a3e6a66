"""Content-addressed cache of builds and simulation results.

A build is keyed by everything that decides the binary (lowered IR, target profile,
toolchain and TVM versions, harness version); a simulation by the binary's hash and
everything that decides the statistics (simulator fingerprint, arguments). An unchanged
kernel is therefore neither rebuilt nor re-simulated. Entries appear whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from perfguard.atomic import atomic_write_bytes, atomic_write_text


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class BuildCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def build_dir(self, key: str) -> Path:
        return self.root / "builds" / key[:2] / key

    def lookup_build(self, key: str) -> Path | None:
        path = self.build_dir(key)
        return path if (path / "DONE").is_file() else None

    def publish_build(self, key: str, staging: Path) -> Path:
        """Move a fully written staging folder into place (first writer wins)."""
        (staging / "DONE").write_text(key)
        final = self.build_dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, final)
        except OSError:
            if not (final / "DONE").is_file():
                raise
            shutil.rmtree(staging, ignore_errors=True)
        return final

    def staging_dir(self) -> Path:
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=tmp))

    def sim_path(self, key: str) -> Path:
        return self.root / "sims" / key[:2] / f"{key}.json"

    def lookup_sim(self, key: str) -> dict | None:
        """The stored record, or None when there is none or it is not a JSON object with "stats"
        (cut short, edited): a damaged cache entry means simulating again, never an error. The
        statistics themselves are validated by the caller, which knows their schema."""
        path = self.sim_path(key)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):  # ValueError: bad JSON or UTF-8
            return None
        return record if isinstance(record, dict) and "stats" in record else None

    def store_sim(self, key: str, record: dict, outputs: bytes) -> None:
        """The record and the kernel's raw outputs (the record last: it vouches for both)."""
        atomic_write_bytes(self.sim_path(key).with_suffix(".out"), outputs)
        atomic_write_text(self.sim_path(key), json.dumps(record, sort_keys=True))

    def lookup_outputs(self, key: str) -> bytes | None:
        """The raw outputs a simulation printed: the output check runs again on them whenever its
        own key (reference, tolerances, ...) is new, without simulating again."""
        try:
            return self.sim_path(key).with_suffix(".out").read_bytes()
        except OSError:
            return None

    def check_path(self, key: str) -> Path:
        return self.root / "checks" / key[:2] / f"{key}.json"

    def lookup_check(self, key: str) -> dict | None:
        """A passed output check ({"max_error": float}); failures are never stored."""
        try:
            record = json.loads(self.check_path(key).read_text())
            if isinstance(record.get("max_error"), (int, float)) and not isinstance(record["max_error"], bool):
                return record
        except (OSError, ValueError, AttributeError):
            pass
        return None

    def store_check(self, key: str, record: dict) -> None:
        atomic_write_text(self.check_path(key), json.dumps(record, sort_keys=True))
