"""Measuring the kernels of a git revision, each revision from its own tree and in its own process.

`perfguard compare` and `perfguard bisect` check out a revision into a temporary git worktree
(`git worktree add --detach`: the user's working tree, index and branch are never touched), read
that tree's config and kernel modules, and measure them in a worker process
(`python -m perfguard.runs.revisions`) that imports TVM once. A user's kernel module, once
imported, stays in sys.modules, so a second revision's edit of `mykernels/ops.py` would silently
measure the first revision's code again: before each revision the worker forgets every module
imported from the previous revision's tree. The caller's process never imports a revision's code.
Every side shares the caller's build and simulation cache, so a revision whose kernel IR did not
change costs no build and no simulation, and a job measured before with the same inputs (its
record, perfguard.job.record) is not run at all, as in `check`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from perfguard.config import Config, KernelSpec, load_config
from perfguard.errors import EXIT_INFRA, InfraError, InputError, PerfguardError
from perfguard.executors import Executor, ExecutorChoice
from perfguard.job.run import JobResult
from perfguard.kernels.models import model_specs
from perfguard.runs.check import make_jobs, measure, recorded
from perfguard.sim.stats import Stats
from perfguard.user_code.imports import forget

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
    def of(cls, config: Path, what: str) -> Project:
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
            which = "HEAD" if named[0] == "HEAD" else f"{named[0]} (HEAD)"
            raise InputError(
                f"{what}: the working tree has uncommitted changes ({', '.join(changed[:3])}{more}) that "
                f"{which} does not include: commit or stash them, or pass --allow-dirty"
            )

    @contextmanager
    def worktree(self, sha: str) -> Iterator[Path]:
        """A temporary checkout of `sha`, removed afterwards (also on Ctrl-C)."""
        folder = Path(tempfile.mkdtemp(prefix="perfguard-rev-"))
        tree = folder / "tree"
        # No hooks: a post-checkout hook of the user's repository has no business running here.
        git(self.repo, "-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--quiet", str(tree), sha)
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
    model_specs: list[KernelSpec] = field(default_factory=list)  # its [[model]]s' kernels (Measurer.expand)

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
        raise InputError(
            f"{ref} ({sha[:12]}):{project.relative}: {exc.message.replace(str(path) + ': ', '')}"
        ) from None
    return Side(ref, sha, tree, config)


def spec_to_dict(spec: KernelSpec) -> dict:
    """A [[model]]'s kernel as the worker sends it (its code travels as TVMScript; it has no limits)."""
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(KernelSpec) if f.name != "limits"}


def spec_from_dict(data: dict) -> KernelSpec:
    return KernelSpec(
        **{
            **data,
            "targets": None if data["targets"] is None else tuple(data["targets"]),
            "positions": None if data.get("positions") is None else tuple(data["positions"]),
        }
    )


def result_from_dict(data: dict) -> JobResult:
    """The inverse of JobResult.to_dict (fields a newer JobResult adds pass through as they are)."""
    known = {f.name for f in dataclasses.fields(JobResult)}
    values = {k: v for k, v in data.items() if k in known}
    if values.get("stats") is not None:
        values["stats"] = Stats.from_dict(values["stats"], f"result {data.get('kernel')}[{data.get('target')}]")
    return JobResult(**values)


