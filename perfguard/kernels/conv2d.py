"""Conv2D, NCHW input x OIHW weight -> NCHW output, direct convolution tiled for a CPU.

out[n, f, p, q] = sum_{c, r, s} in_pad[n, c, p*stride + r, q*stride + s] * weight[f, c, r, s]

The output is tiled tile_f x tile_p x tile_q (filters x rows x columns) and the innermost
column loop is vectorized by `vector` lanes. `order` picks where the reduction loops sit
relative to the tile loops; in its name upper-case letters are tile loops and lower-case
letters loops inside a tile (f, p, q output filters/rows/columns; c, r, s input channels and
kernel rows/columns); the batch loop is outermost and the vector lanes innermost:

    FPQcrsfpq  output tile outermost, full reduction around an fxpxq accumulator block
    FcPQrsfpq  channel loop outside the spatial tiles (weights reused, output revisited)
    PQFcrsfpq  spatial tiles outside the filter tiles (input patch reused across filters)
    FPQfcrspq  reduction per output filter inside the tile

With padding > 0 a zero-padded copy of the input is materialized first. `unroll` is TVM's
auto-unroll step (0 = none).
"""

from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

from perfguard.errors import InputError
from perfguard.kernels.base import DTYPES, Family, Knob, check_divides, check_params, tile_candidates
from perfguard.kernels.gemm import _largest_divisor, default_vector

NAME = "conv2d"
ORDERS = ("FPQcrsfpq", "FcPQrsfpq", "PQFcrsfpq", "FPQfcrspq")

KNOBS: dict[str, Knob] = {
    "N": Knob(int, 1, minimum=1, doc="batch"),
    "C": Knob(int, 64, minimum=1, doc="input channels"),
    "H": Knob(int, 14, minimum=1, doc="input height"),
    "W": Knob(int, 14, minimum=1, doc="input width"),
    "F": Knob(int, 64, minimum=1, doc="output channels (filters)"),
    "R": Knob(int, 3, minimum=1, doc="kernel height"),
    "S": Knob(int, 3, minimum=1, doc="kernel width"),
    "stride": Knob(int, 1, minimum=1),
    "padding": Knob(int, 1, minimum=0, doc="zero padding on each side of H and W"),
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_f": Knob(int, None, minimum=1, divides="F", doc="filters per tile (default: largest divisor of F <= 8)"),
    "tile_p": Knob(int, None, minimum=1, doc="output rows per tile, divides P (default: largest divisor <= 2)"),
    "tile_q": Knob(int, None, minimum=1, doc="output columns per tile, divides Q (default: largest divisor <= 16)"),
    "vector": Knob(int, None, minimum=1, divides="tile_q", doc="SIMD lanes on the output columns; 1 = none"),
    "unroll": Knob(int, 16, minimum=0, doc="auto-unroll max step of inner loop nests; 0 = none"),
    "order": Knob(str, "FPQcrsfpq", choices=ORDERS, doc="loop order (see the module doc)"),
}

SHAPE_KEYS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding", "dtype")


def out_size(extent: int, kernel: int, stride: int, padding: int) -> int:
    return (extent + 2 * padding - kernel) // stride + 1


def resolve(**params) -> dict:
    p = check_params(NAME, KNOBS, params)
    P = out_size(p["H"], p["R"], p["stride"], p["padding"])
    Q = out_size(p["W"], p["S"], p["stride"], p["padding"])
    if P < 1 or Q < 1:
        raise InputError(f"{NAME}: the kernel ({p['R']}x{p['S']}) is larger than the padded input; "
                         f"check 'R', 'S', 'H', 'W', 'padding'")
    if p["tile_f"] is None:
        p["tile_f"] = _largest_divisor(p["F"], 8)
    if p["tile_p"] is None:
        p["tile_p"] = _largest_divisor(P, 2)
    if p["tile_q"] is None:
        p["tile_q"] = _largest_divisor(Q, 16)
    if p["vector"] is None:
        p["vector"] = default_vector(p["tile_q"], p["dtype"])
    check_divides(NAME, "tile_p", p["tile_p"], "the output height P", P)
    check_divides(NAME, "tile_q", p["tile_q"], "the output width Q", Q)
    return check_params(NAME, KNOBS, p)


