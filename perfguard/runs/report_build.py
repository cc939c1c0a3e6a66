"""The Report of a check: every judged result, its target's numbers, its analysis, the baseline's
history and the calibrated model's metrics.

Built once, when the check has the config at hand, so `perfguard report` re-renders from the
JSON alone. Every number comes from the model that scored the result (calibrated, pipeline or
analytical), like its verdict.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from perfguard import __version__, machines
from perfguard.config import Config
from perfguard.document.report import (
    JobTimings,
    Report,
    Seconds,
    Summary,
    TargetSummary,
    Timings,
    ToolchainSummary,
    WorkerCost,
)
from perfguard.document.result import (
    Calibration,
    Interval,
    LimitBreach,
    Machine,
    Mismatch,
    Result,
    StatDelta,
    ToolchainDifference,
)
from perfguard.document.verdicts import VERDICTS, summary_key
from perfguard.jsonfile import now_iso
from perfguard.judge.analysis import analyse, target_summary
from perfguard.judge.history import BaselineHistory, kernel_history
from perfguard.judge.model_totals import count_kernels
from perfguard.predict.base import Predictor
from perfguard.runs.check import CheckRun, JudgedResult
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile
from perfguard.timings import JOB_STAGES, STAGE_NAMES, Span, StageClock

MIN_STEP_FLOOR_PCT = 0.1  # a zero threshold still needs a step size for change points


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a metric is written as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def calibration(predictor: Predictor) -> Calibration | None:
    """Hold-out metrics and the predicted-vs-native points stored with the calibrated model that
    scored the result (the predictor carries its file's metadata: no second lookup)."""
    meta = getattr(predictor, "meta", None) if predictor.calibrated else None
    if not meta:
        return None
    summary = (meta.get("holdout") or {}).get("summary")
    if not isinstance(summary, dict):
        return None
    out = Calibration({k: _finite(v) for k, v in summary.items() if v is None or isinstance(v, (int, float, str))})
    points = meta.get("scatter")
    if isinstance(points, list):
        out.points = [[float(p), float(n)] for p, n in points if math.isfinite(p) and math.isfinite(n)]
        out.points_label = "the stored model on its training variants (in-sample)"
    return out


def result_of(o: JudgedResult) -> Result:
    """One judged result as the report holds it (before its analysis, history and calibration)."""
    r, v = o.result, o.verdict
    return Result(
        kernel=r.kernel,
        target=r.target,
        family=r.family,
        params=r.params,
        simulator=r.simulator,
        verdict=v.verdict,
        delta_pct=v.delta_pct,
        threshold_pct=v.threshold_pct,
        current_time_s=v.current_time_s,
        baseline_time_s=v.baseline_time_s,
        baseline_commit=o.baseline_commit,
        model_id=o.model_id,
        calibrated=o.calibrated,
        stats=None if r.stats is None else r.stats.to_dict(),
        stat_deltas={k: StatDelta(**d) for k, d in v.stat_deltas.items()},
        error=o.error,
        measured=r.ok,
        toolchain_changed={k: ToolchainDifference(**d) for k, d in v.toolchain_changed.items()},
        limit_breaches={k: LimitBreach(**d) for k, d in v.limit_breaches.items()},
        note=o.note,
        blocks=o.blocks,
        attribution=o.attribution,
        flops=r.flops,
        reference=r.reference,
        max_error=r.max_error,
        tensor_bytes=r.tensor_bytes,
        content_hash=r.content_hash,
        toolchain=r.toolchain,
        rebuilt=r.rebuilt,
        resimulated=r.resimulated,
        seconds=round(r.seconds, 3),
        interval=None
        if v.interval is None
        else Interval(
            v.interval.low_pct, v.interval.high_pct, v.interval.level, v.interval.basis, v.interval.exact, v.straddles
        ),
        gate=v.gate,
        mismatch=None if r.mismatch is None else Mismatch(**r.mismatch),
        orphaned=o.orphaned,
        baseline_params=None if o.baseline is None else dict(o.baseline.params),
        baseline_content_hash=None if o.baseline is None else o.baseline.content_hash or None,
        inputs=(dict(r.inputs) or None) if r.ok else None,
        baseline_inputs=baseline_inputs(o),
        source_diff=source_diff(o),
        same_code=same_code(o),
        base_remeasured=o.base_remeasured,
    )


def baseline_inputs(o: JudgedResult) -> dict | None:
    """The inputs the baseline recorded, where there is a change to name against them: None when it
    recorded none (before schema 5) or neither side configures any ({} then says nothing)."""
    r, baseline = o.result, o.baseline
    if not r.ok or baseline is None or baseline.inputs is None or not (baseline.inputs or r.inputs):
        return None
    return dict(baseline.inputs)


SOURCE_DIFF_LINES = 120  # a longer diff is cut (the baseline file and the kernel's module hold it all)


def source_diff(o: JudgedResult) -> list[str]:
    """A user kernel's entry function against its baseline's: a unified diff's lines with two lines
    of context, [] when the baseline recorded none (a family's kernel, a baseline before schema 5)
    or they are the same."""
    r, baseline = o.result, o.baseline
    if not r.ok or baseline is None or baseline.source is None or r.source is None or baseline.source == r.source:
        return []
    lines = list(
        difflib.unified_diff(
            baseline.source.splitlines(), r.source.splitlines(), "baseline", "current", n=2, lineterm=""
        )
    )
    return lines if len(lines) <= SOURCE_DIFF_LINES else lines[:SOURCE_DIFF_LINES] + ["... (cut)"]


def same_code(o: JudgedResult) -> bool:
    """The kernel changed (another build key than the baseline's) but ran the baseline's machine
    code: its block profile (each block executed: address, bytes and count) is the baseline's. The
    same build key says so by itself (text.same_code); a simulator without a block profile cannot."""
    r, baseline = o.result, o.baseline
    if baseline is None or r.stats is None or not r.content_hash or r.content_hash == baseline.content_hash:
        return False
    return (
        r.stats.blocks is not None
        and baseline.stats.blocks is not None
        and bool(r.stats.blocks.blocks)
        and r.stats.blocks == baseline.stats.blocks
        and r.simulator == baseline.simulator
    )


def build_report(run: CheckRun, config_path: Path | None = None, config: Config | None = None) -> Report:
    """The run's Report; with `config`, also target summaries, per-result analysis and baseline
    history, each from the model that judged the result and the baseline it was judged against."""
    order = {name: i for i, name in enumerate(VERDICTS)}
    entries = sorted(
        ((o.explained or result_of(o), o) for o in run.outcomes),
        key=lambda e: (order[e[0].verdict], e[0].kernel, e[0].target),
    )
    results = [r for r, _ in entries]
    summary = Summary(
        exit_code=run.exit_code(),
        **{summary_key(name): run.count(name) for name in VERDICTS},
        not_measured=run.not_measured(),
        toolchain_changed=ToolchainSummary.of(run.toolchain_summary()),
        model_regressions=sum(m.verdict == "regression" for m in run.model_summaries),
        interrupted=run.interrupted,
        errors_allowed=run.allow_errors,
        orphaned=sum(o.orphaned for o in run.outcomes),
        remeasured=sum(1 for r in results if r.base_remeasured),
    )
    report = Report(
        summary=summary,
        results=results,
        perfguard_version=__version__,
        created=now_iso(),
        config=None if config_path is None else str(config_path),
        models=list(run.model_summaries),
        model_parts=list(run.model_parts),
    )
    count_kernels(summary, results, report.models)  # a model's removed and changed kernels, as a reviewer counts
    if config is not None:
        history = BaselineHistory(config.storage.baseline_dir)
        report.commit = history.head
        for r, o in entries:
            profile = config.profile(r.target)
            target = report.targets.setdefault(r.target, target_summary(profile))
            if o.explained is None:  # a result record's entry is explained already
                r.machine = machine_of(config, profile, r, o.predictor)
                explain_result(
                    r,
                    o.predictor,
                    o.result.stats,
                    None if o.baseline is None else o.baseline.stats,
                    profile,
                    target,
                    history,
                )
    return report


def machine_of(config: Config, profile: TargetProfile, r: Result, predictor: Predictor | None) -> Machine | None:
    """What a scored result's time stands for: llvm-mca's CPU where the model reads llvm-mca's
    cycles (the pipeline model, a calibrated model on its features), and the machine profile its
    target chose, or why its result is uncalibrated (None: no model scored it)."""
    if not r.model_id:
        return None
    kind = "calibrated" if r.calibrated else "pipeline" if r.model_id.startswith("pipeline-") else "analytical"
    uses_mca = kind == "pipeline" or (kind == "calibrated" and bool(getattr(predictor, "needs_blocks", False)))
    out = Machine(kind, mca_cpu=profile.pipeline_cpu if uses_mca else "")
    name = config.machines.get(profile.name)
    if kind == "calibrated":
        out.trained_on = _trained_on(r.model_id, name, profile.isa, getattr(predictor, "meta", {}) or {})
    if name:
        chosen = machines.load(name)
        section = chosen.isas[profile.isa]
        out.profile, out.cpu, out.date, out.pairs = name, chosen.cpu.describe(), chosen.date, section.pairs
        if r.interval is None and r.baseline_time_s is not None and r.current_time_s is not None:
            out.uncalibrated = f"no {kind} model was scored on {profile.isa} verdict pairs in {name}"
        return out
    on_isa = [n for n in machines.names() if profile.isa in machines.load(n).isas]
    out.uncalibrated = (
        f"{machines.NO_PROFILE} (on {profile.isa}: {', '.join(on_isa)})" if on_isa else machines.NO_NATIVE_RUNS
    )
    return out


def _trained_on(model_id: str, profile_name: str | None, isa: str, meta: dict) -> str:
    """Whose native runs a calibrated model learnt from: its machine profile's, else its dataset's CPUs."""
    if profile_name and any(m["model_id"] == model_id for m in machines.load(profile_name).isas[isa].models.values()):
        return f"{profile_name}'s native runs"
    cpus = sorted({str(m.get("cpu")) for m in meta.get("machines", []) if isinstance(m, dict) and m.get("cpu")})
    return f"native runs on {', '.join(cpus)}" if cpus else "native runs on an unrecorded CPU"


def explain_result(
    r: Result,
    predictor: Predictor | None,
    current: Stats | None,
    baseline: Stats | None,
    profile: TargetProfile,
    target: TargetSummary,
    history: BaselineHistory,
) -> None:
    """One result's analysis, baseline history and calibration, under `predictor` (None: the model
    could not be had, and the result says why)."""
    if predictor is None:
        r.analysis, r.history = None, None
        return
    r.analysis = analyse(r, current, baseline, profile, predictor, target)
    r.history = kernel_history(
        history,
        r.target,
        r.kernel,
        r.simulator,
        score=lambda b: float(predictor.predict_stats([b.stats])[0]),
        usable=lambda b: b.stats.blocks is not None or not predictor.needs_blocks,
        min_step_pct=max(r.threshold_pct or 0.0, MIN_STEP_FLOOR_PCT),
    )
    r.calibration = calibration(predictor)


def _seconds(span: Span) -> Seconds:
    return Seconds(round(span.wall_s, 3), round(span.cpu_s, 3))


def check_timings(
    clock: StageClock,
    results: list,
    reused: list[bool] | None = None,
    workers: int = 0,
    whole_check_reused: bool = False,
    reruns: list[str] | None = None,
) -> Timings:
    """The check's Timings: its clock's stages, each job's (pipeline.JobResult.timings), their sums
    per job stage, and "workers", what the job stage cost beyond the jobs it ran; for jobs that ran
    on Dask workers, each worker's jobs and CPU (not this process's, so not in the total)."""
    reused = reused or [False] * len(results)
    stages = dict(clock.stages)
    jobs = []
    cluster: dict[str, WorkerCost] = {}
    ran_cpu = 0.0
    for result, was_reused in zip(results, reused):
        job_stages = {name: result.timings[name] for name in JOB_STAGES if name in result.timings}
        for name, span in job_stages.items():
            stages.setdefault(name, Span()).add(span)
        imports = result.timings.get("imports", Span())  # TVM's, in each worker's first job: the pool's cost
        whole = (
            Span()
            if was_reused
            else Span(max(0.0, result.seconds - imports.wall_s), max(0.0, result.cpu_seconds - imports.cpu_s))
        )
        ran_cpu += whole.cpu_s
        worker = None if was_reused else getattr(result, "worker", None)
        jobs.append(
            JobTimings(
                result.kernel,
                result.target,
                _seconds(whole),
                {name: _seconds(span) for name, span in job_stages.items()},
                reused=was_reused,
                worker=worker,
            )
        )
        if worker:
            cost = cluster.setdefault(worker, WorkerCost(worker, 0, 0.0))
            cost.jobs, cost.cpu_s = cost.jobs + 1, round(cost.cpu_s + result.cpu_seconds, 3)
    if "jobs" in stages and workers and not cluster:  # the pool's own cost; its wall time is not apart from the jobs'
        stages["workers"] = Span(0.0, max(0.0, stages["jobs"].cpu_s - ran_cpu))
    order = {name: i for i, name in enumerate(STAGE_NAMES)}
    return Timings(
        _seconds(clock.total()),
        {name: _seconds(stages[name]) for name in sorted(stages, key=lambda n: order.get(n, len(order)))},
        jobs,
        workers,
        reused=whole_check_reused,
        cluster=[cluster[w] for w in sorted(cluster)],
        reruns=list(reruns or []),
    )
