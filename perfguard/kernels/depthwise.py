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
from typing import Iterator

import numpy as np

from perfguard.errors import InputError
from perfguard.kernels.base import DTYPES, Family, Knob, check_divides, check_params, tile_candidates
from perfguard.kernels.conv2d import out_size
from perfguard.kernels.gemm import _largest_divisor, default_vector

NAME = "depthwise_conv2d"
ORDERS = ("rs_inner", "rs_outer")

KNOBS: dict[str, Knob] = {
    "N": Knob(int, 1, minimum=1, doc="batch"),
    "C": Knob(int, 64, minimum=1, doc="channels (input = output)"),
    "H": Knob(int, 28, minimum=1, doc="input height"),
    "W": Knob(int, 28, minimum=1, doc="input width"),
    "R": Knob(int, 3, minimum=1, doc="kernel height"),
    "S": Knob(int, 3, minimum=1, doc="kernel width"),
    "stride": Knob(int, 1, minimum=1),
    "padding": Knob(int, 1, minimum=0, doc="zero padding on each side of H and W"),
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_c": Knob(int, None, minimum=1, divides="C", doc="channels per tile (default: largest divisor of C <= 4)"),
    "tile_p": Knob(int, None, minimum=1, doc="output rows per tile, divides P (default: largest divisor <= 4)"),
    "tile_q": Knob(int, None, minimum=1, doc="output columns per tile, divides Q (default: largest divisor <= 16)"),
    "vector": Knob(int, None, minimum=1, divides="tile_q", doc="SIMD lanes on the output columns; 1 = none"),
    "unroll": Knob(int, 16, minimum=0, doc="auto-unroll max step of inner loop nests; 0 = none"),
    "order": Knob(str, "rs_inner", choices=ORDERS, doc="kernel-window loops inside or outside the tile"),
}

SHAPE_KEYS = ("N", "C", "H", "W", "R", "S", "stride", "padding", "dtype")


def _out_hw(p: dict) -> tuple[int, int]:
    return (out_size(p["H"], p["R"], p["stride"], p["padding"]),
            out_size(p["W"], p["S"], p["stride"], p["padding"]))


def resolve(**params) -> dict:
    p = check_params(NAME, KNOBS, params)
    P, Q = _out_hw(p)
    if P < 1 or Q < 1:
        raise InputError(f"{NAME}: the kernel ({p['R']}x{p['S']}) is larger than the padded input; "
                         f"check 'R', 'S', 'H', 'W', 'padding'")
    if p["tile_c"] is None:
        p["tile_c"] = _largest_divisor(p["C"], 4)
    if p["tile_p"] is None:
        p["tile_p"] = _largest_divisor(P, 4)
    if p["tile_q"] is None:
        p["tile_q"] = _largest_divisor(Q, 16)
    if p["vector"] is None:
        p["vector"] = default_vector(p["tile_q"], p["dtype"])
    check_divides(NAME, "tile_p", p["tile_p"], "the output height P", P)
    check_divides(NAME, "tile_q", p["tile_q"], "the output width Q", Q)
    return check_params(NAME, KNOBS, p)


