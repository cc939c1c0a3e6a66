"""One-knob schedule edits for the verdict-agreement benchmark (benchmarks/verdicts.py).

Each pair is a kernel of a built-in family before and after changing exactly one knob. Every
other knob is given explicitly, so a default that depends on another knob (`vector` on its
tile) cannot change behind the edit's back. The shapes are in no calibration dataset
(baselines/datasets/*), no default calibration group (perfguard.runs.calibration) and not
in perfguard.toml: a calibrated model sees them for the first time.

The list mixes clear regressions, clear improvements and edits expected to be about neutral
(those test false alarms). Reuse it from another benchmark with `PAIRS` and `Pair.sides()`.

Beside the float families: the quantized ones (qgemm, qconv2d), half-precision gemm, kernels as a
user writes them (benchmarks/user_kernels.py: softmax, layer norm, attention; perfguard knows no
family for them, so they are named by `entry` with a numpy `reference`) and kernels that perfguard
extracts from whole models (benchmarks/model_kernels.py: the example MLP and conv block, the same
fused kernel before and after a schedule edit). Their `family` is a label for the tables; only the
built-in families' pairs are perfguard families.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfguard.config import KernelSpec
from perfguard.kernels import get_family

# What kind of knob each knob name is (the list: vector width, tile sizes, loop order,
# unroll, packing).
KNOB_KINDS = {
    "vector": "vector width",
    "unroll": "unroll",
    "order": "loop order",
    "inner": "loop order",
    "pack_b": "packing",
    "requantize": "output type",
    "inline_exp": "fusion",
    "tile": "tile size",
}


def knob_kind(knob: str) -> str:
    return "tile size" if knob.startswith("tile_") else KNOB_KINDS[knob]


@dataclass(frozen=True)
class Pair:
    family: str  # a built-in family, or (with `entry`) a label: softmax, mlp.matmul_add, ...
    base: dict[str, Any]  # every knob, with the "before" value of the edited one
    knob: str
    after: Any
    entry: str | None = None  # "module:function" of a kernel that is no family (a user's, a model's)
    reference: str | None = None  # its numpy reference, "module:function"
    shape_keys: tuple[str, ...] = ()  # its parameters that make the shape (the pair's name)

    @property
    def before(self) -> Any:
        return self.base[self.knob]

    @property
    def name(self) -> str:
        keys = self.shape_keys if self.entry else get_family(self.family).shape_keys
        shape = "x".join(
            str(self.base[k])
            for k in keys
            if k not in ("dtype", "a_dtype") and k in self.base and not isinstance(self.base[k], bool)
        )
        dtype = [str(self.base[k]) for k in ("dtype", "a_dtype") if k in self.base and self.base[k] != "float32"]
        return f"{self.family}/{shape}{''.join('/' + d for d in dtype)}/{self.knob}:{_show(self.before)}->{_show(self.after)}"

    @property
    def kind(self) -> str:
        return knob_kind(self.knob)

    def params(self, side: str) -> dict[str, Any]:
        """The parameters of side "before" or "after"."""
        return dict(self.base) if side == "before" else {**self.base, self.knob: self.after}

    def sides(self) -> tuple[KernelSpec, KernelSpec]:
        if self.entry:
            return tuple(
                KernelSpec(
                    f"{self.name}#{side}",
                    self.entry,
                    None,
                    self.params(side),  # type: ignore[return-value]
                    reference=self.reference,
                )
                for side in ("before", "after")
            )
        family = get_family(self.family)
        entry = f"{family.entry.__module__}:{family.entry.__name__}"
        return tuple(
            KernelSpec(f"{self.name}#{side}", entry, self.family, self.params(side))  # type: ignore[return-value]
            for side in ("before", "after")
        )


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _edits(family: str, base: dict[str, Any], *edits: tuple[str, Any]) -> list[Pair]:
    return [Pair(family, base, knob, after) for knob, after in edits]


def _user(
    label: str,
    function: str,
    shape_keys: tuple[str, ...],
    base: dict[str, Any],
    *edits: tuple[str, Any],
    reference: bool = True,
) -> list[Pair]:
    module = "benchmarks.user_kernels" if reference else "benchmarks.model_kernels"
    ref = f"{module}:{function}_ref" if reference else None
    return [Pair(label, base, knob, after, f"{module}:{function}", ref, shape_keys) for knob, after in edits]


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


_GEMM_A = dict(
    M=128,
    N=384,
    K=256,
    dtype="float32",
    tile_m=16,
    tile_n=64,
    tile_k=4,
    vector=8,
    unroll=16,
    order="ijk",
    inner="ikj",
    pack_b=False,
)
_GEMM_B = dict(
    M=96,
    N=160,
    K=192,
    dtype="float32",
    tile_m=16,
    tile_n=32,
    tile_k=32,
    vector=8,
    unroll=16,
    order="ijk",
    inner="ikj",
    pack_b=False,
)
_GEMM_C = dict(
    M=64,
    N=512,
    K=320,
    dtype="float32",
    tile_m=8,
    tile_n=64,
    tile_k=64,
    vector=8,
    unroll=16,
    order="ijk",
    inner="ikj",
    pack_b=False,
)
_GEMM_D = dict(
    M=160,
    N=96,
    K=128,
    dtype="float32",
    tile_m=32,
    tile_n=32,
    tile_k=64,
    vector=8,
    unroll=0,
    order="ijk",
    inner="ikj",
    pack_b=False,
)

_GEMV_A = dict(M=640, K=1536, dtype="float32", tile_m=8, tile_k=256, vector=8, unroll=16, order="ik")
_GEMV_B = dict(M=2048, K=384, dtype="float32", tile_m=4, tile_k=128, vector=8, unroll=16, order="ik")

_CONV_A = dict(
    N=1,
    C=24,
    H=32,
    W=32,
    F=48,
    R=3,
    S=3,
    stride=1,
    padding=1,
    dtype="float32",
    tile_f=8,
    tile_p=2,
    tile_q=16,
    vector=8,
    unroll=16,
    order="FPQcrsfpq",
)
_CONV_B = dict(
    N=1,
    C=96,
    H=12,
    W=12,
    F=64,
    R=1,
    S=1,
    stride=1,
    padding=0,
    dtype="float32",
    tile_f=8,
    tile_p=2,
    tile_q=12,
    vector=4,
    unroll=16,
    order="FPQcrsfpq",
)
_CONV_C = dict(
    N=1,
    C=8,
    H=64,
    W=64,
    F=16,
    R=3,
    S=3,
    stride=2,
    padding=1,
    dtype="float32",
    tile_f=8,
    tile_p=2,
    tile_q=32,
    vector=8,
    unroll=16,
    order="FPQcrsfpq",
)

_DW_A = dict(
    N=1,
    C=48,
    H=40,
    W=40,
    R=3,
    S=3,
    stride=1,
    padding=1,
    dtype="float32",
    tile_c=4,
    tile_p=4,
    tile_q=40,
    vector=8,
    unroll=16,
    order="rs_inner",
)
_DW_B = dict(
    N=1,
    C=24,
    H=64,
    W=64,
    R=5,
    S=5,
    stride=1,
    padding=2,
    dtype="float32",
    tile_c=4,
    tile_p=2,
    tile_q=64,
    vector=16,
    unroll=16,
    order="rs_inner",
)
_DW_C = dict(
    N=1,
    C=96,
    H=20,
    W=20,
    R=3,
    S=3,
    stride=2,
    padding=1,
    dtype="float32",
    tile_c=8,
    tile_p=5,
    tile_q=10,
    vector=2,
    unroll=16,
    order="rs_inner",
)

_DENSE_A = dict(B=8, I=768, O=384, dtype="float32", tile_b=4, tile_o=8, tile_i=256, vector=8, unroll=16, order="bo")
_DENSE_B = dict(B=24, I=384, O=192, dtype="float32", tile_b=8, tile_o=8, tile_i=128, vector=8, unroll=16, order="bo")

# Quantized and half-precision (issue 26 item 6): shapes in no default calibration group.
_QGEMM_A = dict(
    M=96,
    N=128,
    K=256,
    a_dtype="int8",
    tile_m=8,
    tile_n=16,
    unroll=16,
    dot="auto",
    requantize=False,
    rq_multiplier=1,
    rq_shift=8,
)
_QGEMM_B = dict(
    M=48,
    N=96,
    K=512,
    a_dtype="uint8",
    tile_m=4,
    tile_n=16,
    unroll=16,
    dot="auto",
    requantize=False,
    rq_multiplier=1,
    rq_shift=8,
)
_QCONV_A = dict(
    N=1,
    H=12,
    W=12,
    C=48,
    F=64,
    R=3,
    S=3,
    stride=1,
    padding=1,
    tile_f=16,
    tile_q=4,
    unroll=16,
    requantize=False,
    rq_multiplier=1,
    rq_shift=8,
)
_QCONV_B = dict(
    N=1,
    H=10,
    W=10,
    C=96,
    F=32,
    R=1,
    S=1,
    stride=1,
    padding=0,
    tile_f=16,
    tile_q=5,
    unroll=16,
    requantize=False,
    rq_multiplier=1,
    rq_shift=8,
)
_F16_A = dict(
    M=80,
    N=96,
    K=160,
    dtype="float16",
    tile_m=16,
    tile_n=32,
    tile_k=32,
    vector=16,
    unroll=16,
    order="ijk",
    inner="ikj",
    pack_b=False,
)

# Kernels as users write them, and kernels of whole models (see the module doc).
_SOFTMAX = dict(rows=48, n=640, vector=1, unroll=0, inline_exp=False)
_LAYER_NORM = dict(rows=40, n=384, vector=1, unroll=0)
_ATTENTION = dict(seq=48, d=64, tile=8, vector=1, unroll=0)
_MLP = dict(model="mlp", batch=8, features=96, hidden=192, classes=16, vector=1, unroll=0)
_CONV_BLOCK = dict(
    model="conv_block", op="conv2d_add_relu", which=0, batch=1, channels=8, width=16, size=12, vector=1, unroll=0
)

PAIRS: list[Pair] = [
    *_edits("gemm", _GEMM_A, ("tile_k", 16), ("tile_n", 16), ("order", "kij"), ("inner", "kij"), ("pack_b", True)),
    *_edits(
        "gemm", _GEMM_B, ("vector", 1), ("vector", 4), ("vector", 16), ("tile_m", 4), ("unroll", 0), ("order", "jik")
    ),
    *_edits("gemm", _GEMM_C, ("pack_b", True), ("tile_k", 32)),
    *_edits("gemm", _GEMM_D, ("unroll", 64), ("tile_m", 8)),
    *_edits("gemv", _GEMV_A, ("vector", 1), ("tile_m", 1), ("tile_k", 64), ("order", "ki"), ("unroll", 0)),
    *_edits("gemv", _GEMV_B, ("vector", 16), ("tile_m", 16), ("tile_k", 384)),
    *_edits("gemv", _with(_GEMV_B, vector=4), ("vector", 8)),
    *_edits("conv2d", _with(_CONV_A, vector=1), ("vector", 8)),
    *_edits(
        "conv2d",
        _CONV_A,
        ("vector", 4),
        ("tile_f", 16),
        ("tile_q", 8),
        ("tile_p", 4),
        ("order", "FcPQrsfpq"),
        ("order", "PQFcrsfpq"),
        ("order", "FPQfcrspq"),
        ("unroll", 0),
    ),
    *_edits("conv2d", _CONV_B, ("vector", 1), ("tile_f", 32)),
    *_edits("conv2d", _CONV_C, ("order", "FcPQrsfpq"), ("vector", 16)),
    *_edits(
        "depthwise_conv2d",
        _DW_A,
        ("vector", 1),
        ("order", "rs_outer"),
        ("tile_c", 16),
        ("tile_p", 1),
        ("tile_q", 8),
        ("unroll", 0),
        ("vector", 4),
    ),
    *_edits("depthwise_conv2d", _DW_B, ("order", "rs_outer"), ("vector", 8)),
    *_edits("depthwise_conv2d", _DW_C, ("vector", 10)),
    *_edits(
        "dense_relu",
        _DENSE_A,
        ("vector", 1),
        ("tile_b", 1),
        ("tile_o", 32),
        ("tile_i", 64),
        ("order", "ob"),
        ("unroll", 0),
    ),
    *_edits("dense_relu", _DENSE_B, ("vector", 16), ("tile_b", 2)),
    *_edits("dense_relu", _with(_DENSE_B, vector=4), ("vector", 8)),
    *_edits("qgemm", _QGEMM_A, ("tile_m", 1), ("tile_n", 64), ("tile_n", 4), ("requantize", True)),
    *_edits("qgemm", _QGEMM_B, ("tile_n", 4), ("tile_m", 16)),
    *_edits("qconv2d", _QCONV_A, ("tile_f", 4), ("tile_q", 12), ("tile_q", 2), ("requantize", True)),
    *_edits("qconv2d", _QCONV_B, ("tile_f", 32)),
    *_edits("gemm", _F16_A, ("vector", 1), ("tile_k", 8), ("order", "kij"), ("pack_b", True)),
    *_user("softmax", "softmax", ("rows", "n"), _SOFTMAX, ("vector", 8), ("inline_exp", True), ("vector", 4)),
    *_user("layer_norm", "layer_norm", ("rows", "n"), _LAYER_NORM, ("vector", 8), ("vector", 16)),
    *_user("attention", "attention", ("seq", "d"), _ATTENTION, ("vector", 8), ("tile", 2), ("tile", 16)),
    *_user(
        "mlp.matmul_add_relu",
        "model_kernel",
        ("batch", "features", "hidden"),
        {**_MLP, "op": "matmul_add_relu"},
        ("vector", 8),
        ("vector", 4),
        reference=False,
    ),
    *_user(
        "mlp.matmul_add",
        "model_kernel",
        ("batch", "hidden", "classes"),
        {**_MLP, "op": "matmul_add"},
        ("vector", 8),
        ("vector", 2),
        reference=False,
    ),
    *_user(
        "conv_block.conv2d_add_relu",
        "model_kernel",
        ("channels", "width", "size"),
        _CONV_BLOCK,
        ("vector", 4),
        ("unroll", 16),
        reference=False,
    ),
]
