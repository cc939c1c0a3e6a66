"""perfguard tune KERNEL --target T: find a faster schedule with simulators and the predictor."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.markup import escape

from perfguard.config import load_config
from perfguard.errors import EXIT_INFRA, EXIT_OK, InputError
from perfguard.executors import add_executor_options, executor_from_args
from perfguard.report.terminal import console, progress
from perfguard.tune.measure import MEASURES
from perfguard.tune.output import fmt_time
from perfguard.tune.session import STRATEGY_NAMES, tune_kernel


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tune", help="tune a configured kernel's schedule for a target")
    p.add_argument("kernel", help="a kernel configured in perfguard.toml (of a built-in family)")
    p.add_argument("--config", type=Path, help="perfguard.toml (default: found from the current folder)")
    p.add_argument("--target", required=True, help="target profile to tune for")
    p.add_argument("--trials", type=int, default=64, help="candidates to measure (default 64)")
    p.add_argument(
        "--parallel",
        type=int,
        help="simulators at once: the local pool's or local Dask cluster's size (default: CPU count)",
    )
    p.add_argument(
        "--strategy",
        choices=STRATEGY_NAMES,
        default="evolutionary",
        help="MetaSchedule evolutionary search or trace replay over the unscheduled computation, "
        "or a Bayesian search over the family's knobs (default: evolutionary)",
    )
    p.add_argument("--batch", type=int, help="candidates per search round (default: max(parallel, 8))")
    p.add_argument(
        "--measure",
        choices=MEASURES,
        default="sim",
        help="score by simulation + predictor (default), or by native timing (host ISA only)",
    )
    p.add_argument("--seed", type=int, default=0, help="search seed (default 0): same seed, same trials")
    p.add_argument(
        "--output",
        type=Path,
        help="folder for the schedule and the [[kernel]] snippet (default: tuned/ beside perfguard.toml)",
    )
    add_executor_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out = console()
    config = load_config(args.config)
    spec = config.kernel(args.kernel)
    profile = config.profile(args.target, "--target")
    for name in ("trials", "parallel", "batch"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InputError(f"--{name} {value}: must be at least 1")
    state: dict[str, Any] = {"best": None, "errors": 0, "done": 0}

    with executor_from_args(args, args.parallel or config.jobs) as executor:
        out.print(
            f"tuning {escape(spec.name)} for {profile.name}: {args.strategy}, {args.trials} trials, "
            f"{args.measure} on {escape(executor.describe())}"
        )
        with progress(args.trials, out) as advance:

            def on_trial(trial) -> None:
                if trial.ok and (state["best"] is None or trial.predicted_s < state["best"]):
                    state["best"] = trial.predicted_s
                state["errors"] += not trial.ok
                state["done"] += 1
                line = f"best {fmt_time(state['best'])}, {state['errors']} errors"
                advance(line)
                if not out.is_terminal and (state["done"] % 8 == 0 or state["done"] == args.trials):
                    out.print(f"{state['done']}/{args.trials} candidates: {line}")  # CI logs: no bar

            result = tune_kernel(
                config,
                spec,
                profile,
                executor,
                strategy=args.strategy,
                trials=args.trials,
                batch=args.batch,
                measure=args.measure,
                seed=args.seed,
                out_dir=args.output.resolve() if args.output else None,
                on_trial=on_trial,
            )
    ok = [t for t in result.trials if t.ok]
    out.print(
        f"{len(result.trials)} candidates in {result.seconds:.1f} s: {len(ok)} measured, "
        f"{result.errors} errors; scored by {escape(result.model)}"
    )
    for trial in [t for t in result.trials if not t.ok][:5]:
        out.print(f"[yellow]error[/] {trial.stage}: {escape(trial.error or '')}")
    if result.tuned is None:
        out.print("[bold yellow]no candidate could be measured: nothing written[/]")
        return EXIT_INFRA
    if not result.tuned.ok:
        out.print(f"[bold yellow]the written result does not run[/]: {escape(result.tuned.error or '')}")
        return EXIT_INFRA
    speedup = result.speedup
    assert speedup is not None  # both ran and were scored
    verdict = "[bold green]faster than[/]" if speedup > 1.0 else "no faster than"
    out.print(
        f"configured {fmt_time(result.configured.predicted_s)} -> tuned {fmt_time(result.tuned.predicted_s)}: "
        f"{speedup:.3f}x, {verdict} the configured schedule"
    )
    if speedup < 1.0:
        out.print("[yellow]the configured schedule stays faster: keep it (the result is written for reference)[/]")
    for path in result.written:
        shown = path.relative_to(config.root) if path.is_relative_to(config.root) else path
        out.print(f"wrote {shown}")
    out.print(escape(result.snippet), end="")
    return EXIT_OK
