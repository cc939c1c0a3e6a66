"""An int8 matrix product with int32 accumulation, written as a user kernel: C = A @ B, A[M, K] and
B[K, N] int8, C[M, N] int32.

Schedule knobs, the kind a user edits:

- `order`: "ikj" (row by row, the reduction outside the column loop, which is vectorised by
  `vector`) or "ijk" (the reduction innermost: a dot product per output, nothing to vectorise);
- `vector`: SIMD lanes of the column loop (1 = none);
- `tile_k`: the reduction split into chunks of this many (1 = not split).
"""

from __future__ import annotations

import numpy as np

ORDERS = ("ikj", "ijk")


def int8_matmul(M: int = 32, N: int = 64, K: int = 128, order: str = "ikj", vector: int = 16, tile_k: int = 1):
    import tvm
    import tvm.s_tir
    from tvm import te

    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}")
    A = te.placeholder((M, K), "int8", name="A")
    B = te.placeholder((K, N), "int8", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k), name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([A, B, C])}))
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    outer = None
    if tile_k > 1:
        outer, kk = sch.split(kk, [None, tile_k])
    if order == "ikj":
        sch.reorder(i, *([outer] if outer is not None else []), kk, j)
        if vector > 1:
            _, lanes = sch.split(j, [None, vector])
            sch.vectorize(lanes)
        sch.decompose_reduction(blk, outer if outer is not None else kk)
    elif outer is not None:
        sch.reorder(i, outer, j, kk)
    return sch.mod


def reference(inputs, **_):
    a, b = (np.asarray(x, dtype=np.int64) for x in inputs)
    return [(a @ b).astype(np.int32)]


def flops(M: int = 32, N: int = 64, K: int = 128, **_) -> int:
    return 2 * M * N * K
