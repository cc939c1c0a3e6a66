"""Measuring tuning candidates: simulate and predict (or time natively on the host ISA).

A candidate is a KernelSpec like any configured kernel, so it goes through the pipeline's
build and simulation cache and through any executor. Its score is the predicted run time
(the calibrated model of the target and family, the analytical one where none is stored);
a candidate that fails to build, crashes or computes a wrong result is a Trial with an
error and no score.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from perfguard.compile.cache import BuildCache
from perfguard.compile.inputs import decode_outputs
from perfguard.config import Config, KernelSpec
from perfguard.errors import InfraError
from perfguard.executors.base import Executor
from perfguard.fingerprints import digest
from perfguard.job.native import check_native, run_harness, time_native
from perfguard.job.run import Job, JobResult, build_kernel, check_built, failure_into, run_jobs
from perfguard.predict.select import predictor_for
from perfguard.targets import TargetProfile

MEASURES = ("sim", "native")


@dataclass
class Trial:
    index: int
    label: str
    ok: bool
    params: dict[str, Any] | None = None  # knob strategy: the full knob set
    predicted_s: float | None = None  # the score: predicted time (sim) or native median (native)
    stats: dict[str, int | None] | None = None
    error: str | None = None
    stage: str | None = None  # where a failed candidate failed: build | run
    content_hash: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _guarded(stage: Callable[[Job, JobResult], object], job: Job) -> JobResult:
    """Run one pipeline stage like run_job does: never raises, a failure is ok=False."""
    started = time.monotonic()
    result = JobResult(job.kernel.name, job.profile.name, job.kernel.family, {}, job.simulator, ok=False)
    with failure_into(result, job.label):
        stage(job, result)
        result.ok = True
    result.params = {}  # a candidate's params can be a whole module: do not send them back
    result.seconds = time.monotonic() - started
    return result


def build_job(job: Job) -> JobResult:
    """Worker: lower, compile and link one candidate into the build cache."""
    return _guarded(lambda j, r: build_kernel(j, r), job)


def _native_check(job: Job, result: JobResult) -> None:
    built = build_kernel(job, result)
    stdout = run_harness(built.binary, ["1", "0"], job.timeout, built.where)
    try:
        outputs = decode_outputs(stdout, built.lowered.tensors)
    except ValueError as exc:
        raise InfraError(f"{built.where}: harness printed garbage natively: {exc}") from None
    assert result.binary_hash is not None  # build_kernel set it
    check_built(job, result, built, outputs, digest(result.binary_hash, "native"))


def native_check_job(job: Job) -> JobResult:
    """Worker: build one candidate and check its outputs natively (host ISA only)."""
    return _guarded(_native_check, job)


class Measurer:
    """Scores candidates of one kernel family on one target through an executor.

    `on_trial(trial)` is called once per finished candidate, in submission order of the
    batch it came in, with trials numbered in submission order.
    """

    def __init__(
        self,
        config: Config,
        profile: TargetProfile,
        family: str,
        executor: Executor,
        measure: str = "sim",
        on_trial: Callable[[Trial], None] | None = None,
    ):
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {MEASURES}")
        if measure == "native":
            check_native(profile)
        self.config, self.profile, self.family, self.executor = config, profile, family, executor
        self.measure_kind = measure
        self.on_trial = on_trial
        self.predictor = predictor_for(
            profile,
            family,
            config.simulation.simulator,
            config.storage.baseline_dir,
            None,
            config.storage.cache_dir,
            config.judging.model,
        )
        self.trials: list[Trial] = []

    @property
    def model(self) -> str:
        if self.measure_kind == "native":
            return "native timing"
        kind = "calibrated" if self.predictor.calibrated else self.predictor.model_id.split("-")[0]
        return f"{kind} {self.predictor.model_id}"

    def job(self, spec: KernelSpec) -> Job:
        c = self.config
        return Job(spec, self.profile, c.root, c.storage.cache_dir, c.simulation.simulator, c.simulation.timeout, 1, 1)

    def new_trial(self, label: str, params: dict | None = None) -> Trial:
        trial = Trial(len(self.trials), label, ok=False, params=params)
        self.trials.append(trial)
        return trial

    def fail(self, trial: Trial, stage: str, error: str | None, seconds: float = 0.0) -> Trial:
        trial.ok, trial.stage, trial.error, trial.seconds = False, stage, error, seconds
        if self.on_trial:
            self.on_trial(trial)
        return trial

    def score(self, trial: Trial, result: JobResult) -> Trial:
        """Fill a trial from the pipeline's result of simulating it."""
        if not result.ok:
            return self.fail(trial, "run", result.error, result.seconds)
        trial.ok, trial.content_hash, trial.seconds = True, result.content_hash, result.seconds
        assert result.stats is not None  # an ok result has its statistics
        trial.stats = result.stats.to_dict()
        trial.predicted_s = float(self.predictor.predict_stats([result.stats])[0])
        if self.on_trial:
            self.on_trial(trial)
        return trial

    def measure(
        self, specs: list[KernelSpec], labels: list[str], params: list[dict | None], record: bool = True
    ) -> list[Trial]:
        """Score a batch: in parallel through the executor (native timings one at a time after).

        With record=False the trials are not part of the search (the configured kernel, the
        check of the written result) and on_trial is not called for them.
        """
        if record:
            trials = [self.new_trial(label, p) for label, p in zip(labels, params)]
        else:
            trials = [Trial(-1, label, ok=False, params=p) for label, p in zip(labels, params)]
            saved, self.on_trial = self.on_trial, None
            try:
                return self._measure(specs, trials)
            finally:
                self.on_trial = saved
        return self._measure(specs, trials)

    def _measure(self, specs: list[KernelSpec], trials: list[Trial]) -> list[Trial]:
        jobs = [self.job(spec) for spec in specs]
        if self.measure_kind == "sim":
            results = run_jobs(self.executor, jobs)
            return [self.score(t, r) for t, r in zip(trials, results)]
        results = self.executor.map(native_check_job, jobs)
        return [self.time(t, r) for t, r in zip(trials, results)]

    def time(self, trial: Trial, result: JobResult) -> Trial:
        """Native mode: time a checked candidate's binary here, alone on a pinned core."""
        if not result.ok:
            return self.fail(trial, "run", result.error, result.seconds)
        started = time.monotonic()
        assert result.content_hash is not None  # an ok result was built
        binary = BuildCache(self.config.storage.cache_dir).build_dir(result.content_hash) / "harness"
        try:
            timing = time_native(binary, self.profile, trial.label)
        except InfraError as exc:
            return self.fail(trial, "run", exc.message, result.seconds)
        trial.ok, trial.content_hash = True, result.content_hash
        trial.predicted_s = timing.median_s
        trial.seconds = result.seconds + time.monotonic() - started
        trial.extra["timing"] = timing.to_dict()
        if self.on_trial:
            self.on_trial(trial)
        return trial

    def best(self) -> Trial | None:
        scored = [t for t in self.trials if t.ok and t.predicted_s is not None]
        return min(scored, key=lambda t: (t.predicted_s, t.index)) if scored else None
