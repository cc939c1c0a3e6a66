"""The paper-style table for the committed calibration datasets (leave-one-group-out).

For every dataset under baselines/datasets/<target>/ and every predictor (and the analytical
baseline): per held-out group MAPE, RMSE, Spearman, where the true best lands in the
predicted order (percentile), regret; then the mean over groups, and the time each
predictor takes to train, per 100 variants (a fit on the whole dataset, median of 3).

Once per feature set (--features, default: counts and pipeline): "counts" are the statistics
alone, "pipeline" adds the pipeline model's cycles per bound class and stall cycles (it needs
the rows' block profiles; rows without one are left out). --same-rows evaluates the counts on
the rows that have a block profile too, so that both sets are compared on the same variants.

    python benchmarks/calibration_table.py [--target x86_64] [--families gemm,conv2d]
                                           [--features counts,pipeline] [--same-rows]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from perfguard.config import default_cache_dir
from perfguard.predict.dataset import load_dataset
from perfguard.predict.registry import PREDICTORS
from perfguard.runs.calibration_models import DatasetFeatures, evaluate
from perfguard.targets import BUILTIN

REPO = Path(__file__).resolve().parents[1]


def train_seconds_per_100(data: DatasetFeatures, name: str) -> float:
    runs = []
    for _ in range(3):
        predictor = PREDICTORS[name](features=data.features)
        X = data.X(predictor.view)
        start = time.perf_counter()
        predictor.fit(X, data.native, data.groups)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) / len(data.native) * 100


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="x86_64")
    parser.add_argument("--families", default="")
    parser.add_argument("--features", default="counts,pipeline")
    parser.add_argument("--same-rows", action="store_true", help="counts on the rows with a block profile only")
    parser.add_argument(
        "--root",
        type=Path,
        default=REPO / "benchmarks" / "profiles" / "amd-23-1",
        help="the folder holding datasets/ (default: Zen 1's, benchmarks/profiles/amd-23-1)",
    )
    args = parser.parse_args()
    profile = BUILTIN[args.target]
    root = args.root / "datasets" / args.target
    families = [f for f in args.families.split(",") if f] or sorted(p.stem for p in root.glob("*.json"))
    for family in families:
        dataset = load_dataset(root / f"{family}.json")
        cpus = sorted({m["cpu"] for m in dataset.machines()})
        for features in [f for f in args.features.split(",") if f]:
            data = DatasetFeatures(dataset, profile, features, default_cache_dir(), profiled_only=args.same_rows)
            evaluation = evaluate(dataset, profile, data=data)
            groups = sorted(set(data.groups.tolist()))
            print(
                f"\n### {args.target} / {family}, {features} features: {len(data.rows)} variants in {len(groups)} "
                f"groups (timed on {', '.join(cpus)})"
                + (f"; {data.left_out} rows without a block profile left out" if data.left_out else "")
                + "\n"
            )
            print("| predictor | held-out group | n | MAPE % | RMSE us | Spearman | true best at (top %) | regret |")
            print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, rows in evaluation.table.items():
                for m in rows:
                    print(
                        f"| {name} | {m.group} | {m.n} | {m.mape:.1f} | {m.rmse * 1e6:.1f} | {m.spearman:.3f} | "
                        f"{m.best_rank_pct:.1f} | {m.regret:.3f} |"
                    )
                s = evaluation.summary[name]
                print(
                    f"| **{name}** | **mean** | | **{s['mape']:.1f}** | **{s['rmse'] * 1e6:.1f}** | "
                    f"**{s['spearman']:.3f}** (min {s['min_spearman']:.3f}) | **{s['best_rank_pct']:.1f}** "
                    f"(worst {s['worst_best_rank_pct']:.1f}) | **{s['regret']:.3f}** |"
                )
            print("\n| predictor | train s per 100 variants (fit on all rows, median of 3) |")
            print("| --- | ---: |")
            for name in PREDICTORS:
                print(f"| {name} | {train_seconds_per_100(data, name):.2f} |")


if __name__ == "__main__":
    main()
