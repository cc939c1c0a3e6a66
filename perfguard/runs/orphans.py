"""Orphaned baselines: committed baselines that no configured kernel (or [[model]]) has.

A kernel renamed or dropped in perfguard.toml leaves its baseline behind; without this, the
renamed kernel would be `new`, the old baseline ignored, and the check would pass: the guard
lost quietly. `check` reports each such baseline as `removed` (the verdict `compare` gives a
kernel only the base revision has, built by the same runs.check.removed_outcome) with the way
out, and fails (exit 2) until the baseline is renamed or pruned too. With `--base`, a baseline
the working tree removed as well is reported, but passes: the change removed both.

What counts as configured: a [[kernel]] on a target it runs on, and any kernel of a [[model]]
on the model's targets (a model's own kernels come and go with its graph; the model view and
`baseline update` look after those). A selection narrows what can be an orphan: `--targets`
scans only those targets, `--kernels` none (an orphan has no name to select), and of
`--shard i/n` only shard 1 reports them (so the merged report has each once).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from perfguard.baselines.store import BaselineSource, BaselineStore
from perfguard.config import Config
from perfguard.errors import InputError
from perfguard.job.run import JobResult
from perfguard.runs.check import removed_outcome


@dataclass(frozen=True)
class Orphan:
    target: str
    kernel: str
    path: Path | str  # where the baseline was read from (a working-tree file, or 'REF (sha):path')


def is_configured(config: Config, target: str, kernel: str) -> bool:
    for spec in config.kernels:
        if spec.name == kernel:
            return target in (spec.targets or config.targets)
    return any(kernel.startswith(m.name + ".") and target in (m.targets or config.targets) for m in config.models)


def scanned_targets(config: Config, store: BaselineSource, targets: list[str] | None = None) -> list[str]:
    """The targets whose baselines are looked at: the selected ones, else the config's and every
    other known target that has a baseline folder (a target dropped from the config orphans its
    baselines too). Only known target names: baselines/models and baselines/datasets are not targets."""
    if targets:
        return list(targets)
    names = getattr(store, "names", None)
    others = sorted(t for t in config.profiles if t not in config.targets and names is not None and names(t))
    return [*config.targets, *others]


def find_orphans(config: Config, store: BaselineSource, targets: list[str] | None = None) -> list[Orphan]:
    names = getattr(store, "names", None)
    if names is None:
        return []
    return [
        Orphan(target, kernel, store.path(target, kernel))
        for target in scanned_targets(config, store, targets)
        for kernel in names(target)
        if not is_configured(config, target, kernel)
    ]


def closest_kernel(config: Config, name: str) -> str | None:
    """The configured kernel whose name is nearest `name` (a typo or a rename), if any is near."""
    found = difflib.get_close_matches(name, [k.name for k in config.kernels], n=1, cutoff=0.6)
    return found[0] if found else None


def reason(config: Config, orphan: Orphan) -> str:
    """Why a baseline is an orphan, in a few words."""
    if any(k.name == orphan.kernel for k in config.kernels):
        return f"kernel '{orphan.kernel}' is not configured for target '{orphan.target}'"
    if any(orphan.kernel.startswith(m.name + ".") for m in config.models):
        return f"[[model]] '{orphan.kernel.split('.')[0]}' is not configured for target '{orphan.target}'"
    if "." in orphan.kernel:  # "<model>.<operator>.<digest>": a [[model]]'s kernel, or a kernel with a dot
        return (
            f"no kernel '{orphan.kernel}' and no [[model]] '{orphan.kernel.split('.')[0]}' is configured in "
            f"{Path(config.path).name}"
        )
    return f"no kernel or [[model]] named '{orphan.kernel}' is configured in {Path(config.path).name}"


def shown(config: Config, path: Path | str) -> str:
    """A baseline's path as the user's repository has it (relative to the config's folder)."""
    if isinstance(path, Path) and path.is_relative_to(config.root):
        return str(path.relative_to(config.root))
    return str(path)  # elsewhere, or 'REF (sha):path' at a git revision


def way_out(config: Config, orphan: Orphan, removed_too: bool = False) -> str:
    """What the report says about an orphan: why it is one, and the commands that settle it."""
    spec = next((k for k in config.kernels if k.name == orphan.kernel), None)
    why = reason(config, orphan)
    if removed_too:
        return f"{why}; this change removed its baseline {shown(config, orphan.path)} too"
    closest = closest_kernel(config, orphan.kernel) if spec is None else None
    rename = f"perfguard baseline rename {orphan.kernel} {closest or 'NEW_NAME'}"
    fix = (
        f"renamed to '{closest}'? run '{rename}'" if closest else f"renamed? run '{rename}'"
    ) + "; gone for good? run 'perfguard baseline prune --yes'"
    return (
        f"{why}: its committed baseline {shown(config, orphan.path)} is no longer checked ({fix}; then commit "
        f"the baselines)"
    )


def orphan_outcomes(
    config: Config, store: BaselineSource, targets: list[str] | None = None, threshold: float | None = None
) -> list:
    """A `removed` result for each orphan of `store` (runs.check.JudgedResult); each fails the check
    unless `store` is another revision's and the working tree removed the file too."""
    working = store if isinstance(store, BaselineStore) else BaselineStore(config.storage.baseline_dir)
    out = []
    for orphan in find_orphans(config, store, targets):
        try:
            baseline = store.read(orphan.target, orphan.kernel)
        except InputError:  # unreadable: still an orphan, only without its time
            baseline = None
        removed_too = working is not store and not working.path(orphan.target, orphan.kernel).exists()
        shown = JobResult(
            orphan.kernel,
            orphan.target,
            baseline.family if baseline else None,
            dict(baseline.params) if baseline else {},
            baseline.simulator if baseline else "",
            ok=True,
        )
        out.append(
            removed_outcome(
                config,
                shown,
                baseline.stats if baseline else None,
                threshold,
                store.models(),
                baseline.commit if baseline else None,
                note=way_out(config, orphan, removed_too),
                orphaned=not removed_too,
            )
        )
    return out
