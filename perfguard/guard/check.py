"""The check: configured kernels x targets -> jobs -> results -> verdicts against baselines."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from perfguard.config import Config, KernelSpec
from perfguard.errors import EXIT_INFRA, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, InputError
from perfguard.executors import Executor, LocalExecutor
from perfguard.guard.baselines import Baseline, BaselineStore, now_iso
from perfguard.guard.compare import ERROR, REGRESSION, Verdict, judge
from perfguard.pipeline import Job, JobResult, run_job
from perfguard.predict.select import predictor_for


@dataclass
class Outcome:
    result: JobResult
    verdict: Verdict
    model_id: str | None = None
    calibrated: bool = False
    baseline_commit: str | None = None
    error: str | None = None


@dataclass
class CheckRun:
    outcomes: list[Outcome] = field(default_factory=list)
    models: object = None  # where calibrated models were read from (None: the working tree)

    def exit_code(self) -> int:
        codes = [o.result.exit_code for o in self.outcomes if o.verdict.verdict == ERROR]
        if any(c == EXIT_INFRA for c in codes):
            return EXIT_INFRA
        if codes:
            return EXIT_USAGE
        if any(o.verdict.verdict == REGRESSION for o in self.outcomes):
            return EXIT_REGRESSION
        return EXIT_OK

    def count(self, verdict: str) -> int:
        return sum(1 for o in self.outcomes if o.verdict.verdict == verdict)


def select(config: Config, kernels: list[str] | None, targets: list[str] | None) -> list[tuple[KernelSpec, str]]:
    """The kernel x target pairs to run, in config order; unknown names are input errors."""
    specs = [config.kernel(name) for name in kernels] if kernels else list(config.kernels)
    if targets:
        for name in targets:
            config.profile(name)
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
            config.timeout, config.reps, config.warmup)
        for spec, target in pairs
    ]


def measure(config: Config, jobs: list[Job], workers: int | None = None,
            on_result: Callable[[int, JobResult], None] | None = None,
            executor: Executor | None = None) -> list[JobResult]:
    return (executor or LocalExecutor(workers or config.jobs)).map(run_job, jobs, on_result)


def run_check(
    config: Config,
    jobs: list[Job],
    workers: int | None = None,
    threshold: float | None = None,
    on_result: Callable[[int, JobResult], None] | None = None,
    store: BaselineStore | None = None,  # or any store with path() and read(), e.g. GitBaselineStore
    executor: Executor | None = None,  # default: a local pool of `workers`
) -> CheckRun:
    results = measure(config, jobs, workers, on_result, executor)
    store = BaselineStore(config.baseline_dir) if store is None else store
    models = getattr(store, "read_file", None) and store  # under --base, models come from that revision too
    run = CheckRun(models=models)
    for job, result in zip(jobs, results):
        limit = config.kernel_threshold(job.kernel, threshold)
        if not result.ok:
            run.outcomes.append(Outcome(result, Verdict(ERROR, limit), error=result.error))
            continue
        try:
            predictor = predictor_for(job.profile, result.family, result.simulator, config.baseline_dir, models)
            baseline = store.read(job.profile.name, job.kernel.name)
            if baseline is not None and baseline.simulator != result.simulator:
                raise InputError(
                    f"{store.path(job.profile.name, job.kernel.name)}: baseline was simulated with "
                    f"{baseline.simulator}, this run with {result.simulator}; refusing to compare"
                )
        except InputError as exc:
            result.exit_code = exc.exit_code
            run.outcomes.append(Outcome(result, Verdict(ERROR, limit), error=exc.message))
            continue
        verdict = judge(result.stats, baseline, predictor, limit)
        run.outcomes.append(Outcome(result, verdict, predictor.model_id, predictor.calibrated,
                                    baseline.commit if baseline else None))
    return run


def head_commit(root: Path) -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def write_baselines(config: Config, jobs: list[Job], results: list[JobResult]) -> list[Path]:
    """Write a baseline for every measured result; a failed one keeps its old file untouched."""
    store = BaselineStore(config.baseline_dir)
    commit = head_commit(config.root)
    written = []
    for job, r in zip(jobs, results):
        if not r.ok:
            continue
        predictor = predictor_for(job.profile, r.family, r.simulator, config.baseline_dir)
        written.append(store.write(Baseline(
            kernel=r.kernel, target=r.target, family=r.family, params=r.params, simulator=r.simulator,
            content_hash=r.content_hash or "", stats=r.stats,
            predicted_time_s=float(predictor.predict_stats([r.stats])[0]),
            model_id=predictor.model_id, commit=commit, created=now_iso(), toolchain=r.toolchain,
        )))
    return written
