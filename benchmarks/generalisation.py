"""Calibration that generalises: do the calibrated predictors beat the pipeline model on shapes, and
families, they were neither fitted nor selected on?

From the committed calibration datasets of a target (baselines/datasets/TARGET/*.json, or a
machine profile's under --root benchmarks/profiles/NAME: schedules
sampled per problem shape, each timed natively; no shape is in the verdict benchmark's pairs, which
tests/predict/test_verdicts.py checks), every figure below is on rows held out from both the fit
and the choice of predictor:

- per family, nested leave-one-group-out (perfguard.runs.calibration_models.generalisation, what
  `calibrate train` records as the `auto` decision): the predictor is chosen on the other
  shapes and fitted on them, then scored on the held-out shape beside the pipeline model;
- a cross-family correction of the pipeline model: one predictor fitted on the pipeline features
  of every family's rows at once (so it corrects the pipeline model by what the blocks are bound
  by, their vector width, their memory stalls: nothing family-specific), scored
  - leave one family out: fitted on the other families, scored per shape of the held-out one;
  - leave one shape out: fitted on every other shape of every family;
- the pipeline model alone, per shape (it learns nothing).

Per shape: Spearman of predicted and native times over its schedules (what a verdict's ranking of
two schedules rests on) and where the truly fastest schedule lands in the predicted order.

    python benchmarks/generalisation.py [--target x86_64] [--predictors mlr,xgboost] [--nested-predictors ...]
                                        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

from perfguard.atomic import atomic_write_text  # noqa: E402
from perfguard.config import load_config  # noqa: E402
from perfguard.predict.dataset import dataset_path, load_dataset  # noqa: E402
from perfguard.predict.evaluate import metrics  # noqa: E402
from perfguard.predict.registry import PREDICTORS  # noqa: E402
from perfguard.predict.select import stored_model  # noqa: E402
from perfguard.runs import calibration_models  # noqa: E402


def pooled(
    features: dict[str, calibration_models.DatasetFeatures], view: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every family's rows at once: X, native seconds, family, group (named family/group)."""
    X = np.vstack([f.X(view) for f in features.values()])
    y = np.concatenate([f.native for f in features.values()])
    fam = np.concatenate([[name] * len(f.native) for name, f in features.items()])
    grp = np.concatenate([[f"{name}/{g}" for g in f.groups] for name, f in features.items()])
    return X, y, fam, grp


