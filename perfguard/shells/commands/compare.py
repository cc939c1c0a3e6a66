"""perfguard compare A [B]: measure two revisions now and judge B against A, reported like `check`."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from perfguard.config import find_config, load_config
from perfguard.document.report import Revision, write_report
from perfguard.errors import InputError
from perfguard.executors import add_executor_options, executor_choice
from perfguard.judging import threshold_override
from perfguard.report.pages import write_pages
from perfguard.report.terminal import console, print_table
from perfguard.runs.report_build import build_report
from perfguard.runs.revisions import Measurer, Project, load_side
from perfguard.runs.two_revisions import judge_sides, plan, side_summary
from perfguard.shells.commands.check import names
from perfguard.sim.base import SIMULATOR_NAMES


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("compare", help="build and simulate two git revisions and judge B against A")
    p.add_argument("base", metavar="A", help="the base revision (its kernels are the baselines; its model scores both)")
    p.add_argument("head", metavar="B", nargs="?", default="HEAD", help="the revision judged (default: HEAD)")
    p.add_argument(
        "--config",
        type=Path,
        help="perfguard.toml in the working tree (default: found from here); "
        "each revision's own copy at the same path is used",
    )
    p.add_argument("--targets", type=names, help="comma-separated targets (default: each revision's config)")
    p.add_argument(
        "--kernels",
        type=names,
        help="comma-separated kernel or [[model]] names (default: all, models included, on either side)",
    )
    p.add_argument("--simulator", choices=SIMULATOR_NAMES, help="override the configs' simulator")
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        help="parallel jobs per revision (default: one per 4 jobs to run, up to the CPU count)",
    )
    add_executor_options(p)
    p.add_argument("--threshold", type=float, help="regression threshold in percent (overrides the configs)")
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument("--report-dir", type=Path, help="where reports go (default: the config's report_dir)")
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="measure HEAD as committed even when the working tree has uncommitted changes",
    )
    p.set_defaults(run=run)


def check_numbers(args: argparse.Namespace) -> None:
    if args.jobs is not None and args.jobs < 1:
        raise InputError(f"-j {args.jobs}: must be at least 1")
    threshold_override(args.threshold)


def run(args: argparse.Namespace) -> int:
    out = console()
    check_numbers(args)
    config_path = (args.config or find_config(Path.cwd())).resolve()
    current = load_config(config_path)  # the cache and the report folder are the working tree's
    project = Project.of(config_path, "compare")
    shas = {
        args.base: project.resolve(args.base, "compare: revision"),
        args.head: project.resolve(args.head, "compare: revision"),
    }
    if not args.allow_dirty:
        project.refuse_dirty_head(shas, "compare")
    with project.worktree(shas[args.base]) as base_tree, project.worktree(shas[args.head]) as head_tree:
        base = load_side(project, args.base, shas[args.base], base_tree)
        head = load_side(project, args.head, shas[args.head], head_tree)
        out.print(f"comparing {escape(head.label)} against {escape(base.label)}")
        with Measurer(
            current.storage.cache_dir, args.simulator, args.jobs or current.jobs, executor_choice(args)
        ) as measurer:
            measurer.expand(base, args.targets)  # each revision's [[model]]s, extracted from its own sources
            measurer.expand(head, args.targets)
            base_pairs, head_pairs = plan(base, head, args.kernels, args.targets)
            measurer.measure(base, base_pairs)
            measurer.measure(head, head_pairs)
        verdicts, judging = judge_sides(
            base, head, head_pairs, base_pairs, args.threshold, args.simulator, args.kernels
        )
        report = build_report(verdicts, config_path, judging)  # while the trees exist: models and history live there
    report.commit = head.sha
    report.base = Revision(args.base, base.sha)
    report.compare = {"base": side_summary(base), "head": side_summary(head)}
    report_dir = args.report_dir or current.storage.report_dir
    try:
        write_report(report, report_dir / "perfguard.json")
        if args.json:
            write_report(report, args.json)
        write_pages(report, report_dir)
    finally:
        print_table(report, out)
    return verdicts.exit_code()
