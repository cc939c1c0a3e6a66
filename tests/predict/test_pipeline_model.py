"""The pipeline timing model on real parts: guests cross-compiled and simulated under QEMU with
perfguard's plugin, blocks disassembled by llvm-mc and scheduled by llvm-mca, TVM kernels built
by perfguard. No timing: every assertion is on predicted cycles or on errors."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from perfguard.compile.loops import LOOPS_VERSION
from perfguard.errors import InfraError, InputError
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.select import predictor_for
from perfguard.sim.blocks import Block
from perfguard.sim.mca import LLVM_MC, LLVM_MCA, McaTarget, block_timings
from perfguard.sim.qemu import QemuSimulator
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN
from tests import captured
from tests.predict.test_pipeline_against_mca import mca_cycles

pytestmark = pytest.mark.skipif(
    shutil.which(LLVM_MCA) is None or shutil.which(LLVM_MC) is None,
    reason="llvm-19 (llvm-mca-19, llvm-mc-19) not installed",
)

# The same 4 additions and 4 loads per iteration; "chain" adds into one accumulator (each add
# waits for the previous one: 4 x the add latency per iteration), "split" into four
# independent ones (limited by throughput). Without -ffast-math the compiler keeps the order.
REDUCTION_C = r"""
#include <stdio.h>
#include <string.h>
__attribute__((noinline)) void perfguard_roi_begin(void) { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void perfguard_roi_end(void) { asm volatile("" ::: "memory"); }
#define N 4096
static double a[N];
__attribute__((noinline, noipa)) double chain(const double *x, long n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (long i = 0; i < n; i += 4) {
        s0 += x[i]; s0 += x[i + 1]; s0 += x[i + 2]; s0 += x[i + 3];
    }
    return s0 + s1 + s2 + s3;
}
__attribute__((noinline, noipa)) double split(const double *x, long n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (long i = 0; i < n; i += 4) {
        s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3];
    }
    return s0 + s1 + s2 + s3;
}
int main(int argc, char **argv)
{
    for (long i = 0; i < N; i++) a[i] = (double)(i % 7);
    int use_chain = argc > 1 && !strcmp(argv[1], "chain");
    perfguard_roi_begin();
    double s = use_chain ? chain(a, N) : split(a, N);
    perfguard_roi_end();
    printf("%.1f\n", s);
    return 0;
}
"""


def _need(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}")


# x86_64 only: there gcc emits the same loop shape for both (on aarch64 it pairs the independent
# loads into ldp, so the counts differ and the comparison would not isolate the dependency chain).
@pytest.mark.slow
@pytest.mark.parametrize("target_name", ["x86_64"])
def test_single_accumulator_chain_costs_more_cycles_than_independent_accumulators(tmp_path, target_name):
    target = BUILTIN[target_name]
    _need(target.cc, target.qemu, "cc")
    src = tmp_path / "reduce.c"
    src.write_text(REDUCTION_C)
    binary = tmp_path / "reduce"
    subprocess.run(
        [target.cc, "-O2", "-fno-tree-vectorize", "-static", "-no-pie", "-o", str(binary), str(src)],
        check=True,
        capture_output=True,
    )
    sim = QemuSimulator(tmp_path / "cache")
    chain = sim.run(binary, target, ["chain"], 120).stats
    split = sim.run(binary, target, ["split"], 120).stats
    # the statistics cannot tell them apart (the loops are equal; the epilogues differ by a few) ...
    for name in ("insts", "loads", "stores", "fp_insts", "branches", "l1d_misses"):
        assert abs(getattr(chain, name) - getattr(split, name)) <= 0.002 * getattr(chain, name) + 1, name
    # ... the pipeline model can: 4 dependent adds per iteration against 4 independent ones
    model = PipelineModel(target, tmp_path / "cache")
    slow, fast = model.cycles(chain), model.cycles(split)
    assert slow > 2.0 * fast, (slow, fast)
    hot = max(model.block_costs(chain), key=lambda c: c.cycles)
    assert hot.block.symbol == "chain" and hot.timing.bound == "latency"


@pytest.mark.slow  # llvm-mca schedules every block
@pytest.mark.parametrize("family", ["dense_relu", "gemv"])
def test_scalar_code_is_predicted_at_least_3x_slower_than_8_wide_vectors(family, cache_dir):
    # dense_relu 8x256x128 and gemv 256x256 on x86_64, vector 8 and 1, built and simulated for real
    # (tests/captured/); the pipeline model schedules their blocks with llvm-mca here
    profile = BUILTIN["x86_64"]
    _need("llvm-mca-19", "llvm-mc-19")
    times = {}
    for vector in (8, 1):
        result = captured.job(f"{family}_v{vector}-x86_64")
        assert result.stats.blocks.insts == result.stats.insts
        times[vector] = float(PipelineModel(profile, cache_dir).predict_stats([result.stats])[0])
    assert times[1] >= 3.0 * times[8], times


def _mca_target() -> McaTarget:
    p = BUILTIN["x86_64"]
    return McaTarget(p.triple, p.pipeline_cpu, p.mattr)


def test_block_timings_are_cached_so_a_warm_run_starts_no_llvm_tool(tmp_path, monkeypatch):
    import perfguard.sim.mca as mca

    mca._KNOWN.clear()  # what earlier tests in this process scheduled: this one must write its own cache files
    block = Block(0x401000, 9, 3, 5, "4801c84883e90175f7", "loop")  # add %rcx,%rax; sub $1,%rcx; jne
    first = block_timings([block], _mca_target(), tmp_path)
    assert first[0].asm == ("addq %rcx, %rax", "subq $1, %rcx", "jne -9")
    assert first[0].cycles == mca_cycles(list(first[0].asm), "x86_64")  # llvm-mca's own, run directly
    mca._VERSIONS.clear()  # a new process: the version comes from the on-disk memo
    mca._KNOWN.clear()  # and the timings from the cache files

    def no_tools(*args, **kwargs):
        raise AssertionError(f"an LLVM tool was started: {args[0]}")

    monkeypatch.setattr(mca.subprocess, "run", no_tools)
    assert block_timings([block], _mca_target(), tmp_path) == first


def test_missing_llvm_mca_is_an_infrastructure_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InfraError, match=f"{LLVM_MCA}.*llvm-19"):
        PipelineModel(BUILTIN["x86_64"], tmp_path / "cache")
    with pytest.raises(InfraError, match=LLVM_MCA):
        predictor_for(BUILTIN["x86_64"], "gemm", "qemu", tmp_path / "no-models", None, tmp_path / "cache")


def test_a_block_llvm_mc_cannot_decode_is_named(tmp_path):
    bad = Block(0x402000, 4, 1, 1, "ffffffff", "kernel")
    with pytest.raises(InfraError, match=rf"{LLVM_MC} cannot disassemble block 0x402000-0x402004"):
        block_timings([Block(0x401000, 9, 3, 5, "4801c84883e90175f7", "loop"), bad], _mca_target(), tmp_path)


def test_a_block_llvm_mca_fails_on_is_named(tmp_path, monkeypatch):
    # an llvm-mca that answers --version but fails on any input: the error names the tool and the block
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / LLVM_MCA
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'LLVM version 19.0.0-fake'; exit 0; }\n"
        "echo 'error: unsupported instruction' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    (tools / LLVM_MC).symlink_to(shutil.which(LLVM_MC))
    monkeypatch.setenv("PATH", str(tools))
    with pytest.raises(
        InfraError, match=rf"{LLVM_MCA} cannot schedule block 0x401000-0x401009 .*unsupported instruction"
    ):
        block_timings([Block(0x401000, 9, 3, 5, "4801c84883e90175f7", "loop")], _mca_target(), tmp_path / "cache")


def test_statistics_without_a_block_profile_are_refused_not_guessed(tmp_path):
    model = PipelineModel(BUILTIN["x86_64"], tmp_path)
    with pytest.raises(InputError, match="no block profile"):
        model.predict_stats([Stats(insts=100, l1d_misses=0, l1i_misses=0, l2_misses=0)])
    with pytest.raises(InputError, match="needs a block profile"):
        predictor_for(BUILTIN["x86_64"], "gemm", "cachegrind", None, None, tmp_path, model="pipeline")


ATTRIBUTION_TOML = """
[perfguard]
targets = ["x86_64"]
threshold = 5.0

