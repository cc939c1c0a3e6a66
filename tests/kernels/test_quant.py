"""Quantized (int8) and half-precision kernels: real TVM builds, real cross objects, real QEMU runs.

What must hold: integer outputs equal their references exactly (on the host and simulated on two
ISAs), the references equal a plain-loop definition, the dot-product profiles' objects hold the
native instructions (sdot, {vex} vpdpbusd, fmla .8h), the QEMU plugin counts the Armv8.2 words its
disassembler cannot decode as vector (integer) / vector-fp instructions, and a profile QEMU 7.2
cannot execute is refused before anything runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from perfguard.compile.inputs import TensorSpec, generate  # noqa: E402
from perfguard.errors import InputError  # noqa: E402
from perfguard.kernels import get_family  # noqa: E402
from perfguard.kernels.quant_common import INT32_MAX, MAX_PRODUCT  # noqa: E402
from perfguard.targets import BUILTIN  # noqa: E402

QUANT = ("qgemm", "qconv2d")
SMALL = {
    "qgemm": dict(M=12, N=24, K=36),
    "qconv2d": dict(N=1, H=7, W=9, C=12, F=8, R=3, S=3, stride=2, padding=1),
}
REQUANT = dict(requantize=True, rq_multiplier=41, rq_shift=6)  # some outputs clip, most do not


def _host_run(family, params):
    """Build for this machine, run through TVM's runtime on the family's inputs: (outputs, reference)."""
    full = family.extra["resolve"](**params)
    lib = tvm.tirx.build(family.entry(**params), target=tvm.target.Target({"kind": "llvm"}))
    inputs = family.extra["make_inputs"](np.random.default_rng(7), **full)
    expected = family.reference(inputs, **full)
    dev = tvm.cpu()
    outs = [
        tvm.runtime.empty(shape, str(want.dtype), dev)
        for shape, want in zip(family.extra["output_shapes"](**full), expected)
    ]
    lib["main"](*[tvm.runtime.tensor(a, dev) for a in inputs], *outs)
    return [o.numpy() for o in outs], expected


@pytest.mark.parametrize("name", QUANT)
@pytest.mark.parametrize("extra", [{}, REQUANT], ids=["int32", "requantized"])
def test_int_kernels_equal_their_reference_exactly_on_the_host(name, extra):
    family = get_family(name)
    variants = [{}] + random.Random(3).sample(list(family.space(**SMALL[name])), 2)
    for variant in variants:
        params = {**SMALL[name], **variant, **extra}
        got, want = _host_run(family, params)
        assert got[0].dtype == (np.int8 if extra else np.int32)
        assert np.array_equal(got[0], want[0]), params
        assert np.abs(want[0]).max() > (20 if extra else 100)  # not a trivially small (or all-clipped) output
        if extra:
            assert 0 < np.mean(np.abs(want[0]) == 127) + np.mean(want[0] == -128) < 0.9


def test_uint8_qgemm_equals_its_reference_exactly():
    got, want = _host_run(get_family("qgemm"), dict(SMALL["qgemm"], a_dtype="uint8", **REQUANT))
    assert np.array_equal(got[0], want[0])


def _requantize_scalar(acc, mult, shift):
    value = (acc * mult + ((1 << shift) >> 1)) // (1 << shift)  # floor division: an arithmetic shift
    return max(-128, min(127, value))


def test_references_equal_plain_loops():
    rng = np.random.default_rng(1)
    q = get_family("qgemm")
    a, b = rng.integers(-8, 8, (3, 5)), rng.integers(-8, 8, (4, 5))
    p = dict(M=3, N=4, K=5, **REQUANT)
    want_acc = [[sum(int(a[i, k]) * int(b[j, k]) for k in range(5)) for j in range(4)] for i in range(3)]
    assert q.reference([a, b], M=3, N=4, K=5)[0].tolist() == want_acc
    assert q.reference([a, b], **p)[0].tolist() == [[_requantize_scalar(v, 41, 6) for v in row] for row in want_acc]
    # rounding half up, also for negatives: -96 / 64 = -1.5 -> -1; -97 / 64 -> -2; 32 / 64 = 0.5 -> 1
    assert [_requantize_scalar(v, 1, 6) for v in (-96, -97, 32, 31)] == [-1, -2, 1, 0]

    c = get_family("qconv2d")
    p = dict(N=1, H=5, W=4, C=3, F=2, R=3, S=2, stride=2, padding=1)
    data, weight = rng.integers(-8, 8, (1, 5, 4, 3)), rng.integers(-8, 8, (2, 3, 2, 3))
    padded = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
    P, Q = (5 + 2 - 3) // 2 + 1, (4 + 2 - 2) // 2 + 1
    loops = np.zeros((1, P, Q, 2), dtype=np.int64)
    for y, x, f, r, s, ch in itertools.product(range(P), range(Q), range(2), range(3), range(2), range(3)):
        loops[0, y, x, f] += int(padded[0, y * 2 + r, x * 2 + s, ch]) * int(weight[f, r, s, ch])
    assert c.reference([data, weight], **p)[0].tolist() == loops.tolist()


def test_accumulation_bound_is_enforced_where_int32_would_overflow():
    q = get_family("qgemm")
    for a_dtype in ("int8", "uint8"):
        limit = INT32_MAX // MAX_PRODUCT[a_dtype]
        assert limit * MAX_PRODUCT[a_dtype] <= INT32_MAX < (limit + 1) * MAX_PRODUCT[a_dtype]
        q.extra["resolve"](M=1, N=1, K=limit, a_dtype=a_dtype)
        with pytest.raises(InputError, match="int32 accumulation"):
            q.extra["resolve"](M=1, N=1, K=limit + 1, a_dtype=a_dtype)
    # the harness's integers really are within the bound's range: [-8, 7], uint8 the same bytes
    signed = generate(TensorSpec("A", (4096,), "int8", False, 0))
    unsigned = generate(TensorSpec("A", (4096,), "uint8", False, 0))
    assert -8 <= signed.min() <= -7 and signed.max() == 7  # -8 only where the generator hits -1.0 exactly
    assert np.array_equal(unsigned, signed.astype(np.uint8))
    assert int(unsigned.max()) * 8 <= MAX_PRODUCT["uint8"]
    with pytest.raises(InputError, match="C x R x S"):
        get_family("qconv2d").extra["resolve"](C=INT32_MAX // 64 // 9 + 1)


def _object_text(family: str, params: dict, target: str, tmp_path: Path) -> str:
    """perfguard's own build of the kernel for a profile, disassembled by LLVM for that profile."""
    from perfguard.compile.lower import build_object, inspect_module

    if shutil.which("llvm-objdump-19") is None:
        pytest.skip("llvm-objdump-19 missing")
    profile = BUILTIN[target]
    lowered = inspect_module(get_family(family).entry(**params), 1, "test")
    out = tmp_path / f"{family}-{target}.o"
    build_object(lowered, profile.tvm_target, out, "test")
    cmd = ["llvm-objdump-19", "-d", "--no-show-raw-insn", f"--mcpu={profile.tvm_target['mcpu']}"]
    if profile.mattr:
        cmd.append(f"--mattr={profile.mattr}")
    return subprocess.run([*cmd, str(out)], capture_output=True, text=True, check=True).stdout


