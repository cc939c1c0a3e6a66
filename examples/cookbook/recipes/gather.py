"""An embedding gather: out[i, :] = table[idx[i], :], the indices an input of their own."""

import numpy as np


def gather(V=512, D=32, N=64, vector=8, idx_dtype="int32"):
    import tvm
    import tvm.s_tir  # TVM 0.27: schedules are tvm.s_tir.Schedule (there is no tvm.tir)
    from tvm import te

    table = te.placeholder((V, D), "float32", name="table")
    idx = te.placeholder((N,), idx_dtype, name="idx")  # int32 or int64, drawn in [0, V) by `inputs`
    out = te.compute((N, D), lambda i, j: table[idx[i], j], name="out")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([table, idx, out])}))
    i, j = sch.get_loops(sch.get_sblock("out"))
    if vector > 1:
        _, lanes = sch.split(j, [None, vector])
        sch.vectorize(lanes)
    return sch.mod


def gather_ref(inputs, **_):
    table, idx = inputs
    assert idx.min() >= 0 and idx.max() < len(table), "idx outside the table: set inputs = { idx = { low, high } }"
    return [table[idx]]
