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

import numpy as np

from perfguard.compile.cache import BuildCache
from perfguard.config import Config, DriftLimits, KernelSpec, default_cache_dir
from perfguard.errors import InfraError, InputError
from perfguard.executors import Executor, LocalExecutor, pool_size
from perfguard.job.native import DEFAULT_CV_BOUND, PROCESSES, QuietPolicy, check_native, this_machine, time_interleaved
from perfguard.job.run import Job, JobResult, build_kernel, run_jobs
from perfguard.jsonfile import now_iso
from perfguard.kernels import get_family
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.calibrated import CalibratedModel
from perfguard.predict.dataset import Dataset, Row, dataset_path, load_dataset
from perfguard.predict.evaluate import GroupMetrics, leave_one_group_out, metrics, summarize
from perfguard.predict.features import FEATURE_SETS, feature_names, matrix, pipeline_columns
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.registry import PREDICTORS
from perfguard.predict.select import kernel_dtype
from perfguard.predict.store import StoredModel, save_model
from perfguard.sim.base import get_simulator
from perfguard.sim.mca_tools import timing_cache_dir
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


def default_features(dataset: Dataset) -> str:
    """The pipeline features when any row has a block profile, else the counts."""
    return "pipeline" if any(r.stats.blocks is not None for r in dataset.rows) else "counts"


class DatasetFeatures:
    """The feature matrices of one dataset, per view; the pipeline columns computed once.

    The pipeline features exist only for rows with a block profile: the others are left out
    (`left_out` counts them; `perfguard calibrate resimulate` gives them one). `profiled_only`
    leaves them out of the counts features too, to compare both sets on the same rows.
    """

    def __init__(
        self,
        dataset: Dataset,
        profile: TargetProfile,
        features: str,
        cache_dir: Path | None = None,
        profiled_only: bool = False,
    ):
        if features not in FEATURE_SETS:
            raise InputError(f"unknown feature set '{features}' (one of {', '.join(FEATURE_SETS)})")
        rows = dataset.rows
        if features == "pipeline" or profiled_only:
            rows = [r for r in rows if r.stats.blocks is not None]
            if not rows:
                raise InputError(
                    f"dataset {dataset.target}/{dataset.family}: no row has a block profile, which the "
                    f"pipeline features need (run 'perfguard calibrate resimulate', or use "
                    f"--features counts)"
                )
        self.rows, self.left_out = rows, len(dataset.rows) - len(rows)
        self.stats = [r.stats for r in rows]
        self.native = np.array([r.native_s for r in rows])
        self.groups = np.array([r.group for r in rows])
        self.features, self.line = features, profile.l2.line
        self.pipeline_id, self.pipe = None, None
        if features == "pipeline":
            model = PipelineModel(profile, timing_cache_dir(default_cache_dir() if cache_dir is None else cache_dir))
            self.pipeline_id = model.model_id
            self.pipe = pipeline_columns(self.stats, model)

    def X(self, view: str) -> np.ndarray:
        return matrix(self.stats, self.features, view, self.line, pipe=self.pipe)


@dataclass
class Evaluation:
    table: dict[str, list[GroupMetrics]]  # predictor name (and "analytical") -> per held-out group
    summary: dict[str, dict]
    features: str = "counts"
    rows: int = 0  # rows evaluated
    left_out: int = 0  # rows without the block profile the pipeline features need

    def to_dict(self) -> dict:
        return {
            "summary": self.summary,
            "features": self.features,
            "rows": self.rows,
            "left_out": self.left_out,
            "groups": {name: [m.to_dict() for m in rows] for name, rows in self.table.items()},
        }


def evaluate(
    dataset: Dataset,
    profile: TargetProfile,
    names: list[str] | None = None,
    features: str | None = None,
    cache_dir: Path | None = None,
    data: DatasetFeatures | None = None,
) -> Evaluation:
    data = data or DatasetFeatures(dataset, profile, features or default_features(dataset), cache_dir)
    stats, native, groups = data.stats, data.native, data.groups
    if len(set(groups.tolist())) < 2:
        raise InputError(f"dataset {dataset.target}/{dataset.family}: leave-one-group-out needs at least 2 groups")
    table: dict[str, list[GroupMetrics]] = {}
    analytical = AnalyticalModel(profile)
    table["analytical"] = [
        metrics(g, analytical.predict_stats([s for s, gg in zip(stats, groups) if gg == g]), native[groups == g])
        for g in sorted(set(groups.tolist()))
    ]
    for name in names or list(PREDICTORS):
        estimator = PREDICTORS[name](features=data.features)
        table[name] = leave_one_group_out(estimator, data.X(estimator.view), native, groups)
    return Evaluation(
        table, {name: summarize(rows) for name, rows in table.items()}, data.features, len(data.rows), data.left_out
    )