class Measurer:
    """One worker process (`python -m perfguard.runs.revisions`) that measures revision after revision.

    TVM is imported once; before each revision the worker forgets every module imported from the
    previous revision's tree (and takes that tree off sys.path), so each revision runs its own
    kernel modules. Pool workers (-j > 1) are fresh processes per revision anyway."""

    def __init__(
        self, cache_dir: Path, simulator: str | None, jobs: int | None, executor: ExecutorChoice = ExecutorChoice()
    ):
        self.cache_dir, self.simulator, self.jobs, self.executor = cache_dir, simulator, jobs, executor
        self._proc: subprocess.Popen | None = None
        self._home = Path(tempfile.mkdtemp(prefix="perfguard-measure-"))

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            if self._proc.stdin:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        shutil.rmtree(self._home, ignore_errors=True)

    def _start(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            env = dict(os.environ)
            # This perfguard measures every revision; a revision supplies only its config and kernel modules.
            here = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
            # cwd: a folder holding no Python package, so `-m` cannot import a revision's own perfguard/ first.
            with open(self._home / "stderr.log", "w") as log:  # a file: a full pipe would stall the worker
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "perfguard.runs.revisions"],
                    cwd=self._home,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
        return self._proc

    def expand(self, side: Side, targets: list[str] | None) -> None:
        """The kernels of `side`'s [[model]]s on `targets` (default: its config's), extracted by the
        worker from the revision's own model sources; fills side.model_specs."""
        if side.config is None or not side.config.models:
            return
        answer = self._ask(side, {"expand": [t for t in (targets or side.config.targets) if t in side.config.profiles]})
        side.model_specs = [spec_from_dict(d) for d in answer["specs"]]

    def measure(self, side: Side, pairs: list[tuple[str, str]]) -> None:
        """Measure `pairs` of `side` (configured kernels, or its model kernels: Measurer.expand); fills side.results."""
        if not pairs:
            return
        wanted = {name for name, _ in pairs}
        answer = self._ask(
            side,
            {
                "pairs": pairs,
                "simulator": self.simulator,
                "jobs": self.jobs,
                "executor": dataclasses.asdict(self.executor),
                "specs": [spec_to_dict(s) for s in side.model_specs if s.name in wanted],
            },
        )
        for data in answer["results"]:
            result = result_from_dict(data)
            side.results[(result.kernel, result.target)] = result

    def _ask(self, side: Side, fields: dict) -> dict:
        proc = self._start()
        assert side.config is not None  # expanded first
        request = {"config": str(side.config.path), "cache_dir": str(self.cache_dir), **fields}
        assert proc.stdin is not None and proc.stdout is not None  # started with pipes
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            proc.wait()
            last = ((self._home / "stderr.log").read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise InfraError(f"measuring {side.label}: the worker died (exit {proc.returncode}): {last}")
        answer = json.loads(line)
        if "error" in answer:
            error = InputError if answer["exit_code"] == InputError.exit_code else InfraError
            raise error(f"{side.label}: {answer['error']}")
        return answer


# -- the worker: `python -m perfguard.runs.revisions` ------------------------------------------------


def _model_specs(config: Config, targets: list[str]) -> list[KernelSpec]:
    return [
        spec
        for model in config.models
        for spec in model_specs(config, model, [t for t in targets if model.targets is None or t in model.targets])
    ]


def _serve() -> int:
    """Answer one JSON request per line of stdin with one JSON line on stdout."""
    answers, sys.stdout = sys.stdout, sys.stderr  # nothing a kernel or library prints can garble the answers
    executors: dict[ExecutorChoice, Executor] = {}
    try:
        _answer_requests(answers, executors)
    finally:
        for executor in executors.values():
            executor.close()
    return 0


def _answer_requests(answers, executors: dict) -> None:
    previous: Path | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            config = load_config(Path(request["config"]))
            if previous is not None:
                forget(previous)
            previous = config.root
            config = config.with_cache_dir(Path(request["cache_dir"]))
            if "expand" in request:
                answer = {"specs": [spec_to_dict(s) for s in _model_specs(config, request["expand"])]}
            else:
                models = {(s.name, t): s for s in map(spec_from_dict, request["specs"]) for t in s.targets or ()}
                pairs = [
                    (models.get((kernel, target)) or config.kernel(kernel), target)
                    for kernel, target in request["pairs"]
                ]
                jobs = make_jobs(config, pairs, request["simulator"])
                # as `check`: a job whose inputs are as recorded is not run (no TVM, no pool), and
                # measure sizes the pool to the jobs that are
                known = recorded(jobs)
                choice = ExecutorChoice(**request["executor"])
                executor = None
                if choice.name != "local" and any(r is None for r in known):  # the cluster, once per process
                    executor = executors.get(choice) or executors.setdefault(choice, choice.make())
                results = measure(config, jobs, request["jobs"] or config.jobs, executor=executor, known=known)
                # to_record: the block profile travels too (compare's attribution, bisect's changed blocks)
                answer = {
                    "results": [
                        dict(r.to_dict(), stats=None if r.stats is None else r.stats.to_record()) for r in results
                    ]
                }
        except PerfguardError as exc:
            answer = {"error": exc.message, "exit_code": exc.exit_code}  # type: ignore[dict-item]  # answer's type is the results' dict
        answers.write(json.dumps(answer, sort_keys=True) + "\n")
        answers.flush()


if __name__ == "__main__":
    try:
        sys.exit(_serve())
    except KeyboardInterrupt:
        sys.exit(EXIT_INFRA)
