"""One kernel x target at a time: the unit the pytest plugin (and users' own tests) work with.

A shell beside shells/pytest_plugin.py, above runs/, judge/ and report/: it judges with runs/ and judge/
(as `perfguard check` does) and words its failures with report/'s formatting and report data.

`CaseRunner.run(spec, target)` builds, simulates and scores one kernel on one target (or takes its
job record when nothing it depends on changed: no TVM, no simulator), judges it against its
baseline exactly as `perfguard check` does (the same run_check), optionally rewrites the
baseline, and returns a `CaseResult` that says what happened in words a test failure can
show. `CaseRunner.native(spec, target)` prepares the same object code for in-process native
timing and the metadata that lets `perfguard calibrate` reuse the timing later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfguard.baselines.git_revision import GitBaselineStore
from perfguard.baselines.store import BaselineSource, BaselineStore
from perfguard.config import Config, KernelSpec, parse_kernel
from perfguard.document.report import ModelTotal, TargetSummary
from perfguard.document.result import Result
from perfguard.document.verdicts import ERROR, IMPROVEMENT, NEW, REGRESSION, REMOVED, WRONG_RESULT
from perfguard.errors import EXIT_USAGE, InfraError, InputError
from perfguard.job.native import NativeKernel, check_native, this_machine
from perfguard.job.run import JobResult, build_kernel, run_job
from perfguard.kernels.models import model_specs
from perfguard.report.numbers import pct, seconds
from perfguard.report.text import change_text, delta_with_interval, interval_note, machine_line, what_changed_most
from perfguard.runs.baseline_update import write_baselines
from perfguard.runs.calibration import group_label
from perfguard.runs.check import CheckRun, make_jobs, recorded, run_check, select
from perfguard.runs.orphans import orphan_outcomes
from perfguard.runs.report_build import build_report

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
    report: Result | None = None  # the report's result (document.report)
    target_summary: TargetSummary | None = None  # the report's summary of the target (peaks, caches)
    orphaned: bool = False  # `removed`: a committed baseline no configured kernel has (runs.orphans)

    @property
    def label(self) -> str:
        return f"{self.kernel}[{self.target}]"

    @property
    def ok(self) -> bool:
        """False for a wrong result, a regression or an error; a rewritten baseline is ok once measured."""
        if self.updated is not None:
            return True
        return self.verdict not in (WRONG_RESULT, REGRESSION, ERROR) and not self.orphaned

    def changed_stats(self) -> list[tuple[str, dict]]:
        changed = [(name, d) for name, d in self.stat_deltas.items() if d.get("baseline") != d.get("current")]
        return sorted(changed, key=lambda item: -abs(item[1]["delta_pct"] or 0.0))

    def explain(self) -> str:
        """What a failed test shows: the verdict, the delta against the threshold, the stats that moved."""
        if self.verdict in (ERROR, WRONG_RESULT, REMOVED):
            return f"{self.label}: {self.verdict}: {self.error}"
        head = f"{self.label}: {self.verdict}"
        if self.verdict == NEW:
            return f"{head} (no baseline yet; predicted {seconds(self.current_time_s)})"
        delta = pct(self.delta_pct) if self.report is None else delta_with_interval(self.report)
        lines = [
            f"{head} {delta} (threshold {self.threshold_pct:.2f} %): predicted "
            f"{seconds(self.current_time_s)}, baseline {seconds(self.baseline_time_s)}"
        ]
        if self.report is not None and (note := interval_note(self.report)):
            lines.append(note)
        if (
            self.report is not None
            and self.verdict in (REGRESSION, IMPROVEMENT)
            and (self.report.attribution is not None or self.report.blocks)
        ):
            lines.append(f"where: {what_changed_most(self.report)}")  # as `perfguard check` says it
        if self.report is not None and (change := change_text(self.report)):
            lines.append(f"change: {change}")  # the params' diff against the baseline's
        if self.report is not None and (machine := machine_line(self.report)):
            lines.append(f"machine: {machine}")  # what the predicted time stands for
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
class ModelCaseResult:
    """A [[model]]'s total on one target (`perfguard_check("mlp", target)`): its verdict, and the
    result of every kernel of the model (each judged as `perfguard check` judges it)."""

    model: str
    target: str
    verdict: str
    threshold_pct: float
    exit_code: int
    delta_pct: float | None
    current_total_s: float | None
    baseline_total_s: float | None
    changes: list[str]
    kernels: list[CaseResult]
    total: ModelTotal  # the report's model view (document.report)
    updated: list[Path] = field(default_factory=list)  # baseline files written (--perfguard-update)

    @property
    def label(self) -> str:
        return f"model {self.model}[{self.target}]"

    @property
    def ok(self) -> bool:
        """False when the total regressed or could not be judged, or any of its kernels is not ok."""
        if self.updated:
            return all(k.verdict != ERROR for k in self.kernels)
        return self.verdict not in (REGRESSION, ERROR) and all(k.ok for k in self.kernels)

    def kernel(self, name: str) -> CaseResult:
        for k in self.kernels:
            if k.kernel == name:
                return k
        raise KeyError(
            f"{self.label} has no kernel '{name}' (its kernels: {', '.join(k.kernel for k in self.kernels)})"
        )

    def explain(self) -> str:
        """The total against the threshold, what changed, and each kernel that is not ok."""
        head = f"{self.label}: {self.verdict}"
        if self.delta_pct is not None:
            head += f" {pct(self.delta_pct)} (threshold {self.threshold_pct:.2f} %)"
        head += f": total {seconds(self.current_total_s)} per inference, baseline {seconds(self.baseline_total_s)}"
        lines = [head, *(f"  {line}" for line in self.changes)]
        lines.extend(k.explain() for k in self.kernels if not k.ok)
        lines.extend(f"baseline rewritten: {path}" for path in self.updated)
        return "\n".join(lines)


@dataclass
class NativeCase:
    """A kernel ready to be timed in this process: call() runs it once."""

    call: Any
    extra_info: dict[str, Any]


class CaseRunner:
    def __init__(
        self,
        config: Config,
        simulator: str | None = None,
        threshold: float | None = None,
        update: bool = False,
        base: str | None = None,
    ):
        self.config = config
        self.simulator = simulator
        self.threshold = threshold
        self.update = update
        self.store: BaselineSource = BaselineStore(config.storage.baseline_dir)
        if base:
            self.store = GitBaselineStore(config.storage.baseline_dir, base)

    def pairs(self, kernels: list[str] | None = None, targets: list[str] | None = None) -> list[tuple[KernelSpec, str]]:
        return select(self.config, kernels, targets, ("--perfguard-kernels", "--perfguard-targets"))

    def orphans(self, targets: list[str] | None = None) -> list[CaseResult]:
        """A `removed` case per committed baseline no configured kernel has (runs.orphans): each
        fails, as in `perfguard check`, unless the baselines are another revision's and the working
        tree removed it too."""
        cases = []
        for o in orphan_outcomes(self.config, self.store, targets, self.threshold):
            v = o.verdict
            cases.append(
                CaseResult(
                    o.result.kernel,
                    o.result.target,
                    v.verdict,
                    v.threshold_pct,
                    EXIT_USAGE if o.orphaned else 0,
                    baseline_time_s=v.baseline_time_s,
                    error=o.note,
                    report=build_report(CheckRun([o])).results[0],
                    orphaned=o.orphaned,
                )
            )
        return cases

    def spec(self, kernel: str | KernelSpec | Mapping[str, Any], target: str | None = None) -> KernelSpec:
        """A configured kernel or a [[model]]'s kernel by name, a KernelSpec, or a [[kernel]]-like mapping."""
        if isinstance(kernel, KernelSpec):
            return kernel
        if isinstance(kernel, str):
            found = self.named(kernel, target)
            if found is None:
                raise InputError(
                    f"perfguard_check: '{kernel}' is the [[model]] {kernel}: its total is "
                    f"perfguard_check('{kernel}', target) (a ModelCaseResult), not a kernel"
                )
            return found[0]
        if not isinstance(kernel, Mapping):
            raise InputError(f"kernel must be a name, a KernelSpec or a mapping, got {type(kernel).__name__}")
        # Validated exactly like a [[kernel]] table of perfguard.toml (the config's own validator).
        return parse_kernel(Path("perfguard_check()"), 0, dict(kernel), self.config.profiles)

    def named(self, name: str, target: str | None) -> list[KernelSpec] | None:
        """The specs a name means on `target`: a configured kernel, one kernel of a [[model]] (named
        "<model>.<operator>.<digest>"), or None for a model's own name; else an input error naming it."""
        if any(k.name == name for k in self.config.kernels):
            return [self.config.kernel(name)]
        model = next((m for m in self.config.models if name == m.name or name.startswith(m.name + ".")), None)
        if model is not None and target is not None:
            self.config.profile(target)
            if model.targets is not None and target not in model.targets:
                raise InputError(
                    f"perfguard_check: model '{model.name}' does not run on target '{target}' "
                    f"(its targets: {', '.join(model.targets)})"
                )
            if name == model.name:
                return None

            specs = model_specs(self.config, model, [target])
            found = [replace(s, model=None) for s in specs if s.name == name]  # one kernel: no model total
            if found:
                return found
            raise InputError(
                f"perfguard_check: unknown kernel '{name}' of model '{model.name}' on {target} (its "
                f"kernels: {', '.join(s.name for s in specs)})"
            )
        kernels = ", ".join(k.name for k in self.config.kernels) or "none"
        models = ", ".join(m.name for m in self.config.models) or "none"
        raise InputError(
            f"perfguard_check: unknown kernel or model '{name}' (configured in {self.config.path}: "
            f"kernels {kernels}; models {models})"
        )

    def run_model(self, name: str, target: str, threshold: float | None = None) -> ModelCaseResult:
        """Every kernel of the [[model]] `name` on `target`, judged, and the model's total (as check does)."""
        if self.named(name, target) is not None:
            raise InputError(f"perfguard_check: '{name}' is not a [[model]]")
        model = next(m for m in self.config.models if m.name == name)
        jobs = make_jobs(
            self.config,
            [(spec, target) for spec in model_specs(self.config, model, [target])],
            self.simulator,
            self.threshold,
            threshold,
        )
        imposed = self.config.judging.imposed(self.threshold, threshold)  # the model total's, as its kernels'
        check = run_check(self.config, jobs, 1, imposed, store=self.store, known=recorded(jobs))
        (total,) = check.model_summaries
        updated = []
        if self.update and all(o.result.ok for o in check.outcomes):
            done = write_baselines(self.config, jobs, [o.result for o in check.outcomes])
            updated = done.written + done.removed
        report = build_report(CheckRun(check.outcomes), self.config.path, self.config)
        by_name = {r.kernel: r for r in report.results}
        kernels = [
            CaseResult(
                o.result.kernel,
                target,
                o.verdict.verdict,
                o.verdict.threshold_pct,
                CheckRun([o]).exit_code(),
                o.verdict.delta_pct,
                o.verdict.current_time_s,
                o.verdict.baseline_time_s,
                dict(o.verdict.stat_deltas),
                o.error,
                None,
                by_name[o.result.kernel],
                report.targets.get(target),
            )
            for o in check.outcomes
        ]
        return ModelCaseResult(
            name,
            target,
            total.verdict,
            total.threshold_pct,
            check.exit_code(),
            total.delta_pct,
            total.current_total_s,
            total.baseline_total_s,
            list(total.changes),
            kernels,
            total,
            updated,
        )

    def _job(self, spec: KernelSpec, target: str, threshold: float | None = None):
        """The kernel's job, judged with the test's `threshold` over the command line's and its own."""
        return make_jobs(self.config, [(spec, target)], self.simulator, self.threshold, threshold)[0]

    def run(
        self, kernel: str | KernelSpec | Mapping[str, Any], target: str, threshold: float | None = None
    ) -> CaseResult | ModelCaseResult:
        """One kernel; a [[model]]'s name gives its total and all its kernels (run_model)."""
        if isinstance(kernel, str) and any(m.name == kernel for m in self.config.models):
            return self.run_model(kernel, target, threshold)
        spec = self.spec(kernel, target)
        job = self._job(spec, target, threshold)
        check = run_check(self.config, [job], 1, self.threshold, store=self.store, known=recorded([job]))
        outcome = check.outcomes[0]
        updated = None
        if self.update and outcome.result.ok:
            written = write_baselines(self.config, [job], [outcome.result]).written
            updated = written[0] if written else None  # unchanged: not rewritten
        report = build_report(CheckRun([outcome]), self.config.path, self.config)
        v = outcome.verdict
        return CaseResult(
            spec.name,
            target,
            v.verdict,
            v.threshold_pct,
            check.exit_code(),
            v.delta_pct,
            v.current_time_s,
            v.baseline_time_s,
            dict(v.stat_deltas),
            outcome.error,
            updated,
            report.results[0],
            report.targets.get(target),
        )

    def native(self, kernel: str | KernelSpec | Mapping[str, Any], target: str) -> NativeCase:
        """Simulate (for the statistics) and build a host library of the very same object code."""
        spec = self.spec(kernel, target)
        job = self._job(spec, target)
        check_native(job.profile)
        simulated = run_job(job)
        if not simulated.ok:
            raise (InputError if simulated.exit_code == InputError.exit_code else InfraError)(
                simulated.error or "failed"
            )
        assert simulated.stats is not None  # an ok result has its statistics
        scratch = JobResult(spec.name, target, spec.family, dict(spec.params), job.simulator, ok=False)
        built = build_kernel(job, scratch)
        library = NativeKernel(built.build_dir, job.profile, built.where)
        shape_keys = getattr(built.family, "shape_keys", ()) if built.family is not None else ()
        shape = {k: simulated.params[k] for k in shape_keys if k in simulated.params}
        extra = {
            "perfguard_schema": 1,
            "kernel": spec.name,
            "target": target,
            "family": spec.family,
            "params": simulated.params,
            "group": group_label(shape) if shape else None,
            "simulator": simulated.simulator,
            "simulator_fingerprint": simulated.toolchain.get("simulator"),
            "stats": simulated.stats.to_dict(),
            "flops": simulated.flops,
            "tensor_bytes": simulated.tensor_bytes,
            "content_hash": simulated.content_hash,
            "binary_hash": simulated.binary_hash,
            "toolchain": simulated.toolchain,
            "machine": this_machine().to_dict(),
        }
        return NativeCase(library.call, extra)
