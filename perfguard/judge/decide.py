"""The one place a kernel's result is judged: `decide` takes the kernel x target's resolved
judgement (limits.Judgement: threshold, limits, gate, model), chooses the model that scores it
(`scorer`), compares like with like against the baseline and says where the change happened.
check, compare (through check), bisect, result records and the pytest plugin all come here,
so one edit gets one verdict whichever command looks at it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from perfguard import machines
from perfguard.baselines.store import Baseline
from perfguard.config import Config
from perfguard.errors import InfraError, InputError
from perfguard.job.run import Job, JobResult
from perfguard.judge.attribution import Attributed, attribute
from perfguard.judge.verdicts import Verdict, judge
from perfguard.judging import Judgement
from perfguard.machines import MachineProfile
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.predict.intervals import IntervalCalibration, for_machine
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.select import predictor_for
from perfguard.predict.store import ModelFiles
from perfguard.sim.mca_tools import timing_cache_dir
from perfguard.targets import TargetProfile

NO_INTERVAL_NOTE = 'gate = "{gate}" needs a calibrated interval, and none exists for this model: gated on the estimate'
OLD_BASELINE_NOTE = (
    "the baseline has no block profile (recorded before perfguard kept them): compared with the "
    "analytical model on both sides; re-record it with 'perfguard baseline update' to use the "
    "pipeline model"
)


def judgement_of(config: Config, job: Job, threshold: float | None = None) -> Judgement:
    """The job's judgement (made with it: runs.check.make_jobs); a Job made without one (a library
    caller's) gets it resolved here, by the same rule."""
    if job.judgement is not None:
        return job.judgement
    return config.judging.resolve(
        job.kernel.threshold, job.kernel.limits, threshold, machine=config.machines.get(job.profile.name)
    )


def calibration(judgement: Judgement, profile: TargetProfile) -> IntervalCalibration | None:
    """The interval calibration the judgement's machine profile has for the target's ISA; None
    without a profile or without native runs on that ISA (the result says it is uncalibrated)."""
    return for_machine(machines.load(judgement.machine), profile.isa) if judgement.machine else None


@dataclass(frozen=True)
class ModelSource:
    """Where the models that score a run come from: the config's storage folders and the calibrated
    model files (None: the working tree's; a revision's for `check --base` and compare)."""

    baseline_dir: Path
    cache_dir: Path
    files: ModelFiles | None = None
    # target name -> its `machine` profile, whose models score a family the project has none for
    machines: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, config: Config, files: ModelFiles | None = None, cache_dir: Path | None = None) -> ModelSource:
        """The config's storage folders and machine choices (`files`: models read from a revision)."""
        storage = config.storage
        return cls(storage.baseline_dir, storage.cache_dir if cache_dir is None else cache_dir, files, config.machines)

    def machine(self, target: str) -> MachineProfile | None:
        name = self.machines.get(target)
        return None if name is None else machines.load(name)


def scorer(model: str, profile: TargetProfile, measured: JobResult | Baseline, source: ModelSource) -> Predictor:
    """The model that scores a measured kernel (a result, or a baseline) on `profile`, as `model`
    (the config's `model` key, carried by the judgement) chooses it."""
    return predictor_for(
        profile,
        measured.family,
        measured.simulator,
        source.baseline_dir,
        source.files,
        source.cache_dir,
        model,
        measured.params,
        source.machine(profile.name),
    )


def config_scorer(
    config: Config, profile: TargetProfile, measured: JobResult | Baseline, files: ModelFiles | None = None
) -> Predictor:
    """`scorer` with the config's `model` key and its storage folders (`files`: calibrated models
    read from a revision; None: the working tree's)."""
    return scorer(config.judging.model, profile, measured, ModelSource.of(config, files))


def scorer_or_none(
    model: str, profile: TargetProfile, measured: JobResult | Baseline, source: ModelSource
) -> Predictor | None:
    """`scorer`, or None when it cannot be had (the model file or llvm-mca is at fault: the other
    results say so); for a result with nothing to judge, whose report still shows its history."""
    try:
        return scorer(model, profile, measured, source)
    except (InputError, InfraError):
        return None


def like_with_like(
    predictor: Predictor, baseline: Baseline | None, profile: TargetProfile
) -> tuple[Predictor, str | None]:
    """(the predictor to judge with, a note or None): a baseline the pipeline model (or a calibrated
    model on pipeline features) cannot score is compared under the old analytical model, on both
    sides, and the outputs say so."""
    if predictor.needs_blocks and baseline is not None and baseline.stats.blocks is None:
        return AnalyticalModel(profile), OLD_BASELINE_NOTE
    return predictor, None


def attribute_calibrated(
    predictor: Predictor, profile: TargetProfile, cache_dir: Path, baseline: Baseline, result: JobResult
) -> Attributed | None:
    """Where a calibrated model's change happened, said by the pipeline model (the one that scores
    blocks; every output names it beside the verdict's model), when both sides have block profiles;
    None otherwise, or when the pipeline model cannot score them (the verdict stands without it)."""
    if not predictor.calibrated or baseline.stats.blocks is None or result.stats is None or result.stats.blocks is None:
        return None
    try:
        return attribute(
            PipelineModel(profile, timing_cache_dir(cache_dir)),
            baseline.stats,
            result.stats,
            (baseline.loops, result.loops),
        )
    except (InputError, InfraError):
        return None


@dataclass
class Decision:
    """A judged result: its verdict, the model that gave it, a note for the outputs and, where
    something moved, where (the pipeline model's differential view)."""

    verdict: Verdict
    predictor: Predictor
    note: str | None = None
    attributed: Attributed | None = None


def decide(
    judgement: Judgement,
    profile: TargetProfile,
    result: JobResult,
    baseline: Baseline | None,
    source: ModelSource,
    baseline_file: str,
    kernel_where: str,
    explain: bool = True,
    chosen: Predictor | None = None,
) -> Decision:
    """The verdict of `result` against `baseline` under `judgement`. InputError/InfraError when they
    cannot be compared (another simulator, a model that cannot score them): the caller reports an
    error. `explain`: also say where the change happened (bisect explains its first bad step apart).
    `chosen`: the model `scorer` already chose for this judgement (bisect: at --good, whose tree is
    gone when later revisions are judged)."""
    if result.stats is None:
        raise InputError(f"{kernel_where}: no statistics to judge")
    if baseline is not None and baseline.simulator != result.simulator:
        raise InputError(
            f"{baseline_file}: baseline was simulated with {baseline.simulator}, this run with "
            f"{result.simulator}; refusing to compare"
        )
    chosen = chosen if chosen is not None else scorer(judgement.model, profile, result, source)
    predictor, note = like_with_like(chosen, baseline, profile)
    verdict = judge(
        result.stats,
        baseline,
        predictor,
        judgement.threshold_pct,
        result.toolchain,
        baseline_file,
        judgement.limits_by_metric,
        kernel_where,
        calibration(judgement, profile),
        profile.name,
        judgement.gate,
    )
    if baseline is not None and verdict.gate != judgement.gate:
        note = "; ".join(filter(None, [note, NO_INTERVAL_NOTE.format(gate=judgement.gate)]))
    attributed = None
    if not explain or baseline is None or not verdict.delta_pct:
        pass  # nothing moved (a no-op check pays nothing for the view)
    elif isinstance(predictor, PipelineModel):
        attributed = attribute(predictor, baseline.stats, result.stats, (baseline.loops, result.loops))
    else:
        attributed = attribute_calibrated(predictor, profile, source.cache_dir, baseline, result)
    return Decision(verdict, predictor, note, attributed)
