"""One correction across families, judged on the verdict pairs held out by family.

From a machine's calibration datasets (--root benchmarks/profiles/NAME: every built-in family,
timed natively on that CPU), one predictor is fitted on the pipeline features of every family's
rows at once: it corrects the pipeline model by what the blocks are bound by, their vector
width and their memory stalls, nothing family-specific. For each family of the verdict pairs
(benchmarks/verdict_pairs.py: shapes in no dataset), it is fitted again without that family's
rows and scores that family's pairs, so every pair is held out by shape and by family. Beside
it, on the same pairs and the same CPU's native timings (benchmarks/verdicts.py --no-timing: no
timing is done here):

- pipeline: the pipeline model alone;
- per-family: the machine's per-family models (ROOT/models/TARGET/FAMILY.json, `calibrate
  train`), held out by shape only, where `model = "auto"` uses them (else the pipeline model);
- cross-family (leave family out): the correction above;
- cross-family (all families): fitted on every family's rows, held out by shape only.

    python benchmarks/cross_family.py --root benchmarks/profiles/intel-6-167
        --native-file benchmarks/verdicts-native-intel-6-167.json [--predictor xgboost] [--json FILE] [-j 2]
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

from benchmarks.verdict_pairs import PAIRS  # noqa: E402
from benchmarks.verdicts import (  # noqa: E402
    build_sides,
    by_family,
    family_markdown,
    native_delta,
    summarize,
    time_pairs,
)
from perfguard.atomic import atomic_write_text  # noqa: E402
from perfguard.config import load_config  # noqa: E402
from perfguard.job.native import pick_cpu  # noqa: E402
from perfguard.kernels import FAMILY_NAMES  # noqa: E402
from perfguard.predict.calibrated import CalibratedModel  # noqa: E402
from perfguard.predict.dataset import dataset_path, load_dataset  # noqa: E402
from perfguard.predict.pipeline import PipelineModel  # noqa: E402
from perfguard.predict.registry import PREDICTORS  # noqa: E402
from perfguard.predict.select import predictor_for  # noqa: E402
from perfguard.runs.calibration_models import DatasetFeatures  # noqa: E402

COLUMNS = ("pipeline", "per-family", "cross-family (leave family out)", "cross-family (all families)")


def fit_pooled(features: dict[str, DatasetFeatures], families: list[str], name: str):
    """`name` fitted on the pipeline features of these families' rows at once."""
    estimator = PREDICTORS[name](features="pipeline", **({"objective": "regression"} if name == "xgboost" else {}))
    X = np.vstack([features[f].X(estimator.view) for f in families])
    y = np.concatenate([features[f].native for f in families])
    groups = np.concatenate([[f"{f}/{g}" for g in features[f].groups] for f in families])
    return estimator.fit(X, y, groups)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "perfguard.toml")
    parser.add_argument("--target", default="x86_64")
    parser.add_argument("--root", type=Path, required=True, help="the machine's datasets/ and models/")
    parser.add_argument("--native-file", type=Path, required=True, help="that machine's pair timings")
    parser.add_argument("--predictor", default="xgboost", choices=sorted(PREDICTORS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("-j", "--jobs", type=int)
    args = parser.parse_args(argv)
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    cache = config.storage.cache_dir
    families = [f for f in FAMILY_NAMES if dataset_path(args.root, profile.name, f).exists()]
    if not families:
        raise SystemExit(f"cross_family: no datasets under {args.root}/datasets/{profile.name}")
    features = {
        f: DatasetFeatures(load_dataset(dataset_path(args.root, profile.name, f)), profile, "pipeline", cache)
        for f in families
    }
    pairs = [p for p in PAIRS if p.entry is None and p.family in families]
    sides = build_sides(pairs, config, profile, args.jobs)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    records = time_pairs(pairs, sides, args.native_file, 0, False, pick_cpu(), profile, log, timing=False)
    pairs = [p for p in pairs if p.name in records]
    native = {p.name: native_delta(records[p.name]).delta for p in pairs}

    def delta(model, pair) -> float:
        before, after = model.predict_stats([s.stats for s in sides[pair.name]])
        return float(after / before - 1.0)

    pipeline = PipelineModel(profile, cache)
    everything = CalibratedModel(fit_pooled(features, families, args.predictor), profile, cache)
    predicted: dict[str, dict[str, float | None]] = {c: {} for c in COLUMNS}
    for family in dict.fromkeys(p.family for p in pairs):
        without = CalibratedModel(
            fit_pooled(features, [f for f in families if f != family], args.predictor), profile, cache
        )
        for pair in [p for p in pairs if p.family == family]:
            own = predictor_for(profile, family, "qemu", args.root, None, cache, "auto", pair.base)
            predicted["pipeline"][pair.name] = delta(pipeline, pair)
            predicted["per-family"][pair.name] = delta(own, pair)
            predicted[COLUMNS[2]][pair.name] = delta(without, pair)
            predicted[COLUMNS[3]][pair.name] = delta(everything, pair)
    summaries = {c: summarize(native, predicted[c]) for c in COLUMNS}
    print(f"{len(pairs)} pairs of {len(families)} families; {args.predictor}; timings {args.native_file}\n")
    print("| model | pairs | Spearman of deltas | missed regressions | false alarms | large within x1.3 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for c, s in summaries.items():
        print(
            f"| {c} | {s.n} | {s.spearman:.3f} | {len(s.missed)} | {len(s.false_alarms)} | {s.large_within} / {len(s.large)} |"
        )
    print("\n" + family_markdown(by_family(pairs, native, predicted)))
    for c, s in summaries.items():
        if s.missed or s.false_alarms:
            print(f"\n{c}: missed {', '.join(s.missed) or 'none'}; false alarms {', '.join(s.false_alarms) or 'none'}")
    if args.json:
        doc = {
            "native_file": str(args.native_file),
            "predictor": args.predictor,
            "families": families,
            "native": native,
            "predicted": predicted,
            "summaries": {c: s.to_dict() for c, s in summaries.items()},
        }
        atomic_write_text(args.json, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
