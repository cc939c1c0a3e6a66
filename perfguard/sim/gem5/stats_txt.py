"""gem5's stats.txt: every "Begin Simulation Statistics" dump as {stat name: number}."""

from __future__ import annotations

import os
import re
from pathlib import Path

from perfguard.errors import InputError

Number = int | float
Dump = dict[str, Number]

BEGIN_MARK = "Begin Simulation Statistics"
END_MARK = "End Simulation Statistics"
_MARK_RE = re.compile(r"^-+\s*(Begin|End) Simulation Statistics\s*-+$")
_INT_RE = re.compile(r"^[+-]?\d+$")


def read_source(source: str | Path | bytes, what: str) -> tuple[str, str]:
    """(text, name for messages) from a path, a text or bytes."""
    if isinstance(source, bytes):
        data, name = source, f"<{what}>"
    elif isinstance(source, Path) or ("\n" not in source and source and os.path.exists(source)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        name = str(path)
    else:
        return source, f"<{what}>"
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError:
        raise InputError(f"{name}: not a text file (not UTF-8)") from None


def _number(token: str) -> Number | None:
    if _INT_RE.match(token):
        return int(token)
    try:
        return float(token)  # also nan, inf, -inf, 1e+10
    except ValueError:
        return None


def parse_stats(text_or_path: str | Path | bytes) -> list[Dump]:
    """Every dump of a gem5 stats.txt, in file order, as {stat name: number}.

    A Path (or a string naming an existing file) is read; any other string is the text itself.
    InputError (naming the file and line) for: no dump, a dump without its end line
    (truncated), a line that is not `NAME VALUE [...]`, a name twice in one dump, text outside
    a dump.
    """
    text, name = read_source(text_or_path, "stats text")
    dumps: list[Dump] = []
    current: Dump | None = None
    begin_line = 0
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        mark = _MARK_RE.match(line)
        if mark:
            if mark.group(1) == "Begin":
                if current is not None:
                    raise InputError(f"{name}:{number}: dump {len(dumps) + 1} (line {begin_line}) has no end line")
                current, begin_line = {}, number
            else:
                if current is None:
                    raise InputError(f"{name}:{number}: end of a dump that never began")
                if not current:
                    raise InputError(f"{name}:{number}: dump {len(dumps) + 1} is empty")
                dumps.append(current)
                current = None
            continue
        if current is None:
            raise InputError(f"{name}:{number}: text outside a statistics dump: {line[:60]!r}")
        tokens = line.split()
        value = _number(tokens[1]) if len(tokens) >= 2 else None
        if value is None:
            if not any(END_MARK in later for later in lines[number:]):  # cut off mid-line
                raise InputError(f"{name}: truncated: dump {len(dumps) + 1} (line {begin_line}) ends in a partial line")
            raise InputError(f"{name}:{number}: not a 'NAME VALUE' statistics line: {line[:60]!r}")
        if tokens[0] in current:
            raise InputError(f"{name}:{number}: '{tokens[0]}' appears twice in dump {len(dumps) + 1}")
        current[tokens[0]] = value
    if current is not None:
        raise InputError(f"{name}: truncated: dump {len(dumps) + 1} (line {begin_line}) has no '{END_MARK}' line")
    if not dumps:
        raise InputError(f"{name}: no gem5 statistics ('{BEGIN_MARK}' not found)")
    return dumps
