"""perfguard report: re-render the HTML pages and summary.md from a perfguard.json, no simulation."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfguard.config import find_config, load_config
from perfguard.document.report import read_report, write_report
from perfguard.errors import EXIT_OK, InputError
from perfguard.report.pages import write_pages
from perfguard.report.terminal import console
from perfguard.report.text import headline


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="re-render the HTML and Markdown reports from perfguard.json")
    p.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="JSON",
        help="the perfguard.json to read (default: perfguard.json in the config's report_dir, "
        "else reports/perfguard.json)",
    )
    p.add_argument("--report-dir", type=Path, help="where the pages go (default: the folder of the JSON)")
    p.add_argument("--config", type=Path, help="perfguard.toml naming the report_dir (default: found from here)")
    p.set_defaults(run=run)


def default_source(config: Path | None) -> Path:
    if config is None:
        try:
            config = find_config(Path.cwd())
        except InputError:  # no project here: the conventional place
            return Path("reports") / "perfguard.json"
    return load_config(config).storage.report_dir / "perfguard.json"


def run(args: argparse.Namespace) -> int:
    out = console()
    source = args.source or default_source(args.config)
    report = read_report(source)
    report_dir = args.report_dir or source.parent
    target = report_dir / "perfguard.json"
    if not target.exists() or not target.samefile(source):  # the pages link to it: keep it beside them
        write_report(report, target)
    try:
        paths = write_pages(report, report_dir)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a hand-edited file out of shape
        raise InputError(f"{source}: malformed report ({type(exc).__name__}: {exc})") from None
    for path in paths:
        out.print(f"wrote {path}", markup=False)
    out.print(headline(report.summary), markup=False)
    return EXIT_OK
