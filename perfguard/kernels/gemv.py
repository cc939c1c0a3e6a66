"""GEMV: y[M] = A[M, K] @ x[K], row tiles with a vectorized (rfactor) dot product along K.

With vector > 1 the K loop is split into [K / tile_k, tile_k / vector, vector] and the lanes
become a partial-sum buffer y_rf[M, vector] (rfactor), so each row streams A contiguously with
SIMD multiply-adds; a short horizontal sum per row follows, fused into the row tile when the row
tile loop is outermost. `order` "ik" walks row tiles outside K tiles, "ki" the reverse (x tile
reused across all rows). `unroll` is TVM's auto-unroll step (0 = none).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from perfguard.kernels.base import (
    DTYPES,
    MATRIX_SPACE_LANES,
    SPACE_UNROLL_STEPS,
    UNROLL_KNOB,
    Knob,
    annotate_auto_unroll,
    builtin_family,
    lanes_dividing,
    main_module,
    matmul_in_float64,
    resolve_with_tile_defaults,
    standard_normal_inputs,
    tile_candidates,
)

NAME = "gemv"
ORDERS = ("ik", "ki")

KNOBS: dict[str, Knob] = {
    "M": Knob(int, 512, minimum=1, doc="rows of A, length of y"),
    "K": Knob(int, 512, minimum=1, doc="columns of A, length of x"),
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_m": Knob(int, None, minimum=1, divides="M", doc="rows per tile (default: largest divisor of M <= 8)"),
    "tile_k": Knob(int, None, minimum=1, divides="K", doc="columns per tile (default: largest divisor of K <= 256)"),
    "vector": Knob(int, None, minimum=1, divides="tile_k", doc="SIMD lanes of the K partial sums; 1 = none"),
    "unroll": UNROLL_KNOB,
    "order": Knob(str, "ik", choices=ORDERS, doc="order of the tile loops (i = row tiles, k = K tiles)"),
}

SHAPE_KEYS = ("M", "K", "dtype")


def resolve(**params) -> dict:
    return resolve_with_tile_defaults(NAME, KNOBS, params, tile_caps={"tile_m": 8, "tile_k": 256})


def gemv(**params):
    """Build the scheduled IRModule (function "main", arguments A, x, y)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    M, K, dtype = p["M"], p["K"], p["dtype"]
    tm, tk, vec = p["tile_m"], p["tile_k"], p["vector"]

    A = te.placeholder((M, K), dtype, name="A")
    x = te.placeholder((K,), dtype, name="x")
    k = te.reduce_axis((0, K), name="k")
    y = te.compute((M,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    sch = tvm.s_tir.Schedule(main_module([A, x, y]))

    block = sch.get_sblock("y")
    i, kk = sch.get_loops(block)
    io, ii = sch.split(i, [None, tm])
    ko, kio, kv = sch.split(kk, [None, tk // vec, vec])
    first, second = (io, ko) if p["order"] == "ik" else (ko, io)
    sch.reorder(first, second, ii, kio, kv)
    if vec > 1:
        rf = sch.rfactor(kv, factor_axis=1)
        rf_first, rf_second, _, _, rf_kv = sch.get_loops(rf)
        sch.vectorize(rf_kv)
        if p["order"] == "ik":
            sch.reverse_compute_at(block, rf_first)
            sums = sch.get_loops(block)[1:]  # lanes first, then the rows (absent if tile_m = 1)
            if len(sums) > 1:
                sch.reorder(sums[1], sums[0])  # lanes innermost: each sum stays in a register
            sch.decompose_reduction(block, sch.get_loops(block)[1])
        else:
            sch.decompose_reduction(block, sch.get_loops(block)[-1])
        main, ko_rv, first = rf, (rf_second if p["order"] == "ik" else rf_first), rf_first
    else:
        main, ko_rv = block, ko
    annotate_auto_unroll(sch, first, p["unroll"])
    sch.decompose_reduction(main, ko_rv)
    return sch.mod


def compute(**params):
    """The unscheduled IRModule of the same product: what MetaSchedule tunes."""
    from tvm import te

    p = resolve(**params)
    A = te.placeholder((p["M"], p["K"]), p["dtype"], name="A")
    x = te.placeholder((p["K"],), p["dtype"], name="x")
    k = te.reduce_axis((0, p["K"]), name="k")
    y = te.compute((p["M"],), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    return main_module([A, x, y])


def reference(inputs, **params):
    p = resolve(**params)
    a, b = inputs
    return [matmul_in_float64(a, b, p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    return 2 * p["M"] * p["K"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: row tiles x K tiles x lanes x unroll x order."""
    p = resolve(**shape)
    tms = tile_candidates(p["M"], 32, limit=6)
    tks = tile_candidates(p["K"], 1024, limit=6, floor=16)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tm, tk, order, unroll in itertools.product(tms, tks, ORDERS, SPACE_UNROLL_STEPS):
        for vec in lanes_dividing(tk, MATRIX_SPACE_LANES[p["dtype"]]):
            yield dict(base, tile_m=tm, tile_k=tk, vector=vec, unroll=unroll, order=order)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return standard_normal_inputs(rng, p["dtype"], (p["M"], p["K"]), (p["K"],))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["M"],)]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=gemv,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
)
