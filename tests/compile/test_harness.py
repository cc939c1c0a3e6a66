"""The harness and the region of interest: kernel-only counts, determinism, input generation."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from perfguard.compile.cache import BuildCache
from perfguard.compile.inputs import TensorSpec, generate
from perfguard.config import KernelSpec
from perfguard.job.run import Job, run_job
from perfguard.sim.qemu import QemuSimulator
from perfguard.targets import BUILTIN
from tests.conftest import REPO

CONV = KernelSpec("conv", "perfguard.kernels.conv2d:conv2d", "conv2d", {"C": 8, "H": 12, "W": 12, "F": 16})


ISAS = ["x86_64", "aarch64", "riscv64"]


def job(spec, isa, root, cache_dir, reps=1):
    # the harness and its counts are under test, not the pipeline model: no llvm-mca scheduling of blocks
    return Job(spec, BUILTIN[isa], root, cache_dir, "qemu", 300, reps, 1, warm_pipeline=False)


@pytest.fixture(scope="module")
def built_twice(tmp_path_factory):
    """isa -> CONV built and simulated twice from scratch on that ISA (once per module), from two
    independent caches whose folder paths differ in length: (first result, second result, the
    first's cache)."""
    made = {}

    def build(isa: str):
        if isa not in made:
            root = tmp_path_factory.mktemp(f"harness-{isa}")
            first = run_job(job(CONV, isa, REPO, root / "a"))
            second = run_job(job(CONV, isa, REPO, root / "a-much-longer-cache-folder-name"))
            assert first.ok, first.error
            made[isa] = first, second, root / "a"
        return made[isa]

    return build


@pytest.mark.slow
@pytest.mark.parametrize("isa", ISAS)
def test_three_reps_cost_three_times_one(built_twice, isa):
    first, _, cache = built_twice(isa)
    binary = BuildCache(cache).lookup_build(first.content_hash) / "harness"
    sim = QemuSimulator(cache)
    one = sim.run(binary, BUILTIN[isa], ["1", "1"], 300)
    three = sim.run(binary, BUILTIN[isa], ["3", "1"], 300).stats
    for field in ("insts", "loads", "stores", "branches", "l1d_accesses"):
        a, b = getattr(one.stats, field), getattr(three, field)
        assert a > 0
        assert abs(b - 3 * a) <= 0.005 * 3 * a, (field, a, b)
    # Start-up and input set-up are excluded: the ROI is a small share of the whole program.
    assert one.stats.insts < one.total_insts


@pytest.mark.slow
@pytest.mark.parametrize("isa", ISAS)
def test_identical_inputs_give_byte_identical_stats(built_twice, isa):
    # Two independent caches: the kernel is built twice and simulated twice from scratch.
    first, second, _ = built_twice(isa)
    assert first.ok and second.ok
    assert first.rebuilt and second.rebuilt and first.resimulated and second.resimulated
    assert first.binary_hash == second.binary_hash
    assert json.dumps(first.stats.to_record(), sort_keys=True) == json.dumps(second.stats.to_record(), sort_keys=True)


def _symbols(path) -> dict[str, int]:
    out = subprocess.run(["llvm-nm-19", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    return {name: int(addr, 16) for addr, kind, name in (line.split() for line in out.splitlines()) if kind in "Tt"}


@pytest.mark.slow
def test_a_code_offset_moves_the_kernels_code_and_nothing_it_counts(built_twice):
    """Job.code_offset links padding before the kernel object: every code symbol of the kernel
    lands that many bytes further on, the harness's stay, and the counts are the same code's."""
    first, _, cache = built_twice("x86_64")
    shifted = run_job(
        Job(CONV, BUILTIN["x86_64"], REPO, cache, "qemu", 300, 1, 1, warm_pipeline=False, code_offset=192)
    )
    assert shifted.ok, shifted.error
    assert shifted.content_hash != first.content_hash and shifted.binary_hash != first.binary_hash
    build = {r.content_hash: BuildCache(cache).lookup_build(r.content_hash) for r in (first, shifted)}
    kernel = _symbols(build[first.content_hash] / "kernel.o")
    at, moved = (_symbols(build[r.content_hash] / "harness") for r in (first, shifted))
    assert kernel and all(moved[name] - at[name] == 192 for name in kernel), {n: moved[n] - at[n] for n in kernel}
    assert moved["perfguard_roi_begin"] == at["perfguard_roi_begin"]
    assert shifted.stats.insts == first.stats.insts and shifted.stats.loads == first.stats.loads

    # per function the same instructions ran (the blocks themselves may differ: QEMU ends blocks at
    # page ends, which now fall elsewhere in the kernel's code, and cuts long straight runs from there)
    def executed(stats) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in stats.blocks.blocks:
            out[b.symbol] = out.get(b.symbol, 0) + b.insns * b.count
        return out

    assert set(kernel) & set(executed(first.stats)) and executed(shifted.stats) == executed(first.stats)


@pytest.mark.slow
def test_reps_are_normalised_per_call(built_twice):
    one, _, cache = built_twice("aarch64")
    three = run_job(job(CONV, "aarch64", REPO, cache, reps=3))
    assert three.ok and not three.rebuilt
    assert abs(three.stats.insts - one.stats.insts) <= 0.005 * one.stats.insts


def test_input_generator_matches_known_values():
    spec = TensorSpec("A", (4,), "float32", False, 0)
    values = generate(spec)

    # Independent re-derivation of the counter-based hash for element 0 and 3.
    def lowbias(x):
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    for i in (0, 3):
        h = lowbias((i * 0x9E3779B1 + spec.seed) & 0xFFFFFFFF)
        assert values[i] == np.float32((h >> 8) * (2.0 / 16777216.0) - 1.0)
    assert values.dtype == np.float32 and np.all(np.abs(values) <= 1.0)
    assert len(set(values.tolist())) == 4


@pytest.mark.slow
def test_wrong_kernel_is_an_error_not_a_score(tmp_path):
    # A reference that disagrees with the kernel: exit code 4 (the code under test failed), no stats,
    # and where: the worst element, its value, the reference's and the tolerance there.
    mod = tmp_path / "wrongref.py"
    mod.write_text("def ref(inputs, **params):\n    return [inputs[0] @ inputs[1] + 1.0]\n")
    spec = KernelSpec("g", "perfguard.kernels.gemm:gemm", None, {"M": 16, "N": 16, "K": 16}, reference="wrongref:ref")
    result = run_job(job(spec, "riscv64", tmp_path, tmp_path / "cache"))
    assert not result.ok and result.exit_code == 4
    assert "wrong result" in result.error and result.stats is None
    m = result.mismatch
    assert m["output"] == "C" and len(m["index"]) == 2 and m["elements_off"] == m["elements"] == 256
    assert m["expected"] - m["value"] == pytest.approx(1.0) and 0 < m["tolerance"] < 1e-3


@pytest.mark.parametrize("isa", ["x86_64", "aarch64"])
def test_a_link_failure_names_the_linkers_first_error_not_collect2s_summary(tmp_path, isa):
    import shutil
    import subprocess

    from perfguard.compile.toolchain import link_error

    cc = BUILTIN[isa].cc
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed")
    source = tmp_path / "k.c"
    source.write_text(
        "float perfguard_missing_helper(float);\nint main(void) { return (int)perfguard_missing_helper(1); }\n"
    )
    proc = subprocess.run(
        [cc, "-static", "-no-pie", str(source), "-o", str(tmp_path / "k")], capture_output=True, text=True
    )
    assert proc.returncode != 0 and proc.stderr.rstrip().endswith("collect2: error: ld returned 1 exit status")
    line = link_error(proc.stderr)
    assert line.endswith("undefined reference to `perfguard_missing_helper'"), line
    assert link_error("") == ""
