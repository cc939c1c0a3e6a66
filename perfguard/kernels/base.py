"""What a kernel family is: an IRModule factory with validated knobs and a numpy reference.

A user's kernel needs only the factory (`entry = "module:function"`); a family adds what
perfguard can say about the kernel without running it (reference output, FLOPs, bytes) and
the knob space that calibration and tuning sample from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from perfguard.errors import InputError

DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Knob:
    """One parameter: its type, default, and the values it may take.

    `divides` names another parameter this one must divide (a tile of a loop extent);
    `choices` restricts it to a set; `minimum` bounds integers from below.
    """

    kind: type
    default: Any = None
    required: bool = False
    choices: tuple = ()
    minimum: int | None = None
    divides: str | None = None
    doc: str = ""


@dataclass(frozen=True)
class Family:
    name: str
    entry: Callable[..., Any]
    knobs: dict[str, Knob]
    reference: Callable[..., list[np.ndarray]]  # reference(inputs, **params) -> outputs
    flops: Callable[..., int]  # flops(**params) -> floating-point operations of one call
    num_outputs: int = 1
    shape_keys: tuple[str, ...] = ()  # the params that define a problem (a calibration group)
    space: Callable[..., Iterator[dict]] | None = None  # space(**shape) -> schedule variants
    doc: str = ""
    extra: dict = field(default_factory=dict)


def check_params(family: str, knobs: dict[str, Knob], params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and validate; the error names the family and the offending key."""
    unknown = sorted(set(params) - set(knobs))
    if unknown:
        raise InputError(f"{family}: unknown parameter '{unknown[0]}' (known: {', '.join(sorted(knobs))})")
    values: dict[str, Any] = {}
    for key, knob in knobs.items():
        if key not in params:
            if knob.required:
                raise InputError(f"{family}: missing required parameter '{key}'")
            values[key] = knob.default
            continue
        value = params[key]
        if knob.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"{family}: parameter '{key}' must be an integer, got {value!r}")
        if knob.kind is str and not isinstance(value, str):
            raise InputError(f"{family}: parameter '{key}' must be a string, got {value!r}")
        if knob.kind is bool and not isinstance(value, bool):
            raise InputError(f"{family}: parameter '{key}' must be true or false, got {value!r}")
        if knob.choices and value not in knob.choices:
            raise InputError(
                f"{family}: parameter '{key}' = {value!r} is not one of {', '.join(map(str, knob.choices))}"
            )
        if knob.minimum is not None and value < knob.minimum:
            raise InputError(f"{family}: parameter '{key}' = {value} is below the minimum {knob.minimum}")
        values[key] = value
    for key, knob in knobs.items():
        if knob.divides and values[key] is not None:
            extent = values[knob.divides]
            if extent is not None and extent % values[key] != 0:
                raise InputError(
                    f"{family}: parameter '{key}' = {values[key]} does not divide '{knob.divides}' = {extent}"
                )
    return values


def divisors(n: int) -> list[int]:
    """All positive divisors of n, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def tile_candidates(extent: int, cap: int, limit: int = 5, floor: int = 1) -> list[int]:
    """Up to `limit` divisors of `extent` in [floor, cap], spread over that range, ascending.

    Used by the families' `space` functions; deterministic for a given input.
    """
    pool = [d for d in divisors(extent) if floor <= d <= cap]
    if not pool:
        pool = [d for d in divisors(extent) if d <= cap] or [1]
    if len(pool) <= limit:
        return pool
    step = (len(pool) - 1) / (limit - 1)
    return sorted({pool[round(i * step)] for i in range(limit)})


def check_divides(family: str, key: str, value: int, what: str, extent: int) -> None:
    """Like Knob.divides, for an extent derived from several parameters (a conv output size)."""
    if extent % value != 0:
        raise InputError(f"{family}: parameter '{key}' = {value} does not divide {what} = {extent}")
