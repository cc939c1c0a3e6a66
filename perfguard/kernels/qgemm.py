"""Quantized GEMM: C[M, N] int32 = A[M, K] int8 (or uint8) x B[N, K]^T int8, optionally requantized to int8.

B is the weight matrix in the layout int8 inference keeps it: one row per output column,
contiguous along the reduction K, so both operands of every product are contiguous in k.
Loop nest (`dot` = "auto"):

    for io, jo:                     # tiles of tile_m x tile_n outputs
      for ii, ji:
        for k:                      # the int32 reduction, left to LLVM's vectorizer
          C[i, j] += int32(A[i, k]) * int32(B[j, k])

On a core with the dot-product instructions (aarch64 `+dotprod`, the aarch64dot profile) LLVM
turns the int8 x int8 reduction into sdot (uint8 x int8 has no Armv8.2 instruction: widening
multiplies instead). `dot` = "vnni" packs B into [N/8, K/4, 8, 4] panels and tensorizes with a
256-bit AVX-VNNI dot product (`{vex} vpdpbusd`: uint8 x int8, so it needs a_dtype = "uint8"),
for the x86_64vnni profile, which no simulator here can run (build and inspect only).

`requantize` = true adds the int8 output stage Q of a quantized network (the int32 C stays
internal); it and the int32 overflow bound on K are in perfguard/kernels/quant_common.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from perfguard.errors import InputError
from perfguard.kernels.base import (
    SPACE_UNROLL_STEPS,
    UNROLL_KNOB,
    Knob,
    annotate_auto_unroll,
    builtin_family,
    check_params,
    divided_param,
    largest_divisor_at_most,
    main_module,
    tile_candidates,
)
from perfguard.kernels.quant_common import (
    REQUANT_KNOBS,
    check_quant_params,
    integer_inputs,
    requantize_reference,
    requantize_stage,
)

NAME = "qgemm"
A_DTYPES = ("int8", "uint8")
DOTS = ("auto", "vnni")
VNNI_LANES, VNNI_DEPTH = 8, 4  # one 256-bit vpdpbusd: 8 int32 outputs, each a sum of 4 byte products
VNNI_INTRIN = "perfguard_dot_8x4_u8i8i32_avxvnni"

KNOBS: dict[str, Knob] = {
    "M": Knob(int, 64, minimum=1, doc="rows of A and C"),
    "N": Knob(int, 64, minimum=1, doc="rows of B (weights), columns of C"),
    "K": Knob(int, 64, minimum=1, doc="reduction length (bounded: int32 accumulation, see quant_common)"),
    "a_dtype": Knob(str, "int8", choices=A_DTYPES, doc="A's type; B is int8"),
    "tile_m": Knob(int, None, minimum=1, divides="M", doc="rows per tile (default: largest divisor of M <= 8)"),
    "tile_n": Knob(int, None, minimum=1, divides="N", doc="columns per tile (default: largest divisor of N <= 16)"),
    "unroll": UNROLL_KNOB,
    "dot": Knob(
        str, "auto", choices=DOTS, doc="auto: LLVM vectorizes the reduction; vnni: AVX-VNNI vpdpbusd, tensorized"
    ),
    **REQUANT_KNOBS,
}

SHAPE_KEYS = ("M", "N", "K", "a_dtype", "requantize")


def resolve(**params) -> dict:
    p = check_params(NAME, KNOBS, params)
    for key, cap in (("tile_m", 8), ("tile_n", 16)):
        if p[key] is None:
            p[key] = largest_divisor_at_most(p[divided_param(KNOBS, key)], cap)
    p = check_params(NAME, KNOBS, p)
    check_quant_params(NAME, p, p["K"], "'K'", p["a_dtype"])
    if p["dot"] == "vnni":
        if p["a_dtype"] != "uint8":
            raise InputError(f"{NAME}: dot = 'vnni' needs a_dtype = 'uint8' (vpdpbusd multiplies uint8 by int8)")
        if p["tile_n"] % VNNI_LANES or p["K"] % VNNI_DEPTH:
            raise InputError(f"{NAME}: dot = 'vnni' needs 'tile_n' a multiple of {VNNI_LANES} and 'K' of {VNNI_DEPTH}")
    return p


def _stages(p: dict):
    """The placeholders and stages: A, B, [B_pack,] C (int32), [Q (int8)]."""
    from tvm import te

    M, N, K = p["M"], p["N"], p["K"]
    A = te.placeholder((M, K), p["a_dtype"], name="A")
    B = te.placeholder((N, K), "int8", name="B")
    k = te.reduce_axis((0, K), name="k")
    packed = None
    if p["dot"] == "vnni":
        L, D = VNNI_LANES, VNNI_DEPTH
        packed = te.compute((N // L, K // D, L, D), lambda jo, ko, jl, kd: B[jo * L + jl, ko * D + kd], name="B_pack")
        C = te.compute(
            (M, N),
            lambda i, j: te.sum(A[i, k].astype("int32") * packed[j // L, k // D, j % L, k % D].astype("int32"), axis=k),
            name="C",
        )
    else:
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype("int32") * B[j, k].astype("int32"), axis=k), name="C")
    return A, B, packed, C, requantize_stage(C, p) if p["requantize"] else None


def qgemm(**params):
    """Build the scheduled IRModule (function "main", arguments A, B and C or Q)."""
    import tvm
    import tvm.s_tir

    p = resolve(**params)
    A, B, packed, C, Q = _stages(p)
    sch = tvm.s_tir.Schedule(main_module([A, B, Q if Q is not None else C]))
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, p["tile_m"]])
    jo, ji = sch.split(j, [None, p["tile_n"]])
    if p["dot"] == "vnni":
        register_vnni_intrin()
        jv, jl = sch.split(ji, [None, VNNI_LANES])
        ko, kd = sch.split(k, [None, VNNI_DEPTH])
        sch.reorder(io, jo, ii, ko, jv, jl, kd)
    else:
        sch.reorder(io, jo, ii, ji, k)
    if Q is not None:  # after the reorder (it needs one loop chain), before tensorize (it replaces the block)
        sch.reverse_compute_at(sch.get_sblock("Q"), jo)
    if p["dot"] == "vnni":
        init = sch.decompose_reduction(block, ko)
        sch.vectorize(sch.get_loops(init)[-1])
        sch.tensorize(jl, VNNI_INTRIN)
        pack = sch.get_sblock("B_pack")
        sch.vectorize(sch.fuse(*sch.get_loops(pack)[-2:]))
    annotate_auto_unroll(sch, io, p["unroll"])
    return sch.mod


def register_vnni_intrin() -> None:
    """Register the AVX-VNNI dot product for tensorize, once per process.

    TVM ships a 512-bit one (dot_16x4_vnni) whose LLVM call no longer matches LLVM 22's operand
    types (<64 x i8>, not <16 x i32>); this is the 256-bit VEX form, which x86-64-v3 + AVX-VNNI has.
    """
    import tvm.s_tir
    from tvm.script import tirx as T

    if tvm.s_tir.TensorIntrin.get(VNNI_INTRIN, allow_missing=True) is not None:
        return

    @T.prim_func(s_tir=True)
    # TVMScript: T.Buffer(...) declares a buffer, it is no type mypy knows.
    def desc(
        A: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        B: T.Buffer((8, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        C: T.Buffer((8,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:8], A[0:4], B[0:8, 0:4])
            T.writes(C[0:8])
            for i in T.serial(0, 8):
                for k in T.serial(0, 4):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        C[vi] = C[vi] + T.cast(A[vk], "int32") * T.cast(B[vi, vk], "int32")

    @T.prim_func(s_tir=True)
    def impl(
        A: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        B: T.Buffer((8, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        C: T.Buffer((8,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(C[0:8], A[0:4], B[0:8, 0:4])
            T.writes(C[0:8])
            a4 = T.reinterpret(A.vload([0], "uint8x4"), dtype="int32")  # the 4 bytes of A, one per output
            C[T.ramp(T.int32(0), 1, 8)] = T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id("llvm.x86.avx512.vpdpbusd.256"),
                C.vload([0], dtype="int32x8"),
                T.reinterpret(T.broadcast(a4, 8), dtype="int8x32"),
                B.vload([0, 0], dtype="int8x32"),
                dtype="int32x8",
            )

    tvm.s_tir.TensorIntrin.register(VNNI_INTRIN, desc, impl)


def check_target(tvm_target: dict, where: str, **params) -> None:
    """dot = 'vnni' calls an AVX-VNNI intrinsic: LLVM aborts the process on a target without it."""
    if resolve(**params)["dot"] != "vnni":
        return
    import tvm
    from tvm.target.codegen import target_has_features

    if not target_has_features(["avxvnni"], tvm.target.Target(tvm_target)):
        raise InputError(
            f"{where}: {NAME} dot = 'vnni' needs AVX-VNNI, which this target lacks: build it for "
            f"the x86_64vnni profile, or use dot = 'auto'"
        )


def compute(**params):
    """The unscheduled IRModule: what MetaSchedule tunes."""
    p = resolve(**params)
    A, B, _, C, Q = _stages(dict(p, dot="auto"))
    return main_module([A, B, Q if Q is not None else C])


def reference(inputs, **params):
    """Exact: int64 products and sums (and requantize)."""
    p = resolve(**params)
    a, b = (np.asarray(x, dtype=np.int64) for x in inputs)
    acc = a @ b.T
    return [requantize_reference(acc, p) if p["requantize"] else acc.astype(np.int32)]


def flops(**params) -> int:
    """Integer multiply-adds count as two operations, like a float GEMM's flops."""
    p = resolve(**params)
    return 2 * p["M"] * p["N"] * p["K"]


def space(**shape) -> Iterator[dict]:
    """Schedule variants for one problem: row and column tiles x unroll."""
    p = resolve(**shape)
    base = {key: p[key] for key in SHAPE_KEYS}
    for tm, tn, unroll in itertools.product(
        tile_candidates(p["M"], 16, limit=4), tile_candidates(p["N"], 64, limit=4), SPACE_UNROLL_STEPS
    ):
        yield dict(base, tile_m=tm, tile_n=tn, unroll=unroll)


def make_inputs(rng: np.random.Generator, **params) -> list[np.ndarray]:
    p = resolve(**params)
    return integer_inputs(rng, ((p["M"], p["K"]), p["a_dtype"]), ((p["N"], p["K"]), "int8"))


def output_shapes(**params) -> list[tuple]:
    p = resolve(**params)
    return [(p["M"], p["N"])]


FAMILY = builtin_family(
    NAME,
    KNOBS,
    SHAPE_KEYS,
    __doc__,
    entry=qgemm,
    resolve=resolve,
    compute=compute,
    reference=reference,
    flops=flops,
    space=space,
    make_inputs=make_inputs,
    output_shapes=output_shapes,
    check_target=check_target,
)
