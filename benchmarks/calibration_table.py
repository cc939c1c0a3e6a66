"""The paper-style table for the committed calibration datasets (leave-one-group-out).

For every dataset under baselines/datasets/<target>/ and every predictor (and the analytical
baseline): per held-out group MAPE, RMSE, Spearman, where the true best lands in the
predicted order (percentile), regret; then the mean over groups, and the time each
predictor takes to train, per 100 variants (a fit on the whole dataset, median of 3).

    python benchmarks/calibration_table.py [--target x86_64] [--families gemm,conv2d]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from perfguard.predict.calibration import evaluate
from perfguard.predict.dataset import load_dataset
from perfguard.predict.registry import PREDICTORS
from perfguard.targets import BUILTIN

REPO = Path(__file__).resolve().parents[1]


def train_seconds_per_100(dataset, profile, name: str) -> float:
    stats, native, groups = dataset.arrays()
    runs = []
    for _ in range(3):
        predictor = PREDICTORS[name](profile.l2.line)
        start = time.perf_counter()
        predictor.fit(predictor.features(stats), native, groups)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) / len(native) * 100


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="x86_64")
    parser.add_argument("--families", default="")
    args = parser.parse_args()
    profile = BUILTIN[args.target]
    root = REPO / "baselines" / "datasets" / args.target
    families = [f for f in args.families.split(",") if f] or sorted(p.stem for p in root.glob("*.json"))
    for family in families:
        dataset = load_dataset(root / f"{family}.json")
        evaluation = evaluate(dataset, profile)
        cpus = sorted({m["cpu"] for m in dataset.machines()})
        print(f"\n### {args.target} / {family}: {len(dataset.rows)} variants in {len(dataset.groups())} groups "
              f"(timed on {', '.join(cpus)})\n")
        print("| predictor | held-out group | n | MAPE % | RMSE us | Spearman | true best at (top %) | regret |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, rows in evaluation.table.items():
            for m in rows:
                print(f"| {name} | {m.group} | {m.n} | {m.mape:.1f} | {m.rmse * 1e6:.1f} | {m.spearman:.3f} | "
                      f"{m.best_rank_pct:.1f} | {m.regret:.3f} |")
            s = evaluation.summary[name]
            print(f"| **{name}** | **mean** | | **{s['mape']:.1f}** | **{s['rmse'] * 1e6:.1f}** | "
                  f"**{s['spearman']:.3f}** | **{s['best_rank_pct']:.1f}** (worst {s['worst_best_rank_pct']:.1f}) | "
                  f"**{s['regret']:.3f}** |")
        print("\n| predictor | train s per 100 variants (fit on all rows, median of 3) |")
        print("| --- | ---: |")
        for name in PREDICTORS:
            print(f"| {name} | {train_seconds_per_100(dataset, profile, name):.2f} |")


if __name__ == "__main__":
    main()