def best_predictor(evaluation: Evaluation) -> str:
    """Ranks first: highest mean Spearman, then the true best placed highest, then MAPE."""
    return _best(evaluation.summary)


def _best(summary: dict[str, dict]) -> str:
    candidates = [n for n in summary if n not in ("analytical", "pipeline")]
    return max(
        candidates,
        key=lambda n: (round(summary[n]["spearman"], 3), -summary[n]["worst_best_rank_pct"], -summary[n]["mape"]),
    )


# `model = "auto"` uses a family's calibrated model only where, on shapes it was not selected on,
# its mean Spearman (within each shape, over the sampled schedules) is at least MARGIN above the
# pipeline model's, and no shape does worse than the pipeline model by more than MARGIN.
MARGIN = 0.02


def pipeline_seconds(data: DatasetFeatures, profile: TargetProfile) -> np.ndarray:
    """The pipeline model's own prediction of every row (core plus stall cycles over the clock)."""
    if data.pipe is None:
        raise InputError("the pipeline model needs the pipeline features (block profiles)")
    return (data.pipe[:, 0] + data.pipe[:, 1]) / profile.clock_hz


@dataclass
class Generalisation:
    """A family's calibrated predictors on shapes they were not selected on, against the pipeline
    model (nested leave-one-group-out), and whether `auto` may use the family's model."""

    groups: list[dict]  # per held-out group: the predictor chosen without it, its metrics, the pipeline model's
    summary: dict  # mean and worst Spearman of both, the margin, the decision
    use: bool

    def to_dict(self) -> dict:
        return {"groups": self.groups, "summary": self.summary, "use": self.use}


def generalisation(
    data: DatasetFeatures, profile: TargetProfile, names: list[str] | None = None, margin: float = MARGIN
) -> Generalisation:
    """Nested leave-one-group-out: for each group, the predictor is chosen (as `train` chooses:
    best_predictor over a leave-one-group-out of the other groups) and fitted on the other groups
    only, then scored on the held-out group beside the pipeline model, which learns nothing. So
    every figure is on a shape that neither the choice of predictor nor its fit saw."""
    from sklearn.base import clone

    groups = sorted(set(data.groups.tolist()))
    if len(groups) < 3:
        raise InputError(f"nested leave-one-group-out needs at least 3 groups, the dataset has {len(groups)}")
    pipe = pipeline_seconds(data, profile)
    out = []
    for g in groups:
        test, train = data.groups == g, data.groups != g
        inner: dict[str, dict] = {}
        estimators = {}
        for name in names or list(PREDICTORS):
            estimators[name] = PREDICTORS[name](features=data.features)
            inner[name] = summarize(
                leave_one_group_out(
                    estimators[name], data.X(estimators[name].view)[train], data.native[train], data.groups[train]
                )
            )
        chosen = _best(inner)
        X = data.X(estimators[chosen].view)
        fitted = clone(estimators[chosen]).fit(X[train], data.native[train], data.groups[train])
        model = metrics(g, fitted.predict(X[test]), data.native[test])
        baseline = metrics(g, pipe[test], data.native[test])
        out.append({"group": g, "chosen": chosen, "model": model.to_dict(), "pipeline": baseline.to_dict()})
    model_rho = [r["model"]["spearman"] for r in out]
    pipe_rho = [r["pipeline"]["spearman"] for r in out]
    gain = float(np.mean(model_rho) - np.mean(pipe_rho))
    worst = float(min(m - p for m, p in zip(model_rho, pipe_rho)))
    use = gain >= margin and worst >= -margin
    summary = {
        "model_spearman": float(np.mean(model_rho)),
        "pipeline_spearman": float(np.mean(pipe_rho)),
        "model_worst_best_rank_pct": float(max(r["model"]["best_rank_pct"] for r in out)),
        "pipeline_worst_best_rank_pct": float(max(r["pipeline"]["best_rank_pct"] for r in out)),
        "gain": gain,
        "worst_group_gain": worst,
        "margin": margin,
        "rule": f"mean held-out Spearman at least {margin} above the pipeline model's, and no held-out "
        f"group more than {margin} below it (nested leave-one-group-out over the dataset's shapes)",
    }
    return Generalisation(out, summary, use)


