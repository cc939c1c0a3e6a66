"""What conv2d and depthwise_conv2d share: NCHW data, a kernel window R x S moved by `stride`
over an input zero-padded by `padding`, and an output tiled over its rows P and columns Q.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from perfguard.errors import InputError
from perfguard.kernels.base import Knob, check_divides, check_params, fill_tile_defaults

# R, S, stride, padding: the same knobs, defaults and meaning in both conv families (output_hw reads them).
KERNEL_WINDOW_KNOBS: dict[str, Knob] = {
    "R": Knob(int, 3, minimum=1, doc="kernel height"),
    "S": Knob(int, 3, minimum=1, doc="kernel width"),
    "stride": Knob(int, 1, minimum=1),
    "padding": Knob(int, 1, minimum=0, doc="zero padding on each side of H and W"),
}

# Lane counts a conv `space` tries on the output columns, per dtype (2 too: output widths are often small).
COLUMN_SPACE_LANES = {"float32": (1, 2, 4, 8, 16), "float64": (1, 2, 4, 8)}


def out_size(extent: int, kernel: int, stride: int, padding: int) -> int:
    return (extent + 2 * padding - kernel) // stride + 1


def output_hw(p: dict) -> tuple[int, int]:
    """The output height P and width Q for the resolved (or checked) parameters."""
    return (out_size(p["H"], p["R"], p["stride"], p["padding"]), out_size(p["W"], p["S"], p["stride"], p["padding"]))


def resolve_conv_like(family: str, knobs: dict[str, Knob], params: dict, tile_caps: dict[str, int]) -> dict:
    """A conv family's `resolve`: validate, fill the tile defaults, validate again.

    tile_p and tile_q tile the output size, which no knob holds: their defaults and their
    divisibility checks use P and Q. The order of the checks decides which error a bad
    combination reports, so it stays: kernel too large, then the P/Q tiles, then the rest.
    """
    p = check_params(family, knobs, params)
    P, Q = output_hw(p)
    if P < 1 or Q < 1:
        raise InputError(
            f"{family}: the kernel ({p['R']}x{p['S']}) is larger than the padded input; "
            f"check 'R', 'S', 'H', 'W', 'padding'"
        )
    fill_tile_defaults(p, knobs, tile_caps, extents={"tile_p": P, "tile_q": Q})
    check_divides(family, "tile_p", p["tile_p"], "the output height P", P)
    check_divides(family, "tile_q", p["tile_q"], "the output width Q", Q)
    return check_params(family, knobs, p)


def column_vectors(tile_q: int, dtype: str) -> list[int]:
    """The `vector` values a conv `space` tries for a column tile."""
    vecs = [v for v in COLUMN_SPACE_LANES[dtype] if tile_q % v == 0]
    if tile_q not in vecs and tile_q <= 16:
        vecs.append(tile_q)  # odd widths (7, 14): the whole column tile as one vector
    return vecs


def data_placeholder(p: dict):
    """The NCHW input, the first argument of both conv families' modules."""
    from tvm import te

    return te.placeholder((p["N"], p["C"], p["H"], p["W"]), p["dtype"], name="data")


def zero_padded_stage(data, p: dict):
    """The scheduled kernels' padding: an explicit "pad" stage that copies `data` with zeros around it
    (`data` itself when padding is 0). compute() uses topi's pad instead (see topi_zero_padded)."""
    import tvm
    from tvm import te

    N, C, H, W, pad = p["N"], p["C"], p["H"], p["W"], p["padding"]
    if not pad:
        return data
    zero = tvm.tirx.const(0, p["dtype"])
    return te.compute(
        (N, C, H + 2 * pad, W + 2 * pad),
        lambda n, c, h, w: tvm.tirx.if_then_else(
            tvm.tirx.all(h >= pad, h < H + pad, w >= pad, w < W + pad), data[n, c, h - pad, w - pad], zero
        ),
        name="pad",
    )


def topi_zero_padded(data, p: dict):
    """compute()'s padding: topi's "pad" stage (`data` itself when padding is 0)."""
    from tvm import topi

    pad = p["padding"]
    return topi.nn.pad(data, (0, 0, pad, pad), name="pad") if pad else data


def kernel_tap_windows(data: np.ndarray, p: dict) -> Iterator[tuple[int, int, np.ndarray]]:
    """For the numpy references: (r, s, window) per kernel tap, where window[n, c, y, x] is the
    padded input that tap multiplies for output (y, x)."""
    st, pad = p["stride"], p["padding"]
    P, Q = output_hw(p)
    x = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    for r in range(p["R"]):
        for s in range(p["S"]):
            yield r, s, x[:, :, r : r + st * (P - 1) + 1 : st, s : s + st * (Q - 1) + 1 : st]
