"""Quantized conv2d: NHWC int8 data x OHWI int8 weights -> NHWC int32, optionally requantized to int8.

out[n, p, q, f] = sum_{r, s, c} int32(in_pad[n, p*stride + r, q*stride + s, c]) * int32(weight[f, r, s, c])

The layout int8 inference uses on CPUs: channels innermost in both operands, so the reduction
over c reads both contiguously and LLVM vectorizes it (sdot on aarch64 `+dotprod`). Loop nest:

    for n, p, qo, fo:               # tile_q output columns x tile_f filters per tile
      for qi, fi:
        for r, s, c:                # int32 accumulation; c innermost
          out[n, p, q, f] += ...

With padding > 0 a zero-padded copy of the input is made first. `requantize` adds the int8 stage
(perfguard/kernels/quant_common.py, with the int32 bound on C x R x S), computed per tile.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from perfguard.errors import InputError
from perfguard.kernels.base import (
    SPACE_UNROLL_STEPS,
    UNROLL_KNOB,
    Knob,
    annotate_auto_unroll,
    builtin_family,
    check_divides,
    check_params,
    largest_divisor_at_most,
    main_module,
    tile_candidates,
)
from perfguard.kernels.conv_common import KERNEL_WINDOW_KNOBS, output_hw
from perfguard.kernels.quant_common import (
    REQUANT_KNOBS,
    check_quant_params,
    integer_inputs,
    requantize_reference,
    requantize_stage,
)

NAME = "qconv2d"

KNOBS: dict[str, Knob] = {
    "N": Knob(int, 1, minimum=1, doc="batch"),
    "H": Knob(int, 14, minimum=1, doc="input height"),
    "W": Knob(int, 14, minimum=1, doc="input width"),
    "C": Knob(int, 64, minimum=1, doc="input channels"),
    "F": Knob(int, 64, minimum=1, doc="output channels (filters)"),
    **KERNEL_WINDOW_KNOBS,
    "tile_f": Knob(int, None, minimum=1, divides="F", doc="filters per tile (default: largest divisor of F <= 16)"),
    "tile_q": Knob(int, None, minimum=1, doc="output columns per tile, divides Q (default: largest divisor <= 4)"),
    "unroll": UNROLL_KNOB,
    **REQUANT_KNOBS,
}

SHAPE_KEYS = ("N", "H", "W", "C", "F", "R", "S", "stride", "padding", "requantize")


def resolve(**params) -> dict:
    p = check_params(NAME, KNOBS, params)
    P, Q = output_hw(p)
    if P < 1 or Q < 1:
        raise InputError(
            f"{NAME}: the kernel ({p['R']}x{p['S']}) is larger than the padded input; "
            f"check 'R', 'S', 'H', 'W', 'padding'"
        )
    if p["tile_f"] is None:
        p["tile_f"] = largest_divisor_at_most(p["F"], 16)
    if p["tile_q"] is None:
        p["tile_q"] = largest_divisor_at_most(Q, 4)
    check_divides(NAME, "tile_q", p["tile_q"], "the output width Q", Q)
    p = check_params(NAME, KNOBS, p)
    check_quant_params(NAME, p, p["C"] * p["R"] * p["S"], "C x R x S")
    return p


def _stages(p: dict):
    """data, weight, the int32 accumulator and the int8 Q (or None)."""
    import tvm
    from tvm import te

    N, H, W, C, F, R, S = (p[k] for k in ("N", "H", "W", "C", "F", "R", "S"))
    st, pad = p["stride"], p["padding"]
    data = te.placeholder((N, H, W, C), "int8", name="data")
    weight = te.placeholder((F, R, S, C), "int8", name="weight")
    padded = data
    if pad:
        padded = te.compute(
            (N, H + 2 * pad, W + 2 * pad, C),
            lambda n, h, w, c: tvm.tirx.if_then_else(
                tvm.tirx.all(h >= pad, h < H + pad, w >= pad, w < W + pad),
                data[n, h - pad, w - pad, c],
                tvm.tirx.const(0, "int8"),
            ),
            name="pad",
        )
    r, s, c = (te.reduce_axis((0, p[key]), name=key.lower()) for key in ("R", "S", "C"))
    acc = te.compute(
        (N, *output_hw(p), F),
        lambda n, y, x, f: te.sum(
            padded[n, y * st + r, x * st + s, c].astype("int32") * weight[f, r, s, c].astype("int32"), axis=[r, s, c]
        ),
        name="conv",
    )
    return data, weight, acc, requantize_stage(acc, p) if p["requantize"] else None


def qconv2d(**params):
    """Build the scheduled IRModule (function "main", arguments data, weight and out or Q)."""
    import tvm
    import tvm.s_tir

    p = resolve(**params)
    data, weight, acc, Q = _stages(p)
    sch = tvm.s_tir.Schedule(main_module([data, weight, Q if Q is not None else acc]))
    block = sch.get_sblock("conv")
    n, y, x, f, r, s, c = sch.get_loops(block)
    xo, xi = sch.split(x, [None, p["tile_q"]])
    fo, fi = sch.split(f, [None, p["tile_f"]])
    sch.reorder(n, y, xo, fo, xi, fi, r, s, c)
    if Q is not None:
        sch.reverse_compute_at(sch.get_sblock("Q"), fo)
    annotate_auto_unroll(sch, xo, p["unroll"])
    return sch.mod


def compute(**params):
    """The unscheduled IRModule: what MetaSchedule tunes."""
    p = resolve(**params)
    data, weight, acc, Q = _stages(p)
    return main_module([data, weight, Q if Q is not None else acc])


def reference(inputs, **params):
    """Exact: int64 sums of the padded windows times the weights (and requantize)."""
    p = resolve(**params)
    data, weight = (np.asarray(a, dtype=np.int64) for a in inputs)
    st, pad = p["stride"], p["padding"]
    P, Q = output_hw(p)
    x = np.pad(data, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    acc = np.zeros((p["N"], P, Q, p["F"]), dtype=np.int64)
    for r in range(p["R"]):
        for s in range(p["S"]):
            window = x[:, r : r + st * (P - 1) + 1 : st, s : s + st * (Q - 1) + 1 : st, :]
            acc += np.einsum("npqc,fc->npqf", window, weight[:, r, s, :])
    return [requantize_reference(acc, p) if p["requantize"] else acc.astype(np.int32)]


def flops(**params) -> int:
    """Integer multiply-adds count as two operations, like conv2d's flops."""
    p = resolve(**params)
    P, Q = output_hw(p)
    return 2 * p["N"] * p["F"] * P * Q * p["C"] * p["R"] * p["S"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: filter and column tiles x unroll."""
    p = resolve(**shape)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tf, tq, unroll in itertools.product(
        tile_candidates(p["F"], 64, limit=4), tile_candidates(output_hw(p)[1], 16, limit=4), SPACE_UNROLL_STEPS
    ):
        yield dict(base, tile_f=tf, tile_q=tq, unroll=unroll)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return integer_inputs(rng, ((p["N"], p["H"], p["W"], p["C"]), "int8"), ((p["F"], p["R"], p["S"], p["C"]), "int8"))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["N"], *output_hw(p), p["F"])]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=qconv2d,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
)
