"""perfguard calibrate collect | ingest | resimulate | evaluate | train | drift: predictors from native runs."""

from __future__ import annotations

import datetime
import json
import math
import statistics
from pathlib import Path

from rich.table import Table

from perfguard.atomic import atomic_write_text
from perfguard.config import load_config
from perfguard.errors import EXIT_OK, EXIT_REGRESSION, InfraError, InputError
from perfguard.executors import add_executor_options, executor_from_args
from perfguard.job.native import PROCESSES, QuietPolicy, add_quiet_options
from perfguard.kernels import FAMILY_NAMES
from perfguard.predict.dataset import dataset_path, load_dataset
from perfguard.predict.features import FEATURE_SETS
from perfguard.predict.registry import PREDICTORS
from perfguard.predict.select import stored_model
from perfguard.predict.store import model_path
from perfguard.report.terminal import console, progress
from perfguard.runs import calibration, calibration_models


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("calibrate", help="calibrate predictors against native runs")
    sub = p.add_subparsers(dest="action", required=True)

    def common(q, family_required=True):
        q.add_argument("--config", type=Path)
        q.add_argument("--target", required=True)
        q.add_argument(
            "--family",
            choices=FAMILY_NAMES,
            required=family_required,
            help="kernel family" + ("" if family_required else " (default: every family with a model)"),
        )
        q.add_argument(
            "--root",
            type=Path,
            metavar="DIR",
            help="the folder holding datasets/ and models/ (default: the config's storage baseline_dir); "
            "a machine profile's calibration lives in its own, e.g. benchmarks/profiles/NAME",
        )

    q = sub.add_parser("collect", help="sample schedules, simulate them and time them natively")
    common(q)
    q.add_argument("--variants", type=int, default=200, help="schedules per group (default 200)")
    q.add_argument(
        "--groups",
        type=Path,
        metavar="FILE",
        help="a JSON file holding a list of shapes, one object per group, e.g. "
        '[{"M": 64, "N": 64, "K": 64}] (default: the built-in groups)',
    )
    q.add_argument("--seed", default="perfguard")
    q.add_argument("--output", type=Path, help="dataset file (default: ROOT/datasets/T/F.json)")
    q.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: the config's, else one per 4 jobs)")
    q.add_argument(
        "--max-cv",
        type=float,
        default=3.0,
        metavar="PCT",
        help="reject a native timing whose robust spread (within each process, and between the "
        "processes' medians) stays above PCT %% after 5 attempts (default 3; stored with every row)",
    )
    q.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help=f"separate harness processes per timing attempt, their medians' median kept (default {PROCESSES})",
    )
    _quiet_options(q)
    add_executor_options(q)
    q.set_defaults(run=run_collect)

    q = sub.add_parser("ingest", help="add native timings from pytest --perfguard-native --benchmark-json")
    common(q)
    q.add_argument("--benchmark-json", type=Path, required=True)
    q.add_argument("--output", type=Path, help="dataset file (default: ROOT/datasets/T/F.json)")
    q.set_defaults(run=run_ingest)

    q = sub.add_parser(
        "resimulate",
        help="simulate a dataset's variants again (block profiles), keeping their "
        "native times where the binaries and counters are unchanged",
    )
    common(q, family_required=False)
    q.add_argument("--output", type=Path, help="dataset file (default: the dataset itself)")
    q.add_argument("-j", "--jobs", type=int, help="parallel jobs (default: the config's, else one per 4 jobs)")
    add_executor_options(q)
    q.set_defaults(run=run_resimulate)

    features = dict(
        choices=FEATURE_SETS, help="feature set (default: pipeline when every row has a block profile, else counts)"
    )
    q = sub.add_parser("evaluate", help="leave-one-group-out table of every predictor")
    common(q)
    q.add_argument("--predictors", default=",".join(PREDICTORS))
    q.add_argument("--features", **features)
    q.add_argument("--json", type=Path, help="write the table here (default: reports/calibration-T-F.json)")
    q.set_defaults(run=run_evaluate)

    q = sub.add_parser("train", help="fit the best predictor on the dataset and store it")
    common(q, family_required=False)
    q.add_argument("--predictors", default=",".join(PREDICTORS))
    q.add_argument("--features", **features)
    q.set_defaults(run=run_train)

    q = sub.add_parser("drift", help="time a fresh sample and compare with the stored model")
    common(q, family_required=False)
    q.add_argument("--variants", type=int, default=10, help="fresh schedules per group (default 10)")
    q.add_argument("--seed", help="sampling seed (default: today's date)")
    q.add_argument("--json", type=Path)
    q.add_argument(
        "--max-cv",
        type=float,
        default=3.0,
        metavar="PCT",
        help="reject a native timing whose robust spread stays above PCT %% after 5 batches "
        "(default 3; the spread is stored with every row)",
    )
    _quiet_options(q)
    q.set_defaults(run=run_drift)


def _quiet_options(q) -> None:
    add_quiet_options(q, "an attempt", "a group", "its pending variants are rejected as not quiet")


def _root(args, config) -> Path:
    """Where datasets/ and models/ are: --root, else the config's baseline folder."""
    return args.root if args.root is not None else config.storage.baseline_dir


