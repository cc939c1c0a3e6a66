"""Calibration campaigns: collect (simulate + time natively), train, evaluate, check drift.

A group is one problem shape of a kernel family; its variants are schedules sampled from the
family's knob space. Models are trained per target and family and evaluated leave-one-group-
out, so every reported figure is for shapes the model never saw.

Feature sets (perfguard.predict.features): "pipeline" (the counts plus the pipeline model's
cycles per bound class and stall cycles, computed from each row's block profile) when every
row of the dataset has a block profile, else "counts". A dataset collected before block
profiles gets them with `resimulate`: the same binaries simulated again, the native times kept.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from perfguard.compile.cache import BuildCache
from perfguard.config import Config, KernelSpec
from perfguard.errors import InputError
from perfguard.executors import Executor, LocalExecutor, pool_size
from perfguard.job.native import DEFAULT_CV_BOUND, PROCESSES, QuietPolicy, check_native, this_machine, time_interleaved
from perfguard.job.run import Job, JobResult, build_kernel, run_jobs
from perfguard.kernels import get_family
from perfguard.predict.dataset import Dataset, Row, load_dataset
from perfguard.sim.base import get_simulator
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

# Problem shapes (groups) sampled by default: ResNet-like layers and GEMMs of several aspects.
DEFAULT_GROUPS: dict[str, list[dict]] = {
    "gemm": [dict(M=128, N=128, K=128), dict(M=256, N=64, K=128), dict(M=64, N=128, K=256), dict(M=192, N=192, K=64)],
    "conv2d": [
        dict(C=32, H=28, W=28, F=32, R=3, S=3, stride=1, padding=1),
        dict(C=64, H=14, W=14, F=64, R=3, S=3, stride=1, padding=1),
        dict(C=16, H=56, W=56, F=32, R=3, S=3, stride=2, padding=1),
        dict(C=64, H=14, W=14, F=128, R=1, S=1, stride=1, padding=0),
    ],
    "gemv": [dict(M=512, K=512), dict(M=1024, K=256), dict(M=256, K=1024), dict(M=768, K=768)],
    "depthwise_conv2d": [
        dict(C=32, H=28, W=28),
        dict(C=64, H=14, W=14),
        dict(C=16, H=56, W=56),
        dict(C=32, H=56, W=56, stride=2),
    ],
    "dense_relu": [
        dict(B=16, I=256, O=256),
        dict(B=8, I=512, O=128),
        dict(B=32, I=128, O=512),
        dict(B=4, I=1024, O=256),
    ],
    # The quantized families (int8 operands, int32 accumulation; 48 schedules per shape at most).
    "qgemm": [
        dict(M=64, N=128, K=128),
        dict(M=128, N=64, K=256),
        dict(M=32, N=128, K=512),
        dict(M=256, N=32, K=64, a_dtype="uint8"),
    ],
    "qconv2d": [
        dict(H=14, W=14, C=32, F=32),
        dict(H=7, W=7, C=64, F=64),
        dict(H=28, W=28, C=16, F=32),
        dict(H=14, W=14, C=64, F=64, R=1, S=1, padding=0),
    ],
}
# Half precision is a dtype of gemm, not a family: its shapes are groups of the gemm dataset, so one
# model learns both (a model scores only the dtypes it was trained on: perfguard.predict.select).
DEFAULT_GROUPS["gemm"] += [dict(M=64, N=128, K=128, dtype="float16"), dict(M=128, N=64, K=256, dtype="float16")]


def stored_families(baseline_dir: Path, target: str, family: str | None, need: str) -> list[str]:
    """`family`, else every family with a file under baselines/<need>/<target> (need: datasets or models)."""
    if family:
        return [family]
    root = baseline_dir / need / target
    found = sorted(p.stem for p in root.glob("*.json")) if root.is_dir() else []
    if not found:
        raise InputError(f"{root}: no {need} for target {target}")
    return found


def read_groups(path: Path) -> list[dict]:
    """`calibrate collect --groups FILE`: a JSON list of shapes, one object each."""
    try:
        shapes = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read groups ({type(exc).__name__})") from None
    if not isinstance(shapes, list) or not all(isinstance(s, dict) for s in shapes):
        raise InputError(f"{path}: must be a JSON list of objects (one shape each)")
    return shapes


def group_label(shape: dict) -> str:
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))


def parse_group(label: str) -> dict:
    """The shape back from its label (values that look like integers become integers)."""
    shape = {}
    for part in label.split(","):
        key, _, value = part.partition("=")
        shape[key] = int(value) if value.lstrip("-").isdigit() else value
    return shape


def sample_variants(
    family_name: str, shape: dict, count: int, seed: str, exclude: Collection[str] = frozenset()
) -> list[dict]:
    """A deterministic random sample of the family's knob space for one shape."""
    family = get_family(family_name)
    assert family.space is not None  # calibration families have a space (calibration.FAMILIES)
    space = [p for p in family.space(**shape) if json.dumps(p, sort_keys=True) not in exclude]
    rng = random.Random(f"{seed}/{family_name}/{group_label(shape)}")
    return rng.sample(space, min(count, len(space)))


