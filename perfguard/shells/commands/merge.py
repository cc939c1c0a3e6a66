"""perfguard merge: shard reports (perfguard.json files) -> one report, one verdict, one exit code."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfguard.document.report import read_report, write_report
from perfguard.jsonfile import now_iso
from perfguard.judge.merge import merge_reports
from perfguard.report.pages import write_pages
from perfguard.report.terminal import console, print_table


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("merge", help="combine shard reports into one report and verdict")
    p.add_argument(
        "reports",
        type=Path,
        nargs="+",
        metavar="REPORT.json",
        help="perfguard.json files written by 'perfguard check --shard i/n --json F'",
    )
    p.add_argument(
        "--report-dir",
        type=Path,
        default=Path("reports"),
        help="where the merged perfguard.json, index.html and summary.md go (default: ./reports)",
    )
    p.add_argument("--json", type=Path, help="also write the merged JSON report here")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    out = console()
    report = merge_reports([(path, read_report(path)) for path in args.reports], now_iso())
    write_report(report, args.report_dir / "perfguard.json")
    if args.json:
        write_report(report, args.json)
    write_pages(report, args.report_dir)
    print_table(report, out)
    return report.summary.exit_code
