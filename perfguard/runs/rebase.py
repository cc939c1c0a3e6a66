"""Like with like after a toolchain change: the base revision measured again with this toolchain.

A committed baseline records the toolchain it was measured with (cross compiler, C library, TVM,
LLVM, perfguard's harness, the simulator and its plugin). When this run's differs (perfguard
upgraded, a point release of a cross compiler), the baseline cannot tell a change of the code from
a change of the tools. So every such result is judged against its base revision measured now,
with this toolchain, as `perfguard compare` measures a revision (runs.revisions: a temporary git
worktree, the revision's own config and kernel modules, one worker process, the shared build cache
and job records: a kernel the change did not touch is not measured twice). The base is the
revision the check reads its baselines from when it is given one (`--base REF`: the Action passes
a pull request's merge-base), otherwise the commit each baseline records.

When the base cannot be measured again (the project is not in git, the baseline records no commit,
the commit is not in the history and a shallow clone cannot be deepened, the base revision does
not configure the kernel or cannot build it with this toolchain), a result that moved beyond its
threshold is an error that says why (exit 3), not a pass; `allow_unjudged = true` keeps it as
`toolchain` (not judged) instead. A result within its threshold stays as judged.

Nothing is written: the committed baselines keep their toolchain, and the headline still says
what differs from them and the command that re-baselines.
"""

from __future__ import annotations

import dataclasses
import re

from perfguard.baselines.measured import MeasuredBaselines
from perfguard.baselines.store import BaselineSource, BaselineStore
from perfguard.config import Config
from perfguard.document.verdicts import ERROR, TOOLCHAIN
from perfguard.errors import EXIT_INFRA, InfraError, InputError, PerfguardError
from perfguard.job.run import Job
from perfguard.runs.check import CheckRun, JudgedResult, judge_results
from perfguard.runs.revisions import Measurer, Project, Side, git, load_side
from perfguard.runs.two_revisions import catalogue

_SHA = re.compile(r"^[0-9a-f]{7,64}$")


def remeasure_bases(
    config: Config,
    jobs: list[Job],
    check: CheckRun,
    threshold: float | None,
    store: BaselineSource | None,
    simulator: str | None,
    workers: int | None,
) -> list[str]:
    """Judge again every result of `check` (one per job, in job order) whose baseline was measured
    with another toolchain, against its base revision measured with this one; the base commits
    measured, in order."""
    store = BaselineStore(config.storage.baseline_dir) if store is None else store
    stale: dict[str | None, list[int]] = {}
    for i, outcome in enumerate(check.outcomes[: len(jobs)]):
        if outcome.result.ok and outcome.verdict.toolchain_changed and outcome.verdict.verdict != ERROR:
            base = getattr(store, "sha", None) or outcome.baseline_commit  # --base REF, else the baseline's commit
            stale.setdefault(base, []).append(i)
    measured = []
    for sha, indices in stale.items():
        try:
            side = _measure(config, sha, [jobs[i] for i in indices], simulator, workers)
        except PerfguardError as exc:
            for i in indices:
                _not_judged(config, check, i, exc.message)
            continue
        measured.append(side.sha)
        for i in indices:
            _rejudge(config, jobs[i], check, i, side, threshold, store)
    return measured


def _measure(config: Config, sha: str | None, jobs: list[Job], simulator: str | None, workers: int | None) -> Side:
    """The base revision `sha` measured with this toolchain, for the kernels of `jobs` it configures."""
    if not sha:
        raise InfraError("its baseline records no commit to measure again")
    try:
        project = Project.of(config.path, "check")
    except InputError:
        raise InfraError(
            f"{config.path.parent} is not in a git repository, so its base revision cannot be measured again"
        ) from None
    _fetch(project, sha)
    with project.worktree(sha) as tree:
        side = load_side(project, sha[:12], sha, tree)
        if side.config is None:
            raise InfraError(f"the base revision {sha[:12]} has no {project.relative}")
        with Measurer(config.storage.cache_dir, simulator, workers) as measurer:
            measurer.expand(side, sorted({job.profile.name for job in jobs}))
            known = catalogue(side)
            measurer.measure(
                side,
                [(job.kernel.name, job.profile.name) for job in jobs if (job.kernel.name, job.profile.name) in known],
            )
    return side


