"""Layer normalisation over the rows of X[R, N], written as a user kernel:
Y = (X - mean) / sqrt(var + eps) * gamma + beta, with the mean and the variance of each row.

Schedule knobs, the kind a user edits:

- `vector`: SIMD lanes of the normalising loop over a row (1 = none);
- `order`: "rn" normalises row by row (the row loop outside), "nr" column by column (rows
  inside: every access strides a whole row);
- `lanes`: partial sums of the mean and variance kept in this many lanes (rfactor), then added
  up (1 = a plain scalar sum).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-5


def layer_norm(R: int = 32, N: int = 256, vector: int = 8, order: str = "rn", lanes: int = 1):
    import tvm
    import tvm.s_tir
    from tvm import te

    if order not in ("rn", "nr"):
        raise ValueError("order must be 'rn' or 'nr'")
    X = te.placeholder((R, N), "float32", name="X")
    gamma = te.placeholder((N,), "float32", name="gamma")
    beta = te.placeholder((N,), "float32", name="beta")
    k = te.reduce_axis((0, N), name="k")
    total = te.compute((R,), lambda r: te.sum(X[r, k], axis=k), name="total")
    k2 = te.reduce_axis((0, N), name="k2")
    squares = te.compute((R,), lambda r: te.sum((X[r, k2] - total[r] / N) * (X[r, k2] - total[r] / N), axis=k2),
                         name="squares")
    Y = te.compute((R, N), lambda r, n: (X[r, n] - total[r] / N) / te.sqrt(squares[r] / N + EPS) * gamma[n]
                   + beta[n], name="Y")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([X, gamma, beta, Y])}))
    if lanes > 1:
        for name in ("total", "squares"):
            _, reduction = sch.get_loops(sch.get_sblock(name))
            _, lane = sch.split(reduction, [None, lanes])
            partial = sch.rfactor(lane, factor_axis=1)
            sch.vectorize(sch.get_loops(partial)[-1])
    y = sch.get_sblock("Y")
    r, n = sch.get_loops(y)
    if order == "nr":
        sch.reorder(n, r)
    if vector > 1:
        _, nv = sch.split(n, [None, vector])
        if order == "rn":
            sch.vectorize(nv)
    return sch.mod


def reference(inputs, R: int = 32, N: int = 256, **_):
    x, gamma, beta = (np.asarray(a, dtype=np.float64) for a in inputs)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return [(x - mean) / np.sqrt(var + EPS) * gamma + beta]


def flops(R: int = 32, N: int = 256, **_) -> int:
    return 8 * R * N
