"""The pipeline model's cycles are llvm-mca's own: the hottest blocks of a committed baseline of
each ISA, disassembled by llvm-mc and scheduled by llvm-mca run here directly (one block per run,
the profile's CPU and features, the model's iteration count), give exactly the cycles per execution
the model uses; a loop body QEMU split into several blocks is scaled by llvm-mca's cycles for the
whole body over the sum of its blocks' alone; and a block's cost is its executions times that.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from perfguard.predict.pipeline import PipelineModel, loop_bodies
from perfguard.sim.blocks import Block, BlockProfile
from perfguard.sim.mca import ITERATIONS, LLVM_MC, LLVM_MCA, McaTarget, _page_tail
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(
    shutil.which(LLVM_MCA) is None or shutil.which(LLVM_MC) is None,
    reason="llvm-19 (llvm-mca-19, llvm-mc-19) not installed",
)

HOT = 4  # blocks per ISA, by instructions executed


def cpu_flags(target: str) -> list[str]:
    profile = BUILTIN[target]
    return [f"-mcpu={profile.pipeline_cpu}"] + ([f"-mattr={profile.mattr}"] if profile.mattr else [])


def disassemble(block: Block, target: str) -> list[str]:
    text = " ".join("0x" + block.code[i : i + 2] for i in range(0, len(block.code), 2))
    out = subprocess.run(
        [LLVM_MC, "--disassemble", f"-triple={BUILTIN[target].triple}", *cpu_flags(target)],
        input=text + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [" ".join(line.split()) for line in out.splitlines() if line.strip() and not line.strip().startswith(".")]


def mca_cycles(asm: list[str], target: str) -> float:
    """llvm-mca on `asm` as a loop body: total cycles over iterations."""
    out = subprocess.run(
        [LLVM_MCA, f"-mtriple={BUILTIN[target].triple}", *cpu_flags(target), f"-iterations={ITERATIONS}"],
        input="\n".join(asm) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    iterations = int(re.search(r"^Iterations:\s+(\d+)$", out, re.M).group(1))
    total = int(re.search(r"^Total Cycles:\s+(\d+)$", out, re.M).group(1))
    assert iterations == ITERATIONS
    return total / iterations


def baseline_stats(target: str, kernel: str) -> Stats:
    data = json.loads((REPO / "baselines" / target / f"{kernel}.json").read_text())
    return Stats.from_dict(data["stats"], f"{target}/{kernel}")


@pytest.mark.parametrize(
    "target, kernel",
    [("x86_64", "gemv_1024"), ("x86_64", "gemm_256"), ("aarch64", "gemv_1024"), ("riscv64", "gemv_1024")],
)
def test_block_cycles_are_llvm_mca_run_directly_on_the_same_block(target, kernel, tmp_path):
    profile = BUILTIN[target]
    mca = McaTarget(profile.triple, profile.pipeline_cpu, profile.mattr)
    blocks = sorted(
        (b for b in baseline_stats(target, kernel).blocks.blocks if not _page_tail(b, mca)),
        key=lambda b: (-b.count * b.insns, b.addr),
    )[:HOT]
    assert len(blocks) == HOT
    hot = BlockProfile.merged(blocks)  # scheduled alone (a cold cache): a loop body split in two is the next test's
    costs = PipelineModel(profile, tmp_path).block_costs(Stats(insts=hot.insts, blocks=hot))
    for cost in costs:
        asm = disassemble(cost.block, target)
        assert list(cost.timing.asm) == asm and len(asm) == cost.block.insns
        cycles = mca_cycles(asm, target)
        assert cost.timing.cycles == cycles, (hex(cost.block.addr), asm)
        assert cost.cycles == cost.block.count * (cycles * cost.loop_scale + cost.penalty)


@pytest.mark.parametrize("target, kernel", [("x86_64", "gemv_1024")])
def test_a_loop_body_of_several_blocks_is_scaled_by_llvm_mca_on_the_whole_body(target, kernel, tmp_path):
    kernel_only = BlockProfile.merged(
        [b for b in baseline_stats(target, kernel).blocks.blocks if b.symbol.startswith("main_compute")]
    )  # not the harness's blocks
    costs = PipelineModel(BUILTIN[target], tmp_path).block_costs(Stats(insts=kernel_only.insts, blocks=kernel_only))
    bodies = loop_bodies(costs, BUILTIN[target].triple)
    assert bodies, "no loop body of several blocks in this baseline: pick another kernel"
    for body in bodies:
        blocks = [costs[j] for j in body]
        alone = [mca_cycles(disassemble(c.block, target), target) for c in blocks]
        whole = mca_cycles([line for c in blocks for line in disassemble(c.block, target)], target)
        assert [c.timing.cycles for c in blocks] == alone
        for c in blocks:  # a block in two bodies takes the larger scale
            assert c.loop_scale >= whole / sum(alone)
        assert max(c.loop_scale for c in blocks) >= whole / sum(alone)
    # where a block is in one body only, its scale is exactly that body's
    single = [j for j in range(len(costs)) if sum(j in body for body in bodies) == 1]
    assert single
    for j in single:
        body = next(body for body in bodies if j in body)
        alone = sum(costs[k].timing.cycles for k in body)
        whole = mca_cycles([line for k in body for line in disassemble(costs[k].block, target)], target)
        assert costs[j].loop_scale == whole / alone
