"""Blocks paired by what they are (judge.block_pairs, judge.code_identity) and the differential view
built on the pairs (judge.differential), on hand-made block profiles: exact pairs, shares and order."""

from __future__ import annotations

import pytest

from perfguard.judge.block_pairs import (
    ONLY_BASELINE,
    ONLY_CURRENT,
    RECOUNTED,
    RENAMED,
    SAME,
    SAME_LOOP,
    SAME_OFFSET,
    SPLIT,
    pair_blocks,
)
from perfguard.judge.code_identity import normalised, renamed
from perfguard.judge.differential import HOTTEST, LARGEST, NOT_IN_LOOP, Place, differential
from perfguard.predict.pipeline import BlockCost
from perfguard.sim.blocks import Block
from perfguard.sim.mca import BlockTiming


def cost(
    addr: int, count: int, asm: list[str], cycles: float = 1.0, symbol: str = "main_compute_", size: int | None = None
) -> BlockCost:
    """A block of `asm` (4 bytes an instruction unless `size`), `cycles` per execution."""
    size = 4 * len(asm) if size is None else size
    return BlockCost(
        Block(addr, size, len(asm), count, "00" * size, symbol), BlockTiming(cycles, "dispatch", tuple(asm))
    )


def shape(pairs) -> list[tuple[str, list[int], list[int]]]:
    return [(p.how, [s.addr for s in p.baseline], [s.addr for s in p.current]) for p in pairs]


# -- what makes two blocks the same code ---------------------------------------------------------


def test_moved_code_reads_the_same_on_every_isa_and_changed_code_does_not():
    x86 = [
        "vmovsd 492671(%rip), %xmm1",
        "callq -8359",
        "vfmadd213sd %xmm2, %xmm1, %xmm0 # xmm0 = (xmm1 * xmm0) + xmm2",
        "jne -176",
    ]
    moved = ["vmovsd 491999(%rip), %xmm1", "callq -9001", "vfmadd213sd %xmm2, %xmm1, %xmm0", "jne -176"]
    assert normalised(x86, "x86_64") == normalised(moved, "x86_64")
    assert normalised(x86, "x86_64") != normalised([*moved[:2], "vfmadd213ss %xmm2, %xmm1, %xmm0", moved[3]], "x86_64")
    assert normalised(x86, "x86_64") != normalised(["vmovsd 16(%rax), %xmm1", *moved[1:]], "x86_64")  # not pc-relative
    a64 = [
        "adrp x0, #643072",
        "ldr x0, [x0, #3184]",
        "add x1, x0, #16",
        "fmla v0.4s, v1.4s, v2.4s",
        "b.ne #-288",
        "bl #2972",
    ]
    a64_moved = [
        "adrp x0, #647168",
        "ldr x0, [x0, #1200]",
        "add x1, x0, #16",
        "fmla v0.4s, v1.4s, v2.4s",
        "b.ne #-288",
        "bl #-4000",
    ]
    assert normalised(a64, "aarch64") == normalised(a64_moved, "aarch64")
    # the offset added to a register that no longer holds the page is a real offset again
    assert normalised(a64, "aarch64") != normalised([*a64_moved[:2], "add x1, x0, #32", *a64_moved[3:]], "aarch64")
    rv = [
        "auipc a5, 103",
        "ld a4, -1488(a5)",
        "flw fa5, 16(a0)",
        "fmadd.s fa0, fa5, fa4, fa0",
        "bne a5, s1, -308",
        "auipc ra, 20",
        "jalr 1954(ra)",
        "j -2232",
    ]
    rv_moved = [
        "auipc a5, 101",
        "ld a4, 600(a5)",
        "flw fa5, 16(a0)",
        "fmadd.s fa0, fa5, fa4, fa0",
        "bne a5, s1, -308",
        "auipc ra, 22",
        "jalr -20(ra)",
        "j 1200",
    ]
    assert normalised(rv, "riscv64") == normalised(rv_moved, "riscv64")
    assert normalised(rv, "riscv64") != normalised([*rv_moved[:2], "flw fa5, 20(a0)", *rv_moved[3:]], "riscv64")


