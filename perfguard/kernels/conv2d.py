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

NAME = "conv2d"
ORDERS = ("FPQcrsfpq", "FcPQrsfpq", "PQFcrsfpq", "FPQfcrspq")

KNOBS: dict[str, Knob] = {
    "N": Knob(int, 1, minimum=1, doc="batch"),
    "C": Knob(int, 64, minimum=1, doc="input channels"),
    "H": Knob(int, 14, minimum=1, doc="input height"),
    "W": Knob(int, 14, minimum=1, doc="input width"),
    "F": Knob(int, 64, minimum=1, doc="output channels (filters)"),
    **KERNEL_WINDOW_KNOBS,
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_f": Knob(int, None, minimum=1, divides="F", doc="filters per tile (default: largest divisor of F <= 8)"),
    "tile_p": Knob(int, None, minimum=1, doc="output rows per tile, divides P (default: largest divisor <= 2)"),
    "tile_q": Knob(int, None, minimum=1, doc="output columns per tile, divides Q (default: largest divisor <= 16)"),
    "vector": Knob(int, None, minimum=1, divides="tile_q", doc="SIMD lanes on the output columns; 1 = none"),
    "unroll": UNROLL_KNOB,
    "order": Knob(str, "FPQcrsfpq", choices=ORDERS, doc="loop order (see the module doc)"),
}

SHAPE_KEYS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding", "dtype")


def resolve(**params) -> dict:
    return resolve_conv_like(NAME, KNOBS, params, tile_caps={"tile_f": 8, "tile_p": 2, "tile_q": 16})


def conv2d(**params):
    """Build the scheduled IRModule (function "main", arguments data, weight, out)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    N, C, F, R, S, st = (p[k] for k in ("N", "C", "F", "R", "S", "stride"))
    P, Q = output_hw(p)
    tf, tp, tq, vec = p["tile_f"], p["tile_p"], p["tile_q"], p["vector"]

    data = data_placeholder(p)
    weight = te.placeholder((F, C, R, S), p["dtype"], name="weight")
    padded = zero_padded_stage(data, p)
    c = te.reduce_axis((0, C), name="c")
    r = te.reduce_axis((0, R), name="r")
    s = te.reduce_axis((0, S), name="s")
    out = te.compute(
        (N, F, P, Q),
        lambda n, f, y, x: te.sum(padded[n, c, y * st + r, x * st + s] * weight[f, c, r, s], axis=[c, r, s]),
        name="conv",
    )
    sch = tvm.s_tir.Schedule(main_module([data, weight, out]))

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
    annotate_auto_unroll(sch, loops[p["order"][0]], p["unroll"])
    sch.decompose_reduction(block, loops[next(ch for ch in p["order"] if ch in "crs")])
    return sch.mod


def compute(**params):
    """The unscheduled IRModule (zero padding as its own stage): what MetaSchedule tunes."""
    from tvm import te

    p = resolve(**params)
    st = p["stride"]
    data = data_placeholder(p)
    weight = te.placeholder((p["F"], p["C"], p["R"], p["S"]), p["dtype"], name="weight")
    padded = topi_zero_padded(data, p)
    c, r, s = (te.reduce_axis((0, p[key]), name=key.lower()) for key in ("C", "R", "S"))
    out = te.compute(
        (p["N"], p["F"], *output_hw(p)),
        lambda n, f, y, x: te.sum(padded[n, c, y * st + r, x * st + s] * weight[f, c, r, s], axis=[c, r, s]),
        name="conv",
    )
    return main_module([data, weight, out])


def reference(inputs, **params):
    p = resolve(**params)
    data, weight = (np.asarray(a, dtype=np.float64) for a in inputs)
    out = np.zeros((p["N"], p["F"], *output_hw(p)))
    for r, s, window in kernel_tap_windows(data, p):
        out += np.einsum("nchw,fc->nfhw", window, weight[:, :, r, s])
    return [out.astype(p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    P, Q = output_hw(p)
    return 2 * p["N"] * p["F"] * P * Q * p["C"] * p["R"] * p["S"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: filter/row/column tiles x lanes x unroll x order."""
    p = resolve(**shape)
    P, Q = output_hw(p)
    tfs = tile_candidates(p["F"], 32, limit=4, floor=2)
    tps = tile_candidates(P, 7, limit=3)
    tqs = tile_candidates(Q, 32, limit=4, floor=2)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tf, tp, tq, order, unroll in itertools.product(tfs, tps, tqs, ORDERS, SPACE_UNROLL_STEPS):
        for vec in column_vectors(tq, p["dtype"]):
            yield dict(base, tile_f=tf, tile_p=tp, tile_q=tq, vector=vec, unroll=unroll, order=order)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return standard_normal_inputs(rng, p["dtype"], (p["N"], p["C"], p["H"], p["W"]), (p["F"], p["C"], p["R"], p["S"]))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["N"], p["F"], *output_hw(p))]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=conv2d,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
)
