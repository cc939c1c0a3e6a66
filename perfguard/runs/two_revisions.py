"""`perfguard compare A B`: the kernels of revision B judged against those of revision A.

Both sides are measured now (perfguard.runs.revisions), so a repository needs no committed
baselines. Both are scored by one model, the base revision's: its calibrated model where it
stores one, the analytical model of its target profile otherwise. Thresholds and limits come

from the base revision's config too (a change cannot loosen the gate it is judged by); a kernel
only the head has uses its own settings. A kernel only one side has is `new` or `removed`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from perfguard.baselines.measured import MeasuredBaselines, TreeModelFiles
from perfguard.config import Config, KernelSpec
from perfguard.errors import EXIT_USAGE, EXIT_WRONG_RESULT, InputError
from perfguard.job.run import Job, JobResult
from perfguard.runs.check import CheckRun, JudgedResult, judge_results, removed_outcome
from perfguard.runs.revisions import Side


def base_baselines(side: Side, model_kernels: Collection[tuple[str, str]] = frozenset()) -> MeasuredBaselines:
    """The base revision's measurements read like committed baselines; its calibrated models and
    [[model]] call orders too (so a pull request cannot swap the yardstick both sides are judged by)."""

    def graph(target: str, model: str) -> dict[str, list[int]] | None:
        found = {
            s.name: list(s.positions)
            for s in side.model_specs
            if s.model == model and s.positions is not None and (s.targets is None or target in s.targets)
        }
        return found or None

    models = TreeModelFiles(side.config.storage.baseline_dir, side.tree, side.label) if side.config else None
    return MeasuredBaselines(
        side.label, side.sha, side.results, models=models, graph=graph, model_kernels=model_kernels
    )


def catalogue(side: Side, kernels: list[str] | None = None) -> dict[tuple[str, str], KernelSpec]:
    """(kernel, target) -> spec of every kernel `side` runs on a target it knows: its configured
    kernels, then its [[model]]s' (Measurer.expand). `kernels` may name a model (all its kernels, and
    its total) or one model kernel (that kernel only: no total for a part of a model), as in check."""
    if side.config is None:
        return {}
    out: dict[tuple[str, str], KernelSpec] = {}
    for spec in side.config.kernels:
        if not kernels or spec.name in kernels:
            for target in side.config.profiles:
                if spec.targets is None or target in spec.targets:
                    out[(spec.name, target)] = spec
    for spec in side.model_specs:
        if kernels and spec.model not in kernels:
            if spec.name not in kernels:
                continue
            spec = dataclasses.replace(spec, model=None)
        for target in spec.targets or ():
            out[(spec.name, target)] = spec
    return out


def _names(side: Side) -> set[str]:
    return {name for name, _ in catalogue(side)} | {m.name for m in (side.config.models if side.config else ())}


def plan(
    base: Side, head: Side, kernels: list[str] | None, targets: list[str] | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The (kernel, target) pairs to measure on each side; unknown names are input errors."""
    if base.config is None and head.config is None:
        raise InputError(f"compare: neither {base.label} nor {head.label} has a perfguard config at that path")
    known_names = _names(base) | _names(head)
    for name in kernels or []:
        if name not in known_names:
            raise InputError(f"compare: unknown kernel or model '{name}' (in neither {base.label} nor {head.label})")
    known = set(base.config.profiles if base.config else {}) | set(head.config.profiles if head.config else {})
    for name in targets or []:
        if name not in known:
            raise InputError(f"compare: unknown target '{name}' (known: {', '.join(sorted(known))})")

    def pairs(side: Side) -> list[tuple[str, str]]:
        assert side.config is not None  # called for a side that has one
        wanted = targets or side.config.targets
        return [(name, target) for name, target in catalogue(side, kernels) if target in wanted]

    chosen = (pairs(base) if base.config else [], pairs(head) if head.config else [])
    if not chosen[0] and not chosen[1]:
        raise InputError("compare: nothing to compare (no kernel x target pair selected on either side)")
    return chosen


def _judged_by(base: KernelSpec | None, head: KernelSpec | None) -> KernelSpec:
    """The spec a head result is judged with: the base's thresholds and limits; a model kernel keeps
    the head's calls per inference (the model total counts what the head runs)."""
    if base is None:
        assert head is not None  # a pair is on one side at least
        return head
    if head is not None and head.ir is not None:
        return dataclasses.replace(head, threshold=base.threshold, limits=base.limits)
    return base


def judge_sides(
    base: Side,
    head: Side,
    head_pairs: list[tuple[str, str]],
    base_pairs: list[tuple[str, str]],
    threshold: float | None,
    simulator: str | None,
    kernels: list[str] | None = None,
) -> tuple[CheckRun, Config]:
    """Verdicts of head against base, and the config they were judged by (the base's, with the
    head's target profiles added for targets only the head knows, and the head's [[model]]s the
    base does not have)."""
    judging = base.config or head.config
    assert judging is not None  # plan refused two sides without a config
    if head.config is not None and judging is not head.config:
        mine = {m.name for m in judging.models}
        judging = dataclasses.replace(
            judging,
            profiles={**head.config.profiles, **judging.profiles},
            models=judging.models + tuple(m for m in head.config.models if m.name not in mine),
        )
    a, b = catalogue(base, kernels), catalogue(head, kernels)
    jobs, results = [], []
    for kernel, target in head_pairs:
        spec = _judged_by(a.get((kernel, target)), b[(kernel, target)])
        profile = judging.profiles[target]
        assert head.config is not None  # it has pairs to measure
        sim = judging.simulation
        jobs.append(
            Job(
                spec,
                profile,
                head.config.root,
                judging.storage.cache_dir,
                simulator or sim.simulator,
                sim.timeout,
                sim.reps,
                sim.warmup,
                judgement=judging.judging.resolve(
                    spec.threshold, spec.limits, threshold, machine=judging.machines.get(target)
                ),
            )
        )
        result = head.results[(kernel, target)]
        before = base.results.get((kernel, target))
        if result.ok and before is not None and not before.ok:  # nothing to compare with: the base failed
            # (an error, never this side's `wrong result`: the base's wrong output is not the head's)
            code = EXIT_USAGE if before.exit_code == EXIT_WRONG_RESULT else before.exit_code
            result = dataclasses.replace(
                result,
                ok=False,
                exit_code=code,
                error=f"{kernel}[{target}]: the base revision {base.label} could not be measured: {before.error}",
            )
        results.append(result)
    store = base_baselines(base, {key for key, spec in a.items() if spec.model is not None})
    base_models = {(model, pair[1]) for pair in base_pairs if (model := a[pair].model) is not None}
    run = judge_results(judging, jobs, results, threshold, store, also_models=base_models)  # one only A has: removed
    for kernel, target in base_pairs:
        if (kernel, target) in head.results:
            continue
        before = base.results[(kernel, target)]
        run.outcomes.append(_removed(judging, a[(kernel, target)], before, threshold, store))
    return run, judging


def _removed(
    config: Config, spec: KernelSpec, before: JobResult, threshold: float | None, store: MeasuredBaselines
) -> JudgedResult:
    """A kernel only the base revision has: reported with its base time, never as unchanged."""
    shown = dataclasses.replace(before, stats=None, ok=True, error=None, exit_code=0)
    return removed_outcome(
        config, shown, before.stats if before.ok else None, threshold, store.models(), store.commit, spec
    )


def side_summary(side: Side) -> dict:
    return {"ref": side.ref, "commit": side.sha, "has_config": side.config is not None, "measured": len(side.results)}
