"""A section of perfguard.toml's [perfguard] table, and the typed reads its parser makes.

A section is a small frozen dataclass owned by the layer that reads it (sim/settings.py's
`Simulation`, judging.py's `Judging`, config.py's `Storage` and `Drift`). It declares its keys
with their documentation in `KEYS` (key -> (type, default, meaning): docs/configuration.md is
generated from them) and builds itself with `parse(table)`. config.py composes the sections;
a section never imports config.py (config sits above the layers that own most of them).

Every error is one line naming the file and the key (`Table.where`), as the bad-input catalogue
(docs/bad-input.md) expects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard.errors import InputError

KeyDocs = dict[str, tuple[str, str, str]]  # key -> (type, default, meaning)


@dataclass(frozen=True)
class Table:
    """The [perfguard] (or [tool.perfguard]) table as a section reads it."""

    values: Mapping[str, Any]
    path: Path  # the config file
    prefix: str  # "perfguard" or "tool.perfguard": how an error names the table

    @property
    def root(self) -> Path:
        """The config file's folder: relative paths start here."""
        return self.path.parent

    def where(self, key: str) -> str:
        return f"{self.path}: {self.prefix}.{key}"

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.values


def number(value: Any, where: str, minimum: float = 0.0, integer: bool = False) -> Any:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InputError(f"{where}: must be {'an integer' if integer else 'a number'}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):  # a NaN threshold passes everything
        raise InputError(f"{where}: must be a finite number, got {value!r}")
    if value < minimum:
        raise InputError(f"{where}: must be >= {minimum}, got {value!r}")
    return value if integer else float(value)


def flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{where}: must be true or false, got {value!r}")
    return value


def string_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        raise InputError(f"{where}: must be a non-empty list of strings")
    return tuple(value)