@dataclass
class Collected:
    dataset: Dataset
    failed: list[str]  # variants that did not build, simulate or check
    unsteady: int  # variants rejected because their timing never settled (or busy neighbours cut it short)
    simulate_s: float
    native_s: float
    neighbour_rejected: int = 0  # timing attempts done again because the other CPUs were busy
    neighbour_loads: list[float] = dataclasses.field(default_factory=list)  # of the kept rows' attempts
    not_quiet: list[str] = dataclasses.field(default_factory=list)  # groups cut short by busy neighbours, and why


def collect(
    config: Config,
    profile: TargetProfile,
    family_name: str,
    shapes: list[dict],
    variants: int,
    seed: str = "perfguard",
    workers: int | None = None,
    exclude: Collection[str] = frozenset(),
    on_result: Callable[[int, JobResult], None] | None = None,
    executor: Executor | None = None,
    max_cv: float = DEFAULT_CV_BOUND,
    processes: int = PROCESSES,
    quiet: QuietPolicy = QuietPolicy(),
) -> Collected:
    check_native(profile)
    family = get_family(family_name)
    entry = f"{family.entry.__module__}:{family.entry.__name__}"
    labelled: list[tuple[str, KernelSpec]] = []
    for shape in shapes:
        for params in sample_variants(family_name, shape, variants, seed, exclude):
            labelled.append(
                (group_label(shape), KernelSpec(f"{family_name}-{len(labelled)}", entry, family_name, params))
            )
    sim, cache_dir = config.simulation, config.storage.cache_dir
    jobs = [Job(spec, profile, config.root, cache_dir, sim.simulator, sim.timeout, 1, 1) for _, spec in labelled]
    started = time.monotonic()
    results = run_jobs(executor or LocalExecutor(pool_size(workers or config.jobs, len(jobs))), jobs, on_result)
    simulate_s = time.monotonic() - started
    simulator = get_simulator(sim.simulator, cache_dir)
    dataset = Dataset(profile.name, family_name, sim.simulator, simulator.fingerprint(profile))
    machine = this_machine().to_dict()
    cache = BuildCache(cache_dir)
    failed, unsteady, rejected, loads, not_quiet = [], 0, 0, [], []
    started = time.monotonic()
    timed: dict[str, list[tuple[KernelSpec, JobResult, Path]]] = {}  # group -> its variants to time
    for (label, spec), job, result in zip(labelled, jobs, results):
        if not result.ok:
            failed.append(f"{label} {json.dumps(spec.params, sort_keys=True)}: {result.error}")
            continue
        assert result.content_hash is not None  # an ok result was built
        build_dir = cache.lookup_build(result.content_hash)
        if build_dir is None:  # built by a remote worker: the same key builds the same binary here
            build_dir = build_kernel(
                job, JobResult(spec.name, profile.name, family_name, {}, job.simulator, False)
            ).build_dir
        timed.setdefault(label, []).append((spec, result, build_dir / "harness"))
    # One group at a time, its variants' processes interleaved (native.time_interleaved); one core,
    # nothing else timed meanwhile, and attempts during which the other CPUs were busy done again.
    for label, group in timed.items():
        timings = time_interleaved(
            [b for _, _, b in group],
            profile,
            [f"{s.name} ({label})" for s, _, _ in group],
            cv_bound=max_cv,
            processes=processes,
            quiet=quiet,
        )
        rejected += max(t.neighbour_rejected for t in timings)  # the group's attempts: each covers all pending
        reasons = {t.unsteady for t in timings if not t.quiet}
        not_quiet += [f"{label}: {why}" for why in sorted(reasons)]
        for (_spec, result, _), timing in zip(group, timings):
            if not timing.steady:
                unsteady += 1
                continue
            if timing.neighbour_load is not None:
                loads.append(timing.neighbour_load)
            assert result.stats is not None  # timed: an ok result
            dataset.rows.append(
                Row(label, result.params, result.stats, timing.median_s, timing.to_dict(), machine, result.binary_hash)
            )
    return Collected(dataset, failed, unsteady, simulate_s, time.monotonic() - started, rejected, loads, not_quiet)


