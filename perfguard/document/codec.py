"""A report's JSON form, driven by its dataclasses' annotations: `to_json` writes any part of a
report as plain JSON data, `from_json` reads one back strictly (a wrong type is an input error
naming the key; an absent optional key takes its default; unknown keys are kept in `extra`).
`absent_if(value)` marks a field left out of the JSON while it has that value."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import field
from typing import Any

from perfguard.errors import InputError

_ABSENT_IF = "absent_if"


def absent_if(value: Any) -> Any:
    """A field left out of the JSON while it equals `value` (its default; an empty list or dict
    is made afresh for each object)."""
    if isinstance(value, (list, dict)):
        return field(default_factory=type(value), metadata={_ABSENT_IF: value})
    return field(default=value, metadata={_ABSENT_IF: value})


# -- the conversion, driven by the dataclasses' annotations -------------------------------------


def from_json(cls: type, data: Any, source: str) -> Any:
    """One part of a report (a Result, a TargetSummary, ...) from its JSON form; an error names `source`."""
    return _Reader(source).load(cls, data, "")


def to_json(value: Any) -> Any:
    """A report, or any part of one, as plain JSON data."""
    return _dump(value)


def _dump(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "extra" or (_ABSENT_IF in f.metadata and item == f.metadata[_ABSENT_IF]):
                continue
            out[f.name] = _dump(item)
        return {**getattr(value, "extra", {}), **out}
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


_KINDS: dict[Any, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, what: str, nullable: bool, value: Any) -> InputError:
        return InputError(f"{self.source}: {where}: must be {what}{' or null' if nullable else ''}, got {value!r}")

    def load(self, tp: Any, value: Any, where: str, nullable: bool = False) -> Any:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if tp is Any:
            return value
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            if value is None:
                if len(inner) < len(args):
                    return None
                raise self.fail(where, self.kind(inner[0]), False, value)
            return self.load(inner[0], value, where, nullable=len(inner) < len(args))
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.load_object(tp, value, where, nullable)
        if origin is list:
            if not isinstance(value, list):
                raise self.fail(where, self.kind(tp), nullable, value)
            return [self.load(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                raise self.fail(where, "an object", nullable, value)
            return {k: self.load(args[1], v, f"{where}.{k}") for k, v in value.items()}
        if tp is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, tp)
        if not ok:
            raise self.fail(where, self.kind(tp), nullable, value)
        return value

    def kind(self, tp: Any) -> str:
        if dataclasses.is_dataclass(tp):
            return "an object"
        if typing.get_origin(tp) is list and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            return "a list of objects"
        return _KINDS.get(typing.get_origin(tp) or tp, str(tp))

    def load_object(self, cls: type, value: Any, where: str, nullable: bool) -> Any:
        if not isinstance(value, dict):
            raise self.fail(where or "report", "an object", nullable, value)
        hints = _hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                kwargs["extra"] = {k: v for k, v in value.items() if k not in known or k == "extra"}
            elif f.name in value and value[f.name] is None and f.default_factory is not dataclasses.MISSING:
                kwargs[f.name] = f.default_factory()  # an empty list or object written as null
            elif f.name in value:
                kwargs[f.name] = self.load(hints[f.name], value[f.name], f"{where}.{f.name}" if where else f.name)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise self.fail(f"{where}.{f.name}" if where else f.name, self.kind(hints[f.name]), False, None)
        return cls(**kwargs)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
