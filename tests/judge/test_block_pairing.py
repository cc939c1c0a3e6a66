"""Block pairing (judge.attribution.attribute's changed blocks) on hand-made block profiles: which blocks pair,
each pair's change in cycles and share of the whole change, their order and the cap.

Cycles per execution come from a table keyed by each block's bytes (`HandCycles`), so every
expected number below is worked out by hand from the profiles: executions x cycles per execution
per side, the difference, and its share of (current total - baseline total). Blocks pair by what
they are (judge.block_pairs: the same code at its address, then elsewhere, then renamed), so the
one-sided blocks below are code that no renaming of registers turns into the other's.
"""

from __future__ import annotations

import shutil

import pytest

from perfguard.document.result import BlockSide
from perfguard.judge.attribution import MAX_BLOCKS, attribute
from perfguard.predict.pipeline import BlockCost, PipelineModel
from perfguard.sim.blocks import Block, BlockProfile
from perfguard.sim.mca import LLVM_MC, LLVM_MCA, BlockTiming
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN

# x86_64 code: bytes -> (instructions as llvm-mc prints them, cycles per execution)
CODE = {
    "4801c8": (("addq %rcx, %rax",), 2.0),
    "4883e901": (("subq $1, %rcx",), 4.0),
    "4801d8": (("addq %rbx, %rax",), 1.0),
    "c3": (("retq",), 3.0),
    "9090": (("nop", "nop"), 1.0),
    "90909090": (("nop", "nop", "nop", "nop"), 2.0),
    "480fafc1": (("imulq %rcx, %rax",), 3.0),
}


class HandCycles:
    """The pipeline model's block_costs with cycles per execution from CODE (or `per_code`)."""

    name, model_id = "pipeline", "hand-cycles"
    profile = BUILTIN["x86_64"]  # pairing reads the ISA's disassembly rules from the model's profile

    def stall_cycles(self, stats: Stats) -> float:
        return 0.0  # the hand-made profiles have no cache counters

    def __init__(self, per_code: dict[str, float] | None = None):
        self.per_code = per_code or {}

    def block_costs(self, stats: Stats, what: str = "statistics") -> list[BlockCost]:
        costs = []
        for b in stats.blocks.blocks:
            asm, cycles = CODE.get(b.code, ((f"code {b.code}",), 0.0))
            costs.append(BlockCost(b, BlockTiming(self.per_code.get(b.code, cycles), "dispatch", asm)))
        return costs


