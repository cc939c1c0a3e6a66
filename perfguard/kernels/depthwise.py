"""Depthwise Conv2D (channel multiplier 1): NCHW input x [C, 1, R, S] weight -> NCHW output.

out[n, c, p, q] = sum_{r, s} in_pad[n, c, p*stride + r, q*stride + s] * weight[c, 0, r, s]

Tiled tile_c x tile_p x tile_q (channels x output rows x output columns), the innermost
column loop vectorized by `vector` lanes. `order` "rs_inner" accumulates each output tile
row over the kernel window innermost; "rs_outer" sweeps the whole channel x row tile once per
kernel tap (output tile stays in cache, input rows reused across taps). With padding > 0 a
zero-padded copy of the input is materialized first. `unroll` is TVM's auto-unroll step.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from perfguard.kernels.base import (
    DTYPES,
    SPACE_UNROLL_STEPS,
    UNROLL_KNOB,
    Knob,
    annotate_auto_unroll,
    builtin_family,
    main_module,
    standard_normal_inputs,
    tile_candidates,
)
from perfguard.kernels.conv_common import (
    KERNEL_WINDOW_KNOBS,
    column_vectors,
    data_placeholder,
    kernel_tap_windows,
    output_hw,
    resolve_conv_like,
    topi_zero_padded,
    zero_padded_stage,
)

NAME = "depthwise_conv2d"
ORDERS = ("rs_inner", "rs_outer")

KNOBS: dict[str, Knob] = {
    "N": Knob(int, 1, minimum=1, doc="batch"),
    "C": Knob(int, 64, minimum=1, doc="channels (input = output)"),
    "H": Knob(int, 28, minimum=1, doc="input height"),
    "W": Knob(int, 28, minimum=1, doc="input width"),
    **KERNEL_WINDOW_KNOBS,
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_c": Knob(int, None, minimum=1, divides="C", doc="channels per tile (default: largest divisor of C <= 4)"),
    "tile_p": Knob(int, None, minimum=1, doc="output rows per tile, divides P (default: largest divisor <= 4)"),
    "tile_q": Knob(int, None, minimum=1, doc="output columns per tile, divides Q (default: largest divisor <= 16)"),
    "vector": Knob(int, None, minimum=1, divides="tile_q", doc="SIMD lanes on the output columns; 1 = none"),
    "unroll": UNROLL_KNOB,
    "order": Knob(str, "rs_inner", choices=ORDERS, doc="kernel-window loops inside or outside the tile"),
}

SHAPE_KEYS = ("N", "C", "H", "W", "R", "S", "stride", "padding", "dtype")


def resolve(**params) -> dict:
    return resolve_conv_like(NAME, KNOBS, params, tile_caps={"tile_c": 4, "tile_p": 4, "tile_q": 16})


def depthwise_conv2d(**params):
    """Build the scheduled IRModule (function "main", arguments data, weight, out)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    N, C, R, S, st = (p[k] for k in ("N", "C", "R", "S", "stride"))
    P, Q = output_hw(p)
    tc, tp, tq, vec = p["tile_c"], p["tile_p"], p["tile_q"], p["vector"]

    data = data_placeholder(p)
    weight = te.placeholder((C, 1, R, S), p["dtype"], name="weight")
    padded = zero_padded_stage(data, p)
    r = te.reduce_axis((0, R), name="r")
    s = te.reduce_axis((0, S), name="s")
    out = te.compute(
        (N, C, P, Q),
        lambda n, c, y, x: te.sum(padded[n, c, y * st + r, x * st + s] * weight[c, 0, r, s], axis=[r, s]),
        name="depthwise",
    )
    sch = tvm.s_tir.Schedule(main_module([data, weight, out]))

    block = sch.get_sblock("depthwise")
    n, c, y, x, r, s = sch.get_loops(block)
    co, ci = sch.split(c, [None, tc])
    yo, yi = sch.split(y, [None, tp])
    xo, xi = sch.split(x, [None, tq])
    xvo, xv = sch.split(xi, [None, vec])
    if p["order"] == "rs_inner":
        sch.reorder(n, co, yo, xo, ci, yi, r, s, xvo, xv)
    else:
        sch.reorder(n, co, yo, xo, r, s, ci, yi, xvo, xv)
    if vec > 1:
        sch.vectorize(xv)
    annotate_auto_unroll(sch, co, p["unroll"])
    sch.decompose_reduction(block, r)
    return sch.mod


def compute(**params):
    """The unscheduled IRModule (zero padding as its own stage): what MetaSchedule tunes."""
    from tvm import te

    p = resolve(**params)
    st = p["stride"]
    data = data_placeholder(p)
    weight = te.placeholder((p["C"], 1, p["R"], p["S"]), p["dtype"], name="weight")
    padded = topi_zero_padded(data, p)
    r, s = (te.reduce_axis((0, p[key]), name=key.lower()) for key in ("R", "S"))
    out = te.compute(
        (p["N"], p["C"], *output_hw(p)),
        lambda n, c, y, x: te.sum(padded[n, c, y * st + r, x * st + s] * weight[c, 0, r, s], axis=[r, s]),
        name="depthwise",
    )
    return main_module([data, weight, out])


def reference(inputs, **params):
    p = resolve(**params)
    data, weight = (np.asarray(a, dtype=np.float64) for a in inputs)
    out = np.zeros((p["N"], p["C"], *output_hw(p)))
    for r, s, window in kernel_tap_windows(data, p):
        out += window * weight[None, :, 0, r, s, None, None]
    return [out.astype(p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    P, Q = output_hw(p)
    return 2 * p["N"] * p["C"] * P * Q * p["R"] * p["S"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: channel/row/column tiles x lanes x unroll x order."""
    p = resolve(**shape)
    P, Q = output_hw(p)
    tcs = tile_candidates(p["C"], 16, limit=4)
    tps = tile_candidates(P, 8, limit=3)
    tqs = tile_candidates(Q, 64, limit=4, floor=2)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tc, tp, tq, order, unroll in itertools.product(tcs, tps, tqs, ORDERS, SPACE_UNROLL_STEPS):
        for vec in column_vectors(tq, p["dtype"]):
            yield dict(base, tile_c=tc, tile_p=tp, tile_q=tq, vector=vec, unroll=unroll, order=order)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return standard_normal_inputs(rng, p["dtype"], (p["N"], p["C"], p["H"], p["W"]), (p["C"], 1, p["R"], p["S"]))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["N"], p["C"], *output_hw(p))]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=depthwise_conv2d,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
)
