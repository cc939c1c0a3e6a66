"""The check: configured kernels x targets -> jobs -> results -> verdicts against baselines."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

from perfguard.baselines.store import Baseline, BaselineSource, BaselineStore
from perfguard.config import Config, KernelSpec
from perfguard.document.report import ModelPart
from perfguard.document.result import Attribution, BlockChange, Result
from perfguard.document.verdicts import ERROR, REGRESSION, REMOVED, WRONG_RESULT
from perfguard.errors import EXIT_INFRA, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_WRONG_RESULT, InfraError, InputError
from perfguard.executors import Executor, LocalExecutor, pool_size
from perfguard.job import record
from perfguard.job.run import Job, JobResult, run_jobs
from perfguard.judge.decide import ModelSource, config_scorer, decide, judgement_of, like_with_like, scorer_or_none
from perfguard.judge.model_totals import ModelKernelResult, kernel_rows, skipped_line, total
from perfguard.judge.verdicts import Verdict, toolchain_summary
from perfguard.kernels.models import model_specs, skipped_calls
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.predict.store import ModelFiles
from perfguard.runs.result_record import verdict_of
from perfguard.sim.base import get_simulator


@dataclass
class JudgedResult:
    """A measured (or failed) job with its verdict and the model that judged it."""

    result: JobResult
    verdict: Verdict
    model_id: str | None = None
    calibrated: bool = False
    baseline_commit: str | None = None
    error: str | None = None
    note: str | None = None  # e.g. the baseline predates block profiles: scored with the analytical model
    blocks: list[BlockChange] | None = None  # pipeline model: the blocks whose code changed most (judge.attribution)
    attribution: Attribution | None = None  # pipeline model: the differential view (judge.differential)
    orphaned: bool = False  # `removed`: a committed baseline no configured kernel has (runs.orphans): fails the check
    base_remeasured: str | None = None  # judged against this base commit measured with this toolchain (runs.rebase)
    explained: Result | None = None  # its report entry, from a result record (runs.result_record): nothing to redo
    # The report is explained with these, never by looking them up again: the model that scored the
    # result (the analytical one where the baseline has no block profile; None when none could be
    # had), and the baseline it was compared with (None: new, removed, or not compared).
    predictor: Predictor | None = None
    baseline: Baseline | None = None


@dataclass
class CheckRun:
    outcomes: list[JudgedResult] = field(default_factory=list)
    models: ModelFiles | None = None  # where calibrated models were read from (None: the working tree)
    interrupted: bool = False  # Ctrl-C or SIGTERM stopped the measuring: some results are missing
    allow_errors: bool = False  # --allow-errors: errors stay errors in the report, the exit code ignores them
    # --fail-on-toolchain-change: a toolchain other than the baselines' exits 3 (the environment is
    # not the one the baselines were made in); by default it exits 0 and the headline says so.
    fail_on_toolchain_change: bool = False
    model_summaries: list = field(default_factory=list)  # document.report.ModelTotal per [[model]] x target
    model_parts: list = field(default_factory=list)  # a shard's document.report.ModelPart (no totals: merge sums them)

    def exit_code(self) -> int:
        if any(o.verdict.verdict == WRONG_RESULT for o in self.outcomes):  # the code failed: no retry, no allowing
            return EXIT_WRONG_RESULT
        if self.interrupted:
            return EXIT_INFRA
        codes = [] if self.allow_errors else [o.result.exit_code for o in self.outcomes if o.verdict.verdict == ERROR]
        codes += [EXIT_USAGE for o in self.outcomes if o.orphaned]  # a guard lost is never an allowed error
        if any(c == EXIT_INFRA for c in codes):
            return EXIT_INFRA
        if codes:
            return EXIT_USAGE
        if self.fail_on_toolchain_change and self.toolchain_summary():
            return EXIT_INFRA
        if any(o.verdict.verdict == REGRESSION for o in self.outcomes):
            return EXIT_REGRESSION
        if any(m.verdict == REGRESSION for m in self.model_summaries):
            return EXIT_REGRESSION
        return EXIT_OK

    def toolchain_summary(self) -> dict:
        return toolchain_summary((o.result.target, o.verdict.toolchain_changed) for o in self.outcomes)

    def count(self, verdict: str) -> int:
        return sum(1 for o in self.outcomes if o.verdict.verdict == verdict)

    def not_measured(self) -> int:
        """Errors before any statistics existed (build, simulation, output check, interruption);
        the other errors are results that were measured but could not be compared."""
        return sum(1 for o in self.outcomes if o.verdict.verdict == ERROR and not o.result.ok)


def whole_models(pairs: list[tuple[KernelSpec, str]]) -> dict[tuple[str, str], list[str]]:
    """Each [[model]] x target of a run and its kernels: what a shard of the run reports its part of."""
    out: dict[tuple[str, str], list[str]] = {}
    for spec, target in pairs:
        if spec.model is not None:
            out.setdefault((spec.model, target), []).append(spec.name)
    return out


def select(
    config: Config,
    kernels: list[str] | None,
    targets: list[str] | None,
    option_names: tuple[str, str] = ("--kernels", "--targets"),
) -> list[tuple[KernelSpec, str]]:
    """The kernel x target pairs to run, in config order; unknown names are input errors naming the option."""
    if targets:
        for name in targets:
            config.profile(name, option_names[1])
    specs = _selected_specs(config, kernels, list(targets or config.targets), option_names[0])
    pairs = []
    for spec in specs:
        for target in targets or config.targets:
            if spec.targets is None or target in spec.targets:
                pairs.append((spec, target))
    if not pairs:
        raise InputError(f"{config.path}: nothing to check (no kernel x target pair selected)")
    return pairs


def _selected_specs(config: Config, names: list[str] | None, targets: list[str], option: str) -> list[KernelSpec]:
    """The configured kernels, then every [[model]]'s extracted kernels; `names` may name a model
    (all its kernels), one of its kernels, or a configured kernel."""
    model_names = {m.name for m in config.models}
    wanted = set(names or [])
    configured = {k.name for k in config.kernels}
    specs = [config.kernel(n, option) for n in names if n in configured] if names else list(config.kernels)
    for model in config.models:
        mine = [n for n in wanted if n.startswith(model.name + ".")]
        if names and model.name not in wanted and not mine:
            continue
        found = model_specs(config, model, [t for t in targets if model.targets is None or t in model.targets])
        if model.name not in wanted and names:  # some of its kernels only: guarded, but no model total
            found = [replace(s, model=None) for s in found if s.name in wanted]
        specs.extend(found)
    if names:
        known = {s.name for s in specs} | model_names
        for n in names:
            if n in known:
                continue
            owner = next((m for m in config.models if n.startswith(m.name + ".")), None)
            if owner is not None:
                theirs = sorted({s.name for s in model_specs(config, owner, targets)})
                raise InputError(f"{option}: unknown kernel '{n}' (model '{owner.name}' has {', '.join(theirs)})")
            if config.models:
                raise InputError(
                    f"{option}: unknown kernel '{n}' (configured in {config.path}: kernels "
                    f"{', '.join(k.name for k in config.kernels) or 'none'}; models "
                    f"{', '.join(sorted(model_names))})"
                )
            config.kernel(n, option)  # raises: unknown kernel, naming the option
    return specs


def make_jobs(
    config: Config,
    pairs: list[tuple[KernelSpec, str]],
    simulator: str | None = None,
    threshold: float | None = None,
    marker: float | None = None,
) -> list[Job]:
    """The jobs of the pairs, each with its resolved judgement (the command line's `threshold`, a
    test's `marker`); InputError first when the simulator cannot execute a target's code."""
    sim, cache_dir, judging = config.simulation, config.storage.cache_dir, config.judging
    name = simulator or sim.simulator
    backend = get_simulator(name, cache_dir)
    for target in dict.fromkeys(target for _, target in pairs):
        backend.check_target(config.profile(target))
    return [
        Job(
            spec,
            config.profile(target),
            config.root,
            cache_dir,
            name,
            sim.timeout,
            sim.reps,
            sim.warmup,
            config.require_reference,
            warm_pipeline=judging.model != "analytical",
            judgement=judging.resolve(spec.threshold, spec.limits, threshold, marker, config.machines.get(target)),
        )
        for spec, target in pairs
    ]


def recorded(jobs: list[Job]) -> list[JobResult | None]:
    """Each job's recorded result where nothing it depends on changed (perfguard.job.record), else None."""
    return [record.lookup(job) for job in jobs]


def measure(
    config: Config,
    jobs: list[Job],
    workers: int | None = None,
    on_result: Callable[[int, JobResult], None] | None = None,
    executor: Executor | None = None,
    known: list[JobResult | None] | None = None,
) -> list[JobResult]:
    """Every job's result, in job order: those in `known` (recorded results, `recorded`) as they
    are, the others run by the executor (started only when there is one to run; by default a local
    pool of executors.pool_size workers) and recorded."""
    known = known if known is not None else [None] * len(jobs)
    results: list[JobResult | None] = list(known)
    for i, result in enumerate(known):
        if result is not None and on_result:
            on_result(i, result)
    todo = [i for i, result in enumerate(known) if result is None]

    def finished(k: int, result: JobResult) -> None:
        results[todo[k]] = result
        record.store(jobs[todo[k]], result)  # as each finishes: an interrupted check keeps what it did
        if on_result:
            on_result(todo[k], result)

    if todo:
        pool = executor or LocalExecutor(pool_size(workers or config.jobs, len(todo)))
        run_jobs(pool, [jobs[i] for i in todo], finished)
    return results  # type: ignore[return-value]


INTERRUPTED = "not measured: the check was interrupted (Ctrl-C or SIGTERM) before this job finished"


def not_measured(job: Job, why: str) -> JobResult:
    spec = job.kernel
    return JobResult(
        spec.name,
        job.profile.name,
        spec.family,
        dict(spec.params),
        job.simulator,
        ok=False,
        error=f"{job.label}: {why}",
        exit_code=EXIT_INFRA,
    )


def measure_until_interrupted(
    config: Config,
    jobs: list[Job],
    workers: int | None = None,
    on_result: Callable[[int, JobResult], None] | None = None,
    executor: Executor | None = None,
    known: list[JobResult | None] | None = None,
) -> tuple[list[JobResult], bool]:
    """`measure`, except that Ctrl-C keeps what finished: (results, interrupted), the jobs that
    did not finish coming back as errors."""
    finished: dict[int, JobResult] = {}

    def keep(i: int, result: JobResult) -> None:
        finished[i] = result
        if on_result:
            on_result(i, result)

    try:
        return measure(config, jobs, workers, keep, executor, known), False
    except KeyboardInterrupt:
        return [finished.get(i) or not_measured(job, INTERRUPTED) for i, job in enumerate(jobs)], True


def run_check(
    config: Config,
    jobs: list[Job],
    workers: int | None = None,
    threshold: float | None = None,
    on_result: Callable[[int, JobResult], None] | None = None,
    store: BaselineSource | None = None,  # default: the working tree's baselines
    executor: Executor | None = None,  # default: a local pool of `workers`
    partial: bool = False,  # on Ctrl-C, judge what finished (the rest are errors) instead of raising
    whole_models: dict[tuple[str, str], list[str]] | None = None,  # a shard: each model's kernels in the whole run
    known: list[JobResult | None] | None = None,  # recorded results (`recorded`): those jobs are not run
) -> CheckRun:
    if partial:
        results, interrupted = measure_until_interrupted(config, jobs, workers, on_result, executor, known)
    else:
        results, interrupted = measure(config, jobs, workers, on_result, executor, known), False
    return judge_results(config, jobs, results, threshold, store, interrupted, whole_models)


def judge_results(
    config: Config,
    jobs: list[Job],
    results: list[JobResult],
    threshold: float | None = None,
    store: BaselineSource | None = None,
    interrupted: bool = False,
    whole_models: dict[tuple[str, str], list[str]] | None = None,
    also_models: Collection[tuple[str, str]] = frozenset(),
    known: list[Result | None] | None = None,
) -> CheckRun:
    """Verdicts for measured results against `store`'s baselines (the working tree's by default;
    a git revision's, or another revision's measured results for `perfguard compare`). With
    `whole_models` (a shard), each model's part of its total instead of the total. `also_models`:
    model x target views wanted even without a current kernel (compare: a model only the base has).
    `known`: report entries from result records (runs.result_record), taken as judged."""
    storage = config.storage
    store = BaselineStore(storage.baseline_dir) if store is None else store
    models = store.models()
    source = ModelSource.of(config, models)
    run = CheckRun(models=models, interrupted=interrupted)
    for i, (job, result) in enumerate(zip(jobs, results)):
        judgement = judgement_of(config, job, threshold)
        entry = known[i] if known else None
        if entry is not None and result.ok:
            run.outcomes.append(
                JudgedResult(
                    result,
                    verdict_of(entry),
                    entry.model_id,
                    entry.calibrated,
                    entry.baseline_commit,
                    note=entry.note,
                    blocks=entry.blocks,
                    attribution=entry.attribution,
                    explained=entry,
                )
            )
            continue
        if not result.ok:
            verdict = WRONG_RESULT if result.exit_code == EXIT_WRONG_RESULT else ERROR
            run.outcomes.append(
                JudgedResult(
                    result,
                    Verdict(verdict, judgement.threshold_pct),
                    error=result.error,
                    predictor=scorer_or_none(judgement.model, job.profile, result, source),
                )
            )
            continue
        try:
            baseline = store.read(job.profile.name, job.kernel.name)
            decision = decide(
                judgement,
                job.profile,
                result,
                baseline,
                source,
                str(store.path(job.profile.name, job.kernel.name)),
                f"{config.path}: kernel '{job.kernel.name}'",
            )
        except (InputError, InfraError) as exc:
            result.exit_code = exc.exit_code
            chosen = scorer_or_none(judgement.model, job.profile, result, source)
            run.outcomes.append(
                JudgedResult(result, Verdict(ERROR, judgement.threshold_pct), error=exc.message, predictor=chosen)
            )
            continue
        predictor, attributed = decision.predictor, decision.attributed
        run.outcomes.append(
            JudgedResult(
                result,
                decision.verdict,
                predictor.model_id,
                predictor.calibrated,
                baseline.commit if baseline else None,
                note=decision.note,
                blocks=attributed.blocks if attributed else None,
                attribution=attributed.attribution if attributed else None,
                predictor=predictor,
                baseline=baseline,
            )
        )
    if whole_models is None:
        run.model_summaries = model_summaries(config, jobs, run.outcomes, store, threshold, models, also_models)
    else:
        run.model_parts = model_parts(config, jobs, run.outcomes, store, threshold, models, whole_models)
    return run


def model_summaries(
    config: Config,
    jobs: list[Job],
    outcomes: list[JudgedResult],
    store,
    threshold: float | None,
    models,
    also: Collection[tuple[str, str]] = frozenset(),
) -> list:
    """Each [[model]] x target whose kernels were all checked (and each in `also`): its total and
    verdict (judge.model_totals)."""
    threshold_for = config.judging.threshold_for
    return [
        total(spec.name, target, threshold_for(spec.threshold, threshold), rows, spec.database, skipped)
        for spec, target, rows, skipped in _model_rows(config, jobs, outcomes, store, models, also=also)
    ]


def model_parts(
    config: Config,
    jobs: list[Job],
    outcomes: list[JudgedResult],
    store,
    threshold: float | None,
    models,
    whole: dict[tuple[str, str], list[str]],
) -> list:
    """A shard's parts of each [[model]] x target of the whole run (`whole`: its kernels in every
    shard): the rows `perfguard merge` sums into the totals (document.report.ModelPart)."""
    found = {
        (spec.name, target): (rows, skipped)
        for spec, target, rows, skipped in _model_rows(config, jobs, outcomes, store, models, whole)
    }
    parts = []
    for spec in config.models:
        for target in _targets(config, {t for _, t in whole}):
            if (spec.name, target) in whole:
                rows, skipped = found.get((spec.name, target), ([], []))
                parts.append(
                    ModelPart(
                        spec.name,
                        target,
                        config.judging.threshold_for(spec.threshold, threshold),
                        sorted(whole[(spec.name, target)]),
                        rows,
                        spec.database,
                        skipped,
                    )
                )
    return parts


def _targets(config: Config, seen) -> list[str]:
    """The config's targets in its order, then any other target a run has (compare: the head's only)."""
    return list(dict.fromkeys([*config.targets, *sorted(seen)]))


def _model_rows(
    config: Config,
    jobs: list[Job],
    outcomes: list[JudgedResult],
    store,
    models,
    whole: dict[tuple[str, str], list[str]] | None = None,
    also: Collection[tuple[str, str]] = frozenset(),
):
    """(model spec, target, rows, skipped) per [[model]] x target with a kernel among `jobs` or in
    `also` (a shard: every one in `whole`, the model's kernels in the whole run, none of which is a
    leftover); `skipped`: the calls the model's `skip` leaves out."""
    groups: dict[tuple[str, str], list] = {key: [] for key in [*(whole or {}), *also]}
    for job, outcome in zip(jobs, outcomes):
        if job.kernel.model is not None:
            groups.setdefault((job.kernel.model, job.profile.name), []).append((job, outcome))
    names = getattr(store, "names", None)
    for spec in config.models:
        for target in _targets(config, {t for _, t in groups}):
            pairs = groups.get((spec.name, target))
            if pairs is None:
                continue
            profile = config.profile(target)
            results = []
            for job, o in pairs:
                try:
                    baseline = store.read(target, job.kernel.name)
                except InputError:
                    baseline = None  # its own outcome already says why
                results.append(
                    ModelKernelResult(
                        job.kernel.name,
                        job.kernel.params.get("op"),
                        job.kernel.params.get("calls", 1),
                        o.verdict.verdict,
                        o.verdict.current_time_s,
                        o.verdict.baseline_time_s,
                        baseline,
                        dict(job.kernel.params),
                        tuple(job.kernel.positions or ()),
                    )
                )
            current = {job.kernel.name for job, _ in pairs} | set((whole or {}).get((spec.name, target), ()))
            leftover = [
                store.read(target, n)
                for n in (names(target) if names else [])
                if n.startswith(spec.name + ".") and n not in current
            ]
            order = store.model_graph(target, spec.name)  # a damaged file is an input error naming it

            def score(baseline: Baseline, profile=profile) -> float:
                predictor, _ = like_with_like(config_scorer(config, profile, baseline, models), baseline, profile)
                return float(predictor.predict_stats([baseline.stats])[0])

            try:
                skipped = [skipped_line(entry) for entry in skipped_calls(config, spec, target)] if spec.skip else []
            except (InputError, InfraError):
                skipped = []  # the kernels were extracted for this run: a failure here is reported there
            yield spec, target, kernel_rows(results, [b for b in leftover if b is not None], score, order), skipped


def removed_outcome(
    config: Config,
    shown: JobResult,
    stats,
    threshold: float | None,
    models,
    commit: str | None,
    spec: KernelSpec | None = None,
    note: str | None = None,
    orphaned: bool = False,
) -> JudgedResult:
    """A kernel with a baseline and no current run: `removed`, with the baseline's time under this
    run's model (None when it cannot be scored), never unchanged. `compare`: a kernel only the base
    revision has (`stats` its base run's); `check`: an orphaned baseline (runs.orphans)."""
    limit = config.judging.threshold_for(spec.threshold if spec is not None else None, threshold)
    time_s, model_id, calibrated = None, None, False
    profile = config.profiles.get(shown.target)
    source = ModelSource.of(config, models)
    predictor = None if profile is None else scorer_or_none(config.judging.model, profile, shown, source)
    if stats is not None and predictor is not None and profile is not None:
        scoring = AnalyticalModel(profile) if predictor.needs_blocks and stats.blocks is None else predictor
        try:
            time_s = float(scoring.predict_stats([stats])[0])
            predictor, model_id, calibrated = scoring, scoring.model_id, scoring.calibrated
        except (InputError, InfraError):  # the verdict stays `removed`; a model problem shows on the other results
            pass
    return JudgedResult(
        shown,
        Verdict(REMOVED, limit, baseline_time_s=time_s),
        model_id,
        calibrated,
        commit,
        note=note,
        orphaned=orphaned,
        predictor=predictor,
    )
