"""reports/index.html from reports/perfguard.json (jinja2, autoescaped: names come from users)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from perfguard.atomic import atomic_write_text
from perfguard.guard.compare import VERDICTS
from perfguard.report.text import headline, pct, seconds


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("perfguard.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_index(data: dict[str, Any]) -> str:
    return _env().get_template("index.html.j2").render(
        headline=headline(data["summary"]),
        summary=data["summary"],
        verdict_names=VERDICTS,
        version=data["perfguard_version"],
        created=data["created"],
        results=data["results"],
        pct=pct,
        seconds=seconds,
    )


def write_html(data: dict[str, Any], report_dir: Path) -> Path:
    path = Path(report_dir) / "index.html"
    atomic_write_text(path, render_index(data))
    return path
