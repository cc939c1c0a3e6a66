"""Calibration campaigns, second half: a dataset's features, the predictors evaluated and trained on them (with the generalisation check that decides whether `auto` uses the result), and drift of a committed model against fresh baselines. The first half (runs/calibration.py) collects, ingests and re-simulates the datasets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfguard.config import DriftLimits, default_cache_dir
from perfguard.errors import InfraError, InputError
from perfguard.jsonfile import now_iso
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.calibrated import CalibratedModel
from perfguard.predict.dataset import Dataset, dataset_path, load_dataset
from perfguard.predict.evaluate import GroupMetrics, leave_one_group_out, metrics, summarize
from perfguard.predict.features import FEATURE_SETS, feature_names, matrix, pipeline_columns
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.registry import PREDICTORS
from perfguard.predict.select import kernel_dtype
from perfguard.predict.store import StoredModel, save_model
from perfguard.runs.calibration import DEFAULT_GROUPS, parse_group
from perfguard.sim.mca_tools import timing_cache_dir
from perfguard.targets import TargetProfile


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
