"""A row-wise arg-max with its value, two outputs from one tuple reduction, its row split in
two by rfactor: index[i], value[i] = argmax(A[i, :]), max(A[i, :])."""

import numpy as np


def argmax(R=16, N=256, split=8, order="ik"):
    import tvm
    import tvm.s_tir
    import tvm.tirx  # TVM 0.27: expression helpers (Select, floormod, const) are tvm.tirx, not tvm.tir
    from tvm import te

    def combine(x, y):  # (index, value) pairs: the larger value wins, the first index on a tie
        keep = tvm.tirx.Select(x[1] >= y[1], x[0], y[0])
        return keep, tvm.tirx.Select(x[1] >= y[1], x[1], y[1])

    def identity(t0, t1):
        return tvm.tirx.const(-1, t0), tvm.te.min_value(t1)

    argmax_ = te.comm_reducer(combine, identity, name="argmax")
    A = te.placeholder((R, N), "float32", name="A")
    k = te.reduce_axis((0, N), name="k")
    index, value = te.compute((R,), lambda i: argmax_((k.var.astype("int32"), A[i, k]), axis=k), name="best")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([A, index, value])}))
    block = sch.get_sblock("best")
    _, kk = sch.get_loops(block)
    if split > 1:
        _, inner = sch.split(kk, [split, None])  # `split` partial results per row, combined after
        rf = sch.rfactor(inner, 0)  # the partial results' block, "best_rf": loops i, k_0, k_1
        if order == "ki":  # each partial result's loop outside the row's chunks
            _, k_0, k_1 = sch.get_loops(rf)
            sch.reorder(k_1, k_0)
    return sch.mod


def argmax_ref(inputs, **_):
    (a,) = inputs
    return [a.argmax(axis=1).astype(np.int32), a.max(axis=1)]  # in the order of main's outputs
