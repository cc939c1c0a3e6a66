"""A 5-point stencil on an input padded by a halo of one: out[i, j] = the mean of P[i+1, j+1] and
its four neighbours, P of shape (H + 2, W + 2), tiled in rows."""

import numpy as np


def stencil(H=32, W=64, tile=8, vector=8):
    import tvm
    import tvm.s_tir
    from tvm import te

    P = te.placeholder((H + 2, W + 2), "float32", name="P")  # the halo is part of the input
    out = te.compute((H, W), lambda i, j: 0.2 * (P[i + 1, j + 1] + P[i, j + 1] + P[i + 2, j + 1]
                                                 + P[i + 1, j] + P[i + 1, j + 2]), name="out")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([P, out])}))
    i, j = sch.get_loops(sch.get_sblock("out"))
    i_0, i_1 = sch.split(i, [None, tile])
    if vector > 1:
        j_0, j_1 = sch.split(j, [None, vector])
        sch.vectorize(j_1)
    return sch.mod


def stencil_ref(inputs, **_):
    (p,) = (a.astype(np.float64) for a in inputs)
    return [0.2 * (p[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])]
