"""perfguard check: build, simulate, score and compare every kernel x target with its baseline."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from perfguard.baselines.git_revision import GitBaselineStore
from perfguard.baselines.store import BaselineStore
from perfguard.config import load_config
from perfguard.document.report import Report, Revision, Shard, write_report
from perfguard.errors import InfraError, InputError
from perfguard.executors import add_executor_options, executor_from_args, pool_size
from perfguard.job.run import JobResult
from perfguard.jsonfile import now_iso
from perfguard.judging import MODEL_NAMES, threshold_override
from perfguard.report.html import KERNEL_DIR
from perfguard.report.pages import page_files, write_pages
from perfguard.report.terminal import console, print_table, print_timings, progress
from perfguard.runs import check_record, result_record, reuse_canary
from perfguard.runs.check import judge_results, make_jobs, measure_until_interrupted, recorded, select, whole_models
from perfguard.runs.orphans import orphan_outcomes
from perfguard.runs.rebase import remeasure_bases
from perfguard.runs.report_build import build_report, check_timings
from perfguard.sim.base import SIMULATOR_NAMES
from perfguard.timings import StageClock
from perfguard.user_code.reads import recording


def names(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def shard(value: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard must be i/n, got '{value}'") from None
    if not (n >= 1 and 1 <= i <= n):
        raise argparse.ArgumentTypeError(f"--shard {value}: need 1 <= i <= n")
    return i, n


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="perfguard.toml (default: found from the current folder)")
    parser.add_argument("--targets", type=names, help="comma-separated targets (default: the config's)")
    parser.add_argument(
        "--kernels", type=names, help="comma-separated kernel or [[model]] names (default: all, models included)"
    )
    parser.add_argument("--simulator", choices=SIMULATOR_NAMES, help="override the config's simulator")
    parser.add_argument(
        "-j", "--jobs", type=int, help="parallel jobs (default: one per 4 jobs to run, up to the CPU count)"
    )
    add_executor_options(parser)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("check", help="check kernels against committed baselines")
    add_common(p)
    p.add_argument("--threshold", type=float, help="regression threshold in percent (overrides config)")
    p.add_argument(
        "--model",
        choices=MODEL_NAMES,
        help="override the config's model (auto: a calibrated model where one exists, else pipeline)",
    )
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument("--report-dir", type=Path, help="where reports go (default: the config's report_dir)")
    p.add_argument("--shard", type=shard, help="run the i-th of n deterministic slices (i/n)")
    p.add_argument("--base", metavar="REF", help="read baselines from this git revision's tree, not the working tree")
    p.add_argument(
        "--allow-errors",
        action="store_true",
        help="exit 0 (or 1 on a regression) even when kernels could not be measured or checked; "
        "they are still reported as errors, never as unchanged",
    )
    p.add_argument(
        "--fail-on-toolchain-change",
        action="store_true",
        help="exit 3 when this run's toolchain differs from its baselines' (default: exit 0; the "
        "headline names what differs and the command that re-baselines)",
    )
    p.add_argument(
        "--recompute",
        action="store_true",
        help="ignore every cache and record (builds, simulations, output checks, llvm-mca timings, job "
        "results, the whole check): build, simulate, check, judge and render everything again, "
        "writing each anew",
    )
    p.add_argument(
        "--verify-reuse",
        nargs="?",
        const=0,
        type=int,
        metavar="N",
        help="the reuse canary: run N of the job results this check would reuse (all when N is not "
        "given) again from scratch and exit 3, naming the job and the input, if any answer differs",
    )
    p.add_argument(
        "--timings",
        action="store_true",
        help="print where the time went: wall and CPU seconds per stage (config, lowering, compile, "
        "simulation, timing model, judging, rendering) and the costliest jobs; the JSON report "
        "always has them",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    clock = StageClock()
    out = console()
    with clock.stage("config"):
        config = load_config(args.config)
        if args.model:
            config = replace(config, judging=replace(config.judging, model=args.model))
        if args.jobs is not None and args.jobs < 1:
            raise InputError(f"-j {args.jobs}: must be at least 1")
        threshold_override(args.threshold)
        store = None
        if args.base:
            store = GitBaselineStore(config.storage.baseline_dir, args.base)
            out.print(f"baselines from {escape(args.base)} ({store.sha[:12]})")
    report_dir = args.report_dir or config.storage.report_dir
    simulator = args.simulator or config.simulation.simulator
    with clock.stage("reuse"):
        key = check_record.check_key(
            config,
            {
                "targets": args.targets,
                "kernels": args.kernels,
                "threshold": args.threshold,
                "model": config.judging.model,
                "simulator": simulator,
                "shard": args.shard,
                "base": store.sha if store is not None else None,
                "allow_errors": args.allow_errors,
                "fail_on_toolchain_change": args.fail_on_toolchain_change,
            },
            simulator,
        )
        if args.verify_reuse is not None and args.verify_reuse < 0:
            raise InputError(f"--verify-reuse {args.verify_reuse}: must be a count of jobs >= 0 (0: all)")
        found = None if args.recompute or args.verify_reuse is not None else check_record.lookup(config, key)
    if found is not None:  # nothing the check depends on changed: its report and pages as they were
        return _reused(args, clock, out, found, report_dir)
    with clock.stage("config"), recording(config.root, exclude=(config.storage.cache_dir, report_dir)) as config_files:
        pairs = select(config, args.kernels, args.targets)
        whole = None
        if args.shard:
            i, n = args.shard
            # a shard holds part of a model: it reports its part, `perfguard merge` the total (docs/models.md)
            whole = whole_models(pairs)
            pairs = pairs[i - 1 :: n]
        jobs = make_jobs(config, pairs, args.simulator, args.threshold)
        if args.recompute:
            jobs = [replace(job, recompute=True) for job in jobs]
    with clock.stage("reuse"):
        known: list[JobResult | None] = [None] * len(jobs) if args.recompute else recorded(jobs)
        canary: dict[int, JobResult] = {}
        if args.verify_reuse is not None:  # these reused results are run again from scratch, then compared
            chosen = reuse_canary.pick(
                [(i, j.label) for i, (j, r) in enumerate(zip(jobs, known)) if r is not None], args.verify_reuse
            )
            canary = {i: known[i] for i in chosen}  # type: ignore[misc]
            known = [None if i in canary else r for i, r in enumerate(known)]
            jobs = [replace(j, recompute=True) if i in canary else j for i, j in enumerate(jobs)]
    todo = sum(r is None for r in known)
    with clock.stage("jobs"):  # the pool is shut down inside: its workers' CPU is counted here
        workers = pool_size(args.jobs or config.jobs, todo)
        with executor_from_args(args, workers) as executor, progress(len(jobs), out) as advance:
            results, interrupted = measure_until_interrupted(
                config,
                jobs,
                args.jobs,
                on_result=lambda i, r: advance(f"{r.kernel}[{r.target}]"),
                executor=executor,
                known=known,
            )
            workers = executor.workers if todo > 1 else 0
            reruns = list(executor.reruns)
    mismatches = [m for i, old in canary.items() if (m := reuse_canary.compare(old, results[i])) is not None]
    for mismatch in mismatches:
        out.print(escape(f"reuse canary: {mismatch.message()}"), style="bold red")
    if canary and not mismatches:
        out.print(f"reuse canary: {len(canary)} reused result(s) run again from scratch: each the same")
    with clock.stage("reuse"):  # report entries of results whose inputs are as recorded (not under --base)
        entry_keys = result_record.keys(config, jobs, results, args.threshold) if store is None else []
        entries = [
            None if args.recompute else result_record.lookup(config, key, r) for key, r in zip(entry_keys, results)
        ]
    with clock.stage("judge"):
        check = judge_results(config, jobs, results, args.threshold, store, interrupted, whole, known=entries)
        # results measured with another toolchain than their baselines': judged against the base measured again
        for sha in remeasure_bases(config, jobs, check, args.threshold, store, args.simulator, args.jobs):
            out.print(f"measured the base revision {sha[:12]} again with this toolchain (the baselines' differs)")
        scan_orphans = not args.kernels and (not args.shard or args.shard[0] == 1)  # what a selection can orphan
        if scan_orphans:
            check.outcomes += orphan_outcomes(
                config, store or BaselineStore(config.storage.baseline_dir), args.targets, args.threshold
            )
    check.allow_errors = args.allow_errors
    check.fail_on_toolchain_change = args.fail_on_toolchain_change
    with clock.stage("explain"):
        report = build_report(check, config.path, config)
    if args.shard:
        report.shard = Shard(*args.shard)
    if store is not None:
        report.base = Revision(args.base, store.sha)
    _write_and_show(
        args,
        report,
        report_dir,
        out,
        clock,
        lambda: write_pages(report, report_dir),
        lambda: check_timings(clock, results, [r.reused for r in results], workers=workers, reruns=reruns),
    )
    for entry_key, outcome in zip(entry_keys, check.outcomes):
        if outcome.explained is None:
            entry = next(
                (e for e in report.results if e.kernel == outcome.result.kernel and e.target == outcome.result.target),
                None,
            )
            if entry is not None:
                result_record.store(config, entry_key, entry)
    if not interrupted and all(r.ok and r.depends is not None for r in results) and not check.count("error"):
        targets = {j.profile.name for j in jobs}
        if scan_orphans:  # every baseline of every target the orphan scan read, and which targets there are
            targets |= check_record.baseline_targets(config)
        depends = (
            config_files.digests()
            + [d for r in results for d in r.depends or []]
            + check_record.folder_depends(
                [Path(config.storage.baseline_dir)] * scan_orphans
                + check_record.baseline_files(config, sorted(targets)),
                config.root.resolve(),
            )
        )
        recorded_json = report.to_json()
        recorded_json.pop("timings", None)
        check_record.store(
            config,
            key,
            recorded_json,
            [list(d) for d in dict.fromkeys(map(tuple, depends))],
            report_dir,
            page_files(report_dir),
        )
    return InfraError.exit_code if mismatches else check.exit_code()


def _reused(
    args: argparse.Namespace, clock: StageClock, out, found: tuple[dict, dict[str, bytes]], report_dir: Path
) -> int:
    """Write and show a recorded check (check_record): its report with this run's date and timings."""
    recorded_json, pages = found
    report = Report.from_json(recorded_json, "check record")
    report.created = now_iso()
    _write_and_show(
        args,
        report,
        report_dir,
        out,
        clock,
        lambda: check_record.restore_pages(report_dir, pages, KERNEL_DIR),
        lambda: check_timings(clock, [], whole_check_reused=True),
    )
    return report.summary.exit_code


def _write_and_show(
    args: argparse.Namespace, report: Report, report_dir: Path, out, clock: StageClock, render, timings
) -> None:
    """perfguard.json first (what was measured is reported even when the run was cut short, and a
    folder that cannot take it gets no pages either), then the pages, then the JSON again with the
    time they took; the table is shown even when a file cannot be written (exit 3)."""
    try:
        for first in (True, False):
            report.timings = timings()
            write_report(report, report_dir / "perfguard.json")
            if args.json:
                write_report(report, args.json)
            if first:
                with clock.stage("render"):
                    render()
    finally:
        print_table(report, out)
        if args.timings:
            print_timings(report, out)
        index, summary = report_dir / "index.html", report_dir / "summary.md"
        if index.is_file() and summary.is_file():
            out.print(escape(f"report: {shown_path(index)} (summary: {shown_path(summary)})"))


def shown_path(path: Path) -> str:
    """A path as a user types it: relative to the current folder when under it."""
    path = Path(path).resolve()
    here = Path.cwd().resolve()
    return str(path.relative_to(here)) if path.is_relative_to(here) else str(path)