def _names(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    for name in names:
        if name not in PREDICTORS:
            raise InputError(f"--predictors: unknown predictor '{name}' (one of {', '.join(PREDICTORS)})")
    return names


def _max_cv(args) -> float:
    if not math.isfinite(args.max_cv) or args.max_cv <= 0:
        raise InputError(f"--max-cv {args.max_cv}: must be a finite percentage above 0")
    return args.max_cv / 100.0


def _neighbours(got: calibration.Collected) -> str:
    loads = sorted(got.neighbour_loads)
    kept = (
        f"neighbour load of the kept timings median {statistics.median(loads):.2f}, max {loads[-1]:.2f} CPUs"
        if loads
        else "no neighbour load measured (no kept timing, or no /proc/stat)"
    )
    return f"busy neighbours: {got.neighbour_rejected} timing attempts done again; {kept}"


def run_collect(args) -> int:
    out = console()
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    if args.variants < 2:
        raise InputError(f"--variants {args.variants}: need at least 2")
    if args.processes < 1:
        raise InputError(f"--processes {args.processes}: need at least 1")
    max_cv, quiet = _max_cv(args), QuietPolicy.from_args(args)  # refused before the variants are sampled
    shapes = calibration.read_groups(args.groups) if args.groups else calibration.DEFAULT_GROUPS[args.family]
    total = sum(len(calibration.sample_variants(args.family, s, args.variants, args.seed)) for s in shapes)
    with executor_from_args(args, args.jobs or config.jobs) as executor, progress(total, out) as advance:
        got = calibration.collect(
            config,
            profile,
            args.family,
            shapes,
            args.variants,
            args.seed,
            args.jobs,
            on_result=lambda i, r: advance(r.kernel),
            executor=executor,
            max_cv=max_cv,
            processes=args.processes,
            quiet=quiet,
        )
    path = args.output or dataset_path(_root(args, config), profile.name, args.family)
    n = len(got.dataset.rows)
    if n == 0:  # nothing to train on: say why instead of writing an empty dataset
        why = (
            f"{got.unsteady} native timings rejected as unsteady (spread over --max-cv {args.max_cv:g} %: give "
            f"the machine a quiet moment, or raise --max-cv)"
            if got.unsteady
            else f"{len(got.failed)} variants failed" + (f", first: {got.failed[0]}" if got.failed else "")
        )
        raise InfraError(
            f"calibrate collect kept no variant for {args.family} on {profile.name}: {why}; {path} left as it was"
        )
    got.dataset.save(path)
    out.print(
        f"wrote {path}: {n} variants in {len(got.dataset.groups())} groups "
        f"({len(got.failed)} failed, {got.unsteady} unsteady timings rejected)"
    )
    out.print(_neighbours(got))
    out.print(
        f"simulate {got.simulate_s:.1f} s, native timing {got.native_s:.1f} s "
        f"({100 * (got.simulate_s + got.native_s) / max(n, 1):.1f} s per 100 variants)"
    )
    for line in got.failed[:10]:
        out.print(f"[yellow]failed[/] {line}")
    for line in got.not_quiet[:10]:
        out.print(f"[yellow]not quiet[/] {line}")
    return EXIT_OK


def run_ingest(args) -> int:
    out = console()
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    rows, simulator, fingerprint = calibration.ingest_benchmark_json(args.benchmark_json, profile.name, args.family)
    path = args.output or dataset_path(_root(args, config), profile.name, args.family)
    dataset = calibration.merge_ingested(
        path, rows, simulator, fingerprint, profile.name, args.family, args.benchmark_json
    )
    dataset.save(path)
    out.print(f"wrote {path}: {len(rows)} variants from {args.benchmark_json}, {len(dataset.rows)} in all")
    return EXIT_OK


def run_resimulate(args) -> int:
    out = console()
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    families = calibration.stored_families(_root(args, config), profile.name, args.family, "datasets")
    if args.output and len(families) > 1:
        raise InputError("--output: name one --family with it")
    for family in families:
        path = dataset_path(_root(args, config), profile.name, family)
        dataset = load_dataset(path)
        with (
            executor_from_args(args, args.jobs or config.jobs) as executor,
            progress(len(dataset.rows), out) as advance,
        ):
            got = calibration.resimulate(
                config, profile, dataset, args.jobs, on_result=lambda i, r: advance(r.kernel), executor=executor
            )
        target = args.output or path
        got.dataset.save(target)
        out.print(
            f"wrote {target}: {len(got.dataset.rows)} of {len(dataset.rows)} variants with block profiles "
            f"and binary hashes ({len(got.dropped)} dropped, {len(got.recounted)} kept with new counters)"
        )
        for line in got.recounted[:10]:
            out.print(f"[yellow]recounted[/] {line}")
        for line in got.dropped[:10]:
            out.print(f"[yellow]dropped[/] {line}")
    return EXIT_OK


def print_evaluation(evaluation, out) -> None:
    table = Table(title="leave-one-group-out", show_edge=False)
    for col in ("predictor", "group", "n", "MAPE %", "RMSE us", "Spearman", "best at %", "regret"):
        table.add_column(col, justify="left" if col in ("predictor", "group") else "right")
    for name, rows in evaluation.table.items():
        for m in rows:
            table.add_row(
                name,
                m.group,
                str(m.n),
                f"{m.mape:.1f}",
                f"{m.rmse * 1e6:.1f}",
                f"{m.spearman:.3f}",
                f"{m.best_rank_pct:.1f}",
                f"{m.regret:.3f}",
            )
        s = evaluation.summary[name]
        table.add_row(
            f"[bold]{name}[/]",
            "[bold]mean[/]",
            "",
            f"{s['mape']:.1f}",
            f"{s['rmse'] * 1e6:.1f}",
            f"{s['spearman']:.3f}",
            f"{s['best_rank_pct']:.1f}",
            f"{s['regret']:.3f}",
            end_section=True,
        )
    out.print(table)


def run_evaluate(args) -> int:
    out = console()
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    dataset = load_dataset(dataset_path(_root(args, config), profile.name, args.family))
    evaluation = calibration_models.evaluate(
        dataset, profile, _names(args.predictors), args.features, config.storage.cache_dir
    )
    print_evaluation(evaluation, out)
    path = args.json or config.storage.report_dir / f"calibration-{profile.name}-{args.family}.json"
    atomic_write_text(
        path,
        json.dumps(
            {"target": profile.name, "family": args.family, "dataset_hash": dataset.digest(), **evaluation.to_dict()},
            indent=2,
            sort_keys=True,
        )
        + "\n",
    )
    out.print(f"wrote {path}")
    return EXIT_OK


def run_train(args) -> int:
    out = console()
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    baselines = _root(args, config)
    for family in calibration.stored_families(baselines, profile.name, args.family, "datasets"):
        dataset = load_dataset(dataset_path(baselines, profile.name, family))

        name, evaluation, path = calibration_models.train(
            dataset,
            profile,
            model_path(baselines, profile.name, family),
            _names(args.predictors),
            features=args.features,
            cache_dir=config.storage.cache_dir,
        )
        print_evaluation(evaluation, out)
        s = evaluation.summary[name]
        out.print(
            f"wrote {path}: {name} on the {evaluation.features} features of {evaluation.rows} variants"
            + (f" ({evaluation.left_out} without a block profile left out)" if evaluation.left_out else "")
            + f" (hold-out Spearman {s['spearman']:.3f}, MAPE {s['mape']:.1f} %, "
            f"true best within top {s['worst_best_rank_pct']:.1f} % in every group)"
        )
        auto = stored_model(baselines, profile.name, family)
        decision = (auto.meta.get("auto") or {}) if auto is not None else {}
        if decision:
            g = decision["summary"]
            for row in decision["groups"]:
                out.print(
                    f"  held out {row['group']}: {row['chosen']} {row['model']['spearman']:.3f}, "
                    f"pipeline {row['pipeline']['spearman']:.3f}"
                )
            out.print(
                f"auto {'uses' if decision['use'] else 'does not use'} it: on shapes it was not selected on, "
                f"Spearman {g['model_spearman']:.3f} against the pipeline model's {g['pipeline_spearman']:.3f} "
                f"(gain {g['gain']:+.3f}, worst shape {g['worst_group_gain']:+.3f}; needs +{g['margin']} and "
                f"no shape below -{g['margin']})"
            )
    return EXIT_OK


def run_drift(args) -> int:
    out = console()
    config = load_config(args.config)
    profile = config.profile(args.target, "--target")
    seed = args.seed or datetime.date.today().isoformat()
    verdicts = {}
    baselines = _root(args, config)
    for family in calibration.stored_families(baselines, profile.name, args.family, "models"):
        model = stored_model(baselines, profile.name, family)
        if model is None:
            raise InputError(f"no model for {family} on {profile.name} (run 'perfguard calibrate train')")
        # Fresh variants of the shapes the model was trained on, none of those it has seen.
        known, shapes = calibration_models.drift_sample(baselines, profile.name, family)
        got = calibration.collect(
            config,
            profile,
            family,
            shapes,
            args.variants,
            f"drift-{seed}",
            exclude=known,
            max_cv=_max_cv(args),
            quiet=QuietPolicy.from_args(args),
        )
        out.print(f"{profile.name}/{family}: {_neighbours(got)}")
        result = calibration_models.drift(got.dataset, model, config.drift, profile, config.storage.cache_dir)
        verdicts[family] = result.to_dict()
        state = "[bold red]retrain[/]" if result.needs_retraining else "[green]ok[/]"
        out.print(
            f"{profile.name}/{family}: {state} MAPE {result.mape:.1f} % (limit {config.drift.mape:.1f}), "
            f"Spearman {result.spearman:.3f} (limit {config.drift.spearman:.3f}) on {result.rows} fresh variants"
            + (f": {'; '.join(result.reasons)}" if result.reasons else "")
        )
    if args.json:
        atomic_write_text(args.json, json.dumps(verdicts, indent=2, sort_keys=True) + "\n")
    return EXIT_REGRESSION if any(v["needs_retraining"] for v in verdicts.values()) else EXIT_OK
