"""What the quantized families (qgemm, qconv2d) share: the int32 accumulation bound of the harness's
integer inputs, and the requantize stage that turns an int32 accumulator into int8.

The harness fills integer inputs with values in [-8, 7] (perfguard/compile/inputs.py); a uint8
input takes them modulo 256 (0..7 and 248..255). So one product is at most 8 x 8 = 64 in
magnitude (uint8 x int8: 255 x 8 = 2040), and an accumulation of L products fits in int32 while
L x 64 <= 2^31 - 1: L <= 33554431 (uint8: 1052688). The families refuse longer reductions.

Requantize (knob `requantize`): Q = clip((acc x rq_multiplier + 2^(rq_shift-1)) >> rq_shift, -128, 127),
computed in int64 (|acc| < 2^31 and rq_multiplier < 2^31: no overflow), `>>` an arithmetic shift
(rounding half up), the fixed-point multiply-and-shift an int8 network applies between layers.
"""

from __future__ import annotations

import numpy as np

from perfguard.errors import InputError
from perfguard.kernels.base import Knob

MAX_PRODUCT = {"int8": 8 * 8, "uint8": 255 * 8}  # largest |input x int8 weight| per input type
INT32_MAX = 2**31 - 1

REQUANT_KNOBS: dict[str, Knob] = {
    "requantize": Knob(bool, False, doc="output int8 (requantized) instead of the int32 accumulator"),
    "rq_multiplier": Knob(int, 1, minimum=1, doc="requantize: fixed-point multiplier, below 2^31"),
    "rq_shift": Knob(int, 8, minimum=0, doc="requantize: right shift (rounding half up), at most 62"),
}


def check_quant_params(family: str, p: dict, reduction: int, what: str, a_dtype: str = "int8") -> None:
    """InputError for a reduction that could overflow int32, or requantize knobs out of range."""
    limit = INT32_MAX // MAX_PRODUCT[a_dtype]
    if reduction > limit:
        raise InputError(
            f"{family}: the reduction {what} = {reduction} is above {limit}: int32 accumulation "
            f"of {a_dtype} inputs could overflow"
        )
    if p["rq_shift"] > 62 or p["rq_multiplier"] > INT32_MAX:
        raise InputError(f"{family}: 'rq_shift' must be <= 62 and 'rq_multiplier' < 2^31")


def requantize_stage(acc, p: dict):
    """The int8 stage Q over the int32 tensor `acc` (same shape), as in the module doc."""
    import tvm
    from tvm import te

    def i64(value):
        return tvm.tirx.const(value, "int64")

    shift = p["rq_shift"]
    return te.compute(
        acc.shape,
        lambda *idx: tvm.tirx.max(
            tvm.tirx.min(
                (acc(*idx).astype("int64") * i64(p["rq_multiplier"]) + i64((1 << shift) >> 1)) >> i64(shift), i64(127)
            ),
            i64(-128),
        ).astype("int8"),
        name="Q",
    )


def requantize_reference(acc: np.ndarray, p: dict) -> np.ndarray:
    """The same in numpy (int64, arithmetic shift): exact."""
    shift = p["rq_shift"]
    q = (acc.astype(np.int64) * p["rq_multiplier"] + ((1 << shift) >> 1)) >> shift
    return np.clip(q, -128, 127).astype(np.int8)


def integer_inputs(rng: np.random.Generator, *specs: tuple[tuple, str]) -> list[np.ndarray]:
    """Random integers in the harness's range, one array per (shape, dtype): the bound above holds."""
    return [rng.integers(-8, 8, shape).astype(dtype) for shape, dtype in specs]
