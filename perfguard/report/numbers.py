"""Numbers as every renderer writes them: percentages, times, counts, bytes, energies.

Each takes a number (or None, written "-") and returns text; units scale to the value
(1.23 ms, 456.7 ns, 1.50 MiB).
"""

from __future__ import annotations


def pct(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f} %"


def pct_range(low: float | None, high: float | None) -> str:
    """An interval of percentages: `+1.2 .. +10.4 %` (one decimal: its ends are estimates)."""
    if low is None or high is None:
        return "-"
    return f"{low:+.1f} .. {high:+.1f} %"


def _in_units(value: float | None, units: tuple[tuple[str, float], ...], fmt: str, last: str) -> str:
    """`value` in the first of `units` (largest first) it reaches, else the last one (format `last`)."""
    if value is None:
        return "-"
    for unit, scale in units[:-1]:
        if abs(value) >= scale:
            return f"{value / scale:{fmt}} {unit}"
    unit, scale = units[-1]
    return f"{value / scale:{last}} {unit}"


def seconds(value: float | None) -> str:
    return _in_units(value, (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)), ".3f", ".1f")


def signed_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return ("+" if value > 0 else "-" if value < 0 else "") + seconds(abs(value))


def count(value: int | float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def signed_count(value: int | float | None) -> str:
    return "-" if value is None else ("+" if value > 0 else "") + count(value)


def share(value: float | None) -> str:
    """An unsigned percentage: shares of a peak, of a total."""
    if value is None:
        return "-"
    return f"{value:.2f} %" if abs(value) < 10 else f"{value:.1f} %"


def nbytes(value: float | None) -> str:
    return _in_units(value, (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1)), ".2f", ".0f")


def number(value: float | None, unit: str = "") -> str:
    """Three significant digits, thousands separated: 0.0123, 4.56, 1,230."""
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def joules(value: float | None) -> str:
    return _in_units(value, (("J", 1.0), ("mJ", 1e-3), ("uJ", 1e-6), ("nJ", 1e-9)), ".3g", ".3g")


def threshold(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} %"