def ingest_benchmark_json(path: Path, target: str, family: str) -> tuple[list[Row], str, str]:
    """Rows from pytest-benchmark's --benchmark-json output of `pytest --perfguard --perfguard-native`.

    Each benchmark's extra_info carries what perfguard recorded when it built the kernel (stats,
    params, group, machine); the timing is pytest-benchmark's median. Returns the rows for
    `target` and `family`, and the simulator name and fingerprint they were simulated with.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read pytest-benchmark JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path}: not pytest-benchmark JSON (no 'benchmarks' list)")
    rows, simulators = [], set()
    for i, bench in enumerate(data["benchmarks"]):
        where = f"{path}: benchmarks[{i}]"
        info = bench.get("extra_info") if isinstance(bench, dict) else None
        if not isinstance(info, dict) or info.get("perfguard_schema") != 1:
            continue  # someone else's benchmark
        if info.get("target") != target or info.get("family") != family:
            continue
        try:
            stats = Stats.from_dict(info["stats"], where)
            timing = bench["stats"]
            median, low = float(timing["median"]), float(timing["min"])
            spread = float(timing.get("iqr", 0.0)) / 1.349 / median if median > 0 else float("inf")
            if not median > 0:
                raise InputError(f"{where}: median must be positive")
            rows.append(
                Row(
                    str(info.get("group") or "ungrouped"),
                    dict(info["params"]),
                    stats,
                    median,
                    {
                        "min_s": low,
                        "cv": spread,
                        "samples": int(timing.get("rounds", 0)),
                        "attempts": 1,
                        "steady": True,
                        "timer": "pytest-benchmark",
                    },
                    dict(info.get("machine") or {}),
                )
            )
            simulators.add((str(info["simulator"]), str(info.get("simulator_fingerprint") or "")))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: perfguard extra_info or stats are malformed") from None
    if not rows:
        raise InputError(f"{path}: no perfguard benchmark for {family} on {target}")
    if len(simulators) != 1:
        raise InputError(f"{path}: benchmarks were simulated with different simulators ({len(simulators)})")
    simulator, fingerprint = simulators.pop()
    return rows, simulator, fingerprint


def merge_ingested(
    path: Path, rows: list[Row], simulator: str, fingerprint: str, target: str, family: str, source: Path
) -> Dataset:
    """The dataset at `path` (a new one if there is none) with `rows` ingested from `source`: a variant
    timed again replaces its old row (the newest timing wins). Statistics of another simulator, or
    times from another CPU, are refused: they do not mix."""
    dataset = load_dataset(path) if path.exists() else Dataset(target, family, simulator, fingerprint)
    if dataset.simulator != simulator:
        raise InputError(f"{path}: dataset holds {dataset.simulator} statistics, the benchmarks {simulator}")
    incoming = {r.machine["cpu_id"] for r in rows if r.machine.get("cpu_id")}
    if dataset.cpu_ids() and incoming and incoming != dataset.cpu_ids():
        raise InputError(
            f"{path}: dataset was timed on {', '.join(sorted(dataset.cpu_ids()))}, {source} "
            f"on {', '.join(sorted(incoming))}: times from different CPUs do not mix "
            f"(use --output for another dataset)"
        )
    fresh = {json.dumps(r.params, sort_keys=True) for r in rows}
    dataset.rows = [r for r in dataset.rows if json.dumps(r.params, sort_keys=True) not in fresh] + rows
    return dataset


@dataclass
class Resimulated:
    dataset: Dataset
    dropped: list[str]  # rows left out, and why
    recounted: list[str] = dataclasses.field(default_factory=list)  # kept, same binary, counters moved


def resimulate(
    config: Config,
    profile: TargetProfile,
    dataset: Dataset,
    workers: int | None = None,
    on_result: Callable[[int, JobResult], None] | None = None,
    executor: Executor | None = None,
) -> Resimulated:
    """The dataset's variants simulated again with today's simulator (block profiles included),
    their native times kept: valid only for the very binaries that were timed. A row that records
    its binary's sha256 is kept when the rebuilt binary has it, whatever the counters now say (a
    native time belongs to the binary; a simulator fix may change what it counts, and then the
    row takes the new counters); a row without one is kept only when its counters are the ones it
    stores (the same instructions ran). The others are dropped and named."""
    family = get_family(dataset.family)
    entry = f"{family.entry.__module__}:{family.entry.__name__}"
    sim, cache_dir = config.simulation, config.storage.cache_dir
    jobs = [
        Job(
            KernelSpec(f"{dataset.family}-{i}", entry, dataset.family, row.params),
            profile,
            config.root,
            cache_dir,
            sim.simulator,
            sim.timeout,
            1,
            1,
        )
        for i, row in enumerate(dataset.rows)
    ]
    results = run_jobs(executor or LocalExecutor(pool_size(workers or config.jobs, len(jobs))), jobs, on_result)
    simulator = get_simulator(sim.simulator, cache_dir)
    return merge_resimulated(dataset, results, simulator.fingerprint(profile))


def merge_resimulated(dataset: Dataset, results: list[JobResult], fingerprint: str) -> Resimulated:
    out = Dataset(dataset.target, dataset.family, dataset.simulator, fingerprint)
    dropped, recounted = [], []
    for i, (row, result) in enumerate(zip(dataset.rows, results)):
        where = f"row {i} ({row.group} {json.dumps(row.params, sort_keys=True)})"
        if not result.ok:
            dropped.append(f"{where}: {result.error}")
            continue
        if row.binary is not None and row.binary != result.binary_hash:
            dropped.append(
                f"{where}: binary {(result.binary_hash or '')[:12]} is not the one timed ({row.binary[:12]})"
            )
            continue
        assert result.stats is not None  # an ok result has its statistics
        moved = [k for k, v in result.stats.to_dict().items() if row.stats.to_dict()[k] != v]
        if moved and row.binary is None:
            dropped.append(f"{where}: counters differ ({', '.join(moved)})")
            continue
        if moved:
            recounted.append(f"{where}: same binary, counters now differ ({', '.join(moved)})")
        out.rows.append(dataclasses.replace(row, stats=result.stats, binary=result.binary_hash))
    return Resimulated(out, dropped, recounted)
