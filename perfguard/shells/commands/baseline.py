"""perfguard baseline update | prune | rename: measure and (re)write baselines/<target>/<kernel>.json,
delete the ones no configured kernel has, give a kernel's baselines a new name."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from perfguard.baselines.store import BaselineStore, refuse_newer
from perfguard.config import load_config
from perfguard.errors import EXIT_OK, InputError
from perfguard.executors import executor_from_args, pool_size
from perfguard.report.terminal import console, progress
from perfguard.runs.baseline_update import write_baselines
from perfguard.runs.check import make_jobs, measure, recorded, select
from perfguard.runs.orphans import closest_kernel, find_orphans, is_configured, reason, scanned_targets, shown
from perfguard.shells.commands.check import add_common, names


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("baseline", help="manage committed baselines")
    sub = p.add_subparsers(dest="action", required=True)
    update = sub.add_parser("update", help="measure and write baselines")
    add_common(update)
    update.set_defaults(run=run)
    prune = sub.add_parser("prune", help="list (and with --yes delete) baselines that no configured kernel has")
    prune.add_argument("--config", type=Path, help="perfguard.toml (default: found from the current folder)")
    prune.add_argument("--targets", type=names, help="comma-separated targets (default: every target with baselines)")
    prune.add_argument("--yes", action="store_true", help="delete them (default: only list them)")
    prune.set_defaults(run=run_prune)
    rename = sub.add_parser("rename", help="give a kernel's baselines (every target) a new kernel name")
    rename.add_argument("old", help="the kernel name the baselines have")
    rename.add_argument("new", help="the kernel's name in perfguard.toml now")
    rename.add_argument("--config", type=Path, help="perfguard.toml (default: found from the current folder)")
    rename.add_argument("--targets", type=names, help="comma-separated targets (default: every target with baselines)")
    rename.set_defaults(run=run_rename)


def run(args: argparse.Namespace) -> int:
    out = console()
    config = load_config(args.config)
    jobs = make_jobs(config, select(config, args.kernels, args.targets), args.simulator)
    store = BaselineStore(config.storage.baseline_dir)  # before measuring: files a newer perfguard wrote are refused
    refuse_newer([store.path(job.profile.name, job.kernel.name) for job in jobs])
    known = recorded(jobs)  # a job whose inputs are as recorded is not run again
    todo = sum(r is None for r in known)
    with (
        executor_from_args(args, pool_size(args.jobs or config.jobs, todo)) as executor,
        progress(len(jobs), out) as advance,
    ):
        results = measure(
            config,
            jobs,
            args.jobs,
            on_result=lambda i, r: advance(f"{r.kernel}[{r.target}]"),
            executor=executor,
            known=known,
        )
    update = write_baselines(config, jobs, results)
    for path in update.written:
        out.print(f"wrote {shown(config, path)}")
    for path in update.removed:
        out.print(f"removed {shown(config, path)} (the model no longer has this kernel)")
    if update.unchanged:  # a new commit alone is no change: the file stays as it is, and so does its diff
        out.print(
            f"unchanged: {len(update.unchanged)} baseline(s) (same statistics, toolchain and kernel; not rewritten)"
        )
    failed = [r for r in results if not r.ok]
    for r in failed:
        out.print(f"[bold yellow]error[/] {r.error} (baseline left as it was)")
    return max([r.exit_code for r in failed], default=EXIT_OK)


def run_prune(args: argparse.Namespace) -> int:
    out = console()
    config = load_config(args.config)
    store = BaselineStore(config.storage.baseline_dir)
    orphans = find_orphans(config, store, args.targets)
    # a [[model]]'s call order on a target it is not configured for goes with its kernels' baselines
    graphs = [
        path
        for target in scanned_targets(config, store, args.targets)
        for path in store.graph_files(target)
        if not any(m.name == path.stem and target in (m.targets or config.targets) for m in config.models)
    ]
    if not orphans and not graphs:
        out.print(
            f"no orphaned baselines in {shown(config, config.storage.baseline_dir)}: every one has a configured kernel"
        )
        return EXIT_OK
    if not args.yes:
        for orphan in orphans:
            out.print(escape(f"would remove {shown(config, orphan.path)}: {reason(config, orphan)}"))
        for path in graphs:
            out.print(
                escape(
                    f"would remove {shown(config, path)}: the call order of [[model]] '{path.stem}', which "
                    f"is not configured for target '{path.parent.parent.name}'"
                )
            )
        out.print(
            f"{len(orphans) + len(graphs)} orphaned baseline(s); delete them with: perfguard baseline prune "
            f"--yes (a renamed kernel keeps its statistics with: perfguard baseline rename OLD NEW)"
        )
        return EXIT_OK
    for path in store.remove_all([Path(o.path) for o in orphans] + graphs):
        out.print(escape(f"removed {shown(config, path)}"))
    out.print(f"now commit {shown(config, config.storage.baseline_dir)}")
    return EXIT_OK


def run_rename(args: argparse.Namespace) -> int:
    out = console()
    config = load_config(args.config)
    if args.old == args.new:
        raise InputError(f"baseline rename: old and new name are both '{args.old}'")
    if not any(is_configured(config, t, args.new) for t in config.profiles):
        near = closest_kernel(config, args.new)
        raise InputError(
            f"{config.path}: no kernel '{args.new}' is configured"
            f"{f' (did you mean {near!r}?)' if near else ''}: rename the baselines to the kernel's "
            f"name in the config"
        )
    store = BaselineStore(config.storage.baseline_dir)
    for source, dest in store.rename(args.old, args.new, scanned_targets(config, store, args.targets)):
        out.print(escape(f"renamed {shown(config, source)} -> {shown(config, dest)}"))
    out.print(f"now commit {shown(config, config.storage.baseline_dir)}")
    return EXIT_OK
