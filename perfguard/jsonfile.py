"""Strict JSON for the files perfguard reads back (baselines, models, datasets, reports).

Python's json module accepts NaN, Infinity and numbers like 1e999 (read as infinity), leaves
lone surrogates in strings, and raises RecursionError on deeply nested arrays. Any of these in
a baseline or a model could turn into a wrong verdict (a NaN delta is neither above nor below
a threshold) or a crash far from the file. Here each becomes an InputError that names the file.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from pathlib import Path
from typing import Any

from perfguard.errors import InputError

_INT_DIGITS = 40  # far above any count (< 2**64, 20 digits); Python refuses to read past 4300
# What only the checks below can judge: a run of digits longer than an integer may be, an exponent of
# three digits or more (a float out of range needs one, or such a run), an escape of a surrogate. A
# text holding none of them is parsed by the json module alone, checks and all, at C speed (a model
# file of a megabyte: ten times faster).
_NEEDS_CHECKS = re.compile(rf"\d{{{_INT_DIGITS + 1}}}|[eE][+-]?\d{{3}}|\\u[dD][89a-fA-F]")


class _Rejected(ValueError):
    pass


def _no_constant(name: str) -> float:
    raise _Rejected(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"number {text[:30]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS:
        raise _Rejected(f"integer {text[:20]}... has more than {_INT_DIGITS} digits")
    return int(text)


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _Rejected("a string holds a lone surrogate (\\ud800-\\udfff)") from None


def _encodable(text: str) -> bool:
    """No lone surrogate in the text itself (a str handed in, not decoded from bytes, may hold one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def loads(text: str | bytes, source: str, label: str) -> Any:
    """The parsed document; InputError "<source>: <label> (<what is wrong>)" otherwise."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{source}: {label} (not UTF-8 text)") from None
    try:
        if _NEEDS_CHECKS.search(text) is None and _encodable(text):
            value = json.loads(text, parse_constant=_no_constant)
        else:
            value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
            _check_strings(value)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: {label} (invalid JSON at line {exc.lineno} column {exc.colno})") from None
    except _Rejected as exc:
        raise InputError(f"{source}: {label} ({exc})") from None
    except RecursionError:
        raise InputError(f"{source}: {label} (nested too deeply)") from None
    return value


def read(path: Path, label: str, source: str | None = None) -> Any:
    """Read and parse a file; FileNotFoundError propagates (callers decide what a missing file means)."""
    source = source or str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror or exc}") from None
    return loads(data, source, label)


def check_plain(value: Any, where: str) -> None:
    """InputError unless `value` (from TOML) is something JSON holds as it is: strings without NUL,
    integers, finite floats, booleans, and lists and tables of them (no dates or times)."""
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise InputError(f"{at}: must be a finite number, got {item!r}")
        elif isinstance(item, str) and "\x00" in item:
            raise InputError(f"{at}: must not contain a NUL character")
        elif not isinstance(item, (str, int, float, bool)):
            raise InputError(f"{at}: {type(item).__name__} values are not supported, got {item!r}")


def now_iso() -> str:
    """The UTC time, to the second, that every file perfguard writes records as `created`."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