def test_the_same_code_with_other_registers_and_stack_slots_reads_the_same_renamed():
    x86 = [
        "vmovaps 256(%r13,%rdx), %ymm1",
        "vfmadd231ps 512(%r13,%rdx), %ymm2, %ymm1",
        "vmovups 96(%rsp), %ymm3",
        "movl %eax, %ecx",
        "addq $32, %rdx",
    ]
    other = [
        "vmovaps 256(%r12,%rsi), %ymm4",
        "vfmadd231ps 512(%r12,%rsi), %ymm5, %ymm4",
        "vmovups 480(%rsp), %ymm6",
        "movl %edi, %r8d",
        "addq $32, %rsi",
    ]
    assert normalised(x86, "x86_64") != normalised(other, "x86_64")
    assert renamed(normalised(x86, "x86_64"), "x86_64") == renamed(normalised(other, "x86_64"), "x86_64")
    # one register for two before is another computation
    merged = [*other[:3], "movl %edi, %edi", other[4]]
    assert renamed(normalised(x86, "x86_64"), "x86_64") != renamed(normalised(merged, "x86_64"), "x86_64")
    # a displacement from a register that is not the stack pointer is kept
    assert renamed(normalised(x86, "x86_64"), "x86_64") != renamed(
        normalised(["vmovaps 260(%r12,%rsi), %ymm4", *other[1:]], "x86_64"), "x86_64"
    )
    a64 = ["ldr q1, [x10]", "fmla v0.4s, v1.4s, v10.s[0]", "str s2, [sp, #172]", "add w8, w8, #1"]
    a64_other = ["ldr q3, [x12]", "fmla v2.4s, v3.4s, v11.s[0]", "str s4, [sp, #44]", "add w9, w9, #1"]
    assert renamed(normalised(a64, "aarch64"), "aarch64") == renamed(normalised(a64_other, "aarch64"), "aarch64")
    rv = ["fsw fa4, 172(sp)", "flw fa5, 0(a0)", "fsub.s fa5, fa5, fs1", "addi a0, a0, 4"]
    rv_other = ["fsw fa3, 44(sp)", "flw fa2, 0(a1)", "fsub.s fa2, fa2, fs2", "addi a1, a1, 4"]
    assert renamed(normalised(rv, "riscv64"), "riscv64") == renamed(normalised(rv_other, "riscv64"), "riscv64")


# -- pairing -------------------------------------------------------------------------------------

EXPF = ["vmovsd 492671(%rip), %xmm1", "vfmadd213sd 492610(%rip), %xmm1, %xmm0", "ja 119"]
EXPF_MOVED = ["vmovsd 492111(%rip), %xmm1", "vfmadd213sd 492050(%rip), %xmm1, %xmm0", "ja 119"]
SCALAR = ["vmovss (%rax,%rcx,4), %xmm0", "vfmadd231ss (%rdx,%rcx,4), %xmm1, %xmm0", "incq %rcx", "jne -20"]
VECTOR = ["vmovups (%rax,%rcx,4), %ymm0", "vfmadd231ps (%rdx,%rcx,4), %ymm1, %ymm0", "addq $8, %rcx", "jne -20"]
EXIT = ["vmovss %xmm0, (%rsi)", "retq"]


