"""A quantized matmul: C[M, N] int32 = A[M, K] uint8 x B[K, N] int8, the activations in [0, 255]
(`inputs`), the reduction widened to int32, the column loop vectorised."""

import numpy as np


def qmatmul(M=16, N=32, K=64, vector=16):
    import tvm
    import tvm.s_tir
    from tvm import te

    A = te.placeholder((M, K), "uint8", name="A")
    B = te.placeholder((K, N), "int8", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k), name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([A, B, C])}))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    sch.reorder(i, kk, j)
    if vector > 1:
        _, lanes = sch.split(j, [None, vector])
        sch.vectorize(lanes)  # before decompose_reduction: after it TVM raises a ScheduleError
    sch.decompose_reduction(block, kk)
    return sch.mod


def qmatmul_ref(inputs, **_):
    a, b = (x.astype(np.int64) for x in inputs)
    return [(a @ b).astype(np.int32)]
