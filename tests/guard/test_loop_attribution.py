"""Attribution names the TIR loop of each changed block (guard.attribution.LoopNamer): on real
builds simulated under QEMU, through `perfguard check` to every output, and with baselines that
carry no loop nest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfguard.compile.loops import Loop, LoopNest
from perfguard.config import KernelSpec
from perfguard.guard.attribution import LoopNamer
from perfguard.guard.baselines import Baseline, parse_baseline
from perfguard.pipeline import Job, run_job
from perfguard.sim.blocks import Block, BlockProfile
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN


def _stats(*blocks: Block) -> Stats:
    return Stats(insts=sum(b.insns * b.count for b in blocks), l1d_misses=0, l1i_misses=0, l2_misses=0,
                 blocks=BlockProfile.merged(list(blocks)))


NEST = LoopNest((Loop("i", 8, "serial", None), Loop("k", 16, "serial", 0), Loop("j", 16, "serial", None)),
                ("main_compute_",)).to_dict()


def test_only_the_kernels_blocks_are_named_and_two_fitting_loops_are_candidates_not_an_answer():
    body = Block(0x401000, 4, 1, 128, "90909090", "main_compute_")
    libc = Block(0x402000, 4, 1, 128, "90909090", "memset")  # the same count in the C library: not the kernel's
    outer = Block(0x401010, 4, 1, 8, "90909090", "main_compute_")
    namer = LoopNamer(NEST, _stats(body, libc, outer), "this run")
    loop, candidates = namer.name("main_compute_", 128)
    assert loop is not None and loop.var == "k" and candidates == []
    assert [(s.var, s.extent) for s in loop.path] == [("i", 8), ("k", 16)] and loop.trips == 128
    assert namer.name("memset", 128) == (None, [])
    ambiguous = LoopNest((Loop("a", 16, "serial", None), Loop("b", 16, "serial", None)), ("f",)).to_dict()
    sixteen = Block(0x401000, 4, 1, 16, "90909090", "f")
    loop, candidates = LoopNamer(ambiguous, _stats(sixteen), "this run").name("f", 16)
    assert loop is None and [c.var for c in candidates] == ["a", "b"]
    assert LoopNamer(None, _stats(body), "the baseline").name("main_compute_", 128) == (None, [])


def test_a_baseline_written_before_loop_nests_reads_without_one(tmp_path):
    stats = _stats(Block(0x401000, 4, 1, 128, "90909090", "main_compute_"))
    new = Baseline("k", "x86_64", "gemm", {}, "qemu", "ab" * 32, stats, 1e-3, "pipeline-v2-x", None, "now",
                   loops=NEST)
    assert parse_baseline(new.to_json(), "k.json").loops == NEST
    old = json.loads(new.to_json())
    del old["loops"]
    old["schema"] = 2
    assert parse_baseline(json.dumps(old), "k.json").loops is None


# -- real builds, real simulations --------------------------------------------------------------

def _need(profile) -> None:
    missing = [p for p in (profile.cc, profile.qemu, "llvm-mca-19", "llvm-mc-19") if shutil.which(p) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}")


def _hottest(result, most: int = 4) -> list[tuple[Block, object, list]]:
    """The kernel blocks that ran the most instructions, each with its loop and candidates."""
    namer = LoopNamer(result.loops, result.stats, result.kernel)
    kernel = sorted((b for b in result.stats.blocks.blocks if namer.in_kernel(b.symbol)),
                    key=lambda b: (-b.insns * b.count, b.addr))
    return [(b, *namer.name(b.symbol, b.count)) for b in kernel[:most]]


def _gemm(target: str, cache_dir: Path, tile_k: int):
    profile = BUILTIN[target]
    _need(profile)
    spec = KernelSpec(f"gemm_k{tile_k}", "perfguard.kernels.gemm:gemm", "gemm",
                      dict(M=64, N=64, K=256, tile_m=16, tile_n=32, tile_k=tile_k, vector=8, unroll=0))
    result = run_job(Job(spec, profile, Path.cwd(), cache_dir, "qemu", 600, 1, 1))
    assert result.ok, result.error
    return result


@pytest.mark.slow
@pytest.mark.parametrize("target", ["x86_64", "aarch64"])
def test_the_hottest_gemm_blocks_are_named_by_the_k_loop_and_a_tile_k_edit_moves_them(target, cache_dir):
    # tile_k = 64: the k_1 loop (64 iterations, the 4 column chunks j_1_0 unrolled into it by LLVM)
    # runs the products; LLVM peels its first iteration (and on x86_64 unrolls it by 2)
    hot = _hottest(_gemm(target, cache_dir, 64))
    named = [(b, loop) for b, loop, _ in hot if loop is not None]
    assert len(named) >= 3, hot
    for block, loop in named:
        assert loop.var == "k_1" and loop.trips == block.count, (block, loop)
        assert [(s.var, s.extent) for s in loop.path] == [("i_0", 4), ("j_0", 2), ("k_0", 4), ("i_1", 16), ("k_1", 64)]
        assert loop.unrolled == ["j_1_0"] and loop.peeled == 1
        assert block.count == 4 * 2 * 16 * ((64 - 1) // loop.per_execution)  # per copy of k_0 (LLVM unrolled it)
    # tile_k = 16: LLVM unrolls the 16 k_1 iterations completely: the hot blocks are i_1's, k_1 inside
    hot = _hottest(_gemm(target, cache_dir, 16))
    assert all(loop is not None and loop.var == "i_1" and loop.unrolled == ["k_1"] for _, loop, _ in hot), hot


CHECK_TOML = """
[perfguard]
targets = ["x86_64"]
threshold = 0.0