def test_code_that_only_moved_pairs_as_the_same_and_changed_code_by_loop_offset_or_one_side():
    before = [
        cost(0x404139, 4096, EXPF, 14.7, "__expf_fma"),
        cost(0x402000, 64, VECTOR, 4.0),
        cost(0x402020, 1, EXIT, 2.0),
        cost(0x402100, 64, EXIT, 3.0),
        cost(0x402200, 8, ["nop", "nop"], 1.0),
    ]
    after = [
        cost(0x404369, 4096, EXPF_MOVED, 14.7, "__expf_fma"),
        cost(0x402000, 512, SCALAR, 3.0),
        cost(0x402030, 1, EXIT, 2.0),
        cost(0x402180, 64, ["ud2"], 1.0),
        cost(0x402300, 5, ["int3"], 1.0),
    ]
    loops_before, loops_after = {0x402000: "k", 0x402100: "j"}, {0x402180: "j"}
    pairs = pair_blocks(
        before, after, "x86_64", (lambda s: loops_before.get(s.addr), lambda s: loops_after.get(s.addr))
    )
    assert shape(pairs) == [  # step by step, each in the baseline's address order
        (SAME, [0x402020], [0x402030]),
        (SAME, [0x404139], [0x404369]),  # moved: never a change
        (SAME_LOOP, [0x402100], [0x402180]),  # changed code in the same loop
        (SAME_OFFSET, [0x402000], [0x402000]),  # the k loop only one side names: its offset in the function
        (ONLY_BASELINE, [0x402200], []),
        (ONLY_CURRENT, [], [0x402300]),
    ]
    assert [p.unchanged for p in pairs] == [True, True, False, False, False, False]
    assert [p.delta for p in pairs] == [0.0, 0.0, 64 - 192, 512 * 3 - 64 * 4, -8.0, 5.0]
    assert [p.start for p in pairs] == [0x402030, 0x404369, 0x402180, 0x402000, 0x402200, 0x402300]


def test_several_blocks_at_one_address_are_one_site_and_pair_whole():
    before = [cost(0x1000, 100, SCALAR, 3.0), cost(0x1000, 5, SCALAR[:2], 2.0, size=8)]  # QEMU split it once
    after = [cost(0x2000, 100, SCALAR, 3.0), cost(0x2000, 5, SCALAR[:2], 2.0, size=8)]
    (pair,) = pair_blocks(before, after, "x86_64")
    assert (pair.how, pair.baseline[0].executions, pair.baseline[0].cycles, pair.delta) == (SAME, 105, 310.0, 0.0)
    # one of its blocks ran another number of times: the same code, another count (a change)
    (pair,) = pair_blocks(before, [after[0], cost(0x2000, 7, SCALAR[:2], 2.0, size=8)], "x86_64")
    assert (pair.how, pair.delta) == (RECOUNTED, 4.0)


def test_code_split_at_another_place_pairs_with_its_pieces():
    whole = cost(0x1FF0, 64, SCALAR, 4.0)
    pieces = [cost(0x2FF8, 64, SCALAR[:2], 2.5), cost(0x3000, 64, SCALAR[2:], 1.5)]  # a page boundary at 0x3000
    assert shape(pair_blocks([whole], pieces, "x86_64")) == [(SPLIT, [0x1FF0], [0x2FF8, 0x3000])]
    assert shape(pair_blocks(pieces, [whole], "x86_64")) == [(SPLIT, [0x2FF8, 0x3000], [0x1FF0])]
    # pieces run another number of times are not the same code run the same way
    other = [cost(0x2FF8, 64, SCALAR[:2]), cost(0x3000, 32, SCALAR[2:])]
    assert [p.how for p in pair_blocks([whole], other, "x86_64")] == [SAME_OFFSET, ONLY_CURRENT]


def test_a_c_library_routine_called_less_often_is_the_same_code_with_another_count():
    memset = ["sd a4, 0(a5)", "sd a4, 8(a5)", "addi a5, a5, 64", "bne a5, a3, -16"]
    pairs = pair_blocks(
        [cost(0x27022, 256, memset, 10.0, "memset")], [cost(0x26A72, 64, memset, 10.0, "memset")], "riscv64"
    )
    assert shape(pairs) == [(RECOUNTED, [0x27022], [0x26A72])] and pairs[0].delta == -1920.0
    assert not pairs[0].unchanged


def test_register_renamed_twins_pair_in_address_order_and_the_pairing_is_deterministic():
    a = ["vaddps %ymm0, %ymm1, %ymm2", "jne -8"]
    b = ["vaddps %ymm3, %ymm4, %ymm5", "jne -8"]
    before = [cost(0x100, 8, a), cost(0x200, 8, a), cost(0x300, 8, a)]
    after = [cost(0x150, 8, b), cost(0x250, 8, b)]
    pairs = pair_blocks(before, after, "x86_64")
    assert shape(pairs) == [
        (RENAMED, [0x100], [0x150]),
        (RENAMED, [0x200], [0x250]),
        (SAME_OFFSET, [0x300], []),
    ] or shape(pairs) == [(RENAMED, [0x100], [0x150]), (RENAMED, [0x200], [0x250]), (ONLY_BASELINE, [0x300], [])]
    assert shape(pairs) == shape(pair_blocks(list(reversed(before)), list(reversed(after)), "x86_64"))


