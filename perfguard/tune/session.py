"""One tuning run: a configured kernel on one target, start to end.

configured kernel -> candidates (knob search or MetaSchedule) -> measured trials
-> best -> written back (params table or schedule file + [[kernel]] snippet)
-> the written kernel measured once more, exactly as `perfguard check` will build it
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.atomic import atomic_write_text
from perfguard.config import Config, KernelSpec
from perfguard.errors import InfraError, InputError
from perfguard.executors.base import Executor
from perfguard.kernels import FAMILY_NAMES, get_family
from perfguard.targets import TargetProfile
from perfguard.tune import apply, metaschedule
from perfguard.tune.knobs import search
from perfguard.tune.measure import Measurer, Trial
from perfguard.tune.output import dump_record, kernel_snippet

STRATEGY_NAMES = ("evolutionary", "replay", "knobs")


@dataclass
class TuneResult:
    kernel: str
    target: str
    family: str
    strategy: str
    measure: str
    model: str
    executor: str
    budget: int
    configured: Trial  # the kernel as configured now
    best: Trial | None  # the best search trial
    tuned: Trial | None  # the written result, measured as `check` builds it
    trials: list[Trial] = field(default_factory=list)
    seconds: float = 0.0
    snippet: str = ""
    written: list[Path] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for t in self.trials if not t.ok)

    @property
    def speedup(self) -> float | None:
        configured, tuned = self.configured.predicted_s, self.tuned.predicted_s if self.tuned is not None else None
        if self.tuned is None or not self.tuned.ok or not self.configured.ok or configured is None or tuned is None:
            return None
        return configured / tuned

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "target": self.target,
            "family": self.family,
            "strategy": self.strategy,
            "measure": self.measure,
            "model": self.model,
            "executor": self.executor,
            "budget": self.budget,
            "seconds": self.seconds,
            "speedup": self.speedup,
            "errors": self.errors,
            "configured": self.configured.to_dict(),
            "best": None if self.best is None else self.best.to_dict(),
            "tuned": None if self.tuned is None else self.tuned.to_dict(),
            "trials": [t.to_dict() for t in self.trials],
            "written": [str(p) for p in self.written],
            "perfguard": __version__,
        }


def tunable(spec: KernelSpec, where: str):
    """The built-in family behind a configured kernel, or an input error saying why not."""
    if spec.family not in FAMILY_NAMES:
        raise InputError(
            f"{where}: only kernels of a built-in family can be tuned (family = one of {', '.join(FAMILY_NAMES)})"
        )
    family = get_family(spec.family)
    entry = f"{family.entry.__module__}:{family.entry.__name__}"
    if spec.entry != entry:
        raise InputError(
            f"{where}: entry '{spec.entry}' is not the {family.name} family's ({entry}); "
            f"tune the kernel it was tuned from"
        )
    return family


def tune_kernel(
    config: Config,
    spec: KernelSpec,
    profile: TargetProfile,
    executor: Executor,
    *,
    strategy: str = "knobs",
    trials: int = 64,
    batch: int | None = None,
    measure: str = "sim",
    seed: int = 0,
    out_dir: Path | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> TuneResult:
    if strategy not in STRATEGY_NAMES:
        raise InputError(f"--strategy {strategy}: one of {', '.join(STRATEGY_NAMES)}")
    if trials < 1:
        raise InputError(f"--trials {trials}: must be at least 1")
    where = f"kernel '{spec.name}'"
    family = tunable(spec, where)
    try:
        default = family.extra["resolve"](**spec.params)
    except InputError as exc:
        raise InputError(f"{config.path}: {where}: {exc.message}") from None
    shape = {k: default[k] for k in family.shape_keys}
    batch = batch or min(trials, max(executor.workers, 8))
    started = time.monotonic()
    measurer = Measurer(config, profile, family.name, executor, measure, on_trial)
    configured = measurer.measure([spec], ["configured"], [default], record=False)[0]
    if not configured.ok:
        raise InfraError(f"{where} as configured does not run on {profile.name}: {configured.error}")
    out_dir = out_dir or config.root / "tuned"
    stem = f"{spec.name}-{profile.name}"
    name = f"{spec.name}-tuned-{profile.name}"
    written: list[Path] = []
    if strategy == "knobs":
        search(family, default, spec, measurer, trials, batch, seed)
        best = measurer.best()
        tuned_spec = (
            None
            if best is None
            else dataclasses.replace(spec, name=name, params=best.params or {}, targets=(profile.name,))
        )
        check_spec = tuned_spec
    else:
        _, trace = metaschedule.tune(measurer, spec, shape, strategy, trials, batch, seed)
        best = measurer.best()
        tuned_spec = check_spec = None
        if trace is not None:
            schedule = out_dir / f"{stem}.json"
            atomic_write_text(
                schedule,
                dump_record(
                    {
                        "format": apply.FORMAT,
                        "kernel": spec.name,
                        "target": profile.name,
                        "family": family.name,
                        "shape": shape,
                        "workload": apply.workload_digest(apply.compute_module(family.name, shape)),
                        "trace": trace,
                        "strategy": strategy,
                        "trials": len(measurer.trials),
                        "seed": seed,
                        "measure": measure,
                        "model": measurer.model,
                        "predicted_s": None if best is None else best.predicted_s,
                        "tvm": _tvm_version(),
                        "perfguard": __version__,
                    }
                ),
            )
            written.append(schedule)
            tuned_spec = KernelSpec(
                name,
                "perfguard.tune.apply:tuned",
                family.name,
                {"schedule": _relative(schedule, config.root)},
                spec.threshold,
                "perfguard.tune.apply:reference",
                (profile.name,),
                spec.outputs,
                spec.rtol,
                spec.atol,
            )
            # the module `check` will build, replayed here from the file just written; it travels
            # to the workers as a candidate, so they need no copy of the file
            import tvm

            replayed = apply.tuned(schedule=str(schedule.resolve()))
            check_spec = metaschedule.candidate_spec(spec, family.name, shape, name, tvm.ir.save_json(replayed))
    tuned = None
    if check_spec is not None and tuned_spec is not None:  # both or neither
        tuned = measurer.measure([check_spec], ["tuned"], [tuned_spec.params], record=False)[0]
    result = TuneResult(
        spec.name,
        profile.name,
        family.name,
        strategy,
        measure,
        measurer.model,
        executor.describe(),
        trials,
        configured,
        best,
        tuned,
        measurer.trials,
        time.monotonic() - started,
    )
    if tuned_spec is not None:
        result.snippet = kernel_snippet(tuned_spec, result)
        snippet = out_dir / f"{stem}.toml"
        atomic_write_text(snippet, result.snippet)
        written.append(snippet)
    result.written = written
    log = config.storage.report_dir / f"tune-{stem}.json"
    atomic_write_text(log, json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n")
    result.written.append(log)
    return result


def _relative(path: Path, root: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(root.resolve())) if path.is_relative_to(root.resolve()) else str(path)


def _tvm_version() -> str:
    import tvm

    return tvm.__version__