def block(addr: int, code: str, count: int, insns: int | None = None) -> Block:
    return Block(addr, len(code) // 2, insns or len(CODE[code][0]), count, code, "k")


def profile(*blocks: Block) -> Stats:
    merged = BlockProfile.merged(list(blocks))
    return Stats(insts=merged.insts, blocks=merged)


def side(start: int, end: int, code: str, executions: int, cycles: float) -> BlockSide:
    asm, _ = CODE[code]
    return BlockSide(
        start=start,
        end=end,
        insns=len(asm),
        executions=executions,
        cycles_per_execution=cycles / executions,
        cycles=cycles,
        bound="dispatch",
        symbol="k",
        asm=list(asm),
    )


# baseline                                     current
# 0x1000 A 4801c8   100 x 2 = 200              130 x 2 = 260    +60
# 0x1010 B 4883e901  50 x 4 = 200               55 x 4 = 220    +20
# 0x1020 C 4801d8    20 x 1 =  20              -                -20  (baseline only)
# 0x1030 D c3         7 x 3 =  21                7 x 3 =  21      0  (unchanged: left out)
# 0x1040 E 9090      20 x 1 =  20               40 x 1 =  40
#        E 90909090   5 x 2 =  10  (QEMU split the block differently once: two blocks at one address)
#                          = 30 at 0x1040            = 40      +10
# 0x1050 F 480fafc1  -                          10 x 3 =  30    +30  (current only)
# totals                 471                       571          +100
BASELINE = profile(
    block(0x1000, "4801c8", 100),
    block(0x1010, "4883e901", 50),
    block(0x1020, "4801d8", 20),
    block(0x1030, "c3", 7),
    block(0x1040, "9090", 20),
    block(0x1040, "90909090", 5),
)
CURRENT = profile(
    block(0x1000, "4801c8", 130),
    block(0x1010, "4883e901", 55),
    block(0x1030, "c3", 7),
    block(0x1040, "9090", 40),
    block(0x1050, "480fafc1", 10),
)


def block_changes(model, baseline, current):
    """The changed blocks: code paired by what it is, code that only moved left out, largest change first."""
    return attribute(model, baseline, current).blocks


def test_pairs_shares_and_order_of_a_hand_made_change():
    changes = block_changes(HandCycles(), BASELINE, CURRENT)
    # largest |change| first; B and C tie at 20 cycles: the lower address first
    assert [(c.start, c.delta_cycles, c.share_pct) for c in changes] == [
        (0x1000, 60.0, 60.0),
        (0x1050, 30.0, 30.0),
        (0x1010, 20.0, 20.0),
        (0x1020, -20.0, -20.0),
        (0x1040, 10.0, 10.0),
    ]
    assert sum(c.share_pct for c in changes) == 100.0  # every changed block listed: the shares add up
    by_start = {c.start: c for c in changes}
    assert by_start[0x1000].baseline == side(0x1000, 0x1003, "4801c8", 100, 200.0)
    assert by_start[0x1000].current == side(0x1000, 0x1003, "4801c8", 130, 260.0)
    assert by_start[0x1010].baseline == side(0x1010, 0x1014, "4883e901", 50, 200.0)
    assert by_start[0x1010].current == side(0x1010, 0x1014, "4883e901", 55, 220.0)
    # one-sided blocks pair with nothing
    assert by_start[0x1020].baseline == side(0x1020, 0x1023, "4801d8", 20, 20.0) and by_start[0x1020].current is None
    assert by_start[0x1050].baseline is None and by_start[0x1050].current == side(0x1050, 0x1054, "480fafc1", 10, 30.0)
    # two blocks at one address are one side: executions and cycles summed (30 over 25 executions),
    # the range to the longer one's end; instructions, disassembly and bound are the longer one's
    # (the site's code as a whole)
    e = by_start[0x1040]
    assert e.baseline == BlockSide(
        start=0x1040,
        end=0x1044,
        insns=4,
        executions=25,
        cycles_per_execution=1.2,
        cycles=30.0,
        bound="dispatch",
        symbol="k",
        asm=["nop"] * 4,
    )
    assert e.current == side(0x1040, 0x1042, "9090", 40, 40.0)


def test_the_same_profile_on_both_sides_changes_nothing():
    assert block_changes(HandCycles(), BASELINE, BASELINE) == []
    assert block_changes(HandCycles(), CURRENT, CURRENT) == []


def test_the_direction_is_current_minus_baseline():
    changes = block_changes(HandCycles(), CURRENT, BASELINE)  # the sides swapped
    assert [(c.start, c.delta_cycles, c.share_pct) for c in changes] == [
        (0x1000, -60.0, 60.0),
        (0x1050, -30.0, 30.0),
        (0x1010, -20.0, 20.0),
        (0x1020, 20.0, -20.0),
        (0x1040, -10.0, 10.0),
    ]  # shares of a change of -100: the same signs as above
    assert changes[1].baseline is not None and changes[1].current is None


def test_shares_of_a_small_net_change_and_of_none():
    base = profile(block(0x1000, "4801c8", 10), block(0x1010, "4883e901", 10))  # 20 + 40
    # A: 15 x 2 = 30 (+10); B: 7 x 4 = 28 (-12); net -2: shares beyond 100 % and of either sign
    changes = block_changes(HandCycles(), base, profile(block(0x1000, "4801c8", 15), block(0x1010, "4883e901", 7)))
    assert [(c.start, c.delta_cycles, c.share_pct) for c in changes] == [(0x1010, -12.0, 600.0), (0x1000, 10.0, -500.0)]
    # A: 30 x 2 = 60 (+40); B gone (-40): the totals are equal, so no block has a share of the change;
    # both are listed, the tie in size broken by address
    changes = block_changes(HandCycles(), base, profile(block(0x1000, "4801c8", 30)))
    assert [(c.start, c.delta_cycles, c.share_pct) for c in changes] == [(0x1000, 40.0, None), (0x1010, -40.0, None)]


def test_code_that_only_moved_is_no_change():
    # the same bytes, run as often, at another address (an edit elsewhere in the function shifted it)
    base = profile(block(0x1000, "4801c8", 10), block(0x1010, "4883e901", 10))
    cur = profile(block(0x1000, "4801c8", 10), block(0x1020, "4883e901", 10))
    assert block_changes(HandCycles(), base, cur) == []
    # moved and run more often: one pair, the change is the extra executions' cycles
    more = profile(block(0x1000, "4801c8", 10), block(0x1020, "4883e901", 13))
    changes = block_changes(HandCycles(), base, more)
    assert [(c.start, c.delta_cycles, c.share_pct, c.baseline.start, c.current.start) for c in changes] == [
        (0x1020, 12.0, 100.0, 0x1010, 0x1020)
    ]


def test_at_most_max_blocks_are_kept_the_largest_with_shares_of_the_whole_change():
    # 45 blocks, block i run i + 1 times more: changes of 1 .. 45 cycles, 1035 in all
    codes = [f"4883e9{i:02x}" for i in range(45)]
    per_code = {code: 1.0 for code in codes}
    base = profile(*(Block(0x2000 + 16 * i, 4, 1, 10, code, "k") for i, code in enumerate(codes)))
    cur = profile(*(Block(0x2000 + 16 * i, 4, 1, 10 + i + 1, code, "k") for i, code in enumerate(codes)))
    changes = block_changes(HandCycles(per_code), base, cur)
    assert MAX_BLOCKS == 40 and len(changes) == 40
    assert [(c.start, c.delta_cycles) for c in changes] == [(0x2000 + 16 * i, float(i + 1)) for i in range(44, 4, -1)]
    assert [c.share_pct for c in changes] == [100.0 * (i + 1) / 1035 for i in range(44, 4, -1)]
    assert sum(c.share_pct for c in changes) == pytest.approx(100.0 * (1035 - 15) / 1035)  # 1 + .. + 5 left out


@pytest.mark.skipif(shutil.which(LLVM_MCA) is None or shutil.which(LLVM_MC) is None, reason="llvm-19 not installed")
def test_pairing_with_the_real_pipeline_model_uses_its_cycles(tmp_path):
    """The same pairing with llvm-mca's cycles: each change is (executions after - before) x the
    block's llvm-mca cycles, and the shares of all changed blocks add up to 100 %."""
    model = PipelineModel(BUILTIN["x86_64"], tmp_path)
    loop = "4801c84883e90175f7"  # addq %rcx, %rax; subq $1, %rcx; jne -9
    tail = "4801d8c3"  # addq %rbx, %rax; retq
    base = profile(Block(0x401000, 9, 3, 100, loop, "k"), Block(0x401009, 4, 2, 1, tail, "k"))
    cur = profile(
        Block(0x401000, 9, 3, 250, loop, "k"), Block(0x401009, 4, 2, 1, tail, "k"), Block(0x401100, 4, 2, 3, tail, "k")
    )
    per = {c.block.code: c.cycles_per_execution for c in model.block_costs(cur)}
    changes = block_changes(model, base, cur)
    assert [(c.start, c.delta_cycles) for c in changes] == [(0x401000, 150 * per[loop]), (0x401100, 3 * per[tail])]
    assert sum(c.share_pct for c in changes) == pytest.approx(100.0, rel=1e-12)
    assert changes[0].current.asm == ["addq %rcx, %rax", "subq $1, %rcx", "jne -9"]
