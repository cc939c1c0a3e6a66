"""perfguard check end to end: real TVM builds, real cross compilers, real QEMU with the plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfguard.shells.cli import main
from tests.projects import kernel_table, repository_project

ISAS = ["x86_64", "aarch64", "riscv64"]

# One small kernel per built-in family: every output is checked against numpy on every ISA.
FAMILIES_TOML = '[perfguard]\ntargets = ["x86_64", "aarch64", "riscv64"]\nthreshold = 1.0\n' + "".join(
    [
        kernel_table(
            "gemm_s",
            "perfguard.kernels.gemm:gemm",
            "M = 32, N = 32, K = 32, tile_m = 8, tile_n = 16, tile_k = 8, vector = 8",
            "gemm",
        ),
        kernel_table("gemv_s", "perfguard.kernels.gemv:gemv", "M = 64, K = 128", "gemv"),
        kernel_table("conv_s", "perfguard.kernels.conv2d:conv2d", "C = 8, H = 8, W = 8, F = 8", "conv2d"),
        kernel_table(
            "dw_s", "perfguard.kernels.depthwise:depthwise_conv2d", "C = 8, H = 10, W = 10", "depthwise_conv2d"
        ),
        kernel_table("dense_s", "perfguard.kernels.dense_relu:dense_relu", "B = 4, I = 64, O = 32", "dense_relu"),
    ]
)


def report(config: Path) -> dict:
    return json.loads((config.parent / "reports" / "perfguard.json").read_text())


def by_key(data: dict) -> dict:
    return {(r["kernel"], r["target"]): r for r in data["results"]}


@pytest.mark.slow
def test_every_family_on_every_isa_then_unchanged_and_cached(project, capsys):
    config = project(FAMILIES_TOML)
    # -j 1: the jobs in this process (a pool's workers each import TVM again; pools: tests/executors)
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    for isa in ISAS:
        for kernel in ("gemm_s", "gemv_s", "conv_s", "dw_s", "dense_s"):
            saved = json.loads((config.parent / "baselines" / isa / f"{kernel}.json").read_text())
            assert saved["stats"]["insts"] > 1000 and saved["predicted_time_s"] > 0
            assert saved["simulator"] == "qemu" and saved["target"] == isa
    capsys.readouterr()

    assert main(["check", "--config", str(config), "-j", "1"]) == 0
    data = report(config)
    assert len(data["results"]) == 15
    for r in data["results"]:
        assert r["verdict"] == "unchanged", r
        assert r["delta_pct"] == 0.0
        # Built and simulated during `baseline update`: this run hit the cache everywhere.
        assert r["rebuilt"] is False and r["resimulated"] is False
    out = capsys.readouterr().out
    assert "no regressions" in out and "gemm_s" in out
    assert (config.parent / "reports" / "index.html").read_text().count("unchanged") >= 15


GEMV_LINE = 'params = { M = 1024, K = 1024, dtype = "float32", tile_m = 8, tile_k = 256, vector = 8 }'
# The unchanged kernel beside it: test_toolchain.py checks it on x86_64 too (one job for both).
OTHER = "dense_relu_16x512x256"


@pytest.mark.slow
def test_injected_regression_is_caught(tmp_path, cache_dir, capsys):
    # vector = 1: the dot products lose their SIMD lanes (one multiply-add per element instead of one per 8).
    # (gemv_1024: a committed baseline as gemm_256's is, simulated in a fraction of its time.)
    worse = GEMV_LINE.replace("vector = 8", "vector = 1")
    config = repository_project(tmp_path / "repo", cache_dir, (GEMV_LINE, worse))
    code = main(["check", "--config", str(config), "--kernels", f"gemv_1024,{OTHER}", "--targets", "aarch64,x86_64"])
    out = capsys.readouterr().out
    assert code == 1, out
    results = by_key(report(config))
    for isa in ("aarch64", "x86_64"):
        assert results[("gemv_1024", isa)]["verdict"] == "regression"
        assert results[("gemv_1024", isa)]["delta_pct"] > 2.0
        assert results[(OTHER, isa)]["verdict"] == "unchanged"
        assert results[(OTHER, isa)]["delta_pct"] == 0.0
    assert "gemv_1024" in out and "regression" in out


@pytest.mark.slow
def test_real_improvement_is_reported(tmp_path, cache_dir, capsys):
    # vector = 16: two 8-lane partial sums per row instead of one, so consecutive multiply-adds no longer
    # wait on each other (-11 % on x86_64 under the pipeline model).
    better = GEMV_LINE.replace("vector = 8", "vector = 16")
    config = repository_project(tmp_path / "repo", cache_dir, (GEMV_LINE, better))
    code = main(["check", "--config", str(config), "--kernels", "gemv_1024", "--targets", "x86_64"])
    assert code == 0, capsys.readouterr().out
    result = by_key(report(config))[("gemv_1024", "x86_64")]
    assert result["verdict"] == "improvement" and result["delta_pct"] < -2.0


USER_KERNEL = """
import tvm
from tvm import te


