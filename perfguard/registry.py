"""Parts found by name and imported on first use: simulators, predictors, kernel families, executors.

Adding one is one new module and one line in its registry. Lazy because the parts' imports are
heavy (TVM, scikit-learn, XGBoost, Dask) and every command and every pytest collection would
otherwise pay for all of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from perfguard.errors import InputError


class Registry(Mapping[str, Any]):
    """name -> "module:attribute". `registry[name]` (KeyError when unknown) and `load(name)`
    (an input error listing the known names) import the module on first use; `names`, `in` and
    iteration import nothing."""

    def __init__(self, kind: str, entries: dict[str, str], listing: str = "one of"):
        self.kind = kind  # in messages: "unknown {kind} 'x' ({listing} a, b)"
        self.listing = listing
        self._entries = dict(entries)
        self.names = tuple(self._entries)

    def load(self, name: str) -> Any:
        if name not in self._entries:
            raise InputError(f"unknown {self.kind} '{name}' ({self.listing} {', '.join(self.names)})")
        module_name, _, attribute = self._entries[name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # a part this installation leaves out; a missing dependency is raised as is
                raise InputError(f"{self.kind} '{name}' is not available in this perfguard version") from None
            raise
        return getattr(module, attribute)

    def __getitem__(self, name: str) -> Any:
        if name not in self._entries:
            raise KeyError(name)
        return self.load(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