[[kernel]]
name = "gemm_t"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = { M = 64, N = 64, K = 256, tile_m = 16, tile_n = 32, tile_k = 64, vector = 8, unroll = 0 }
"""


def _named(blocks: list[dict], side: str) -> set[str]:
    return {b[side]["loop"]["var"] for b in blocks if b[side] and "loop" in b[side]}


@pytest.mark.slow
def test_check_names_both_sides_loops_in_every_output_and_an_old_baseline_names_none(project, capsys):
    import jsonschema

    from perfguard.cli import main
    from tests.conftest import REPO

    _need(BUILTIN["x86_64"])
    config = project(CHECK_TOML)
    assert main(["baseline", "update", "--config", str(config)]) == 0
    baseline_file = config.parent / "baselines" / "x86_64" / "gemm_t.json"
    stored = json.loads(baseline_file.read_text())
    assert stored["schema"] == 3 and any(loop["var"] == "k_1" for loop in stored["loops"]["loops"])

    config.write_text(config.read_text().replace("tile_k = 64", "tile_k = 16"))
    capsys.readouterr()
    # the pipeline model predicts the k-tile of 16 faster (-16 % on LLVM 19's znver4 model): exit 0. What this
    # test checks is the loop naming; natively the edit measured +7 % (CPU time, a loaded Zen 1 host, issue 28)
    assert main(["check", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    reports = config.parent / "reports"
    data = json.loads((reports / "perfguard.json").read_text())
    jsonschema.validate(data, json.loads((REPO / "docs" / "report.schema.json").read_text()),
                        cls=jsonschema.Draft202012Validator)
    result = data["results"][0]
    assert result["verdict"] == "improvement" and result["delta_pct"] < -10.0 and result["blocks"]
    # and the blocks listed moved the same way in all
    assert sum(b["delta_cycles"] for b in result["blocks"]) < 0
    # the products ran in k_1 (tile_k 64) and now in i_1, with k_1 unrolled into it by LLVM
    assert "k_1" in _named(result["blocks"], "baseline") and "i_1" in _named(result["blocks"], "current")
    assert "where gemm_t[x86_64]:" in out and " in loop " in out
    assert "in loop " in (reports / "summary.md").read_text()
    page = next((reports / "kernels").glob("gemm_t*.html")).read_text()
    assert "in loop i_1 (i_0[4] &gt; j_0[2" in page

    # a baseline written before loop nests were kept: the current side is named, the baseline's is not
    del stored["loops"]
    stored["schema"] = 2
    baseline_file.write_text(json.dumps(stored))
    assert main(["check", "--config", str(config)]) == 0
    older = json.loads((reports / "perfguard.json").read_text())["results"][0]
    assert (older["verdict"], older["delta_pct"]) == (result["verdict"], result["delta_pct"])  # loops do not time
    result = older
    assert result["blocks"] and _named(result["blocks"], "baseline") == set()
    assert "i_1" in _named(result["blocks"], "current")


@pytest.mark.slow
def test_init_and_product_loops_of_one_count_are_ambiguous_until_the_debug_information_tells_them_apart(cache_dir):
    profile = BUILTIN["x86_64"]
    _need(profile)
    if shutil.which("llvm-dwarfdump-19") is None:
        pytest.skip("llvm-dwarfdump-19 not installed")
    spec = KernelSpec("gemm_init", "perfguard.kernels.gemm:gemm", "gemm",
                      dict(M=512, N=64, K=128, tile_m=16, tile_n=64, tile_k=32, vector=8, unroll=16))
    result = run_job(Job(spec, profile, Path.cwd(), cache_dir, "qemu", 600, 1, 1))
    assert result.ok, result.error
    namer = LoopNamer(result.loops, result.stats, result.kernel)
    # i_1_init (zeroing C) and i_1 (the products) both run 32 x 16 times per call (each peeled)
    both = [b for b in result.stats.blocks.blocks if namer.in_kernel(b.symbol)
            and len(namer.layout.matches(b.count)) == 2]
    assert both
    for b in both:
        loop, candidates = namer.name(b.symbol, b.count)  # by the count alone: no answer, two candidates
        assert loop is None and sorted(c.var for c in candidates) == ["i_1", "i_1_init"]
        loop, candidates = namer.name(b.symbol, b.count, b.addr, b.end)  # the DWARF places i_1 there
        assert loop is not None and loop.located and candidates == []
        assert loop.var == "i_1", (hex(b.addr), b.count, loop)