[[kernel]]
name = "gemv_s"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = { M = 128, K = 256, vector = 8 }
"""


@pytest.mark.slow
def test_check_uses_the_pipeline_model_attributes_blocks_and_notes_old_baselines(project, capsys):
    import json

    import jsonschema

    from perfguard.shells.cli import main

    config = project(ATTRIBUTION_TOML)
    assert main(["baseline", "update", "--config", str(config)]) == 0
    baseline_file = config.parent / "baselines" / "x86_64" / "gemv_s.json"
    stored = json.loads(baseline_file.read_text())
    assert stored["schema"] == 5 and stored["loops"]["version"] == LOOPS_VERSION and stored["loops"]["loops"]
    assert stored["model_id"].startswith("pipeline-")
    profile = Stats.from_dict(stored["stats"], "baseline").blocks
    assert profile is not None and profile.insts == stored["stats"]["insts"]

    config.write_text(config.read_text().replace("vector = 8", "vector = 1"))
    capsys.readouterr()
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    data = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "report.schema.json").read_text())
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    result = data["results"][0]
    assert result["verdict"] == "regression" and result["model_id"].startswith("pipeline-")
    assert result["delta_pct"] > 100.0 and result["note"] is None
    top = result["blocks"][0]
    assert top["delta_cycles"] > 0 and top["current"]["asm"] and top["current"]["executions"] > 0
    assert top["current"]["symbol"] and top["current"]["bound"]
    assert sum(b["delta_cycles"] for b in result["blocks"]) > 0
    # where: the place of the differential view whose changed code moved most (a loop of gemv's nest)
    from perfguard.document.codec import from_json
    from perfguard.document.result import Result
    from perfguard.report.text import what_changed_most

    line = what_changed_most(from_json(Result, result, "perfguard.json"))
    assert line.startswith("loop ") and " of nest y.rf, y in " in line
    assert f"where gemv_s[x86_64]: {line}" in " ".join(out.split())
    assert result["attribution"]["code_cycles"] > 0
    summary = (config.parent / "reports" / "summary.md").read_text()
    assert "where the cycles moved" in summary and top["current"]["asm"][0].split()[0] in summary
    page = next((config.parent / "reports" / "kernels").glob("gemv_s*.html")).read_text()
    assert "Changed blocks, baseline and current" in page and '<svg class="flame"' in page
    assert page.count('<table class="blocks">') == len(result["blocks"])

    # --model analytical: the old count-weighted model judges both sides, and no job schedules
    # blocks with llvm-mca for a model that does not read them
    from dataclasses import replace

    from perfguard.config import load_config
    from perfguard.runs.check import make_jobs, select

    capsys.readouterr()
    # the count-weighted model sees the scalar code too (+131 %)
    assert main(["check", "--config", str(config), "--model", "analytical"]) == 1
    analytical = result = json.loads((config.parent / "reports" / "perfguard.json").read_text())["results"][0]
    assert result["verdict"] == "regression" and result["delta_pct"] > 100.0
    assert result["model_id"].startswith("analytical-") and result["blocks"] is None
    loaded = load_config(config)
    assert all(job.warm_pipeline for job in make_jobs(loaded, select(loaded, None, None)))
    by_analytical = replace(loaded, judging=replace(loaded.judging, model="analytical"))
    assert not any(job.warm_pipeline for job in make_jobs(by_analytical, select(loaded, None, None)))

    # a baseline recorded before block profiles: compared under the analytical model, and said so
    del stored["stats"]["blocks"]
    stored["schema"] = 1
    baseline_file.write_text(json.dumps(stored))
    capsys.readouterr()
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    result = json.loads((config.parent / "reports" / "perfguard.json").read_text())["results"][0]
    assert result["model_id"].startswith("analytical-") and "no block profile" in result["note"]
    # the same statistics under the same model as --model analytical above: the same verdict, to the bit
    assert (result["verdict"], result["delta_pct"], result["model_id"]) == (
        analytical["verdict"],
        analytical["delta_pct"],
        analytical["model_id"],
    )
    assert result["blocks"] is None
    assert "no block profile" in out
    assert "no block profile" in (config.parent / "reports" / "summary.md").read_text()
    page = next((config.parent / "reports" / "kernels").glob("gemv_s*.html")).read_text()
    assert "no block profile" in page


def test_an_x86_instruction_cut_at_a_page_end_is_left_out_only_there(tmp_path):
    # QEMU gives the last instruction (a vmovups running over the page end) only its first 4 bytes
    cut = "4801c84883e901c5fc1081"
    at_page_end = Block(0x402FF4, 11, 3, 2, cut, "kernel")
    timing = block_timings([at_page_end], _mca_target(), tmp_path)[0]
    assert timing.asm == ("addq %rcx, %rax", "subq $1, %rcx")
    elsewhere = Block(0x402F00, 11, 3, 2, cut, "kernel")
    with pytest.raises(InfraError, match=rf"{LLVM_MC} cannot disassemble block 0x402f00-0x402f0b"):
        block_timings([elsewhere], _mca_target(), tmp_path)


def test_a_block_cut_at_a_page_end_does_not_unbatch_the_others(tmp_path, monkeypatch):
    import perfguard.sim.mca as mca

    mca._KNOWN.clear()  # what earlier tests in this process scheduled
    cut = Block(0x402FF4, 11, 3, 2, "4801c84883e901c5fc1081", "kernel")
    # six different loops (sub $1 .. sub $6): identical code would be disassembled once
    loops = [Block(0x401000 + 0x20 * i, 9, 3, 5, f"4801c84883e9{i + 1:02x}75f7", "loop") for i in range(6)]
    started = []
    real_run = mca.subprocess.run

    def counting(cmd, *args, **kwargs):
        started.append(Path(cmd[0]).name)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(mca.subprocess, "run", counting)
    timings = block_timings([loops[0], cut, *loops[1:]], _mca_target(), tmp_path)
    assert [t.asm for t in timings] == [("addq %rcx, %rax", "subq $1, %rcx", "jne -9")] + [
        ("addq %rcx, %rax", "subq $1, %rcx")
    ] + [("addq %rcx, %rax", f"subq ${i}, %rcx", "jne -9") for i in range(2, 7)]
    # one llvm-mc run for the six whole blocks, one for the cut block (not one per block)
    assert started.count(Path(mca._tool(LLVM_MC)).name) == 2


def test_many_blocks_are_scheduled_in_chunks_of_llvm_mca_runs(tmp_path, monkeypatch):
    """A dataset's thousands of blocks go to llvm-mca in chunks (one run each), so no run nears the
    tool's timeout on a loaded machine; the cycles are those of one run per block."""
    import perfguard.sim.mca as mca

    loops = [Block(0x401000 + 0x20 * i, 9, 3, 5, f"4801c84883e9{i + 1:02x}75f7", "loop") for i in range(5)]
    mca._KNOWN.clear()
    whole = block_timings(loops, _mca_target(), tmp_path / "whole")
    started = []
    real_run = mca.subprocess.run

    def counting(cmd, *args, **kwargs):
        started.append(Path(cmd[0]).name)
        return real_run(cmd, *args, **kwargs)

    mca._KNOWN.clear()
    monkeypatch.setattr(mca, "SCHEDULE_CHUNK", 2)
    monkeypatch.setattr(mca.subprocess, "run", counting)
    chunked = block_timings(loops, _mca_target(), tmp_path / "chunked")
    assert chunked == whole
    assert started.count(Path(mca._tool(LLVM_MCA)).name) == 3  # 2 + 2 + 1 blocks


