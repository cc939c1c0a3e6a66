"""One-knob schedule edits for the verdict-agreement benchmark (benchmarks/verdicts.py).

Each pair is a kernel of a built-in family before and after changing exactly one knob. Every
other knob is given explicitly, so a default that depends on another knob (`vector` on its
tile) cannot change behind the edit's back. The shapes are in no calibration dataset
(baselines/datasets/*), no default calibration group (perfguard.runs.calibration) and not
in perfguard.toml: a calibrated model sees them for the first time.

The list mixes clear regressions, clear improvements and edits expected to be about neutral
(those test false alarms). Reuse it from another benchmark with `PAIRS` and `Pair.sides()`.
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
}


def knob_kind(knob: str) -> str:
    return "tile size" if knob.startswith("tile_") else KNOB_KINDS[knob]


@dataclass(frozen=True)
class Pair:
    family: str
    base: dict[str, Any]  # every knob, with the "before" value of the edited one
    knob: str
    after: Any

    @property
    def before(self) -> Any:
        return self.base[self.knob]

    @property
    def name(self) -> str:
        shape = "x".join(str(self.base[k]) for k in get_family(self.family).shape_keys if k != "dtype"
                         and k in self.base)
        return f"{self.family}/{shape}/{self.knob}:{_show(self.before)}->{_show(self.after)}"

    @property
    def kind(self) -> str:
        return knob_kind(self.knob)

    def params(self, side: str) -> dict[str, Any]:
        """The parameters of side "before" or "after"."""
        return dict(self.base) if side == "before" else {**self.base, self.knob: self.after}

    def sides(self) -> tuple[KernelSpec, KernelSpec]:
        family = get_family(self.family)
        entry = f"{family.entry.__module__}:{family.entry.__name__}"
        return tuple(KernelSpec(f"{self.name}#{side}", entry, self.family, self.params(side))  # type: ignore[return-value]
                     for side in ("before", "after"))


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _edits(family: str, base: dict[str, Any], *edits: tuple[str, Any]) -> list[Pair]:
    return [Pair(family, base, knob, after) for knob, after in edits]


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


_GEMM_A = dict(M=128, N=384, K=256, dtype="float32", tile_m=16, tile_n=64, tile_k=4, vector=8, unroll=16,
               order="ijk", inner="ikj", pack_b=False)
_GEMM_B = dict(M=96, N=160, K=192, dtype="float32", tile_m=16, tile_n=32, tile_k=32, vector=8, unroll=16,
               order="ijk", inner="ikj", pack_b=False)
_GEMM_C = dict(M=64, N=512, K=320, dtype="float32", tile_m=8, tile_n=64, tile_k=64, vector=8, unroll=16,
               order="ijk", inner="ikj", pack_b=False)
_GEMM_D = dict(M=160, N=96, K=128, dtype="float32", tile_m=32, tile_n=32, tile_k=64, vector=8, unroll=0,
               order="ijk", inner="ikj", pack_b=False)

_GEMV_A = dict(M=640, K=1536, dtype="float32", tile_m=8, tile_k=256, vector=8, unroll=16, order="ik")
_GEMV_B = dict(M=2048, K=384, dtype="float32", tile_m=4, tile_k=128, vector=8, unroll=16, order="ik")

_CONV_A = dict(N=1, C=24, H=32, W=32, F=48, R=3, S=3, stride=1, padding=1, dtype="float32", tile_f=8, tile_p=2,
               tile_q=16, vector=8, unroll=16, order="FPQcrsfpq")
_CONV_B = dict(N=1, C=96, H=12, W=12, F=64, R=1, S=1, stride=1, padding=0, dtype="float32", tile_f=8, tile_p=2,
               tile_q=12, vector=4, unroll=16, order="FPQcrsfpq")
_CONV_C = dict(N=1, C=8, H=64, W=64, F=16, R=3, S=3, stride=2, padding=1, dtype="float32", tile_f=8, tile_p=2,
               tile_q=32, vector=8, unroll=16, order="FPQcrsfpq")

_DW_A = dict(N=1, C=48, H=40, W=40, R=3, S=3, stride=1, padding=1, dtype="float32", tile_c=4, tile_p=4, tile_q=40,
             vector=8, unroll=16, order="rs_inner")
_DW_B = dict(N=1, C=24, H=64, W=64, R=5, S=5, stride=1, padding=2, dtype="float32", tile_c=4, tile_p=2, tile_q=64,
             vector=16, unroll=16, order="rs_inner")
_DW_C = dict(N=1, C=96, H=20, W=20, R=3, S=3, stride=2, padding=1, dtype="float32", tile_c=8, tile_p=5, tile_q=10,
             vector=2, unroll=16, order="rs_inner")

_DENSE_A = dict(B=8, I=768, O=384, dtype="float32", tile_b=4, tile_o=8, tile_i=256, vector=8, unroll=16, order="bo")
_DENSE_B = dict(B=24, I=384, O=192, dtype="float32", tile_b=8, tile_o=8, tile_i=128, vector=8, unroll=16, order="bo")

PAIRS: list[Pair] = [
    *_edits("gemm", _GEMM_A, ("tile_k", 16), ("tile_n", 16), ("order", "kij"), ("inner", "kij"), ("pack_b", True)),
    *_edits("gemm", _GEMM_B, ("vector", 1), ("vector", 4), ("vector", 16), ("tile_m", 4), ("unroll", 0),
            ("order", "jik")),
    *_edits("gemm", _GEMM_C, ("pack_b", True), ("tile_k", 32)),
    *_edits("gemm", _GEMM_D, ("unroll", 64), ("tile_m", 8)),
    *_edits("gemv", _GEMV_A, ("vector", 1), ("tile_m", 1), ("tile_k", 64), ("order", "ki"), ("unroll", 0)),
    *_edits("gemv", _GEMV_B, ("vector", 16), ("tile_m", 16), ("tile_k", 384)),
    *_edits("gemv", _with(_GEMV_B, vector=4), ("vector", 8)),
    *_edits("conv2d", _with(_CONV_A, vector=1), ("vector", 8)),
    *_edits("conv2d", _CONV_A, ("vector", 4), ("tile_f", 16), ("tile_q", 8), ("tile_p", 4), ("order", "FcPQrsfpq"),
            ("order", "PQFcrsfpq"), ("order", "FPQfcrspq"), ("unroll", 0)),
    *_edits("conv2d", _CONV_B, ("vector", 1), ("tile_f", 32)),
    *_edits("conv2d", _CONV_C, ("order", "FcPQrsfpq"), ("vector", 16)),
    *_edits("depthwise_conv2d", _DW_A, ("vector", 1), ("order", "rs_outer"), ("tile_c", 16), ("tile_p", 1),
            ("tile_q", 8), ("unroll", 0), ("vector", 4)),
    *_edits("depthwise_conv2d", _DW_B, ("order", "rs_outer"), ("vector", 8)),
    *_edits("depthwise_conv2d", _DW_C, ("vector", 10)),
    *_edits("dense_relu", _DENSE_A, ("vector", 1), ("tile_b", 1), ("tile_o", 32), ("tile_i", 64), ("order", "ob"),
            ("unroll", 0)),
    *_edits("dense_relu", _DENSE_B, ("vector", 16), ("tile_b", 2)),
    *_edits("dense_relu", _with(_DENSE_B, vector=4), ("vector", 8)),
]