def test_dotprod_profile_build_contains_sdot_and_a72_does_not(tmp_path):
    params = dict(M=16, N=32, K=64)
    dot = _object_text("qgemm", params, "aarch64dot", tmp_path)
    assert len(re.findall(r"\bsdot\s+v\d+\.[24]s", dot)) >= 8
    assert "sdot" not in _object_text("qgemm", params, "aarch64", tmp_path)
    conv = _object_text("qconv2d", dict(H=8, W=8, C=32, F=16, **REQUANT), "aarch64dot", tmp_path)
    assert re.search(r"\bsdot\s+v\d+\.[24]s", conv)


def test_vnni_profile_build_contains_vpdpbusd(tmp_path):
    text = _object_text("qgemm", dict(M=16, N=32, K=64, a_dtype="uint8", dot="vnni", **REQUANT), "x86_64vnni", tmp_path)
    assert len(re.findall(r"\{vex\}\s+vpdpbusd\s.*%ymm", text)) >= 8
    assert "zmm" not in text  # the 256-bit VEX form: no AVX-512


def test_fp16_gemm_is_native_half_on_aarch64dot_only(tmp_path):
    params = dict(M=16, N=32, K=16, dtype="float16")
    assert re.search(r"\bfmla\s+v\d+\.8h", _object_text("gemm", params, "aarch64dot", tmp_path))
    a72 = _object_text("gemm", params, "aarch64", tmp_path)
    assert not re.search(r"\bf(mla|add|mul)\s+v\d+\.[48]h", a72)  # no half arithmetic on a Cortex-A72:
    assert re.search(r"\bfcvtl", a72) and re.search(r"\bf(mul|mla)\s+v\d+\.4s", a72)  # widened to float32


