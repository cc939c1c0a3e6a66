"""What a kernel family is: an IRModule factory with validated knobs and a numpy reference.

A user's kernel needs only the factory (`entry = "module:function"`); a family adds what
perfguard can say about the kernel without running it (reference output, FLOPs, bytes) and
the knob space that calibration and tuning sample from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfguard.errors import InputError, did_you_mean

DTYPES = ("float32", "float64")
HALF = "float16"  # gemm only: half-precision inputs, products and sums (see perfguard/kernels/gemm.py)


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
        raise InputError(
            f"{family}: unknown parameter '{unknown[0]}'{did_you_mean(unknown[0], knobs)} "
            f"(known: {', '.join(sorted(knobs))})"
        )
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


# --- what the built-in families share (each family module keeps only what is its own) ---


def largest_divisor_at_most(extent: int, cap: int) -> int:
    """The default for a tile knob: a tile must divide its extent, and the cap keeps it cache-sized."""
    return max(d for d in range(1, min(extent, cap) + 1) if extent % d == 0)


def default_vector(tile: int, dtype: str) -> int:
    """Widest of 256-bit-register lanes, halved until it divides the tile."""
    lanes = {HALF: 16, "float32": 8}.get(dtype, 4)
    while tile % lanes:
        lanes //= 2
    return lanes


def fill_tile_defaults(
    p: dict[str, Any], knobs: dict[str, Knob], tile_caps: dict[str, int], extents: dict[str, int] | None = None
) -> None:
    """Fill the tile knobs in `tile_caps` left unset (None), then an unset `vector`, in place.

    A tile defaults to the largest divisor of its extent up to its cap; its extent is the knob it
    `divides`, or `extents[key]` when no knob holds it (a conv output size). `vector` defaults to
    default_vector of the tile it divides. Tiles come first because the vector default depends on one.
    """
    extents = extents or {}
    for key, cap in tile_caps.items():
        if p[key] is None:
            extent = extents[key] if key in extents else p[divided_param(knobs, key)]
            p[key] = largest_divisor_at_most(extent, cap)
    if p["vector"] is None:
        p["vector"] = default_vector(p[divided_param(knobs, "vector")], p["dtype"])


def resolve_with_tile_defaults(family: str, knobs: dict[str, Knob], params: dict, tile_caps: dict[str, int]) -> dict:
    """A family's `resolve` when every tile tiles a knob: validate, fill the defaults, validate again.

    The second check catches a given knob that does not divide a defaulted one (a `vector` that
    does not divide the default tile), which the first could not see.
    """
    p = check_params(family, knobs, params)
    fill_tile_defaults(p, knobs, tile_caps)
    return check_params(family, knobs, p)


# Lane counts the matrix families' `space` tries (gemm, gemv, dense_relu; the conv families
# have their own in conv_common), per dtype.
MATRIX_SPACE_LANES = {"float32": (1, 4, 8, 16), "float64": (1, 2, 4, 8), HALF: (1, 8, 16, 32)}


def lanes_dividing(tile: int, lanes: tuple[int, ...]) -> list[int]:
    """The lane counts that divide the tile (Knob `vector` divides its tile), in the given order."""
    return [v for v in lanes if tile % v == 0]


UNROLL_KNOB = Knob(int, 16, minimum=0, doc="auto-unroll max step of inner loop nests; 0 = none")
SPACE_UNROLL_STEPS = (0, 16, 64)  # the `unroll` values every family's `space` tries


def annotate_auto_unroll(sch, loop, max_step: int) -> None:
    """TVM's auto-unroll on the nest under `loop`: inner nests of at most max_step iterations unroll.

    0 and 1 add no annotation at all and leave unrolling to LLVM.
    """
    if max_step > 1:
        sch.annotate(loop, "pragma_auto_unroll_max_step", max_step)
        sch.annotate(loop, "pragma_unroll_explicit", 1)


def main_module(args):
    """The module shape perfguard builds and calls: one PrimFunc "main" over `args`, inputs then outputs."""
    import tvm
    from tvm import te

    return tvm.IRModule({"main": te.create_prim_func(list(args))})


# Entries that build a family's own computation under a schedule perfguard tune recorded (the
# schedule names the family): they may name any family, and keep its reference and calibrated model.
SCHEDULE_ENTRIES = ("perfguard.tune.apply:tuned", "perfguard.tune.apply:candidate")


def divided_param(knobs: dict[str, Knob], key: str) -> str:
    """The parameter knob `key` divides (a tile's loop extent)."""
    divides = knobs[key].divides
    assert divides is not None, f"knob {key} divides no parameter"  # a family's declaration, not user input
    return divides


def matmul_in_float64(a, b, dtype: str) -> np.ndarray:
    """a @ b for a reference: computed in float64 and cast to the kernel's dtype last, so the reference
    is more precise than the float32 kernel it checks."""
    return (np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)).astype(dtype)


def standard_normal_inputs(rng: np.random.Generator, dtype: str, *shapes: tuple) -> list[np.ndarray]:
    """One standard-normal array per input shape, drawn in argument order (reproducible from the seed)."""
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def builtin_family(
    name: str,
    knobs: dict[str, Knob],
    shape_keys: tuple[str, ...],
    module_doc: str,
    *,
    entry,
    resolve,
    compute,
    reference,
    flops,
    space,
    make_inputs,
    output_shapes,
    check_target=None,
) -> Family:
    """The Family of a built-in kernel module: one output, the doc's first line, and the `extra`
    hooks (resolve, make_inputs, output_shapes, compute) that tests and tuning look up by key.
    `check_target(tvm_target, where, **params)`, when given, raises InputError before a build for
    a target that cannot build these params (a schedule using instructions the target lacks)."""
    extra = {"resolve": resolve, "make_inputs": make_inputs, "output_shapes": output_shapes, "compute": compute}
    if check_target is not None:
        extra["check_target"] = check_target
    return Family(
        name=name,
        entry=entry,
        knobs=knobs,
        reference=reference,
        flops=flops,
        num_outputs=1,
        shape_keys=shape_keys,
        space=space,
        doc=module_doc.splitlines()[0],
        extra=extra,
    )
