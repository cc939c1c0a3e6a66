"""Content-addressed cache of builds and simulation results.

A build is keyed by everything that decides the binary (lowered IR, target profile,
toolchain and TVM versions, harness version); a simulation by the binary's hash and
everything that decides the statistics (simulator fingerprint, arguments). An unchanged
kernel is therefore neither rebuilt nor re-simulated. Entries appear whole or not at all, and
each vouches for itself (perfguard.sealed): a build's marker holds the sha256 of every file of
the build, a simulation's record that of the outputs beside it. Whatever does not check out is
built, simulated or checked again and replaced, never trusted and never an error.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from perfguard import sealed
from perfguard.atomic import atomic_write_bytes


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


BUILD_MARKER = "DONE"


class BuildCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def build_dir(self, key: str) -> Path:
        return self.root / "builds" / key[:2] / key

    def lookup_build(self, key: str, tools: str | None = None) -> Path | None:
        """The build's folder when its marker lists every file with the sha256 it still has (and,
        given `tools`, says it was built by these: another compiler builds it again)."""
        path = self.build_dir(key)
        marker = sealed.read(path / BUILD_MARKER, "build", key)
        if marker is None:
            return None
        files = marker.get("files") if isinstance(marker, dict) else None
        if not isinstance(files, dict) or not files:
            return sealed.damaged(str(path / BUILD_MARKER), "lists no files")
        if tools is not None and marker.get("tools") != tools:
            return None  # built by another compiler (or with other variables): built again, and replaced
        for name, sha in files.items():
            if _sha256_or_none(path / name) != sha:
                return sealed.damaged(str(path / name), "missing, or not the file the build made")
        return path

    def built_file_sha(self, key: str, name: str) -> str:
        """A file's sha256 as the build's marker holds it (after lookup_build vouched for it)."""
        marker = sealed.read(self.build_dir(key) / BUILD_MARKER, "build", key)
        files = marker.get("files") if isinstance(marker, dict) else None
        if isinstance(files, dict) and isinstance(files.get(name), str):
            return files[name]
        return file_digest(self.build_dir(key) / name)

    def publish_build(self, key: str, staging: Path, tools: str = "") -> Path:
        """Move a fully written staging folder into place: its marker (the sha256 of each file) is
        written last. A folder already there that lookup_build refused (damaged) is replaced; a
        whole one written meanwhile by another process wins."""
        files = {p.name: file_digest(p) for p in sorted(staging.iterdir()) if p.is_file()}
        sealed.write(staging / BUILD_MARKER, "build", key, {"files": files, "tools": tools})
        final = self.build_dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                os.rename(staging, final)
                return final
            except OSError:
                if self.lookup_build(key, tools) is not None:
                    shutil.rmtree(staging, ignore_errors=True)
                    return final
                self._discard(final)
        os.rename(staging, final)  # the last try: its error is the caller's
        return final

    def _discard(self, folder: Path) -> None:
        """Move a damaged folder out of the way (renamed first, so no reader sees it half removed)."""
        if not folder.exists():
            return
        trash = Path(tempfile.mkdtemp(dir=self.staging_dir().parent, prefix="discard-"))
        try:
            os.rename(folder, trash / "entry")
        except OSError:
            pass
        shutil.rmtree(trash, ignore_errors=True)

    def staging_dir(self) -> Path:
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=tmp))

    def sim_path(self, key: str) -> Path:
        return self.root / "sims" / key[:2] / f"{key}.json"

    def lookup_sim(self, key: str) -> tuple[dict, bytes] | None:
        """The stored record and the kernel's raw outputs, or None when either is missing or they
        do not check out (the record holds the outputs' sha256): simulating again, never an error.
        The statistics themselves are validated by the caller, which knows their schema."""
        path = self.sim_path(key)
        record = sealed.read(path, "simulation", key)
        if not isinstance(record, dict) or "stats" not in record or not isinstance(record.get("outputs_sha256"), str):
            return None
        outputs = _read_or_none(path.with_suffix(".out"))
        if outputs is None or hashlib.sha256(outputs).hexdigest() != record["outputs_sha256"]:
            return sealed.damaged(str(path.with_suffix(".out")), "missing, or not the outputs the simulation printed")
        return record, outputs

    def store_sim(self, key: str, record: dict, outputs: bytes) -> None:
        """The record and the kernel's raw outputs (the record last: it vouches for both)."""
        atomic_write_bytes(self.sim_path(key).with_suffix(".out"), outputs)
        sealed.write(
            self.sim_path(key), "simulation", key, {**record, "outputs_sha256": hashlib.sha256(outputs).hexdigest()}
        )

    def check_path(self, key: str) -> Path:
        return self.root / "checks" / key[:2] / f"{key}.json"

    def lookup_check(self, key: str) -> dict | None:
        """A passed output check ({"max_error": float, "depends": [...]}); failures are never stored."""
        record = sealed.read(self.check_path(key), "output check", key)
        if (
            isinstance(record, dict)
            and isinstance(record.get("max_error"), (int, float))
            and not isinstance(record["max_error"], bool)
        ):
            return record
        return None

    def store_check(self, key: str, record: dict) -> None:
        sealed.try_write(self.check_path(key), "output check", key, record)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _sha256_or_none(path: Path) -> str | None:
    data = _read_or_none(path)
    return None if data is None else hashlib.sha256(data).hexdigest()