def scale_add(n=256, alpha=2.0):
    A = te.placeholder((n,), "float32", name="A")
    B = te.placeholder((n,), "float32", name="B")
    C = te.compute((n,), lambda i: A[i] * alpha + B[i], name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})


def broken(n=64):
    A = te.placeholder((n,), "float32", name="A")
    C = te.compute((n,), lambda i: A[i] * 2.0, name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, C])})


def wrong_reference(inputs, n=64):
    return [inputs[0] * 3.0]


def not_a_module(n=1):
    return 42
"""


@pytest.mark.slow
def test_user_kernel_with_tvm_host_reference(project, capsys):
    config = project(
        '[perfguard]\ntargets = ["riscv64"]\n'
        + kernel_table("saxpy", "mykernels.ops:scale_add", "n = 512", "elementwise"),
        {"mykernels/__init__.py": "", "mykernels/ops.py": USER_KERNEL},
    )
    assert main(["check", "--config", str(config)]) == 0
    result = by_key(report(config))[("saxpy", "riscv64")]
    assert result["verdict"] == "new"
    assert result["stats"]["loads"] >= 1024 // 8  # two 512-element inputs were read


@pytest.mark.parametrize(
    "kernel_toml, code, needle",
    [
        ('entry = "mykernels.missing:f"', 2, "cannot import 'mykernels.missing'"),
        ('entry = "mykernels.ops:not_a_module"', 2, "expected a tvm IRModule"),
        (
            'entry = "perfguard.kernels.gemm:gemm"\nfamily = "gemm"\nparams = { M = 64, tile_m = 48 }',
            2,
            "'tile_m' = 48 does not divide 'M' = 64",
        ),
        (
            'entry = "perfguard.kernels.gemm:gemm"\nfamily = "gemm"\nparams = { M = 64, tile_z = 4 }',
            2,
            "unknown parameter 'tile_z'",
        ),
        ('entry = "mykernels.ops:broken"\nreference = "mykernels.ops:wrong_reference"', 4, "wrong result"),
    ],
)
def test_bad_kernels(project, capsys, kernel_toml, code, needle):
    config = project(
        '[perfguard]\ntargets = ["aarch64"]\n\n[[kernel]]\nname = "k"\n' + kernel_toml + "\n",
        {"mykernels/__init__.py": "", "mykernels/ops.py": USER_KERNEL},
    )
    assert main(["check", "--config", str(config)]) == code
    out = capsys.readouterr().out
    assert needle in " ".join(out.split()), out
    result = report(config)["results"][0]
    assert result["verdict"] == ("wrong result" if code == 4 else "error") and needle in result["error"]


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("cc", "no-such-linux-gnu-gcc", "cross compiler 'no-such-linux-gnu-gcc' not found"),
        ("qemu", "qemu-no-such-arch", "qemu-no-such-arch"),
    ],
)
def test_missing_toolchain_is_exit_3(project, capsys, field, value, needle):
    config = project(
        f'[perfguard]\ntargets = ["odd"]\n\n[target.odd]\nbase = "aarch64"\n{field} = "{value}"\n'
        + kernel_table("g", "perfguard.kernels.gemm:gemm", "M = 16, N = 16, K = 16", "gemm")
    )
    assert main(["check", "--config", str(config)]) == 3
    assert needle in capsys.readouterr().out


@pytest.mark.slow
def test_corrupted_baseline_is_exit_2_and_untouched(project, capsys):
    config = project(
        '[perfguard]\ntargets = ["aarch64"]\n'
        + kernel_table("g", "perfguard.kernels.gemm:gemm", "M = 16, N = 16, K = 16", "gemm")
    )
    path = config.parent / "baselines" / "aarch64" / "g.json"
    path.parent.mkdir(parents=True)
    damaged = b'{"schema": 1, "kernel": "g", "stats": {"insts": 12'
    path.write_bytes(damaged)
    assert main(["check", "--config", str(config)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "g.json: corrupted baseline" in out
    assert path.read_bytes() == damaged