def test_rep_string_blocks_cost_per_element_not_llvm_mca_flat_100_cycles(tmp_path):
    # QEMU runs `rep stosb` / `rep movsq` as one block execution per element
    stosb, movsq = Block(0x424E4A, 2, 1, 4096, "f3aa", "memset"), Block(0x425000, 3, 1, 512, "f348a5", "memcpy")
    timings = block_timings([stosb, movsq], _mca_target(), tmp_path)
    assert [t.bound for t in timings] == ["rep string", "rep string"]
    assert timings[0].cycles == pytest.approx(1 / 16) and timings[1].cycles == pytest.approx(8 / 16)


def _assemble(lines: list[str]) -> str:
    """x86_64 machine code (hex) of AT&T assembly, by llvm-mc."""
    out = subprocess.run(
        [shutil.which(LLVM_MC), "-triple=x86_64-linux-gnu", "--show-encoding"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "".join(b[2:] for enc in re.findall(r"encoding: \[([^\]]*)\]", out) for b in enc.split(","))


def _accumulate(offsets: list[int]) -> list[str]:
    # the read-modify-write of an accumulator array a TVM conv2d with a 4 KiB row spills into
    out = []
    for off in offsets:
        out += [f"vmovaps {off}(%r11), %ymm6", "vfmadd231ps %ymm5, %ymm4, %ymm6", f"vmovaps %ymm6, {off}(%r11)"]
    return out


def test_loads_that_4k_alias_an_older_store_cost_what_llvm_mca_does_not_see(tmp_path):
    from perfguard.predict.memdeps import ALIAS_PENALTY, aliased_loads
    from perfguard.sim.blocks import BlockProfile

    strided = _accumulate([0, 4096, 8192, 12288])  # each load shares its low 12 bits with the previous store
    packed = _accumulate([0, 32, 64, 96])  # the same work on neighbouring lines: no false dependency
    assert aliased_loads(strided, "x86_64-linux-gnu") == 4  # the first one aliases the previous iteration's last store
    assert aliased_loads(packed, "x86_64-linux-gnu") == 0
    assert aliased_loads(strided, "aarch64-linux-gnu") == 0  # only x86 code is analysed
    # a load of exactly what a store wrote is forwarded, and a base register the block changes is not trusted
    assert aliased_loads(["vmovaps %ymm6, 0(%r11)", "vmovaps 0(%r11), %ymm6"], "x86_64-linux-gnu") == 0
    assert (
        aliased_loads(["vmovaps %ymm6, 0(%r11)", "addq $64, %r11", "vmovaps 4096(%r11), %ymm6"], "x86_64-linux-gnu")
        == 0
    )

    model = PipelineModel(BUILTIN["x86_64"], tmp_path)
    costs = {}
    for name, asm in (("strided", strided), ("packed", packed)):
        code = _assemble(asm)
        stats = Stats(
            insts=12 * 1000,
            l1d_misses=0,
            l1i_misses=0,
            l2_misses=0,
            blocks=BlockProfile((Block(0x401000, len(code) // 2, 12, 1000, code, "k"),)),
        )
        costs[name] = model.block_costs(stats)[0]
    strided_cost, packed_cost = costs["strided"], costs["packed"]
    # llvm-mca, which assumes no aliasing, times both alike: exactly its cycles run directly on each
    assert (
        strided_cost.timing.cycles
        == mca_cycles(strided, "x86_64")
        == mca_cycles(packed, "x86_64")
        == packed_cost.timing.cycles
    )
    assert strided_cost.penalty == 4 * ALIAS_PENALTY and packed_cost.penalty == 0
    assert strided_cost.cycles == pytest.approx(1000 * (strided_cost.timing.cycles + 4 * ALIAS_PENALTY))
    assert packed_cost.bound == packed_cost.timing.bound


def test_a_dependency_chain_through_a_loop_body_of_two_blocks_counts(tmp_path):
    from perfguard.predict.pipeline import _last_insn_offset, loop_bodies
    from perfguard.sim.blocks import BlockProfile

    # xmm0 -> xmm1 in the first block, xmm1 -> xmm0 in the second, which branches back to the
    # first: alone, neither block has a loop-carried chain; as one loop, two multiplications in
    # a row per iteration
    first = _assemble(["vmulsd %xmm0, %xmm0, %xmm1"])
    second = _assemble(["vmulsd %xmm1, %xmm1, %xmm0", "decq %rcx"])
    size = (len(first) + len(second)) // 2 + 2
    second += "75" + f"{(-size) & 0xFF:02x}"  # jne back to the first block
    a, b = 0x401000, 0x401000 + len(first) // 2
    model = PipelineModel(BUILTIN["x86_64"], tmp_path)

    def cost(count_b: int) -> list:
        blocks = (Block(a, len(first) // 2, 1, 1000, first, "k"), Block(b, len(second) // 2, 3, count_b, second, "k"))
        insts = 1000 + 3 * count_b
        stats = Stats(insts=insts, l1d_misses=0, l1i_misses=0, l2_misses=0, blocks=BlockProfile(blocks))
        return model.block_costs(stats)

    loop = cost(1000)
    assert loop[1].timing.asm[-1] == f"jne -{size}"
    assert loop_bodies(loop, "x86_64-linux-gnu") == [[0, 1]]
    alone = sum(c.timing.cycles for c in loop)
    per_iteration = sum(c.cycles for c in loop) / 1000
    assert alone < 3.0 and per_iteration >= 6.0  # two dependent multiplications of 3+ cycles each
    assert loop[0].loop_scale == loop[1].loop_scale > 2 and loop[0].bound == "loop latency"
    # blocks that ran different numbers of times are not one straight-line body: each stays alone
    apart = cost(3000)
    assert loop_bodies(apart, "x86_64-linux-gnu") == [] and all(c.loop_scale == 1.0 for c in apart)
    # "about equally often" is within LOOP_COUNT_SPREAD = 5 %: 1050 against 1000 is one body, 1051 is not
    assert loop_bodies(cost(1050), "x86_64-linux-gnu") == [[0, 1]]
    assert loop_bodies(cost(1051), "x86_64-linux-gnu") == []
    # riscv64: a 4-byte addi and a compressed bnez; the branch starts 4 bytes in
    assert _last_insn_offset(Block(0x10000, 6, 2, 1, "130515007df5", "k"), "riscv64") == 4


def test_a_back_branch_split_off_by_a_page_end_still_closes_its_loop(tmp_path):
    """A page end can leave a loop's back branch in a block of its own, which other paths into the
    same code reach too (it runs more often than the body): the body is still one loop."""
    from perfguard.predict.pipeline import loop_bodies
    from perfguard.sim.blocks import BlockProfile

    first = _assemble(["vmulsd %xmm0, %xmm0, %xmm1"])
    second = _assemble(["vmulsd %xmm1, %xmm1, %xmm0", "decq %rcx"])
    model = PipelineModel(BUILTIN["x86_64"], tmp_path)

    def bodies(count_branch: int, c: int = 0x403000) -> list:
        """The branch's block at `c` (0x403000: the page end split it off, it starts the next page)."""
        a = c - len(first) // 2 - len(second) // 2
        b = a + len(first) // 2
        branch = "75" + f"{(a - c - 2) & 0xFF:02x}"  # jne back to the first block
        blocks = (
            Block(a, len(first) // 2, 1, 1000, first, "k"),
            Block(b, len(second) // 2, 2, 1000, second, "k"),
            Block(c, 2, 1, count_branch, branch, "k"),
        )
        stats = Stats(insts=3000 + count_branch, l1d_misses=0, l1i_misses=0, l2_misses=0, blocks=BlockProfile(blocks))
        return loop_bodies(model.block_costs(stats), "x86_64-linux-gnu")

    assert bodies(1000) == [[0, 1, 2]]
    assert bodies(1200) == [[0, 1, 2]]  # 200 more from another way in: still the loop's back branch
    assert bodies(500) == []  # a branch taken half as often as its body runs closes no loop of it
    # 16 bytes lower the branch's block starts no page: no page end split it off, so running more
    # often than the body means it is entered from outside the body
    assert bodies(1000, 0x402FF0) == [[0, 1, 2]] and bodies(1200, 0x402FF0) == []


def test_a_page_end_inside_a_loop_body_lets_the_blocks_after_it_run_more(tmp_path):
    """The page end falls between the body's first and second block: the blocks on the next page
    (the second and the back branch's) are reached by other paths too and run more often; the
    body is still one loop. Before the page end, running more means entered from outside."""
    from perfguard.predict.pipeline import loop_bodies
    from perfguard.sim.blocks import BlockProfile

    first = _assemble(["vmulsd %xmm0, %xmm0, %xmm1"])
    second = _assemble(["vmulsd %xmm1, %xmm1, %xmm0", "decq %rcx"])
    model = PipelineModel(BUILTIN["x86_64"], tmp_path)

    def bodies(counts: tuple[int, int, int], b: int = 0x403000) -> list:
        """The second block at `b` (0x403000: it starts a page), the branch's block right after it."""
        a = b - len(first) // 2
        c = b + len(second) // 2
        branch = "75" + f"{(a - c - 2) & 0xFF:02x}"  # jne back to the first block
        blocks = (
            Block(a, len(first) // 2, 1, counts[0], first, "k"),
            Block(b, len(second) // 2, 2, counts[1], second, "k"),
            Block(c, 2, 1, counts[2], branch, "k"),
        )
        stats = Stats(
            insts=counts[0] + 2 * counts[1] + counts[2],
            l1d_misses=0,
            l1i_misses=0,
            l2_misses=0,
            blocks=BlockProfile(blocks),
        )
        return loop_bodies(model.block_costs(stats), "x86_64-linux-gnu")

    assert bodies((1000, 1000, 1000)) == [[0, 1, 2]]
    assert bodies((1000, 1300, 1300)) == [[0, 1, 2]]  # 300 more entered at the page start
    assert bodies((1000, 900, 1000)) == []  # a block after the page end that ran less leaves the body early
    # 16 bytes lower no page end falls inside the body: blocks that ran more are entered from outside
    assert bodies((1000, 1000, 1000), 0x402FF0) == [[0, 1, 2]] and bodies((1000, 1300, 1300), 0x402FF0) == []


def test_l2_misses_that_fit_in_the_l3_cost_its_latency_the_rest_memory(tmp_path):
    """The simulators stop at the L2; a profile's l3_size says how many missed lines a call can
    find in a last-level cache (its L2-miss traffic bounds what it touches), charged at the L3
    latency, the rest at the memory latency; a profile without an L3 charges memory for all."""
    from dataclasses import replace

    x86 = BUILTIN["x86_64"]
    cost = x86.cost
    assert x86.l3_size == 32 << 20 and cost.l3_latency > cost.l2_latency
    model = PipelineModel(x86, tmp_path)
    lines = x86.l3_size // x86.l2.line

    def stalls(profile, l1, l2):
        return PipelineModel(profile, tmp_path).stall_cycles(Stats(insts=1, l1d_misses=l1, l1i_misses=0, l2_misses=l2))

    # a 4 MiB stream: every line missed in L1 and L2, all of them in the L3
    assert stalls(x86, 65536, 65536) == pytest.approx(65536 * cost.l3_latency / x86.mlp)
    # more missed lines than the L3 holds: the excess from memory
    assert stalls(x86, lines + 1000, lines + 1000) == pytest.approx(
        (lines * cost.l3_latency + 1000 * cost.mem_latency) / x86.mlp
    )
    # L1 misses that hit the L2 are unchanged
    assert stalls(x86, 5000, 0) == pytest.approx(5000 * cost.l2_latency / x86.mlp)
    no_l3 = replace(x86, l3_size=0)
    assert stalls(no_l3, 65536, 65536) == pytest.approx(65536 * cost.mem_latency / x86.mlp)
    assert BUILTIN["aarch64"].l3_size == 0  # a Cortex-A72 system with no L3
    # the L3 is part of the model's identity (stored baselines re-score under the new id), not of
    # the profile's fingerprint (no statistic changes)
    assert PipelineModel(no_l3, tmp_path).model_id != model.model_id
    assert no_l3.fingerprint() == x86.fingerprint()


def test_the_model_id_follows_the_logic_of_its_code_not_its_prose(tmp_path, monkeypatch):
    # The id carries a digest of the code that turns a profile into a time (issue 26: a change to
    # the loop rule or the L3 term kept the old id, so stored intervals and calibrated models made
    # for the old arithmetic were used with the new). Written on copies of a module in a temporary
    # package folder, as the digest reads them.
    from perfguard import fingerprints

    source = (fingerprints.PACKAGE_DIR / "predict/memdeps.py").read_text()
    assert "ALIAS_PENALTY = " in source

    def digest_of(text: str) -> str:
        (tmp_path / "predict").mkdir(exist_ok=True)
        (tmp_path / "predict/memdeps.py").write_text(text)
        monkeypatch.setattr(fingerprints, "PACKAGE_DIR", tmp_path)
        fingerprints.logic_digest.cache_clear()
        try:
            return fingerprints.logic_digest("predict/memdeps.py")
        finally:
            fingerprints.logic_digest.cache_clear()

    original = digest_of(source)
    prose = source.replace('"""', '"""An edited docstring. ', 1).replace("\n", "  # a comment\n", 3)
    layout = source.replace("ALIAS_PENALTY = ", "ALIAS_PENALTY  =  ")
    assert digest_of(prose) == original
    assert digest_of(layout) == original
    value = source.split("ALIAS_PENALTY = ", 1)[1].split("\n", 1)[0].split("#")[0].strip()
    logic = source.replace(f"ALIAS_PENALTY = {value}", f"ALIAS_PENALTY = {value} + 1", 1)
    assert digest_of(logic) != original
    monkeypatch.undo()
    fingerprints.logic_digest.cache_clear()
    # and the model's id is made from that digest of its own modules
    import perfguard.predict.pipeline as pipeline

    assert set(pipeline.MODEL_CODE) >= {"predict/pipeline.py", "predict/memdeps.py", "sim/mca.py"}
    before = PipelineModel(BUILTIN["x86_64"], tmp_path / "cache").model_id
    monkeypatch.setattr(pipeline, "logic_digest", lambda *modules: "another arithmetic")
    assert PipelineModel(BUILTIN["x86_64"], tmp_path / "cache").model_id != before
