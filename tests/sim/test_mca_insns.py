"""llvm-mca's cycles per instruction (perfguard.sim.mca_insns), on real llvm-mca-19 output: each
instruction's latency, reciprocal throughput and micro-ops from the instruction-info view of the
CPU the pipeline model schedules for, one row per line, cached; a block llvm-mca cannot read gets
none while the others keep theirs."""

from __future__ import annotations

import json

import pytest

from perfguard.sim.mca import McaTarget
from perfguard.sim.mca_insns import InsnCost, instruction_costs, parse_instruction_info

ZEN4 = McaTarget("x86_64-linux-gnu", "znver4", "")
A72 = McaTarget("aarch64-linux-gnu", "cortex-a72", "+neon")
LOOP = ["vmovups (%rdi), %ymm0", "vfmadd231ps (%rsi), %ymm0, %ymm1", "addq $32, %rdi", "cmpq %rdx, %rdi", "jne -22"]


def test_each_instruction_gets_its_latency_and_throughput_on_the_models_cpu(tmp_path):
    (costs,) = instruction_costs([LOOP], ZEN4, tmp_path)
    # Zen 4's scheduling model in LLVM 19: a 256-bit load 8 cycles, an FMA with a folded load 11
    assert costs == [
        InsnCost(1, 8, 0.5),
        InsnCost(1, 11, 0.5),
        InsnCost(1, 1, 0.25),
        InsnCost(1, 1, 0.25),
        InsnCost(1, 1, 0.5),
    ]
    # the same block on another CPU is another answer (and another cache entry)
    (skylake,) = instruction_costs([LOOP], McaTarget("x86_64-linux-gnu", "skylake", ""), tmp_path)
    assert skylake[:2] == [InsnCost(1, 7, 0.5), InsnCost(2, 11, 0.5)]  # a 7-cycle load; the FMA two micro-ops
    (arm,) = instruction_costs(
        [["ldr q0, [x0], #16", "fmla v1.4s, v0.4s, v2.4s", "subs x2, x2, #1", "b.ne #-12"]], A72, tmp_path
    )
    assert [c.latency for c in arm] == [5, 10, 1, 1]  # Cortex-A72: a post-indexed q load 5, fmla 10 (its model)


def test_costs_are_cached_and_a_block_llvm_mca_cannot_read_gets_none(tmp_path):
    got = instruction_costs([LOOP, ["not an instruction %zz"], ["ret"]], ZEN4, tmp_path)
    assert got[0] is not None and len(got[0]) == 5 and got[1] is None and got[2] == [InsnCost(1, 5, 0.5)]
    cached = sorted((tmp_path / "mca-insns").glob("*.json"))
    assert len(cached) == 2  # the two it could read
    for path in cached:
        path.write_text(json.dumps([[9, 99, 9.5]] * len(json.loads(path.read_text()))))
    again = instruction_costs([LOOP, ["ret"]], ZEN4, tmp_path)
    assert again[0][0] == InsnCost(9, 99, 9.5) and again[1] == [InsnCost(9, 99, 9.5)]  # read back, not re-run
    assert instruction_costs([[]], ZEN4, tmp_path) == [[]]


def test_the_instruction_info_view_is_read_row_by_row():
    view = """
Instruction Info:
[1]: #uOps
[2]: Latency
[3]: RThroughput
[4]: MayLoad
[5]: MayStore
[6]: HasSideEffects (U)

[1]    [2]    [3]    [4]    [5]    [6]    Instructions:
 2      12    1.00    *      *            vaddps\t(%rdi), %ymm0, %ymm0
 1      1     0.33                        incq\t%rax

"""
    assert parse_instruction_info(view) == [InsnCost(2, 12, 1.0), InsnCost(1, 1, 0.33)]
    with pytest.raises(ValueError, match="no Instruction Info"):
        parse_instruction_info("Iterations: 1\n")