def cross_family(
    features: dict[str, calibration_models.DatasetFeatures], profile, names: list[str]
) -> dict[str, list[dict]]:
    """predictor -> per shape: leave-one-family-out and leave-one-shape-out metrics."""
    from sklearn.base import clone

    out: dict[str, list[dict]] = {}
    for name in names:
        # XGBoost as a regressor on log time: its "auto" objective picks by a leave-one-group-out of
        # its own inside every fit, which across families and shapes would multiply the fits by 16
        estimator = PREDICTORS[name](features="pipeline", **({"objective": "regression"} if name == "xgboost" else {}))
        X, y, fam, grp = pooled(features, estimator.view)
        rows = []
        for g in sorted(set(grp.tolist())):
            test = grp == g
            lofo = fam != fam[test][0]
            logo = grp != g
            got = {"group": g}
            for label, train in (("leave_one_family_out", lofo), ("leave_one_shape_out", logo)):
                fitted = clone(estimator).fit(X[train], y[train], grp[train])
                got[label] = metrics(g, fitted.predict(X[test]), y[test]).to_dict()
            rows.append(got)
        out[name] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "perfguard.toml")
    parser.add_argument("--target", default="x86_64")
    parser.add_argument("--predictors", default="mlr,xgboost", help="cross-family correction predictors")
    parser.add_argument(
        "--nested-predictors",
        default=",".join(PREDICTORS),
        help="predictors the per-family nested selection chooses from (default: all)",
    )
    parser.add_argument(
        "--recompute",
        action="store_true",
        help="run the nested selection even where the family's model file records it",
    )
    parser.add_argument(
        "--root",
        type=Path,
        metavar="DIR",
        help="the folder holding datasets/ and models/ (default: the config's baselines; a machine's "
        "calibration: benchmarks/profiles/NAME)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    baselines = config.storage.baseline_dir if args.root is None else args.root
    folder = baselines / "datasets" / profile.name
    families = sorted(p.stem for p in folder.glob("*.json"))
    if not families:
        raise SystemExit(f"generalisation: no datasets in {folder}")
    features = {
        f: calibration_models.DatasetFeatures(
            load_dataset(dataset_path(baselines, profile.name, f)), profile, "pipeline", config.storage.cache_dir
        )
        for f in families
    }
    doc: dict = {"target": profile.name, "families": families, "rows": {f: len(d.rows) for f, d in features.items()}}

    pipe_rows = {}
    for f, data in features.items():
        seconds = calibration_models.pipeline_seconds(data, profile)
        for g in sorted(set(data.groups.tolist())):
            mask = data.groups == g
            pipe_rows[f"{f}/{g}"] = metrics(g, seconds[mask], data.native[mask]).to_dict()
    doc["pipeline"] = pipe_rows

    nested = {}
    for f, data in features.items():
        stored = stored_model(baselines, profile.name, f)
        recorded = (stored.meta.get("auto") if stored is not None else None) if not args.recompute else None
        if (
            recorded
            and stored.meta.get("dataset_hash") == load_dataset(dataset_path(baselines, profile.name, f)).digest()
        ):
            general = calibration_models.Generalisation(recorded["groups"], recorded["summary"], recorded["use"])
            print(f"\n{f}: as `calibrate train` recorded it in {stored.path} (--recompute to run it again)")
        else:
            general = calibration_models.generalisation(
                data, profile, [n for n in args.nested_predictors.split(",") if n]
            )
        nested[f] = general.to_dict()
        print(f"\n{f}: nested leave-one-group-out (chosen on the other shapes, fitted on them)\n")
        print("| held-out shape | chosen | Spearman | pipeline Spearman | best at % | pipeline best at % |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for row in general.groups:
            print(
                f"| {row['group']} | {row['chosen']} | {row['model']['spearman']:.3f} | "
                f"{row['pipeline']['spearman']:.3f} | {row['model']['best_rank_pct']:.1f} | "
                f"{row['pipeline']['best_rank_pct']:.1f} |"
            )
        s = general.summary
        print(
            f"\nmean {s['model_spearman']:.3f} vs pipeline {s['pipeline_spearman']:.3f} (gain {s['gain']:+.3f}, worst "
            f"shape {s['worst_group_gain']:+.3f}): auto {'uses' if general.use else 'does not use'} it"
        )
    doc["nested"] = nested

    names = [n for n in args.predictors.split(",") if n]
    cross = cross_family(features, profile, names)
    doc["cross_family"] = cross
    print("\ncross-family correction of the pipeline model (one predictor, every family's rows)\n")
    head = "| shape | pipeline | " + " | ".join(f"{n}: leave family out | {n}: leave shape out" for n in names) + " |"
    print(head)
    print("| --- | ---: |" + " ---: | ---: |" * len(names))
    shapes = [r["group"] for r in cross[names[0]]]
    for i, g in enumerate(shapes):
        cells = [f"{pipe_rows[g]['spearman']:.3f}"]
        for n in names:
            r = cross[n][i]
            cells += [f"{r['leave_one_family_out']['spearman']:.3f}", f"{r['leave_one_shape_out']['spearman']:.3f}"]
        print(f"| {g} | " + " | ".join(cells) + " |")
    means = [f"{np.mean([pipe_rows[g]['spearman'] for g in shapes]):.3f}"]
    for n in names:
        means += [
            f"{np.mean([r['leave_one_family_out']['spearman'] for r in cross[n]]):.3f}",
            f"{np.mean([r['leave_one_shape_out']['spearman'] for r in cross[n]]):.3f}",
        ]
    print("| mean | " + " | ".join(means) + " |")
    worst = [f"{max(pipe_rows[g]['best_rank_pct'] for g in shapes):.1f}"]
    for n in names:
        worst += [
            f"{max(r['leave_one_family_out']['best_rank_pct'] for r in cross[n]):.1f}",
            f"{max(r['leave_one_shape_out']['best_rank_pct'] for r in cross[n]):.1f}",
        ]
    print("| true best within top % (worst shape) | " + " | ".join(worst) + " |")
    if args.json:
        atomic_write_text(args.json, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
