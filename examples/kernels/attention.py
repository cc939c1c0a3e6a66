"""One attention head written as a user kernel: O = softmax(Q K^T / sqrt(D)) V.

Keys come transposed (Kt[D, S]) so that both products read their right-hand operand along a row.
Schedule knobs, the kind a user edits:

- `qk_order`: loops of the scores S = Q Kt: "idj" (the reduction d outside, j innermost and
  vectorised by `vector`) or "ijd" (the reduction innermost: nothing left to vectorise);
- `pv_order`: loops of O = P V the same way: "itc" (c innermost, vectorised) or "ict";
- `vector`: SIMD lanes of the innermost column loops (1 = none);
- `inline_p`: the probabilities P = e / row_sum computed inside the output product where they are
  used (inlined: a division per product), or stored as a stage of their own.
"""

from __future__ import annotations

import numpy as np

QK_ORDERS = ("idj", "ijd")
PV_ORDERS = ("itc", "ict")


def attention(S: int = 64, D: int = 32, vector: int = 8, qk_order: str = "idj", pv_order: str = "itc",
              inline_p: bool = False):
    import tvm
    import tvm.s_tir
    from tvm import te

    if qk_order not in QK_ORDERS or pv_order not in PV_ORDERS:
        raise ValueError(f"qk_order must be one of {QK_ORDERS}, pv_order one of {PV_ORDERS}")
    Q = te.placeholder((S, D), "float32", name="Q")
    Kt = te.placeholder((D, S), "float32", name="Kt")
    V = te.placeholder((S, D), "float32", name="V")
    d = te.reduce_axis((0, D), name="d")
    scale = 1.0 / float(np.sqrt(D))
    scores = te.compute((S, S), lambda i, j: te.sum(Q[i, d] * Kt[d, j], axis=d), name="scores")
    k1 = te.reduce_axis((0, S), name="k1")
    row_max = te.compute((S,), lambda i: te.max(scores[i, k1], axis=k1), name="row_max")
    e = te.compute((S, S), lambda i, j: te.exp((scores[i, j] - row_max[i]) * scale), name="e")
    k2 = te.reduce_axis((0, S), name="k2")
    row_sum = te.compute((S,), lambda i: te.sum(e[i, k2], axis=k2), name="row_sum")
    p = te.compute((S, S), lambda i, j: e[i, j] / row_sum[i], name="p")
    t = te.reduce_axis((0, S), name="t")
    out = te.compute((S, D), lambda i, c: te.sum(p[i, t] * V[t, c], axis=t), name="out")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([Q, Kt, V, out])}))

    if qk_order == "idj":
        _reduction_outside(sch, "scores", vector)
    if inline_p:
        sch.compute_inline(sch.get_sblock("p"))
    if pv_order == "itc":
        _reduction_outside(sch, "out", vector)
    return sch.mod


def _reduction_outside(sch, block: str, vector: int) -> None:
    """Loops (row, reduction, column) with the column innermost and vectorised, the zeroing apart."""
    blk = sch.get_sblock(block)
    row, column, reduction = sch.get_loops(blk)
    sch.reorder(row, reduction, column)
    if vector > 1:
        _, lanes = sch.split(column, [None, vector])
        sch.vectorize(lanes)
    sch.decompose_reduction(blk, reduction)


def reference(inputs, S: int = 64, D: int = 32, **_):
    q, kt, v = (np.asarray(a, dtype=np.float64) for a in inputs)
    s = (q @ kt) / np.sqrt(D)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return [(e / e.sum(axis=1, keepdims=True)) @ v]


def flops(S: int = 64, D: int = 32, **_) -> int:
    return 2 * S * S * D + 5 * S * S + 2 * S * S * D
