"""Every human-facing report rendered from perfguard.json: the HTML pages and summary.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfguard.report.html import write_html
from perfguard.report.markdown import write_markdown


def write_pages(data: dict[str, Any], report_dir: Path) -> list[Path]:
    """reports/index.html (+ kernels/*.html) and reports/summary.md; returns the two entry files."""
    return [write_html(data, report_dir), write_markdown(data, report_dir)]
