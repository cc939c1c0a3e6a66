"""Number and verdict wording shared by every renderer (terminal, HTML, Markdown)."""

from __future__ import annotations


def pct(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f} %"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3f} {unit}"
    return f"{value / 1e-9:.1f} ns"


def headline(summary: dict) -> str:
    if summary.get("error"):
        return f"{summary['error']} kernel(s) could not be measured"
    if summary.get("regression"):
        return f"{summary['regression']} regression(s) found"
    return "no regressions"