def _fetch(project: Project, sha: str) -> None:
    """Make sure the commit is here: a shallow clone is deepened once; otherwise say why it cannot be."""

    def have() -> bool:
        return (
            bool(_SHA.fullmatch(sha))
            and git(project.repo, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0
        )

    if have():
        return
    shallow = git(project.repo, "rev-parse", "--is-shallow-repository", check=False).stdout.strip() == "true"
    if shallow and _SHA.fullmatch(sha):
        git(project.repo, "fetch", "--quiet", "--unshallow", check=False)
        if have():
            return
        raise InfraError(
            f"the base revision {sha[:12]} is not in this shallow clone, and it could not be deepened "
            f"(check out with fetch-depth: 0)"
        )
    raise InfraError(
        f"the base revision {sha[:12]} is not in the history of {project.repo} (rewritten, or never fetched)"
    )


def _rejudge(
    config: Config, job: Job, check: CheckRun, i: int, side: Side, threshold: float | None, store: BaselineSource
) -> None:
    before = side.results.get((job.kernel.name, job.profile.name))
    if before is None:
        _not_judged(
            config,
            check,
            i,
            f"the base revision {side.sha[:12]} does not configure kernel '{job.kernel.name}' on {job.profile.name}",
        )
        return
    if not before.ok:
        _not_judged(
            config,
            check,
            i,
            f"the base revision {side.sha[:12]} could not be measured with this toolchain: {before.error}",
        )
        return
    old = check.outcomes[i]
    new = judge_results(
        config,
        [job],
        [old.result],
        threshold,
        MeasuredBaselines(
            side.label, side.sha, side.results, failed_as_missing=True, models=store.models(), graph=store.model_graph
        ),
        whole_models={},
    ).outcomes[0]
    if new.verdict.verdict == ERROR:  # the comparison itself failed (a model file, another simulator): as it says
        check.outcomes[i] = new
        return
    # the headline still says that the committed baseline's toolchain differs, and how to re-baseline
    new.verdict = dataclasses.replace(new.verdict, toolchain_changed=old.verdict.toolchain_changed)
    new.base_remeasured = new.baseline_commit = side.sha
    said = (
        f"judged against {side.sha[:12]} measured again with this toolchain (the committed baseline was "
        f"measured with another: {_tools(old)})"
    )
    new.note = "; ".join(filter(None, [said, new.note]))
    check.outcomes[i] = new


def _not_judged(config: Config, check: CheckRun, i: int, why: str) -> None:
    """The base cannot be measured again: a result that moved is an error (or, opted out, `toolchain`)."""
    old = check.outcomes[i]
    if old.verdict.verdict != TOOLCHAIN:
        return  # within its threshold: as judged, the headline says what differs
    if config.judging.allow_unjudged:
        old.note = "; ".join(filter(None, [old.note, f"not judged: {why} (allow_unjudged = true)"]))
        return
    r = old.result
    message = (
        f"{r.kernel}[{r.target}]: not judged: its baseline was measured with another toolchain ({_tools(old)}) "
        f"and {why}; re-baseline with: perfguard baseline update --targets {r.target} (or allow_unjudged = "
        f"true in {config.path.name})"
    )
    r.exit_code = EXIT_INFRA
    check.outcomes[i] = dataclasses.replace(
        old, verdict=dataclasses.replace(old.verdict, verdict=ERROR), error=message, explained=None, note=None
    )


def _tools(outcome: JudgedResult) -> str:
    return ", ".join(sorted(outcome.verdict.toolchain_changed))
