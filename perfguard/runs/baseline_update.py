"""What `perfguard baseline update` writes: a baseline for every result whose record changed, each
[[model]]'s call order, and no baseline left of a kernel a model no longer has; one change under
the baselines' lock."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.baselines.lock import baselines_lock
from perfguard.baselines.store import Baseline, BaselineStore, graph_path, graph_text, same_record
from perfguard.config import Config
from perfguard.errors import InputError
from perfguard.job.run import Job, JobResult
from perfguard.jsonfile import now_iso
from perfguard.judge.decide import config_scorer


def head_commit(root: Path) -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


@dataclass
class BaselineUpdate:
    """What `baseline update` did: files written, files left as they were (nothing but the commit and
    date would have changed), files removed (kernels a model no longer has)."""

    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)


def write_baselines(config: Config, jobs: list[Job], results: list[JobResult]) -> BaselineUpdate:
    """Write a baseline for every measured result whose record changed (statistics, toolchain, what
    the kernel is: a new commit alone is no change), and each [[model]] updated whole its call order,
    as one change under the folder's lock; a failed result keeps its old file untouched, and so does
    every result when any file cannot be written."""
    store = BaselineStore(config.storage.baseline_dir)
    commit = head_commit(config.root)
    created = now_iso()
    update = BaselineUpdate()
    baselines = []
    for job, r in zip(jobs, results):
        if not r.ok:
            continue
        predictor = config_scorer(config, job.profile, r)
        assert r.stats is not None  # an ok result has its statistics
        new = Baseline(
            kernel=r.kernel,
            target=r.target,
            family=r.family,
            params=r.params,
            simulator=r.simulator,
            content_hash=r.content_hash or "",
            stats=r.stats,
            predicted_time_s=float(predictor.predict_stats([r.stats])[0]),
            model_id=predictor.model_id,
            commit=commit,
            created=created,
            toolchain=r.toolchain,
            loops=r.loops,
            inputs=dict(r.inputs),
            source=r.source,
        )
        try:
            old = store.read(r.target, r.kernel)
        except InputError:
            old = None  # damaged: rewritten
        if old is not None and same_record(old, new):
            update.unchanged.append(store.path(r.target, r.kernel))
        else:
            baselines.append(new)
    graphs = {}
    for (model, target), order in _whole_models(jobs, results).items():
        path = graph_path(store.root, target, model)
        text = graph_text(model, target, order)
        try:
            if path.read_text() == text:
                continue
        except (OSError, UnicodeDecodeError):
            pass
        graphs[path] = text
    update.written = store.write_all(baselines, graphs)
    update.removed = _drop_stale_model_baselines(config, store, jobs, results)
    return update


def _whole_models(jobs: list[Job], results: list[JobResult]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Each [[model]] x target whose every kernel was measured: its calls in model order, [kernel, anchor node]."""
    calls: dict[tuple[str, str], list | None] = {}
    for job, r in zip(jobs, results):
        spec = job.kernel
        if spec.model is None:
            continue
        key = (spec.model, job.profile.name)
        if calls.setdefault(key, []) is None:
            continue
        if not r.ok or spec.positions is None:
            calls[key] = None  # a failed kernel (or one from before positions were kept): leave the file be
            continue
        nodes = spec.params.get("nodes") or []
        mine = calls[key]
        assert mine is not None  # checked above
        for i, position in enumerate(spec.positions):
            site = nodes[i] if i < len(nodes) and isinstance(nodes[i], list) else []
            anchor = str(site[0][0]) if site and isinstance(site[0], list) and site[0] else ""
            mine.append((position, spec.name, anchor))
    return {key: [(kernel, node) for _, kernel, node in sorted(found)] for key, found in calls.items() if found}


def _drop_stale_model_baselines(
    config: Config, store: BaselineStore, jobs: list[Job], results: list[JobResult]
) -> list[Path]:
    """A model updated whole on a target keeps no baseline of a kernel it no longer has (else the
    model view would call it removed forever). Returns the files removed."""
    done: dict[tuple[str, str], set[str] | None] = {}
    for job, r in zip(jobs, results):
        if job.kernel.model is None:
            continue
        key = (job.kernel.model, job.profile.name)
        names = done.setdefault(key, set())
        if names is not None:
            done[key] = names | {job.kernel.name} if r.ok else None  # a failed kernel: leave the model as it is
    removed = []
    with baselines_lock(store.root):
        for (model, target), names in done.items():
            if names is None:  # a failed kernel: the model is left as it is
                continue
            for name in store.names(target):
                if name.startswith(model + ".") and name not in names:
                    path = store.path(target, name)
                    path.unlink()
                    removed.append(path)
    return removed
