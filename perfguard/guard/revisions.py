"""Measuring the kernels of a git revision, each revision from its own tree and in its own process.

`perfguard compare` and `perfguard bisect` check out a revision into a temporary git worktree
(`git worktree add --detach`: the user's working tree, index and branch are never touched), read
that tree's config and kernel modules, and measure them in a fresh Python process
(`python -m perfguard.guard.revisions`). A separate process per revision is what keeps the two
sides apart: a user's kernel module, once imported, stays in sys.modules, so a second revision's
edit of `mykernels/ops.py` would otherwise silently measure the first revision's code again.
Every side shares the caller's build and simulation cache, so a revision whose kernel IR did not
change costs no build and no simulation.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator

from perfguard.config import Config, load_config
from perfguard.errors import EXIT_INFRA, InfraError, InputError, PerfguardError
from perfguard.guard.baselines import Baseline
from perfguard.pipeline import JobResult
from perfguard.sim.stats import Stats

# -- git -------------------------------------------------------------------------------------------


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise InfraError(f"git {' '.join(args)} failed in {root}: {last}")
    return proc


@dataclass(frozen=True)
class Project:
    """Where the user's config sits in its git repository."""

    repo: Path  # the repository's top folder
    config: Path  # the config file, in the user's working tree
    relative: PurePosixPath  # the config's path inside the repository

    @classmethod
    def of(cls, config: Path, what: str) -> "Project":
        proc = git(config.parent, "rev-parse", "--show-toplevel", check=False)
        if proc.returncode != 0:
            raise InputError(f"{what}: {config} is not in a git repository")
        repo = Path(proc.stdout.strip()).resolve()
        return cls(repo, config, PurePosixPath(config.resolve().relative_to(repo).as_posix()))

    def resolve(self, ref: str, what: str) -> str:
        """The commit a ref names; an unknown ref (or an option in disguise) is an input error."""
        if not ref or ref.startswith("-"):
            raise InputError(f"{what} {ref!r}: not a git revision")
        proc = git(self.repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if proc.returncode != 0:
            raise InputError(f"{what} {ref}: unknown git revision in {self.repo}")
        return proc.stdout.strip()

    def subject(self, sha: str) -> str:
        return git(self.repo, "log", "-1", "--format=%s", sha).stdout.strip()

    def dirty(self) -> list[str]:
        """Tracked files under the config's folder with uncommitted changes (staged or not)."""
        folder = self.relative.parent.as_posix() or "."
        proc = git(self.repo, "status", "--porcelain", "--untracked-files=no", "--", folder)
        return [line[3:] for line in proc.stdout.splitlines() if line.strip()]

    def refuse_dirty_head(self, shas: dict[str, str], what: str) -> None:
        """A revision that is HEAD does not include uncommitted edits: say so instead of measuring
        something other than what the user is looking at (--allow-dirty measures HEAD as committed)."""
        head = git(self.repo, "rev-parse", "HEAD").stdout.strip()
        named = [ref for ref, sha in shas.items() if sha == head]
        changed = self.dirty() if named else []
        if changed:
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            raise InputError(f"{what}: the working tree has uncommitted changes ({', '.join(changed[:3])}{more}) that "
                             f"{named[0]} (HEAD) does not include: commit or stash them, or pass --allow-dirty")

    @contextmanager
    def worktree(self, sha: str) -> Iterator[Path]:
        """A temporary checkout of `sha`, removed afterwards (also on Ctrl-C)."""
        folder = Path(tempfile.mkdtemp(prefix="perfguard-rev-"))
        tree = folder / "tree"
        git(self.repo, "worktree", "add", "--detach", "--quiet", str(tree), sha)
        try:
            yield tree
        finally:
            git(self.repo, "worktree", "remove", "--force", str(tree), check=False)
            shutil.rmtree(folder, ignore_errors=True)
            git(self.repo, "worktree", "prune", check=False)


# -- one revision's measurements -------------------------------------------------------------------


@dataclass
class Side:
    """One revision: its config (None when the revision has no config file) and its results."""

    ref: str
    sha: str
    tree: Path
    config: Config | None
    results: dict[tuple[str, str], JobResult] = field(default_factory=dict)  # (kernel, target) -> result

    @property
    def label(self) -> str:
        return f"{self.ref} ({self.sha[:12]})"


def load_side(project: Project, ref: str, sha: str, tree: Path) -> Side:
    path = tree / project.relative
    if not path.is_file():
        return Side(ref, sha, tree, None)
    try:
        config = load_config(path)
    except InputError as exc:  # name the revision, not the temporary folder
        raise InputError(f"{ref} ({sha[:12]}):{project.relative}: {exc.message.replace(str(path) + ': ', '')}") from None
    return Side(ref, sha, tree, config)


def result_from_dict(data: dict) -> JobResult:
    """The inverse of JobResult.to_dict (fields a newer JobResult adds pass through as they are)."""
    known = {f.name for f in dataclasses.fields(JobResult)}
    values = {k: v for k, v in data.items() if k in known}
    if values.get("stats") is not None:
        values["stats"] = Stats.from_dict(values["stats"], f"result {data.get('kernel')}[{data.get('target')}]")
    return JobResult(**values)


def measure_side(side: Side, pairs: list[tuple[str, str]], cache_dir: Path, simulator: str | None,
                 jobs: int | None) -> None:
    """Measure `pairs` of `side` in a fresh process; fills side.results."""
    if not pairs:
        return
    out = side.tree.parent / "results.json"
    cmd = [sys.executable, "-m", "perfguard.guard.revisions", "--config", str(side.config.path), "--out", str(out),
           "--cache-dir", str(cache_dir), "--pairs", json.dumps(pairs)]
    if simulator:
        cmd += ["--simulator", simulator]
    if jobs:
        cmd += ["-j", str(jobs)]
    env = dict(os.environ)
    # This perfguard measures both sides; the revision supplies only its config and kernel modules.
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # cwd: a folder holding no Python package, so `-m` cannot import a revision's own perfguard/ first.
    proc = subprocess.run(cmd, cwd=side.tree.parent, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not out.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise InfraError(f"measuring {side.label} failed (exit {proc.returncode}): {last}")
    for data in json.loads(out.read_text()):
        result = result_from_dict(data)
        side.results[(result.kernel, result.target)] = result


def as_baseline(result: JobResult, side: Side, predicted_time_s: float, model_id: str) -> Baseline:
    """One side's measurement in the shape the verdicts compare with."""
    return Baseline(kernel=result.kernel, target=result.target, family=result.family, params=result.params,
                    simulator=result.simulator, content_hash=result.content_hash or "", stats=result.stats,
                    predicted_time_s=predicted_time_s, model_id=model_id, commit=side.sha, created="",
                    toolchain=result.toolchain)


# -- the worker: `python -m perfguard.guard.revisions` ------------------------------------------------


def _worker(argv: list[str]) -> int:
    from perfguard.guard.check import make_jobs, measure

    parser = argparse.ArgumentParser(prog="python -m perfguard.guard.revisions")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--pairs", required=True, help="JSON list of [kernel, target]")
    parser.add_argument("--simulator")
    parser.add_argument("-j", "--jobs", type=int)
    args = parser.parse_args(argv)
    try:
        config = dataclasses.replace(load_config(args.config), cache_dir=args.cache_dir)
        pairs = [(config.kernel(kernel), target) for kernel, target in json.loads(args.pairs)]
        results = measure(config, make_jobs(config, pairs, args.simulator), args.jobs or config.jobs)
    except PerfguardError as exc:
        sys.stderr.write(f"{exc.message}\n")
        return exc.exit_code
    from perfguard.atomic import atomic_write_text

    atomic_write_text(args.out, json.dumps([r.to_dict() for r in results], sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_worker(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(EXIT_INFRA)
