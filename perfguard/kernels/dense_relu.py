"""Dense + bias + ReLU, fused: Y[B, O] = max(X[B, I] @ W[O, I]^T + bias[O], 0).

Both X and W are read along I, so the dot products are vectorized along I: with vector > 1 the
I loop is split [I / tile_i, tile_i / vector, vector] and the lanes become partial sums
(rfactor). The output is tiled tile_b x tile_o; the horizontal sum, the bias and the ReLU run
per output tile right after its dot products (fused epilogue), so the pre-activation never
leaves the tile. `order` "bo" walks batch tiles outside output tiles (X rows reused), "ob" the
reverse (W rows reused). `unroll` is TVM's auto-unroll step (0 = none).
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
    resolve_with_tile_defaults,
    standard_normal_inputs,
    tile_candidates,
)

NAME = "dense_relu"
ORDERS = ("bo", "ob")

KNOBS: dict[str, Knob] = {
    "B": Knob(int, 16, minimum=1, doc="batch (rows of X and Y)"),
    "I": Knob(int, 256, minimum=1, doc="input features"),
    "O": Knob(int, 256, minimum=1, doc="output features"),
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_b": Knob(int, None, minimum=1, divides="B", doc="batch rows per tile (default: largest divisor of B <= 4)"),
    "tile_o": Knob(int, None, minimum=1, divides="O", doc="outputs per tile (default: largest divisor of O <= 8)"),
    "tile_i": Knob(int, None, minimum=1, divides="I", doc="inputs per tile (default: largest divisor of I <= 256)"),
    "vector": Knob(int, None, minimum=1, divides="tile_i", doc="SIMD lanes of the I partial sums; 1 = none"),
    "unroll": UNROLL_KNOB,
    "order": Knob(str, "bo", choices=ORDERS, doc="order of the batch (b) and output (o) tile loops"),
}

SHAPE_KEYS = ("B", "I", "O", "dtype")


def resolve(**params) -> dict:
    return resolve_with_tile_defaults(NAME, KNOBS, params, tile_caps={"tile_b": 4, "tile_o": 8, "tile_i": 256})


def dense_relu(**params):
    """Build the scheduled IRModule (function "main", arguments X, W, bias, Y)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    Bn, In, On, dtype = p["B"], p["I"], p["O"], p["dtype"]
    tb, to, ti, vec = p["tile_b"], p["tile_o"], p["tile_i"], p["vector"]

    X = te.placeholder((Bn, In), dtype, name="X")
    Wt = te.placeholder((On, In), dtype, name="W")
    bias = te.placeholder((On,), dtype, name="bias")
    i = te.reduce_axis((0, In), name="i")
    D = te.compute((Bn, On), lambda b, o: te.sum(X[b, i] * Wt[o, i], axis=i), name="dense")
    Y = te.compute((Bn, On), lambda b, o: te.max(D[b, o] + bias[o], tvm.tirx.const(0, dtype)), name="relu")
    sch = tvm.s_tir.Schedule(main_module([X, Wt, bias, Y]))

    dense = sch.get_sblock("dense")
    relu = sch.get_sblock("relu")
    b, o, ii = sch.get_loops(dense)
    bo, bi = sch.split(b, [None, tb])
    oo, oi = sch.split(o, [None, to])
    io, iio, iv = sch.split(ii, [None, ti // vec, vec])
    first, second = (bo, oo) if p["order"] == "bo" else (oo, bo)
    sch.reorder(first, second, io, bi, oi, iio, iv)
    if vec > 1:
        rf = sch.rfactor(iv, factor_axis=2)
        rf_first, rf_second = sch.get_loops(rf)[:2]
        sch.vectorize(sch.get_loops(rf)[-1])
        sch.decompose_reduction(rf, sch.get_loops(rf)[2])
        # the horizontal sums and the epilogue follow each output tile's dot products
        sch.reverse_compute_at(dense, rf_second)
        sums = sch.get_loops(dense)[2:]  # lanes first, then the (non-unit) b and o loops
        if len(sums) > 1:
            sch.reorder(*sums[1:], sums[0])  # lanes innermost: each sum stays in a register
        sch.decompose_reduction(dense, sch.get_loops(dense)[2])
        sch.reverse_compute_at(relu, rf_second)
        first = rf_first
    else:
        sch.decompose_reduction(dense, io)
        sch.reverse_compute_at(relu, second)
    annotate_auto_unroll(sch, first, p["unroll"])
    return sch.mod


def compute(**params):
    """The unscheduled IRModule (dense and ReLU as two stages): what MetaSchedule tunes."""
    import tvm
    from tvm import te

    p = resolve(**params)
    X = te.placeholder((p["B"], p["I"]), p["dtype"], name="X")
    Wt = te.placeholder((p["O"], p["I"]), p["dtype"], name="W")
    bias = te.placeholder((p["O"],), p["dtype"], name="bias")
    i = te.reduce_axis((0, p["I"]), name="i")
    D = te.compute((p["B"], p["O"]), lambda b, o: te.sum(X[b, i] * Wt[o, i], axis=i), name="dense")
    Y = te.compute((p["B"], p["O"]), lambda b, o: te.max(D[b, o] + bias[o], tvm.tirx.const(0, p["dtype"])), name="relu")
    return main_module([X, Wt, bias, Y])


def reference(inputs, **params):
    p = resolve(**params)
    x, w, bias = (np.asarray(a, dtype=np.float64) for a in inputs)
    out = np.maximum(x @ w.T + bias[None, :], 0.0)
    return [out.astype(p["dtype"])]


def flops(**params) -> int:
    """Multiply-adds of the product plus the bias add and the ReLU compare per output."""
    p = resolve(**params)
    return 2 * p["B"] * p["O"] * p["I"] + 2 * p["B"] * p["O"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: batch/output/input tiles x lanes x unroll x order."""
    p = resolve(**shape)
    tbs = tile_candidates(p["B"], 16, limit=4)
    tos = tile_candidates(p["O"], 32, limit=4)
    tis = tile_candidates(p["I"], 512, limit=4, floor=16)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tb, to, ti, order, unroll in itertools.product(tbs, tos, tis, ORDERS, SPACE_UNROLL_STEPS):
        for vec in lanes_dividing(ti, MATRIX_SPACE_LANES[p["dtype"]]):
            yield dict(base, tile_b=tb, tile_o=to, tile_i=ti, vector=vec, unroll=unroll, order=order)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return standard_normal_inputs(rng, p["dtype"], (p["B"], p["I"]), (p["O"], p["I"]), (p["O"],))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["B"], p["O"])]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=dense_relu,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
)
