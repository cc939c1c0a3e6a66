"""Check records: a whole check's report and pages, reused when nothing it depends on changed.

A check's answer is decided by the config file, the command-line options that change a result
or a verdict, the baselines and calibrated models it reads, the git commit they are in (the
report's history and commit), perfguard's code, the installed packages and tools
(perfguard.fingerprints), and the project's files its user code read (model sources, kernel
entries and their helpers, references: each job's dependency file). The record is keyed on the
first ones and lists the files with their sha256: the baselines' and models' folders as they
were listed, every file in them, every user file. When the key matches and every file hashes as
recorded, `perfguard check` writes the recorded report (with this run's `created` and timings)
and pages and exits with the recorded code, without lowering, judging or rendering anything:
no TVM, no matplotlib, no pool.

Only a check that measured and judged every result without an error is recorded (an error may
be transient: a timeout on a loaded machine). A record that is missing, damaged, of another
version or key, or whose pages are not all there as recorded means: check in full. Records live
in <cache>/check-records/; `perfguard check --recompute` ignores them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from perfguard import sealed
from perfguard.atomic import atomic_write_bytes
from perfguard.config import Config
from perfguard.errors import InfraError
from perfguard.fingerprints import digest, environment_digest
from perfguard.sim.base import profile_tools
from perfguard.user_code.reads import file_sha256, unchanged

RECORD_VERSION = 2


def git_head(folder: Path) -> str:
    """The commit checked out where `folder` is ("" outside a git work tree): the report's
    history and `commit` come from it."""
    start = Path(folder)
    while not start.exists() and start != start.parent:
        start = start.parent
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=start, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def check_key(config: Config, options: dict[str, Any], simulator: str) -> str:
    """Everything but the files that decides a check's report: the config's bytes, the options,
    the baselines' commit, perfguard and its environment."""
    profiles = [config.profile(t) for t in config.targets if t in config.profiles] + [
        config.profile(t) for t in options.get("targets") or [] if t in config.profiles
    ]
    try:
        config_bytes = hashlib.sha256(config.path.read_bytes()).hexdigest()
    except OSError:
        config_bytes = "unreadable"
    return digest(
        "check record",
        str(RECORD_VERSION),
        environment_digest(profile_tools(profiles, simulator)),
        str(config.path.resolve()),
        config_bytes,
        str(Path(config.storage.cache_dir).resolve()),
        json.dumps(options, sort_keys=True, default=str),
        git_head(config.storage.baseline_dir),
    )


def baseline_files(config: Config, targets: list[str]) -> list[Path]:
    """The baselines' and calibrated models' folders of `targets`: what a check reads of them."""
    root = Path(config.storage.baseline_dir)
    return [folder for t in targets for folder in (root / t, root / "models" / t)]


def baseline_targets(config: Config) -> set[str]:
    """The known targets with a baseline folder: what the orphan scan (runs.orphans) may read."""
    root = Path(config.storage.baseline_dir)
    return {t for t in config.profiles if (root / t).is_dir()}


def folder_depends(folders: list[Path], root: Path) -> list[list[str]]:
    """[[path, sha256], ...] for each folder's listing (path ending in "/") and every file in it."""
    out = []
    for folder in folders:
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        out.append([_relative(folder, root) + "/", _listing(folder)])
        for name in names:
            path = folder / name
            if path.is_file():
                out.append([_relative(path, root), file_sha256(path) or ""])
    return out


def _relative(path: Path, root: Path) -> str:
    path = Path(path).resolve()
    return path.relative_to(root).as_posix() if root in path.parents else str(path)


def _listing(folder: Path) -> str:
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = None
    return hashlib.sha256(json.dumps(names).encode()).hexdigest()


def unchanged_files(root: Path, depends: Any) -> bool:
    """user_code.unchanged, plus folder listings (a path ending in "/")."""
    if not isinstance(depends, list):
        return False
    files = []
    for item in depends:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and item[0].endswith("/"):
            folder = Path(item[0]) if os.path.isabs(item[0]) else root / item[0]
            if _listing(folder) != item[1]:
                return False
        else:
            files.append(item)
    return unchanged(root, files)


def record_dir(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "check-records" / key[:2] / key


def lookup(config: Config, key: str) -> tuple[dict, dict[str, bytes]] | None:
    """(the recorded report's JSON, its pages by path relative to the report folder) when
    nothing the check depends on changed; None otherwise."""
    folder = record_dir(config.storage.cache_dir, key)
    record = sealed.read(folder / "record.json", "check", key)
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("report"), dict)
        or not isinstance(record.get("pages"), dict)
    ):
        return None  # absent or damaged: check in full
    if not unchanged_files(config.root.resolve(), record.get("depends")):
        return None
    pages = {}
    for relative, sha in record["pages"].items():
        try:
            data = (folder / "pages" / relative).read_bytes()
        except OSError:
            data = None
        if data is None or hashlib.sha256(data).hexdigest() != sha:
            return sealed.damaged(str(folder / "pages" / relative), "missing, or not the page that was rendered")
        pages[relative] = data
    return record["report"], pages


def store(
    config: Config, key: str, report_json: dict, depends: list[list[str]], report_dir: Path, pages: list[Path]
) -> None:
    """Record a check (best effort: a cache that cannot be written costs only reuse)."""
    final = record_dir(config.storage.cache_dir, key)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=final.parent, prefix=".staging-"))
        recorded = {}
        for page in pages:
            relative = Path(page).relative_to(report_dir).as_posix()
            data = Path(page).read_bytes()
            target = staging / "pages" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            recorded[relative] = hashlib.sha256(data).hexdigest()
        (staging / "record.json").write_bytes(
            sealed.seal("check", key, {"depends": depends, "pages": recorded, "report": report_json})
        )
        if final.exists():  # an older record of the same key: replaced whole
            old = Path(tempfile.mkdtemp(dir=final.parent, prefix=".old-"))
            os.rename(final, old / "record")
            shutil.rmtree(old, ignore_errors=True)
        os.rename(staging, final)
    except (OSError, ValueError):
        shutil.rmtree(locals().get("staging") or final.parent / ".none", ignore_errors=True)


def restore_pages(report_dir: Path, pages: dict[str, bytes], kernel_dir: str) -> None:
    """The recorded pages into `report_dir` (a file already as recorded is left alone), and the
    pages of kernels the record does not have removed, as rendering would."""
    report_dir = Path(report_dir)
    for relative, data in pages.items():
        path = report_dir / relative
        try:
            if path.read_bytes() == data:
                continue
        except OSError:
            pass
        atomic_write_bytes(path, data)
    kernels = report_dir / kernel_dir
    if kernels.is_dir():
        keep = {Path(r).name for r in pages if Path(r).parent.as_posix() == kernel_dir}
        for old in kernels.glob("*.html"):
            if old.name not in keep:
                try:
                    old.unlink()
                except OSError as exc:
                    raise InfraError(f"{old}: cannot remove a stale page: {exc.strerror or exc}") from None
