"""GEMM: C[M, N] = A[M, K] @ B[K, N], a cache-tiled, vectorized, single-threaded CPU schedule.

Loop nest after scheduling (order "ijk", inner "ikj"):

    for io, jo, ko:                 # tiles of tile_m x tile_n x tile_k; `order` permutes these
      for ii, ki:                   # `inner` = "ikj" (row accumulators) or "kij" (rank-1 updates)
        for jv_o:                   # tile_n / vector chunks
          for jv in vectorized(vector):
            C[i, j] += A[i, k] * B[k, j]

`pack_b` copies B into a [N / tile_n, K, tile_n] panel layout first, so each tile reads B
contiguously. `unroll` is TVM's auto-unroll step: inner loop nests of at most that many
iterations are unrolled (0 leaves unrolling to LLVM).

dtype = "float16" multiplies and accumulates in half precision: native on a core with
`+fullfp16` (the aarch64dot profile: fmla v.8h), each operation widened to float32 and rounded
back elsewhere (x86_64 F16C, Cortex-A72). The harness needs _Float16 in the target's C compiler.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from perfguard.kernels.base import (
    DTYPES,
    HALF,
    MATRIX_SPACE_LANES,
    SPACE_UNROLL_STEPS,
    UNROLL_KNOB,
    Knob,
    annotate_auto_unroll,
    builtin_family,
    lanes_dividing,
    main_module,
    matmul_in_float64,
    resolve_with_tile_defaults,
    standard_normal_inputs,
    tile_candidates,
)

NAME = "gemm"
ORDERS = ("ijk", "ikj", "jik", "jki", "kij", "kji")
INNER_ORDERS = ("ikj", "kij")

KNOBS: dict[str, Knob] = {
    "M": Knob(int, 128, minimum=1, doc="rows of A and C"),
    "N": Knob(int, 128, minimum=1, doc="columns of B and C"),
    "K": Knob(int, 128, minimum=1, doc="reduction length"),
    "dtype": Knob(str, "float32", choices=DTYPES + (HALF,), doc="float16: products and sums in half precision"),
    "tile_m": Knob(int, None, minimum=1, divides="M", doc="rows per tile (default: largest divisor of M <= 32)"),
    "tile_n": Knob(int, None, minimum=1, divides="N", doc="columns per tile (default: largest divisor of N <= 64)"),
    "tile_k": Knob(int, None, minimum=1, divides="K", doc="reduction per tile (default: largest divisor of K <= 64)"),
    "vector": Knob(int, None, minimum=1, divides="tile_n", doc="SIMD lanes on the innermost column loop; 1 = none"),
    "unroll": UNROLL_KNOB,
    "order": Knob(str, "ijk", choices=ORDERS, doc="order of the tile loops (i = M, j = N, k = K tiles)"),
    "inner": Knob(str, "ikj", choices=INNER_ORDERS, doc="order of the loops inside a tile; j is always innermost"),
    "pack_b": Knob(bool, False, doc="pack B into [N/tile_n, K, tile_n] panels before the product"),
}

SHAPE_KEYS = ("M", "N", "K", "dtype")


def resolve(**params) -> dict:
    """Validate and fill every knob, including the automatic tile and vector defaults."""
    return resolve_with_tile_defaults(NAME, KNOBS, params, tile_caps={"tile_m": 32, "tile_n": 64, "tile_k": 64})


def gemm(**params):
    """Build the scheduled IRModule (function "main", arguments A, B, C)."""
    import tvm
    import tvm.s_tir
    from tvm import te

    p = resolve(**params)
    M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
    tm, tn, tk, vec = p["tile_m"], p["tile_n"], p["tile_k"], p["vector"]

    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    if p["pack_b"]:
        Bp = te.compute((N // tn, K, tn), lambda jo, kk, jt: B[kk, jo * tn + jt], name="B_pack")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * Bp[j // tn, k, j % tn], axis=k), name="C")
    else:
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tvm.s_tir.Schedule(main_module([A, B, C]))

    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    io, ii = sch.split(i, [None, tm])
    jo, ji = sch.split(j, [None, tn])
    ko, ki = sch.split(kk, [None, tk])
    jvo, jv = sch.split(ji, [None, vec])
    outer = {"i": io, "j": jo, "k": ko}
    inner = {"i": ii, "k": ki}
    sch.reorder(*[outer[c] for c in p["order"]], *[inner[c] for c in p["inner"] if c != "j"], jvo, jv)
    if vec > 1:
        sch.vectorize(jv)
    annotate_auto_unroll(sch, outer[p["order"][0]], p["unroll"])
    sch.decompose_reduction(block, ko)

    if p["pack_b"]:
        pack = sch.get_sblock("B_pack")
        _, _, jt = sch.get_loops(pack)
        if vec > 1:
            _, jtv = sch.split(jt, [None, vec])
            sch.vectorize(jtv)
    return sch.mod


def compute(**params):
    """The unscheduled IRModule of the same product (no B packing): what MetaSchedule tunes."""
    from tvm import te

    p = resolve(**params)
    A = te.placeholder((p["M"], p["K"]), p["dtype"], name="A")
    B = te.placeholder((p["K"], p["N"]), p["dtype"], name="B")
    k = te.reduce_axis((0, p["K"]), name="k")
    C = te.compute((p["M"], p["N"]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return main_module([A, B, C])


def reference(inputs, **params):
    p = resolve(**params)
    a, b = inputs
    return [matmul_in_float64(a, b, p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    return 2 * p["M"] * p["N"] * p["K"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: tiles x vector x unroll x loop orders x packing."""
    p = resolve(**shape)
    tms = tile_candidates(p["M"], 64, floor=4)
    tns = tile_candidates(p["N"], 128, floor=8)
    tks = tile_candidates(p["K"], 128, limit=4, floor=8)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tm, tn, tk, order, inner, unroll, pack in itertools.product(
        tms, tns, tks, ORDERS, INNER_ORDERS, SPACE_UNROLL_STEPS, (False, True)
    ):
        for vec in lanes_dividing(tn, MATRIX_SPACE_LANES[p["dtype"]]):
            yield dict(
                base, tile_m=tm, tile_n=tn, tile_k=tk, vector=vec, unroll=unroll, order=order, inner=inner, pack_b=pack
            )


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return standard_normal_inputs(rng, p["dtype"], (p["M"], p["K"]), (p["K"], p["N"]))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["M"], p["N"])]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=gemm,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
)
