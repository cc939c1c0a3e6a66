"""The check: configured kernels x targets -> jobs -> results -> verdicts against baselines."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from perfguard.config import Config, KernelSpec
from perfguard.errors import EXIT_INFRA, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, InfraError, InputError
from perfguard.executors import Executor, LocalExecutor
from perfguard.guard.attribution import block_changes
from perfguard.guard.baselines import Baseline, BaselineStore
from perfguard.guard.compare import ERROR, REGRESSION, Verdict, judge, toolchain_summary
from perfguard.guard.report import BlockChange
from perfguard.jsonfile import now_iso
from perfguard.pipeline import Job, JobResult, run_job
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.select import predictor_for


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
    blocks: list[BlockChange] | None = None  # pipeline model: the blocks whose cycles changed most (guard.attribution)


@dataclass
class CheckRun:
    outcomes: list[JudgedResult] = field(default_factory=list)
    models: object = None  # where calibrated models were read from (None: the working tree)
    interrupted: bool = False  # Ctrl-C or SIGTERM stopped the measuring: some results are missing
    allow_errors: bool = False  # --allow-errors: errors stay errors in the report, the exit code ignores them
    # --fail-on-toolchain-change: a toolchain other than the baselines' exits 3 (the environment is
    # not the one the baselines were made in); by default it exits 0 and the headline says so.
    fail_on_toolchain_change: bool = False

    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INFRA
        codes = [] if self.allow_errors else [o.result.exit_code for o in self.outcomes if o.verdict.verdict == ERROR]
        if any(c == EXIT_INFRA for c in codes):
            return EXIT_INFRA
        if codes:
            return EXIT_USAGE
        if self.fail_on_toolchain_change and self.toolchain_summary():
            return EXIT_INFRA
        if any(o.verdict.verdict == REGRESSION for o in self.outcomes):
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


def select(config: Config, kernels: list[str] | None, targets: list[str] | None,
           option_names: tuple[str, str] = ("--kernels", "--targets")) -> list[tuple[KernelSpec, str]]:
    """The kernel x target pairs to run, in config order; unknown names are input errors naming the option."""
    specs = [config.kernel(name, option_names[0]) for name in kernels] if kernels else list(config.kernels)
    if targets:
        for name in targets:
            config.profile(name, option_names[1])
    pairs = []
    for spec in specs:
        for target in targets or config.targets:
            if spec.targets is None or target in spec.targets:
                pairs.append((spec, target))
    if not pairs:
        raise InputError(f"{config.path}: nothing to check (no kernel x target pair selected)")
    return pairs


def make_jobs(config: Config, pairs: list[tuple[KernelSpec, str]], simulator: str | None = None) -> list[Job]:
    return [
        Job(spec, config.profile(target), config.root, config.cache_dir, simulator or config.simulator,
            config.timeout, config.reps, config.warmup, config.require_reference)
        for spec, target in pairs
    ]


def measure(config: Config, jobs: list[Job], workers: int | None = None,
            on_result: Callable[[int, JobResult], None] | None = None,
            executor: Executor | None = None) -> list[JobResult]:
    return (executor or LocalExecutor(workers or config.jobs)).map(run_job, jobs, on_result)


INTERRUPTED = "not measured: the check was interrupted (Ctrl-C or SIGTERM) before this job finished"


def not_measured(job: Job, why: str) -> JobResult:
    spec = job.kernel
    return JobResult(spec.name, job.profile.name, spec.family, dict(spec.params), job.simulator, ok=False,
                     error=f"{job.label}: {why}", exit_code=EXIT_INFRA)


def measure_until_interrupted(config: Config, jobs: list[Job], workers: int | None = None,
                              on_result: Callable[[int, JobResult], None] | None = None,
                              executor: Executor | None = None) -> tuple[list[JobResult], bool]:
    """`measure`, except that Ctrl-C keeps what finished: (results, interrupted), the jobs that
    did not finish coming back as errors."""
    finished: dict[int, JobResult] = {}

    def keep(i: int, result: JobResult) -> None:
        finished[i] = result
        if on_result:
            on_result(i, result)

    try:
        return measure(config, jobs, workers, keep, executor), False
    except KeyboardInterrupt:
        return [finished.get(i) or not_measured(job, INTERRUPTED) for i, job in enumerate(jobs)], True


def run_check(
    config: Config,
    jobs: list[Job],
    workers: int | None = None,
    threshold: float | None = None,
    on_result: Callable[[int, JobResult], None] | None = None,
    store: BaselineStore | None = None,  # or any store with path() and read(), e.g. GitBaselineStore
    executor: Executor | None = None,  # default: a local pool of `workers`
    partial: bool = False,  # on Ctrl-C, judge what finished (the rest are errors) instead of raising
) -> CheckRun:
    if partial:
        results, interrupted = measure_until_interrupted(config, jobs, workers, on_result, executor)
    else:
        results, interrupted = measure(config, jobs, workers, on_result, executor), False
    return judge_results(config, jobs, results, threshold, store, interrupted)


def judge_results(config: Config, jobs: list[Job], results: list[JobResult], threshold: float | None = None,
                  store: BaselineStore | None = None, interrupted: bool = False) -> CheckRun:
    """Verdicts for measured results against `store`'s baselines (the working tree's by default;
    a git revision's, or another revision's measured results for `perfguard compare`)."""
    store = BaselineStore(config.baseline_dir) if store is None else store
    models = getattr(store, "read_file", None) and store  # under --base, models come from that revision too
    run = CheckRun(models=models, interrupted=interrupted)
    for job, result in zip(jobs, results):
        limit = config.kernel_threshold(job.kernel, threshold)
        if not result.ok:
            run.outcomes.append(JudgedResult(result, Verdict(ERROR, limit), error=result.error))
            continue
        note, blocks = None, None
        try:
            predictor = predictor_for(job.profile, result.family, result.simulator, config.baseline_dir, models,
                                      config.cache_dir, config.model)
            baseline = store.read(job.profile.name, job.kernel.name)
            if baseline is not None and baseline.simulator != result.simulator:
                raise InputError(
                    f"{store.path(job.profile.name, job.kernel.name)}: baseline was simulated with "
                    f"{baseline.simulator}, this run with {result.simulator}; refusing to compare"
                )
            predictor, note = like_with_like(predictor, baseline, job.profile)
            verdict = judge(result.stats, baseline, predictor, limit, result.toolchain,
                            str(store.path(job.profile.name, job.kernel.name)), config.kernel_limits(job.kernel),
                            f"{config.path}: kernel '{job.kernel.name}'")
            if baseline is not None and isinstance(predictor, PipelineModel):
                blocks = block_changes(predictor, baseline.stats, result.stats)
        except (InputError, InfraError) as exc:
            result.exit_code = exc.exit_code
            run.outcomes.append(JudgedResult(result, Verdict(ERROR, limit), error=exc.message))
            continue
        run.outcomes.append(JudgedResult(result, verdict, predictor.model_id, predictor.calibrated,
                                    baseline.commit if baseline else None, note=note, blocks=blocks))
    return run


OLD_BASELINE_NOTE = ("the baseline has no block profile (recorded before perfguard kept them): compared with the "
                     "analytical model on both sides; re-record it with 'perfguard baseline update' to use the "
                     "pipeline model")


def like_with_like(predictor, baseline: Baseline | None, profile):
    """(the predictor to judge with, a note or None): a baseline the pipeline model cannot score
    is compared under the old analytical model, on both sides, and the outputs say so."""
    if isinstance(predictor, PipelineModel) and baseline is not None and baseline.stats.blocks is None:
        return AnalyticalModel(profile), OLD_BASELINE_NOTE
    return predictor, None


def head_commit(root: Path) -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def write_baselines(config: Config, jobs: list[Job], results: list[JobResult]) -> list[Path]:
    """Write a baseline for every measured result, as one change under the folder's lock; a failed
    result keeps its old file untouched, and so does every result when any file cannot be written."""
    store = BaselineStore(config.baseline_dir)
    commit = head_commit(config.root)
    baselines = []
    for job, r in zip(jobs, results):
        if not r.ok:
            continue
        predictor = predictor_for(job.profile, r.family, r.simulator, config.baseline_dir, None, config.cache_dir,
                                  config.model)
        baselines.append(Baseline(
            kernel=r.kernel, target=r.target, family=r.family, params=r.params, simulator=r.simulator,
            content_hash=r.content_hash or "", stats=r.stats,
            predicted_time_s=float(predictor.predict_stats([r.stats])[0]),
            model_id=predictor.model_id, commit=commit, created=now_iso(), toolchain=r.toolchain,
        ))
    return store.write_all(baselines)
