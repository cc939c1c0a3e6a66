"""Kernels as a user would write them (README "Output check": `entry = "module:function"` returning
an IRModule, a numpy reference beside it), with a few schedule knobs each, for the verdict
benchmark's user-kernel pairs (benchmarks/verdict_pairs.py): a row softmax, a layer norm and a
single-head attention. They are not perfguard families: perfguard knows nothing of them but what
it simulates, as for any user's kernel.

Knobs (each a one-line schedule choice a user might flip):
- vector: SIMD lanes of the element-wise loops over a row (split and vectorised; 1 = as written);
- unroll: TVM's auto-unroll step on the row loop (0 = none);
- softmax `inline_exp`: recompute exp(x - max) where it is summed and where it is divided, instead of
  keeping the row of exponentials (twice the exp calls, no temporary row);
- attention `tile`: rows of the score matrix per tile of the QK^T product, whose inner product loop
  is `vector` wide.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-5


def _vectorize_rows(sch, block: str, vector: int) -> None:
    """Split the block's innermost loop by `vector` and vectorise the lanes."""
    if vector > 1:
        loops = sch.get_loops(sch.get_sblock(block))
        _, lanes = sch.split(loops[-1], [None, vector])
        sch.vectorize(lanes)


def _unroll(sch, block: str, step: int) -> None:
    if step > 1:
        outer = sch.get_loops(sch.get_sblock(block))[0]
        sch.annotate(outer, "pragma_auto_unroll_max_step", step)
        sch.annotate(outer, "pragma_unroll_explicit", 1)


def softmax(rows: int = 64, n: int = 512, vector: int = 1, unroll: int = 0, inline_exp: bool = False):
    import tvm
    import tvm.s_tir
    from tvm import te

    A = te.placeholder((rows, n), "float32", name="A")
    k = te.reduce_axis((0, n), name="k")
    m = te.compute((rows,), lambda i: te.max(A[i, k], axis=k), name="m")
    e = te.compute((rows, n), lambda i, j: te.exp(A[i, j] - m[i]), name="e")
    k2 = te.reduce_axis((0, n), name="k2")
    s = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    B = te.compute((rows, n), lambda i, j: e[i, j] / s[i], name="B")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([A, B])}))
    if inline_exp:
        sch.compute_inline(sch.get_sblock("e"))
    else:
        _vectorize_rows(sch, "e", vector)
    _vectorize_rows(sch, "B", vector)
    _unroll(sch, "B", unroll)
    return sch.mod


def softmax_ref(inputs, rows=64, n=512, **_):
    (a,) = inputs
    e = np.exp(a.astype(np.float64) - a.max(axis=1, keepdims=True))
    return [e / e.sum(axis=1, keepdims=True)]


def layer_norm(rows: int = 64, n: int = 768, vector: int = 1, unroll: int = 0):
    import tvm
    import tvm.s_tir
    from tvm import te

    X = te.placeholder((rows, n), "float32", name="X")
    G = te.placeholder((n,), "float32", name="G")
    Bt = te.placeholder((n,), "float32", name="Bt")
    k = te.reduce_axis((0, n), name="k")
    total = te.compute((rows,), lambda i: te.sum(X[i, k], axis=k), name="total")
    d = te.compute((rows, n), lambda i, j: X[i, j] - total[i] / n, name="d")
    k2 = te.reduce_axis((0, n), name="k2")
    sq = te.compute((rows,), lambda i: te.sum(d[i, k2] * d[i, k2], axis=k2), name="sq")
    Y = te.compute((rows, n), lambda i, j: d[i, j] * te.rsqrt(sq[i] / n + EPS) * G[j] + Bt[j], name="Y")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([X, G, Bt, Y])}))
    _vectorize_rows(sch, "d", vector)
    _vectorize_rows(sch, "Y", vector)
    _unroll(sch, "Y", unroll)
    return sch.mod


def layer_norm_ref(inputs, **_):
    x, g, b = (np.asarray(v, dtype=np.float64) for v in inputs)
    d = x - x.mean(axis=1, keepdims=True)
    return [d / np.sqrt((d * d).mean(axis=1, keepdims=True) + EPS) * g + b]


def attention(seq: int = 64, d: int = 64, tile: int = 8, vector: int = 1, unroll: int = 0):
    """O = softmax(Q K^T / sqrt(d)) V for one head: Q, K, V of [seq, d]."""
    import tvm
    import tvm.s_tir
    from tvm import te

    Q = te.placeholder((seq, d), "float32", name="Q")
    K = te.placeholder((seq, d), "float32", name="K")
    V = te.placeholder((seq, d), "float32", name="V")
    r = te.reduce_axis((0, d), name="r")
    scale = 1.0 / float(np.sqrt(d))
    S = te.compute((seq, seq), lambda i, j: te.sum(Q[i, r] * K[j, r], axis=r), name="S")
    c = te.reduce_axis((0, seq), name="c")
    m = te.compute((seq,), lambda i: te.max(S[i, c], axis=c), name="m")
    e = te.compute((seq, seq), lambda i, j: te.exp((S[i, j] - m[i]) * scale), name="e")
    c2 = te.reduce_axis((0, seq), name="c2")
    s = te.compute((seq,), lambda i: te.sum(e[i, c2], axis=c2), name="s")
    t = te.reduce_axis((0, seq), name="t")
    P = te.compute((seq, d), lambda i, j: te.sum(e[i, t] * V[t, j], axis=t), name="O")
    O = te.compute((seq, d), lambda i, j: P[i, j] / s[i], name="out")  # noqa: E741 (attention's Q, K, V, O)
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([Q, K, V, O])}))
    # QK^T in row tiles
    i, j, rr = sch.get_loops(sch.get_sblock("S"))
    io, ii = sch.split(i, [None, tile])
    sch.reorder(io, j, ii, rr)
    # P V with the output columns as lanes: a rank-1 update per t, vector wide
    oi, oj, ot = sch.get_loops(sch.get_sblock("O"))
    sch.reorder(oi, ot, oj)
    if vector > 1:
        _, lanes = sch.split(oj, [None, vector])
        sch.vectorize(lanes)
    sch.decompose_reduction(sch.get_sblock("O"), sch.get_loops(sch.get_sblock("O"))[1])
    _vectorize_rows(sch, "e", vector)
    _vectorize_rows(sch, "out", vector)
    _unroll(sch, "e", unroll)
    return sch.mod


def attention_ref(inputs, seq=64, d=64, **_):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in inputs)
    s = q @ k.T / np.sqrt(d)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return [(e / e.sum(axis=1, keepdims=True)) @ v]
