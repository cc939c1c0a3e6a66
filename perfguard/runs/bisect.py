"""`perfguard bisect`: the first commit on the first-parent line whose predicted time crossed a threshold.

Binary search between a good and a bad revision, as `git bisect --first-parent` would walk it,
measuring only the revisions it visits (each in its own worktree and process, through the shared
content-addressed cache: a revision whose kernel IR did not change costs no build and no
simulation). Every revision is scored by the good revision's model and compared with the good
revision's predicted time. A revision that cannot be measured (it does not build, its config is
broken, it does not configure the kernel) is skipped, as `git bisect skip` would, and the search
tries its neighbours; when skips leave several candidates, all of them are named.

A [[model]] is bisected on its total (`--model NAME`): each visited revision's model is extracted
from that revision's sources, all its kernels on the target are measured, and the revision is
judged against --good as `perfguard compare` judges two revisions (runs.two_revisions): it
crossed when the model's total regressed beyond the threshold (the model's at --good), whether a
kernel got slower, a layer was added (a kernel called more often) or a kernel was replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from perfguard.baselines.measured import baseline_of
from perfguard.baselines.store import Baseline
from perfguard.document.report import ModelTotal
from perfguard.document.verdicts import ERROR, REGRESSION
from perfguard.errors import InputError, PerfguardError
from perfguard.job.run import JobResult
from perfguard.judge.decide import ModelSource, decide, scorer
from perfguard.judge.verdicts import Verdict
from perfguard.judging import Judgement
from perfguard.predict.base import Predictor
from perfguard.runs.revisions import Measurer, Project, Side, git, load_side
from perfguard.runs.two_revisions import catalogue, judge_sides
from perfguard.targets import TargetProfile

FOUND, NO_CROSSING, AMBIGUOUS = "found", "no crossing", "ambiguous"


@dataclass
class Visit:
    sha: str
    subject: str
    index: int  # position in the range: -1 is --good, the last one --bad
    result: JobResult | None = None
    verdict: Verdict | ModelTotal | None = None  # a model's: its total against --good's
    skipped: str | None = None  # why it could not be measured
    side: Side | None = None  # a model's visit: every kernel's result (to explain the first bad commit)

    @property
    def crossed(self) -> bool:
        return self.verdict is not None and self.verdict.verdict == REGRESSION

    @property
    def time_s(self) -> float | None:
        """Predicted time: the kernel's per call, or the model's total per inference."""
        v = self.verdict
        return None if v is None else v.current_total_s if isinstance(v, ModelTotal) else v.current_time_s

    @property
    def reference_s(self) -> float | None:
        v = self.verdict
        return None if v is None else v.baseline_total_s if isinstance(v, ModelTotal) else v.baseline_time_s

    def to_dict(self) -> dict:
        v, r = self.verdict, self.result
        results = list(self.side.results.values()) if self.side is not None else [r] if r else []
        return {
            "commit": self.sha,
            "subject": self.subject,
            "index": self.index,
            "skipped": self.skipped,
            "crossed": self.crossed if v else None,
            "predicted_time_s": self.time_s,
            "delta_pct": v.delta_pct if v else None,
            "content_hash": r.content_hash if r else None,
            "rebuilt": any(x.rebuilt for x in results) if results else None,
            "resimulated": any(x.resimulated for x in results) if results else None,
        }


@dataclass
class Bisection:
    kernel: str
    target: str
    good: Visit
    bad: Visit
    commits: list[str]  # the range after --good, oldest first; the last one is --bad
    threshold_pct: float
    outcome: str = NO_CROSSING
    first_bad: Visit | None = None
    last_good: Visit | None = None  # the measured revision just before first_bad
    candidates: list[str] = field(default_factory=list)  # AMBIGUOUS: skipped commits and the first bad one
    visits: list[Visit] = field(default_factory=list)  # in the order they were measured
    step: ModelTotal | None = None  # a model: first_bad's total judged against last_good's (what changed)


def first_parent_range(project: Project, good: str, bad: str, good_ref: str, bad_ref: str) -> list[str]:
    """The commits after `good` up to `bad` on bad's first-parent line, oldest first."""
    if good == bad:
        raise InputError(f"bisect: --good {good_ref} and --bad {bad_ref} are the same commit")
    if git(project.repo, "merge-base", "--is-ancestor", good, bad, check=False).returncode != 0:
        if git(project.repo, "merge-base", "--is-ancestor", bad, good, check=False).returncode == 0:
            raise InputError(f"bisect: --good {good_ref} is newer than --bad {bad_ref} (good and bad swapped?)")
        raise InputError(f"bisect: --good {good_ref} is not an ancestor of --bad {bad_ref}")
    commits = git(project.repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").stdout.split()
    first_parent = git(project.repo, "rev-parse", f"{commits[0]}^1", check=False).stdout.strip()
    if first_parent != good:
        raise InputError(
            f"bisect: --good {good_ref} is not on the first-parent history of --bad {bad_ref} "
            f"(it was merged in from a side branch)"
        )
    return commits


class Bisector:
    def __init__(
        self,
        project: Project,
        kernel: str,
        target: str,
        threshold: float | None,
        measurer: Measurer,
        on_visit: Callable[[Visit], None] | None = None,
        model: bool = False,
    ):
        self.project, self.kernel, self.target = project, kernel, target  # kernel: the model's name when `model`
        self.threshold, self.measurer = threshold, measurer
        self.on_visit = on_visit
        self.model = model
        self.reference: Baseline | None = None
        self.good: Side | None = None  # a model's bisection: --good's measurements judge every revision
        self.predictor: Predictor | None = None  # the model --good's judgement chose (a kernel's bisection)
        self.judgement: Judgement | None = None  # --good's, resolved once: every revision is judged by it
        self.source: ModelSource | None = None
        self.profile: TargetProfile | None = None
        self.threshold_pct = 0.0

    def _load(self, visit: Visit, ref: str, tree):
        """(the revision's side, the followed kernel's or model's spec, how to name the revision)."""
        side = load_side(self.project, ref, visit.sha, tree)
        where = f"{ref} ({visit.sha[:12]})"
        if side.config is None:
            raise InputError(f"bisect: {where} has no {self.project.relative}")
        what = "model" if self.model else "kernel"
        specs = side.config.models if self.model else side.config.kernels
        spec = next((s for s in specs if s.name == self.kernel), None)
        if spec is None:
            raise InputError(f"bisect: {where} does not configure {what} '{self.kernel}'")
        if self.target not in side.config.profiles or (spec.targets is not None and self.target not in spec.targets):
            raise InputError(f"bisect: {where} does not run {what} '{self.kernel}' on target '{self.target}'")
        return side, spec, where

    def _measure_model(self, visit: Visit, ref: str) -> None:
        """Every kernel of the model on the target at `visit`, and its total judged against --good's."""
        with self.project.worktree(visit.sha) as tree:
            side, spec, where = self._load(visit, ref, tree)
            # the caller's cache, not the revision's (its tree goes away after this visit)
            side.config = side.config.with_cache_dir(self.measurer.cache_dir)
            self.measurer.expand(side, [self.target])
            pairs = list(catalogue(side, [self.kernel]))
            self.measurer.measure(side, pairs)
        visit.side = side
        if self.good is None:
            self.good = side
            self.threshold_pct = side.config.judging.threshold_for(spec.threshold, self.threshold)
        run, total = self._model_total(self.good, side)
        visit.verdict = total
        if total.verdict == ERROR:
            failed = [o.result for o in run.outcomes if o.verdict.verdict == ERROR]
            exc = PerfguardError(f"{where}: {failed[0].error if failed else total.changes[0]}")
            exc.exit_code = max((r.exit_code for r in failed), default=exc.exit_code)
            raise exc

    def _model_total(self, before: Side, after: Side):
        """(the check run, the model's total at `after` against `before`'s), scored and judged with --good's
        config, as `perfguard compare` does."""
        pairs = [list(catalogue(side, [self.kernel])) for side in (before, after)]
        assert self.good is not None  # set by the first (--good) visit
        judging = replace(before, config=self.good.config)
        run, _ = judge_sides(judging, after, pairs[1], pairs[0], self.threshold, None, [self.kernel])
        return run, next(m for m in run.model_summaries if m.model == self.kernel and m.target == self.target)

    def _measure(self, visit: Visit, ref: str) -> Side:
        with self.project.worktree(visit.sha) as tree:
            side, spec, where = self._load(visit, ref, tree)
            self.measurer.measure(side, [(self.kernel, self.target)])
            visit.result = side.results[(self.kernel, self.target)]
            if self.judgement is None:  # the good side: its judgement and model judge every revision
                config = side.config
                self.judgement = config.judging.resolve(
                    spec.threshold, spec.limits, self.threshold, machine=config.machines.get(self.target)
                )
                self.threshold_pct = self.judgement.threshold_pct
                if visit.result.ok:
                    self.source = ModelSource.of(config, cache_dir=self.measurer.cache_dir)
                    self.profile = config.profiles[self.target]
                    self.predictor = scorer(self.judgement.model, self.profile, visit.result, self.source)
        return side

    def _judge_kernel(self, visit: Visit, ref: str) -> None:
        side = self._measure(visit, ref)
        result = visit.result
        assert result is not None and self.predictor is not None  # _measure set both
        if not result.ok:
            raise PerfguardError(result.error or "failed")
        if self.reference is None:
            self.reference = baseline_of(result, side.sha)
        good = f"--good {(self.reference.commit or '')[:12]}"
        # set with the predictor at --good, which every later revision is judged against
        assert self.judgement is not None and self.profile is not None and self.source is not None
        visit.verdict = decide(
            self.judgement,
            self.profile,
            result,
            self.reference,
            self.source,
            good,
            f"{good}: kernel '{self.kernel}'",
            explain=False,
            chosen=self.predictor,
        ).verdict

    def visit(self, visit: Visit, ref: str, end: bool) -> Visit:
        """Measure and judge one revision; at an end of the range a failure is an error, elsewhere a skip."""
        try:
            if self.model:
                self._measure_model(visit, ref)
            else:
                self._judge_kernel(visit, ref)
        except PerfguardError as exc:
            if end:
                if visit.result is not None and not visit.result.ok:
                    exc.exit_code = visit.result.exit_code
                raise
            visit.skipped = exc.message
        if self.on_visit:
            self.on_visit(visit)
        return visit

    def run(self, good_ref: str, bad_ref: str) -> Bisection:
        good_sha = self.project.resolve(good_ref, "bisect: --good")
        bad_sha = self.project.resolve(bad_ref, "bisect: --bad")
        commits = first_parent_range(self.project, good_sha, bad_sha, good_ref, bad_ref)
        subject = self.project.subject
        good = self.visit(Visit(good_sha, subject(good_sha), -1), f"--good {good_ref}", end=True)
        bad = self.visit(Visit(bad_sha, subject(bad_sha), len(commits) - 1), f"--bad {bad_ref}", end=True)
        out = Bisection(self.kernel, self.target, good, bad, commits, self.threshold_pct, visits=[good, bad])
        if not bad.crossed:
            return out
        measured = {-1: good, len(commits) - 1: bad}
        lo, hi, skipped = -1, len(commits) - 1, set()
        while True:
            left = [i for i in range(lo + 1, hi) if i not in skipped]
            if not left:
                break
            middle = (lo + hi) / 2
            pick = min(left, key=lambda i: (abs(i - middle), i))
            sha = commits[pick]
            visit = self.visit(Visit(sha, subject(sha), pick), sha[:12], end=False)
            out.visits.append(visit)
            if visit.skipped:
                skipped.add(pick)
                continue
            measured[pick] = visit
            if visit.crossed:
                hi = pick
            else:
                lo = pick
        out.first_bad, out.last_good = measured[hi], measured[lo]
        if self.model:
            assert out.last_good.side is not None and out.first_bad.side is not None  # a model's visits
            out.step = self._model_total(out.last_good.side, out.first_bad.side)[1]
        between = [commits[i] for i in range(lo + 1, hi) if i in skipped]
        out.outcome = AMBIGUOUS if between else FOUND
        out.candidates = between + [commits[hi]] if between else []
        return out