# -- the differential view -----------------------------------------------------------------------


def _places(loops: dict[int, tuple[str, str]]):
    """Place of a site: main_compute_'s sites by `loops` (address -> (nest, loop)), others by symbol."""

    def place(site):
        if site.symbol != "main_compute_":
            return Place(site.symbol)
        if site.addr not in loops:
            return Place(site.symbol, group=NOT_IN_LOOP)
        nest, loop = loops[site.addr]
        return Place(site.symbol, nest, (nest, loop))

    return place


def test_the_view_adds_up_to_the_whole_change_and_leaves_moved_code_out_of_every_change():
    before = [
        cost(0x404139, 4096, EXPF, 14.7, "__expf_fma"),
        cost(0x402000, 64, VECTOR, 4.0),
        cost(0x402100, 4032, SCALAR, 5.0),
    ]
    # the expf block moved and its loop scale changed (+10 cycles): the moved code's part, not a change
    after = [
        cost(0x404369, 4096, EXPF_MOVED, 14.7 + 10 / 4096, "__expf_fma"),
        cost(0x402000, 512, SCALAR, 3.0),
        cost(0x402180, 4032, SCALAR, 5.0),
    ]
    loops = {0x402000: ("scores", "d"), 0x402100: ("row_sum", "k2"), 0x402180: ("row_sum", "k2")}
    pairs = pair_blocks(before, after, "x86_64")
    assert [p.how for p in pairs] == [SAME, SAME, SAME_OFFSET]
    view = differential(
        pairs, (_places(loops), _places(loops)), {2: 0}, "pipeline", "pipeline-x", 1e9, (1000.0, 1300.0)
    )
    change = view.current_cycles - view.baseline_cycles
    assert change == pytest.approx(512 * 3 - 64 * 4 + 10 + 300)
    assert (view.code_cycles, view.stall_cycles, view.moved_cycles) == pytest.approx((1280.0, 300.0, 10.0))
    assert view.code_cycles + view.stall_cycles + view.moved_cycles == pytest.approx(change)
    shares = [n.share_pct for n in view.nodes] + [view.share(view.stall_cycles), view.share(view.moved_cycles)]
    assert sum(shares) == pytest.approx(100.0)
    # hottest first: expf (60,211 cycles), then main_compute_ (its row_sum nest, then scores)
    expf, kernel = view.nodes
    assert (expf.name, expf.unchanged, expf.delta_cycles) == ("__expf_fma", True, 0.0)
    assert [(n.kind, n.name) for n in kernel.children] == [("nest", "row_sum"), ("nest", "scores")]
    row_sum, scores = kernel.children
    assert row_sum.unchanged and row_sum.delta_cycles == 0.0
    (loop,) = scores.children
    assert (loop.kind, loop.name, loop.delta_cycles, loop.share_pct) == (
        "loop",
        "d",
        1280.0,
        pytest.approx(100 * 1280 / change),
    )
    (block,) = loop.children
    assert (block.kind, block.name, block.block) == ("block", "0x402000", 0)


def test_a_pair_whose_sides_sit_in_different_loops_is_a_leaf_in_each():
    pairs = pair_blocks([cost(0x402000, 64, VECTOR, 4.0)], [cost(0x402000, 448, SCALAR, 3.0)], "x86_64")
    loops_before, loops_after = {0x402000: ("scores", "d")}, {0x402000: ("scores", "j")}
    view = differential(pairs, (_places(loops_before), _places(loops_after)), {0: 0}, "pipeline", "p", 1e9, (0.0, 0.0))
    (kernel,) = view.nodes
    (nest,) = kernel.children
    assert [(n.name, n.baseline_cycles, n.current_cycles, n.delta_cycles) for n in nest.children] == [
        ("j", 0.0, 1344.0, 1344.0),
        ("d", 256.0, 0.0, -256.0),
    ]


