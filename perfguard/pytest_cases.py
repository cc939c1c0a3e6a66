"""One kernel x target at a time: the unit the pytest plugin (and users' own tests) work with.

A shell beside pytest_plugin.py, above guard/ and report/: it judges with guard/ and words
its failures with report/'s formatting and report data.

`CaseRunner.run(spec, target)` builds, simulates and scores one kernel on one target, judges it
against its baseline exactly as `perfguard check` does (the same run_check), optionally rewrites
the baseline, and returns a `CaseResult` that says what happened in words a test failure can
show. `CaseRunner.native(spec, target)` prepares the same object code for in-process native
timing and the metadata that lets `perfguard calibrate` reuse the timing later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from perfguard.config import Config, KernelSpec
from perfguard.config import _kernel as _kernel_table
from perfguard.errors import InfraError, InputError
from perfguard.guard.baselines import BaselineStore
from perfguard.guard.compare import ERROR, NEW, REGRESSION
from perfguard.guard.report import Result, TargetSummary
from perfguard.report.numbers import pct, seconds

MAX_STATS_SHOWN = 8  # changed statistics listed in a failure, largest change first


@dataclass
class CaseResult:
    kernel: str
    target: str
    verdict: str
    threshold_pct: float
    exit_code: int
    delta_pct: float | None = None
    current_time_s: float | None = None
    baseline_time_s: float | None = None
    stat_deltas: dict[str, dict] = field(default_factory=dict)
    error: str | None = None
    updated: Path | None = None  # the baseline file written (--perfguard-update)
    report: Result | None = None  # the report's result (guard.report)
    target_summary: TargetSummary | None = None  # the report's summary of the target (peaks, caches)

    @property
    def label(self) -> str:
        return f"{self.kernel}[{self.target}]"

    @property
    def ok(self) -> bool:
        """False for a regression or an error; a rewritten baseline is ok once measured."""
        if self.updated is not None:
            return True
        return self.verdict not in (REGRESSION, ERROR)

    def changed_stats(self) -> list[tuple[str, dict]]:
        changed = [(name, d) for name, d in self.stat_deltas.items() if d.get("baseline") != d.get("current")]
        return sorted(changed, key=lambda item: -abs(item[1]["delta_pct"] or 0.0))

    def explain(self) -> str:
        """What a failed test shows: the verdict, the delta against the threshold, the stats that moved."""
        if self.verdict == ERROR:
            return f"{self.label}: error: {self.error}"
        head = f"{self.label}: {self.verdict}"
        if self.verdict == NEW:
            return f"{head} (no baseline yet; predicted {seconds(self.current_time_s)})"
        lines = [f"{head} {pct(self.delta_pct)} (threshold {self.threshold_pct:.2f} %): predicted "
                 f"{seconds(self.current_time_s)}, baseline {seconds(self.baseline_time_s)}"]
        changed = self.changed_stats()
        if changed:
            lines.append("changed statistics (baseline -> current):")
            for name, d in changed[:MAX_STATS_SHOWN]:
                lines.append(f"  {name:<17} {d['baseline']} -> {d['current']} ({pct(d['delta_pct'])})")
            if len(changed) > MAX_STATS_SHOWN:
                lines.append(f"  ... and {len(changed) - MAX_STATS_SHOWN} more (see the JSON report)")
        if self.updated is not None:
            lines.append(f"baseline rewritten: {self.updated}")
        return "\n".join(lines)


@dataclass
class NativeCase:
    """A kernel ready to be timed in this process: call() runs it once."""

    call: Any
    extra_info: dict[str, Any]


class CaseRunner:
    def __init__(self, config: Config, simulator: str | None = None, threshold: float | None = None,
                 update: bool = False, base: str | None = None):
        self.config = config
        self.simulator = simulator
        self.threshold = threshold
        self.update = update
        self.store = BaselineStore(config.baseline_dir)
        if base:
            from perfguard.guard.git_baselines import GitBaselineStore

            self.store = GitBaselineStore(config.baseline_dir, base)

    def pairs(self, kernels: list[str] | None = None, targets: list[str] | None = None) -> list[tuple[KernelSpec, str]]:
        from perfguard.guard.check import select

        return select(self.config, kernels, targets, ("--perfguard-kernels", "--perfguard-targets"))

    def spec(self, kernel: str | KernelSpec | Mapping[str, Any]) -> KernelSpec:
        """A configured kernel by name, a KernelSpec, or a [[kernel]]-like mapping."""
        if isinstance(kernel, KernelSpec):
            return kernel
        if isinstance(kernel, str):
            return self.config.kernel(kernel)
        if not isinstance(kernel, Mapping):
            raise InputError(f"kernel must be a name, a KernelSpec or a mapping, got {type(kernel).__name__}")
        # Validated exactly like a [[kernel]] table of perfguard.toml (the config's own validator).
        return _kernel_table(Path("perfguard_check()"), 0, dict(kernel), self.config.profiles)

    def _job(self, spec: KernelSpec, target: str):
        from perfguard.guard.check import make_jobs

        return make_jobs(self.config, [(spec, target)], self.simulator)[0]

    def run(self, kernel: str | KernelSpec | Mapping[str, Any], target: str,
            threshold: float | None = None) -> CaseResult:
        from perfguard.guard.check import CheckRun, run_check, write_baselines
        from perfguard.guard.report_build import build_report

        spec = self.spec(kernel)
        job = self._job(spec, target)
        limit = self.threshold if threshold is None else threshold
        check = run_check(self.config, [job], 1, limit, store=self.store)
        outcome = check.outcomes[0]
        updated = None
        if self.update and outcome.result.ok:
            updated = write_baselines(self.config, [job], [outcome.result])[0]
        report = build_report(CheckRun([outcome]), self.config.path, self.config)
        v = outcome.verdict
        return CaseResult(spec.name, target, v.verdict, v.threshold_pct, check.exit_code(), v.delta_pct,
                          v.current_time_s, v.baseline_time_s, dict(v.stat_deltas), outcome.error, updated,
                          report.results[0], report.targets.get(target))

    def native(self, kernel: str | KernelSpec | Mapping[str, Any], target: str) -> NativeCase:
        """Simulate (for the statistics) and build a host library of the very same object code."""
        from perfguard.pipeline import JobResult, build_kernel, run_job
        from perfguard.predict.calibration import group_label
        from perfguard.native import NativeKernel, check_native, this_machine

        spec = self.spec(kernel)
        job = self._job(spec, target)
        check_native(job.profile)
        simulated = run_job(job)
        if not simulated.ok:
            raise (InputError if simulated.exit_code == InputError.exit_code else InfraError)(simulated.error)
        scratch = JobResult(spec.name, target, spec.family, dict(spec.params), job.simulator, ok=False)
        built = build_kernel(job, scratch)
        library = NativeKernel(built.build_dir, job.profile, built.where)
        shape_keys = getattr(built.family, "shape_keys", ()) if built.family is not None else ()
        shape = {k: simulated.params[k] for k in shape_keys if k in simulated.params}
        extra = {
            "perfguard_schema": 1,
            "kernel": spec.name, "target": target, "family": spec.family, "params": simulated.params,
            "group": group_label(shape) if shape else None,
            "simulator": simulated.simulator, "simulator_fingerprint": simulated.toolchain.get("simulator"),
            "stats": simulated.stats.to_dict(), "flops": simulated.flops, "tensor_bytes": simulated.tensor_bytes,
            "content_hash": simulated.content_hash, "binary_hash": simulated.binary_hash,
            "toolchain": simulated.toolchain, "machine": this_machine().to_dict(),
        }
        return NativeCase(library.call, extra)

