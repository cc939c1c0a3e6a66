"""Every human-facing report rendered from the typed report: the HTML pages and summary.md."""

from __future__ import annotations

from pathlib import Path

from perfguard.document.report import Report
from perfguard.report.html import KERNEL_DIR, write_html
from perfguard.report.markdown import write_markdown


def write_pages(report: Report, report_dir: Path) -> list[Path]:
    """reports/index.html (+ kernels/*.html) and reports/summary.md; returns the two entry files."""
    return [write_html(report, report_dir), write_markdown(report, report_dir)]


def page_files(report_dir: Path) -> list[Path]:
    """Every file write_pages leaves in `report_dir` (what a check record keeps of them)."""
    report_dir = Path(report_dir)
    found = [report_dir / "index.html", report_dir / "summary.md", *sorted((report_dir / KERNEL_DIR).glob("*.html"))]
    return [path for path in found if path.is_file()]