def depthwise_conv2d(**params):
    """Build the scheduled IRModule (function "main", arguments data, weight, out)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    N, C, H, W, R, S = (p[k] for k in ("N", "C", "H", "W", "R", "S"))
    st, pad, dtype = p["stride"], p["padding"], p["dtype"]
    P, Q = _out_hw(p)
    tc, tp, tq, vec = p["tile_c"], p["tile_p"], p["tile_q"], p["vector"]

    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, 1, R, S), dtype, name="weight")
    if pad:
        zero = tvm.tirx.const(0, dtype)
        padded = te.compute(
            (N, C, H + 2 * pad, W + 2 * pad),
            lambda n, c, h, w: tvm.tirx.if_then_else(
                tvm.tirx.all(h >= pad, h < H + pad, w >= pad, w < W + pad), data[n, c, h - pad, w - pad], zero
            ),
            name="pad",
        )
    else:
        padded = data
    r = te.reduce_axis((0, R), name="r")
    s = te.reduce_axis((0, S), name="s")
    out = te.compute(
        (N, C, P, Q),
        lambda n, c, y, x: te.sum(padded[n, c, y * st + r, x * st + s] * weight[c, 0, r, s], axis=[r, s]),
        name="depthwise",
    )
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([data, weight, out])}))

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
    if p["unroll"] > 1:
        sch.annotate(co, "pragma_auto_unroll_max_step", p["unroll"])
        sch.annotate(co, "pragma_unroll_explicit", 1)
    sch.decompose_reduction(block, r)
    return sch.mod


def compute(**params):
    """The unscheduled IRModule (zero padding as its own stage): what MetaSchedule tunes."""
    import tvm
    from tvm import te, topi

    p = resolve(**params)
    st, pad, dtype = p["stride"], p["padding"], p["dtype"]
    data = te.placeholder((p["N"], p["C"], p["H"], p["W"]), dtype, name="data")
    weight = te.placeholder((p["C"], 1, p["R"], p["S"]), dtype, name="weight")
    padded = topi.nn.pad(data, (0, 0, pad, pad), name="pad") if pad else data
    r, s = (te.reduce_axis((0, p[key]), name=key.lower()) for key in ("R", "S"))
    out = te.compute((p["N"], p["C"], *_out_hw(p)), lambda n, c, y, x: te.sum(
        padded[n, c, y * st + r, x * st + s] * weight[c, 0, r, s], axis=[r, s]), name="depthwise")
    return tvm.IRModule({"main": te.create_prim_func([data, weight, out])})


def reference(inputs, **params):
    p = resolve(**params)
    data, weight = (np.asarray(a, dtype=np.float64) for a in inputs)
    st, pad = p["stride"], p["padding"]
    P, Q = _out_hw(p)
    x = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((p["N"], p["C"], P, Q))
    for r in range(p["R"]):
        for s in range(p["S"]):
            window = x[:, :, r : r + st * (P - 1) + 1 : st, s : s + st * (Q - 1) + 1 : st]
            out += window * weight[None, :, 0, r, s, None, None]
    return [out.astype(p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    P, Q = _out_hw(p)
    return 2 * p["N"] * p["C"] * P * Q * p["R"] * p["S"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: channel/row/column tiles x lanes x unroll x order."""
    p = resolve(**shape)
    P, Q = _out_hw(p)
    lanes = (1, 2, 4, 8, 16) if p["dtype"] == "float32" else (1, 2, 4, 8)
    tcs = tile_candidates(p["C"], 16, limit=4)
    tps = tile_candidates(P, 8, limit=3)
    tqs = tile_candidates(Q, 64, limit=4, floor=2)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tc, tp, tq, order, unroll in itertools.product(tcs, tps, tqs, ORDERS, (0, 16, 64)):
        vecs = [v for v in lanes if tq % v == 0]
        if tq not in vecs and tq <= 16:
            vecs.append(tq)  # odd widths (7, 14): the whole column tile as one vector
        for vec in vecs:
            yield dict(base, tile_c=tc, tile_p=tp, tile_q=tq, vector=vec, unroll=unroll, order=order)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return [
        rng.standard_normal((p["N"], p["C"], p["H"], p["W"])).astype(p["dtype"]),
        rng.standard_normal((p["C"], 1, p["R"], p["S"])).astype(p["dtype"]),
    ]


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["N"], p["C"], *_out_hw(p))]


FAMILY = Family(
    name=NAME,
    entry=depthwise_conv2d,
    knobs=KNOBS,
    reference=reference,
    flops=flops,
    num_outputs=1,
    shape_keys=SHAPE_KEYS,
    space=space,
    doc=__doc__.splitlines()[0],
    extra={"resolve": resolve, "make_inputs": make_inputs, "output_shapes": output_shapes, "compute": compute},
)