def conv2d(**params):
    """Build the scheduled IRModule (function "main", arguments data, weight, out)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    N, C, H, W, F, R, S = (p[k] for k in ("N", "C", "H", "W", "F", "R", "S"))
    st, pad, dtype = p["stride"], p["padding"], p["dtype"]
    P, Q = out_size(H, R, st, pad), out_size(W, S, st, pad)
    tf, tp, tq, vec = p["tile_f"], p["tile_p"], p["tile_q"], p["vector"]

    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((F, C, R, S), dtype, name="weight")
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
    c = te.reduce_axis((0, C), name="c")
    r = te.reduce_axis((0, R), name="r")
    s = te.reduce_axis((0, S), name="s")
    out = te.compute(
        (N, F, P, Q),
        lambda n, f, y, x: te.sum(padded[n, c, y * st + r, x * st + s] * weight[f, c, r, s], axis=[c, r, s]),
        name="conv",
    )
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([data, weight, out])}))

    block = sch.get_sblock("conv")
    n, f, y, x, c, r, s = sch.get_loops(block)
    fo, fi = sch.split(f, [None, tf])
    yo, yi = sch.split(y, [None, tp])
    xo, xi = sch.split(x, [None, tq])
    xvo, xv = sch.split(xi, [None, vec])
    loops = {"F": fo, "P": yo, "Q": xo, "f": fi, "p": yi, "q": xvo, "c": c, "r": r, "s": s}
    sch.reorder(n, *[loops[ch] for ch in p["order"]], xv)
    if vec > 1:
        sch.vectorize(xv)
    first = loops[p["order"][0]]
    if p["unroll"] > 1:
        sch.annotate(first, "pragma_auto_unroll_max_step", p["unroll"])
        sch.annotate(first, "pragma_unroll_explicit", 1)
    sch.decompose_reduction(block, loops[next(ch for ch in p["order"] if ch in "crs")])
    return sch.mod


def compute(**params):
    """The unscheduled IRModule (zero padding as its own stage): what MetaSchedule tunes."""
    import tvm
    from tvm import te, topi

    p = resolve(**params)
    st, pad, dtype = p["stride"], p["padding"], p["dtype"]
    data = te.placeholder((p["N"], p["C"], p["H"], p["W"]), dtype, name="data")
    weight = te.placeholder((p["F"], p["C"], p["R"], p["S"]), dtype, name="weight")
    padded = topi.nn.pad(data, (0, 0, pad, pad), name="pad") if pad else data
    c, r, s = (te.reduce_axis((0, p[key]), name=key.lower()) for key in ("C", "R", "S"))
    shape = (p["N"], p["F"], out_size(p["H"], p["R"], st, pad), out_size(p["W"], p["S"], st, pad))
    out = te.compute(shape, lambda n, f, y, x: te.sum(
        padded[n, c, y * st + r, x * st + s] * weight[f, c, r, s], axis=[c, r, s]), name="conv")
    return tvm.IRModule({"main": te.create_prim_func([data, weight, out])})


def reference(inputs, **params):
    p = resolve(**params)
    data, weight = (np.asarray(a, dtype=np.float64) for a in inputs)
    st, pad = p["stride"], p["padding"]
    P = out_size(p["H"], p["R"], st, pad)
    Q = out_size(p["W"], p["S"], st, pad)
    x = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((p["N"], p["F"], P, Q))
    for r in range(p["R"]):
        for s in range(p["S"]):
            window = x[:, :, r : r + st * (P - 1) + 1 : st, s : s + st * (Q - 1) + 1 : st]
            out += np.einsum("nchw,fc->nfhw", window, weight[:, :, r, s])
    return [out.astype(p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    P = out_size(p["H"], p["R"], p["stride"], p["padding"])
    Q = out_size(p["W"], p["S"], p["stride"], p["padding"])
    return 2 * p["N"] * p["F"] * P * Q * p["C"] * p["R"] * p["S"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: filter/row/column tiles x lanes x unroll x order."""
    p = resolve(**shape)
    P = out_size(p["H"], p["R"], p["stride"], p["padding"])
    Q = out_size(p["W"], p["S"], p["stride"], p["padding"])
    lanes = (1, 2, 4, 8, 16) if p["dtype"] == "float32" else (1, 2, 4, 8)
    tfs = tile_candidates(p["F"], 32, limit=4, floor=2)
    tps = tile_candidates(P, 7, limit=3)
    tqs = tile_candidates(Q, 32, limit=4, floor=2)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tf, tp, tq, order, unroll in itertools.product(tfs, tps, tqs, ORDERS, (0, 16, 64)):
        vecs = [v for v in lanes if tq % v == 0]
        if tq not in vecs and tq <= 16:
            vecs.append(tq)  # odd widths (7, 14): the whole column tile as one vector
        for vec in vecs:
            yield dict(base, tile_f=tf, tile_p=tp, tile_q=tq, vector=vec, unroll=unroll, order=order)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return [
        rng.standard_normal((p["N"], p["C"], p["H"], p["W"])).astype(p["dtype"]),
        rng.standard_normal((p["F"], p["C"], p["R"], p["S"])).astype(p["dtype"]),
    ]


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["N"], p["F"], out_size(p["H"], p["R"], p["stride"], p["padding"]),
             out_size(p["W"], p["S"], p["stride"], p["padding"]))]


FAMILY = Family(
    name=NAME,
    entry=conv2d,
    knobs=KNOBS,
    reference=reference,
    flops=flops,
    num_outputs=1,
    shape_keys=SHAPE_KEYS,
    space=space,
    doc=__doc__.splitlines()[0],
    extra={"resolve": resolve, "make_inputs": make_inputs, "output_shapes": output_shapes, "compute": compute},
)
