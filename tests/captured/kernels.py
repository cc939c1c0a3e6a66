"""User kernels captured beside the families' (tests/captured/__init__.py's CAPTURES)."""

from __future__ import annotations

import numpy as np


def stencil2d(H=64, W=64, ti=8, tj=16, vector=8):
    """A 5-point stencil on an input with a halo, tiled in rows and columns, its column tile split
    in lanes that are vectorised (vector > 1) or left to LLVM (vector = 1: TVM keeps the loop)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    P = te.placeholder((H + 2, W + 2), "float32", name="P")
    out = te.compute(
        (H, W),
        lambda i, j: 0.25 * (P[i, j + 1] + P[i + 2, j + 1] + P[i + 1, j] + P[i + 1, j + 2]) - P[i + 1, j + 1],
        name="out",
    )
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([P, out])}))
    i, j = sch.get_loops(sch.get_sblock("out"))
    i_0, i_1 = sch.split(i, [None, ti])
    j_0, j_1 = sch.split(j, [None, tj])
    sch.reorder(i_0, j_0, i_1, j_1)
    _, lanes = sch.split(j_1, [None, 8])
    if vector > 1:
        sch.vectorize(lanes)
    return sch.mod


def stencil2d_ref(inputs, **_):
    (p,) = (a.astype(np.float64) for a in inputs)
    return [0.25 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]) - p[1:-1, 1:-1]]


def embed(V=1024, D=64, N=128, idx_dtype="int64", vector=8, order="ij"):
    """An embedding gather out[i, :] = table[idx[i], :], the columns split in vectorised lanes; order
    "ji" moves the column chunks j_0 outside the rows i (a new user's injected regression)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    table = te.placeholder((V, D), "float32", name="table")
    idx = te.placeholder((N,), idx_dtype, name="idx")
    out = te.compute((N, D), lambda i, j: table[idx[i], j], name="out")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([table, idx, out])}))
    i, j = sch.get_loops(sch.get_sblock("out"))
    j_0, j_1 = sch.split(j, [None, vector])
    sch.vectorize(j_1)
    if order == "ji":
        sch.reorder(j_0, i)
    return sch.mod


def embed_ref(inputs, **_):
    table, idx = inputs
    return [table[idx]]
