"""The built-in kernel families, built and run with the real TVM (no mocks)."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

pytest.importorskip("tvm")
import tvm.tirx  # noqa: E402

from perfguard.errors import InputError  # noqa: E402
from perfguard.kernels import FAMILY_NAMES, get_family  # noqa: E402
from perfguard.kernels.base import check_params, divisors, tile_candidates  # noqa: E402

# The float families (a `dtype` knob); the integer ones, qgemm and qconv2d, are in tests/test_quant.py.
FLOAT_FAMILIES = tuple(name for name in FAMILY_NAMES if "dtype" in get_family(name).knobs)

TARGETS = {
    "x86_64": {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "x86-64-v3"},
    "aarch64": {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72", "mattr": ["+neon"]},
    "riscv64": {
        "kind": "llvm",
        "mtriple": "riscv64-linux-gnu",
        "mcpu": "generic-rv64",
        "mattr": ["+m", "+a", "+f", "+d", "+c"],
    },
}
ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "riscv64": 243}

# Small problems per family: fast to build and run, with odd extents so that tiles vary.
SMALL = {
    "gemm": dict(M=24, N=32, K=20),
    "gemv": dict(M=24, K=64),
    "conv2d": dict(N=1, C=4, H=10, W=10, F=8),
    "depthwise_conv2d": dict(N=1, C=6, H=9, W=9, R=3, S=3, stride=2, padding=1),
    "dense_relu": dict(B=3, I=64, O=12),
}

# Typical (ResNet-like / layer-like) problems for the size of the schedule space.
TYPICAL = {
    "gemm": dict(M=256, N=256, K=256),
    "gemv": dict(M=1024, K=1024),
    "conv2d": dict(N=1, C=64, H=56, W=56, F=64, R=3, S=3, stride=1, padding=1),
    "depthwise_conv2d": dict(N=1, C=128, H=56, W=56, R=3, S=3, stride=1, padding=1),
    "dense_relu": dict(B=16, I=512, O=512),
}


def _target(name):
    return tvm.target.Target(TARGETS[name])


def _run_and_check(family, params, rtol=1e-4):
    mod = family.entry(**params)
    lib = tvm.tirx.build(mod, target=_target("x86_64"))
    full = family.extra["resolve"](**params)
    rng = np.random.default_rng(0)
    inputs = family.extra["make_inputs"](rng, **full)
    dev = tvm.cpu()
    outs = [tvm.runtime.empty(shape, full["dtype"], dev) for shape in family.extra["output_shapes"](**full)]
    lib["main"](*[tvm.runtime.tensor(a, dev) for a in inputs], *outs)
    expected = family.reference(inputs, **full)
    assert len(expected) == family.num_outputs == len(outs)
    for got, want in zip(outs, expected):
        assert got.numpy().dtype == np.dtype(full["dtype"])
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=rtol * 10)


def _sample(family, shape, count, seed=0):
    variants = list(family.space(**shape))
    return random.Random(seed).sample(variants, min(count, len(variants)))


@pytest.mark.parametrize("name", FLOAT_FAMILIES)
def test_default_params_build_and_match_reference(name):
    _run_and_check(get_family(name), {})


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOAT_FAMILIES)
def test_space_variants_match_reference(name):
    family = get_family(name)
    for params in _sample(family, SMALL[name], 4):
        _run_and_check(family, params)


@pytest.mark.parametrize("name", FLOAT_FAMILIES)
def test_float64_variant_matches_reference(name):
    family = get_family(name)
    for params in _sample(family, dict(SMALL[name], dtype="float64"), 2, seed=1):
        _run_and_check(family, params, rtol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", FLOAT_FAMILIES)
def test_cross_targets_build_objects(name, tmp_path):
    family = get_family(name)
    variants = [{}] + _sample(family, SMALL[name], 2, seed=2)
    for n, params in enumerate(variants):
        mod = family.entry(**params)
        for target in ("aarch64", "riscv64"):
            path = tmp_path / f"{name}-{n}-{target}.o"
            tvm.tirx.build(mod, target=_target(target)).write_to_file(str(path))
            head = path.read_bytes()[:20]
            assert head[:4] == b"\x7fELF"
            assert struct.unpack("<H", head[18:20])[0] == ELF_MACHINE[target]


@pytest.mark.parametrize("name", FLOAT_FAMILIES)
def test_module_is_single_threaded_main_with_output_last(name):
    family = get_family(name)
    mod = family.entry()
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["main"]
    func = mod["main"]
    full = family.extra["resolve"]()
    outs = family.extra["output_shapes"](**full)
    # TVM 0.27: PrimFunc params are typed vars carrying the buffer shape (no buffer_map)
    assert len(func.params) == len(family.extra["make_inputs"](np.random.default_rng(0), **full)) + 1
    assert tuple(int(d) for d in func.params[-1].shape) == outs[0]
    assert "parallel" not in mod.script()


@pytest.mark.parametrize("name", FLOAT_FAMILIES)
def test_space_is_valid_distinct_and_rich(name):
    family = get_family(name)
    shape = TYPICAL[name]
    variants = list(family.space(**shape))
    assert len(variants) >= 100
    keys = {tuple(sorted(v.items())) for v in variants}
    assert len(keys) == len(variants)
    assert variants == list(family.space(**shape))  # deterministic order
    for v in variants:
        assert set(v) == set(family.knobs)
        assert all(v[k] == shape.get(k, family.knobs[k].default) for k in family.shape_keys)
        assert check_params(name, family.knobs, v) == v
        assert family.extra["resolve"](**v) == v  # derived checks (conv output tiles) pass too
    for knob in ("vector", "unroll"):
        assert len({v[knob] for v in variants}) >= 3, knob


def test_space_sizes_for_gemm_and_conv2d():
    assert len(list(get_family("gemm").space(**TYPICAL["gemm"]))) >= 1000
    assert len(list(get_family("conv2d").space(**TYPICAL["conv2d"]))) >= 300


def test_conv2d_space_builds_on_odd_output_width():
    # ResNet's last stage: 7x7 outputs; the space offers 7-lane vectors
    family = get_family("conv2d")
    shape = dict(N=1, C=8, H=7, W=7, F=8, R=3, S=3, stride=1, padding=1)
    variants = list(family.space(**shape))
    assert any(v["vector"] == 7 for v in variants)
    _run_and_check(family, next(v for v in variants if v["vector"] == 7 and v["tile_p"] > 1))


@pytest.mark.parametrize(
    "name, params, key",
    [
        ("gemm", dict(tile_x=4), "tile_x"),
        ("gemm", dict(M=96, tile_m=64), "tile_m"),
        ("gemm", dict(tile_n=32, vector=3), "vector"),
        ("gemm", dict(M=12.0), "M"),
        ("gemm", dict(tile_k="8"), "tile_k"),
        ("gemm", dict(pack_b=1), "pack_b"),
        ("gemm", dict(dtype="bfloat16"), "dtype"),
        ("gemm", dict(order="ijj"), "order"),
        ("gemm", dict(unroll=-1), "unroll"),
        ("gemv", dict(K=100, tile_k=64), "tile_k"),
        ("gemv", dict(vector=True), "vector"),
        ("gemv", dict(dtype="int8"), "dtype"),
        ("conv2d", dict(tile_q=5), "tile_q"),
        ("conv2d", dict(tile_p=3), "tile_p"),
        ("conv2d", dict(tile_f=48), "tile_f"),
        ("conv2d", dict(kernel=3), "kernel"),
        ("conv2d", dict(stride="2"), "stride"),
        ("conv2d", dict(R=40, S=40), "R"),
        ("depthwise_conv2d", dict(tile_c=5), "tile_c"),
        ("depthwise_conv2d", dict(dtype="bfloat16"), "dtype"),
        ("depthwise_conv2d", dict(F=3), "F"),
        ("dense_relu", dict(tile_o=7), "tile_o"),
        ("dense_relu", dict(tile_i=32, vector=5), "vector"),
        ("dense_relu", dict(B=None), "B"),
    ],
)
def test_bad_params_raise_input_error_naming_the_key(name, params, key):
    family = get_family(name)
    with pytest.raises(InputError, match=f"'{key}'"):
        family.entry(**params)


def test_unknown_family_is_an_input_error():
    with pytest.raises(InputError, match="nope"):
        get_family("nope")


def test_flops():
    assert get_family("gemm").flops(M=4, N=5, K=6) == 2 * 4 * 5 * 6
    assert get_family("gemv").flops(M=7, K=3) == 2 * 7 * 3
    # 9x9 input, 3x3 kernel, stride 2, padding 1 -> 5x5 output
    conv = dict(N=2, C=3, H=9, W=9, F=4, R=3, S=3, stride=2, padding=1)
    assert get_family("conv2d").flops(**conv) == 2 * 2 * 4 * 5 * 5 * 3 * 3 * 3
    assert get_family("depthwise_conv2d").flops(N=1, C=8, H=6, W=6, R=3, S=3, stride=1, padding=0) == (
        2 * 8 * 4 * 4 * 9
    )
    assert get_family("dense_relu").flops(B=2, I=8, O=3) == 2 * 2 * 3 * 8 + 2 * 2 * 3


def test_references_on_tiny_hand_cases():
    gemm = get_family("gemm")
    a = np.arange(6, dtype="float32").reshape(2, 3)
    b = np.ones((3, 2), dtype="float32")
    np.testing.assert_array_equal(gemm.reference([a, b], M=2, N=2, K=3)[0], [[3, 3], [12, 12]])
    dense = get_family("dense_relu")
    x = np.array([[1.0, -2.0]], dtype="float32")
    w = np.array([[1.0, 1.0], [-1.0, 0.0]], dtype="float32")
    np.testing.assert_array_equal(
        dense.reference([x, w, np.array([0.5, 0.0], "float32")], B=1, I=2, O=2)[0], [[0.0, 0.0]]
    )
    # 1x1 identity conv returns its input
    conv = get_family("conv2d")
    data = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype("float32")
    eye = np.eye(2, dtype="float32").reshape(2, 2, 1, 1)
    params = dict(N=1, C=2, H=3, W=3, F=2, R=1, S=1, padding=0)
    np.testing.assert_allclose(conv.reference([data, eye], **params)[0], data, rtol=1e-6)


def test_tile_candidates_divide_and_respect_bounds():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    for extent in (1, 7, 56, 100, 256, 1000):
        cands = tile_candidates(extent, 64, limit=5, floor=4)
        assert cands == sorted(set(cands)) and 1 <= len(cands) <= 5
        assert all(extent % c == 0 and c <= 64 for c in cands)
