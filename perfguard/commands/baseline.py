"""perfguard baseline update: measure and (re)write baselines/<target>/<kernel>.json."""

from __future__ import annotations

import argparse

from perfguard.commands.check import add_common
from perfguard.config import load_config
from perfguard.errors import EXIT_OK
from perfguard.guard.check import make_jobs, measure, select, write_baselines
from perfguard.report.terminal import console, progress


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("baseline", help="manage committed baselines")
    sub = p.add_subparsers(dest="action", required=True)
    update = sub.add_parser("update", help="measure and write baselines")
    add_common(update)
    update.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out = console()
    config = load_config(args.config)
    jobs = make_jobs(config, select(config, args.kernels, args.targets), args.simulator)
    with progress(len(jobs), out) as advance:
        results = measure(config, jobs, args.jobs, on_result=lambda i, r: advance(f"{r.kernel}[{r.target}]"))
    update = write_baselines(config, jobs, results)

    def shown(path):
        return path.relative_to(config.root) if path.is_relative_to(config.root) else path

    for path in update.written:
        out.print(f"wrote {shown(path)}")
    for path in update.removed:
        out.print(f"removed {shown(path)} (the model no longer has this kernel)")
    if update.unchanged:  # a new commit alone is no change: the file stays as it is, and so does its diff
        out.print(f"unchanged: {len(update.unchanged)} baseline(s) (same statistics, toolchain and kernel; "
                  f"not rewritten)")
    failed = [r for r in results if not r.ok]
    for r in failed:
        out.print(f"[bold yellow]error[/] {r.error} (baseline left as it was)")
    return max([r.exit_code for r in failed], default=EXIT_OK)