def test_past_the_hottest_and_the_largest_changes_nodes_fold_into_one_that_keeps_the_sums():
    n = HOTTEST + LARGEST + 5
    # blocks of one function, each cooler than the one before; the coolest LARGEST changed by 1, 2, 3, 4 cycles
    before = [cost(0x1000 + 0x100 * i, 1, [f"nop{i}"], 1000.0 - 10 * i, "f") for i in range(n)]
    after = before[: n - LARGEST] + [
        cost(0x1000 + 0x100 * i, 1, [f"ud{i}"], 1000.0 - 10 * i + i - (n - LARGEST) + 1, "f")
        for i in range(n - LARGEST, n)
    ]
    pairs = pair_blocks(before, after, "x86_64")
    view = differential(pairs, (_places({}), _places({})), {}, "pipeline", "p", 1e9, (0.0, 0.0))
    (function,) = view.nodes
    names = [c.name for c in function.children]
    assert len(names) == HOTTEST + LARGEST + 1 and names[-1] == "5 more"
    assert names[:HOTTEST] == [f"0x{0x1000 + 0x100 * i:x}" for i in range(HOTTEST)]  # hottest first
    assert names[HOTTEST:-1] == [f"0x{0x1000 + 0x100 * i:x}" for i in range(n - LARGEST, n)]  # largest changes
    more = function.children[-1]
    assert (more.kind, more.folded, more.unchanged) == ("more", 5, True)
    assert sum(c.baseline_cycles for c in function.children) == function.baseline_cycles
    assert sum(c.delta_cycles for c in function.children) == function.delta_cycles == 1 + 2 + 3 + 4


# -- the whole attribution, scored by the real pipeline model (llvm-mca) ------------------------


def _real_stats(*blocks: Block):
    from perfguard.sim.blocks import BlockProfile
    from perfguard.sim.stats import Stats

    return Stats(
        insts=sum(b.insns * b.count for b in blocks),
        l1d_misses=0,
        l1i_misses=0,
        l2_misses=0,
        blocks=BlockProfile.merged(list(blocks)),
    )


def test_a_baseline_whose_nest_names_no_buffers_keys_both_sides_nests_by_their_place(tmp_path):
    import shutil

    from perfguard.compile.loops import Loop, LoopNest
    from perfguard.judge.attribution import attribute
    from perfguard.predict.pipeline import PipelineModel
    from perfguard.targets import BUILTIN

    if shutil.which("llvm-mca-19") is None or shutil.which("llvm-mc-19") is None:
        pytest.skip("llvm-mca-19 not installed")
    loops = (Loop("i", 8, "serial", None, stores=("a",)), Loop("j", 16, "serial", 0))
    new = LoopNest(loops, ("main_compute_",)).to_dict()
    old = {**new, "version": 1, "loops": [{k: v for k, v in row.items() if k != "stores"} for row in new["loops"]]}
    nops = "90" * 4
    outer = Block(0x1000, 4, 4, 8, nops, "main_compute_")
    before = _real_stats(outer, Block(0x1010, 4, 4, 128, nops, "main_compute_"))
    after = _real_stats(outer, Block(0x1010, 8, 8, 128, nops * 2, "main_compute_"))  # j's body got longer
    model = PipelineModel(BUILTIN["x86_64"], tmp_path)
    for nests, key in (((new, new), "a"), ((old, new), "#1 (i)"), ((new, old), "#1 (i)")):
        found = attribute(model, before, after, nests)
        (kernel,) = found.attribution.nodes
        (nest,) = kernel.children  # one nest on both sides, never split in two by the old baseline
        assert nest.name == key and [(c.name, c.unchanged) for c in nest.children] == [("j", False), ("i", True)]
        (change,) = found.blocks
        assert (change.paired, change.current.loop.var) == ("same loop", "j")
        assert change.share_pct == pytest.approx(100.0)