def test_vnni_and_avx512_profiles_are_refused_before_simulating(tmp_path):
    from perfguard.sim.cachegrind import CachegrindSimulator
    from perfguard.sim.qemu import QemuSimulator

    qemu, grind = QemuSimulator(tmp_path), CachegrindSimulator(tmp_path)
    for ok in ("x86_64", "x86_64v1", "aarch64", "aarch64dot", "riscv64v"):
        qemu.check_target(BUILTIN[ok])
    avx512 = dataclasses.replace(
        BUILTIN["x86_64"],
        name="skx",
        tvm_target={"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "skylake-avx512"},
    )
    by_flag = dataclasses.replace(BUILTIN["x86_64"], name="flagged", cflags=("-O2", "-mavx512f"))
    for profile, feature in ((BUILTIN["x86_64vnni"], "avxvnni"), (avx512, "avx512f"), (by_flag, "avx512f")):
        for sim in (qemu, grind):
            with pytest.raises(InputError, match=f"target '{profile.name}': .*{feature}.*'x86_64' profile"):
                sim.check_target(profile)


# -- simulated: the harness under QEMU, through perfguard's pipeline ---------------------------------

# model = "analytical": the jobs do not schedule their blocks with llvm-mca (no verdict is judged here)
PROJECT = """\
[perfguard]
targets = ["aarch64dot", "x86_64", "riscv64v"]
cache_dir = "{cache}"
model = "analytical"

[[kernel]]
name = "q8"
entry = "perfguard.kernels.qgemm:qgemm"
family = "qgemm"
params = {{ M = 8, N = 16, K = 64 }}

[[kernel]]
name = "q8u_rq"
entry = "perfguard.kernels.qgemm:qgemm"
family = "qgemm"
params = {{ M = 8, N = 16, K = 48, a_dtype = "uint8", requantize = true, rq_multiplier = 3, rq_shift = 7 }}
targets = ["aarch64dot", "x86_64"]

[[kernel]]
name = "qconv_rq"
entry = "perfguard.kernels.qconv2d:qconv2d"
family = "qconv2d"
params = {{ H = 6, W = 6, C = 16, F = 8, stride = 2, requantize = true, rq_multiplier = 5, rq_shift = 7 }}
targets = ["aarch64dot", "x86_64"]

[[kernel]]
name = "h16"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = 8, N = 16, K = 32, dtype = "float16" }}
targets = ["aarch64dot", "x86_64"]
"""


def _sdot_executions(blocks, profile) -> int:
    """sdot/udot executed, from the block profile's bytes disassembled by llvm-mc (not by the plugin)."""
    total = 0
    for block in blocks:
        text = " ".join("0x" + block.code[i : i + 2] for i in range(0, len(block.code), 2))
        out = subprocess.run(
            ["llvm-mc-19", "--disassemble", f"-triple={profile.triple}", f"-mattr={profile.mattr}"],
            input=text + "\n",
            capture_output=True,
            text=True,
        ).stdout
        total += block.count * len(re.findall(r"^\s*[su]dot\s", out, re.M))
    return total


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    from perfguard.config import load_config
    from perfguard.runs.check import make_jobs, measure, select

    for tool in (
        "qemu-aarch64",
        "aarch64-linux-gnu-gcc",
        "qemu-x86_64",
        "qemu-riscv64",
        "riscv64-linux-gnu-gcc",
        "llvm-mc-19",
    ):
        if shutil.which(tool) is None:
            pytest.skip(f"missing {tool}")
    root = tmp_path_factory.mktemp("quant-project")
    (root / "perfguard.toml").write_text(PROJECT.format(cache=root / "cache"))
    config = load_config(root / "perfguard.toml")
    jobs = make_jobs(config, select(config, None, None))
    # one worker, in this process: a pool would start processes that each import TVM again
    return {(r.kernel, r.target): r for r in measure(config, jobs, 1)}


@pytest.mark.slow
def test_simulated_int_outputs_are_exact_and_fp16_within_tolerance(simulated):
    assert len(simulated) == 9
    for (kernel, target), result in simulated.items():
        assert result.ok, result.error
        assert result.reference == "family"
        if kernel == "h16":
            assert 0 < result.max_error < 0.02 * 6  # default float16 tolerance x a bound on max|reference|
        else:
            assert result.max_error == 0.0, (kernel, target)  # the check compared them exactly


@pytest.mark.slow
def test_simulated_int8_counts_are_integer_vector_work(simulated):
    dot = simulated[("q8", "aarch64dot")].stats
    sdots = _sdot_executions(dot.blocks.blocks, BUILTIN["aarch64dot"])
    # 8 x 16 x 64 multiply-adds; an sdot .4s does 16 of them, .2s 8: at least 512 / 16 executions
    assert sdots >= 8 * 16 * 64 // 16
    assert dot.vec_insts >= sdots and dot.vec_fp_insts == 0 and dot.fp_insts == 0
    for kernel, target in (("q8u_rq", "aarch64dot"), ("q8u_rq", "x86_64"), ("q8", "riscv64v")):
        stats = simulated[(kernel, target)].stats  # vpmaddwd, smlal, vwmacc.vv: integer vector work
        assert stats.vec_insts > 0 and stats.vec_fp_insts == 0 and stats.fp_insts == 0, (kernel, target)
    half = simulated[("h16", "aarch64dot")].stats
    assert half.vec_fp_insts >= 8 * 16 * 32 // 8  # fmla .8h: 8 half multiply-adds each
    assert simulated[("h16", "x86_64")].stats.vec_fp_insts > 0  # F16C conversions and float32 FMAs


A64_GUEST = r"""
#include <stdlib.h>
__attribute__((noinline)) void perfguard_roi_begin(void) { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void perfguard_roi_end(void) { asm volatile("" ::: "memory"); }
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10;
    perfguard_roi_begin();
    for (long i = 0; i < n; i++)
        asm volatile(
            "sdot v0.4s, v1.16b, v2.16b\n\t"      /* vec */
            "udot v3.2s, v4.8b, v5.8b\n\t"        /* vec */
            "sdot v6.4s, v1.16b, v2.4b[1]\n\t"    /* vec */
            "fmla v7.8h, v8.8h, v9.8h\n\t"        /* vec vec_fp */
            "fmla v10.8h, v8.8h, v9.h[3]\n\t"     /* vec vec_fp */
            "fadd v11.4h, v8.4h, v9.4h\n\t"       /* vec vec_fp */
            "fadd h12, h13, h14\n\t"              /* fp */
            "fmadd h15, h13, h14, h12\n\t"        /* fp */
            ::: "v0", "v3", "v6", "v7", "v10", "v11", "v12", "v15");
    perfguard_roi_end();
    return 0;
}
"""


def test_plugin_counts_armv82_words_capstone_cannot_decode(tmp_path):
    from perfguard.sim.qemu import QemuSimulator

    target = BUILTIN["aarch64dot"]
    if shutil.which(target.cc) is None or shutil.which(target.qemu) is None:
        pytest.skip("missing the aarch64 cross compiler or QEMU")
    (tmp_path / "g.c").write_text(A64_GUEST)
    binary = tmp_path / "g"
    subprocess.run(
        [target.cc, "-O1", "-static", "-march=armv8.2-a+dotprod+fp16", "-o", str(binary), str(tmp_path / "g.c")],
        check=True,
    )
    sim = QemuSimulator(cache_dir=tmp_path / "cache")
    a, b = (sim.run(binary, target, [str(n)], 60).stats for n in (1000, 2000))
    per_iter = {k: (getattr(b, k) - getattr(a, k)) / 1000 for k in ("vec_insts", "vec_fp_insts", "fp_insts")}
    assert per_iter == {"vec_insts": 6, "vec_fp_insts": 3, "fp_insts": 2}
