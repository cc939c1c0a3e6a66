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
"""

from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

from perfguard.kernels.base import DTYPES, Family, Knob, check_params, tile_candidates

NAME = "gemm"
ORDERS = ("ijk", "ikj", "jik", "jki", "kij", "kji")
INNER_ORDERS = ("ikj", "kij")

KNOBS: dict[str, Knob] = {
    "M": Knob(int, 128, minimum=1, doc="rows of A and C"),
    "N": Knob(int, 128, minimum=1, doc="columns of B and C"),
    "K": Knob(int, 128, minimum=1, doc="reduction length"),
    "dtype": Knob(str, "float32", choices=DTYPES),
    "tile_m": Knob(int, None, minimum=1, divides="M", doc="rows per tile (default: largest divisor of M <= 32)"),
    "tile_n": Knob(int, None, minimum=1, divides="N", doc="columns per tile (default: largest divisor of N <= 64)"),
    "tile_k": Knob(int, None, minimum=1, divides="K", doc="reduction per tile (default: largest divisor of K <= 64)"),
    "vector": Knob(int, None, minimum=1, divides="tile_n", doc="SIMD lanes on the innermost column loop; 1 = none"),
    "unroll": Knob(int, 16, minimum=0, doc="auto-unroll max step of inner loop nests; 0 = none"),
    "order": Knob(str, "ijk", choices=ORDERS, doc="order of the tile loops (i = M, j = N, k = K tiles)"),
    "inner": Knob(str, "ikj", choices=INNER_ORDERS, doc="order of the loops inside a tile; j is always innermost"),
    "pack_b": Knob(bool, False, doc="pack B into [N/tile_n, K, tile_n] panels before the product"),
}

SHAPE_KEYS = ("M", "N", "K", "dtype")


def _largest_divisor(extent: int, cap: int) -> int:
    return max(d for d in range(1, min(extent, cap) + 1) if extent % d == 0)


def default_vector(tile: int, dtype: str) -> int:
    """Widest of 256-bit-register lanes, halved until it divides the tile."""
    lanes = 8 if dtype == "float32" else 4
    while tile % lanes:
        lanes //= 2
    return lanes


def resolve(**params) -> dict:
    """Validate and fill every knob, including the automatic tile and vector defaults."""
    p = check_params(NAME, KNOBS, params)
    if p["tile_m"] is None:
        p["tile_m"] = _largest_divisor(p["M"], 32)
    if p["tile_n"] is None:
        p["tile_n"] = _largest_divisor(p["N"], 64)
    if p["tile_k"] is None:
        p["tile_k"] = _largest_divisor(p["K"], 64)
    if p["vector"] is None:
        p["vector"] = default_vector(p["tile_n"], p["dtype"])
    return check_params(NAME, KNOBS, p)


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
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": te.create_prim_func([A, B, C])}))

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
    first = outer[p["order"][0]]
    if p["unroll"] > 1:
        sch.annotate(first, "pragma_auto_unroll_max_step", p["unroll"])
        sch.annotate(first, "pragma_unroll_explicit", 1)
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
    import tvm
    from tvm import te

    p = resolve(**params)
    A = te.placeholder((p["M"], p["K"]), p["dtype"], name="A")
    B = te.placeholder((p["K"], p["N"]), p["dtype"], name="B")
    k = te.reduce_axis((0, p["K"]), name="k")
    C = te.compute((p["M"], p["N"]), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})


def reference(inputs, **params):
    p = resolve(**params)
    a, b = inputs
    out = np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)
    return [out.astype(p["dtype"])]


def flops(**params) -> int:
    p = resolve(**params)
    return 2 * p["M"] * p["N"] * p["K"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: tiles x vector x unroll x loop orders x packing."""
    p = resolve(**shape)
    lanes = (1, 4, 8, 16) if p["dtype"] == "float32" else (1, 2, 4, 8)
    tms = tile_candidates(p["M"], 64, floor=4)
    tns = tile_candidates(p["N"], 128, floor=8)
    tks = tile_candidates(p["K"], 128, limit=4, floor=8)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tm, tn, tk, order, inner, unroll, pack in itertools.product(
        tms, tns, tks, ORDERS, INNER_ORDERS, (0, 16, 64), (False, True)
    ):
        for vec in lanes:
            if tn % vec == 0:
                yield dict(base, tile_m=tm, tile_n=tn, tile_k=tk, vector=vec, unroll=unroll,
                           order=order, inner=inner, pack_b=pack)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return [
        rng.standard_normal((p["M"], p["K"])).astype(p["dtype"]),
        rng.standard_normal((p["K"], p["N"])).astype(p["dtype"]),
    ]


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["M"], p["N"])]


FAMILY = Family(
    name=NAME,
    entry=gemm,
    knobs=KNOBS,
    reference=reference,
    flops=flops,
    num_outputs=1,
    shape_keys=SHAPE_KEYS,
    space=space,
    doc=__doc__.splitlines()[0],
    extra={"resolve": resolve, "make_inputs": make_inputs, "output_shapes": output_shapes, "compute": compute},
)