def train(
    dataset: Dataset,
    profile: TargetProfile,
    out: Path,
    names: list[str] | None = None,
    evaluation: Evaluation | None = None,
    features: str | None = None,
    cache_dir: Path | None = None,
) -> tuple[str, Evaluation, Path]:
    """Evaluate every predictor, fit the best on all rows, store it with its hold-out metrics."""
    data = DatasetFeatures(dataset, profile, features or default_features(dataset), cache_dir)
    evaluation = evaluation or evaluate(dataset, profile, names, data=data)
    name = best_predictor(evaluation)
    # Whether `auto` may use it: only the pipeline features have the pipeline model to beat.
    general = (
        generalisation(data, profile, names)
        if data.features == "pipeline" and len(set(data.groups.tolist())) >= 3
        else None
    )
    predictor = PREDICTORS[name](features=data.features)
    X = data.X(predictor.view)
    predictor.fit(X, data.native, data.groups)
    meta = {
        "target": dataset.target,
        "family": dataset.family,
        "simulator": dataset.simulator,
        "simulator_fingerprint": dataset.simulator_fingerprint,
        "profile_fingerprint": profile.fingerprint(),
        "dataset_hash": dataset.digest(),
        "rows": len(data.rows),
        "rows_left_out": data.left_out,
        "groups": sorted(set(data.groups.tolist())),
        "dtypes": sorted({kernel_dtype(r.params) for r in data.rows}),
        "machines": dataset.machines(),
        "created": now_iso(),
        "feature_set": data.features,
        "features": list(feature_names(data.features, predictor.view)),
        "pipeline_model_id": data.pipeline_id,
        "holdout": {"summary": evaluation.summary[name], "groups": [m.to_dict() for m in evaluation.table[name]]},
        "compared": evaluation.summary,
        "scatter": [[float(p), float(n)] for p, n in zip(predictor.predict(X), data.native)],
    }
    if general is not None:
        meta["auto"] = general.to_dict()
    return name, evaluation, save_model(out, predictor, meta)


@dataclass
class Drift:
    mape: float
    spearman: float
    rows: int
    needs_retraining: bool
    reasons: list[str]

    def to_dict(self) -> dict:
        return {
            "mape": self.mape,
            "spearman": self.spearman,
            "rows": self.rows,
            "needs_retraining": self.needs_retraining,
            "reasons": self.reasons,
        }


def drift_sample(baseline_dir: Path, target: str, family: str) -> tuple[set[str], list[dict]]:
    """What a drift check samples: the shapes the model was trained on (the dataset's groups, else the
    default ones) and the variants it has seen (JSON params), which the fresh sample leaves out."""
    known, shapes = set(), DEFAULT_GROUPS[family]
    try:
        dataset = load_dataset(dataset_path(baseline_dir, target, family))
        known = {json.dumps(r.params, sort_keys=True) for r in dataset.rows}
        shapes = [parse_group(g) for g in dataset.groups()]
    except InputError:
        pass  # no dataset (or an unreadable one): the default shapes, nothing to leave out
    return known, shapes


def drift_reasons(mape: float, spearman: float, max_mape: float, min_spearman: float) -> list[str]:
    """Why a model needs retraining: MAPE above its limit, Spearman below its; at a limit is fine."""
    reasons = []
    if mape > max_mape:
        reasons.append(f"MAPE {mape:.1f} % > {max_mape:.1f} %")
    if spearman < min_spearman:
        reasons.append(f"Spearman {spearman:.3f} < {min_spearman:.3f}")
    return reasons


def drift(
    fresh: Dataset, model: StoredModel, limits: DriftLimits, profile: TargetProfile, cache_dir: Path | None = None
) -> Drift:
    """Compare a fresh native sample with the stored model's predictions (drifted beyond `limits`,
    the config's drift_mape and drift_spearman, it needs training again)."""
    if not fresh.rows:
        raise InfraError(f"drift check for {fresh.target}/{fresh.family}: no variant could be measured")
    stats, native, groups = fresh.arrays()
    predicted = CalibratedModel(model.predictor, profile, cache_dir).predict_stats(stats)
    per_group = [metrics(g, predicted[groups == g], native[groups == g]) for g in sorted(set(groups.tolist()))]
    mape = float(np.mean(np.abs(predicted - native) / native) * 100.0)
    spearman = float(np.mean([m.spearman for m in per_group]))
    reasons = drift_reasons(mape, spearman, limits.mape, limits.spearman)
    trained_on = {m["cpu_id"] for m in model.meta.get("machines", []) if isinstance(m, dict) and m.get("cpu_id")}
    now_on = fresh.cpu_ids()
    if reasons and trained_on and now_on and not now_on <= trained_on:
        reasons.append(
            f"timed on {', '.join(sorted(now_on))}; the model was trained on {', '.join(sorted(trained_on))}"
        )
    return Drift(mape, spearman, len(native), bool(reasons), reasons)
