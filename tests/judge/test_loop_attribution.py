"""Attribution names the TIR loop of each changed block (judge.attribution.LoopNamer): on the
statistics and loop nests of real builds simulated under QEMU (captured in tests/captured/),
through `perfguard check` to every output, and with baselines that carry no loop nest."""

from __future__ import annotations

import json
import shutil

import pytest

from perfguard.baselines.store import Baseline, parse_baseline
from perfguard.compile.loops import LOOPS_VERSION, Loop, LoopNest
from perfguard.judge.attribution import LoopNamer
from perfguard.sim.blocks import Block, BlockProfile
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN
from tests import captured


def _stats(*blocks: Block) -> Stats:
    return Stats(
        insts=sum(b.insns * b.count for b in blocks),
        l1d_misses=0,
        l1i_misses=0,
        l2_misses=0,
        blocks=BlockProfile.merged(list(blocks)),
    )


NEST = LoopNest(
    (Loop("i", 8, "serial", None), Loop("k", 16, "serial", 0), Loop("j", 16, "serial", None)), ("main_compute_",)
).to_dict()


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


def _block(addr: int, count: int, size: int = 16) -> Block:
    return Block(addr, size, size // 4, count, "00" * size, "main_compute_")


def test_a_loop_head_entered_by_falling_through_counts_every_iteration():
    # QEMU starts a block at k's head only when the back branch jumps there: the first of the 16
    # iterations runs in the block before it, which covers the head too
    entry, head = _block(0x1000, 8, 64), _block(0x1010, 8 * 15, 48)
    namer = LoopNamer(NEST, _stats(entry, head), "this run")
    loop, _ = namer.name("main_compute_", head.count, head.addr, head.end)
    assert loop is not None and loop.var == "k" and loop.trips == 128 and loop.peeled == 0  # not "peeled"
    assert namer.runs == {0x1000: 8, 0x1010: 128}


# nests a (i > j[16]), c (i > m[12]), b (i > k[16]), in this order; j and k fit a count of 128
ORDERED = LoopNest(
    (
        Loop("i", 8, "serial", None, stores=("a",)),
        Loop("j", 16, "serial", 0),
        Loop("i", 8, "serial", None, stores=("c",)),
        Loop("m", 12, "serial", 2),
        Loop("i", 8, "serial", None, stores=("b",)),
        Loop("k", 16, "serial", 4),
    ),
    ("main_compute_",),
).to_dict()
OUTER = _block(0x0F00, 8)  # a block of an outer i loop: they are kept (LLVM did not unroll them)


def test_the_order_of_the_nests_tells_loops_of_one_count_apart():
    first, m, last = _block(0x1000, 128), _block(0x1100, 96), _block(0x1200, 128)  # m's count: an anchor
    namer = LoopNamer(ORDERED, _stats(OUTER, first, m, last), "this run")
    named = {b.addr: namer.name("main_compute_", b.count, b.addr, b.end) for b in (first, m, last)}
    assert named[0x1100][0].var == "m" and not named[0x1100][0].ordered
    assert (named[0x1000][0].var, named[0x1000][0].nest_name, named[0x1000][0].ordered) == ("j", "a", True)
    assert (named[0x1200][0].var, named[0x1200][0].nest_name, named[0x1200][0].ordered) == ("k", "b", True)
    assert "told apart from loops of the same count by the order of the nests" in named[0x1000][0].describe()
    # by the count alone (a block this profile did not run) both stay candidates, none the answer
    loop, candidates = namer.name("main_compute_", 128, 0x5000, 0x5010)
    assert loop is None and [(c.var, c.nest_name) for c in candidates] == [("j", "a"), ("k", "b")]
    # the first debug location of a variable only one loop has is an anchor too
    dwarf = {**ORDERED, "ranges": {"m": [[0x1100, 0x1180]]}}
    namer = LoopNamer(dwarf, _stats(OUTER, first, last), "this run")
    assert [namer.name("main_compute_", 128, b.addr, b.end)[0].var for b in (first, last)] == ["j", "k"]


def test_anchors_out_of_the_nests_order_narrow_nothing():
    # a fourth nest d (i > n[20]) after b; n's block lies before c's m: not the nest's order
    nest = {
        **ORDERED,
        "loops": ORDERED["loops"]
        + [
            {"var": "i", "extent": 8, "kind": "serial", "parent": None, "copy_of": None, "stores": ["d"]},
            {"var": "n", "extent": 20, "kind": "serial", "parent": 6, "copy_of": None, "stores": []},
        ],
    }
    assert len(LoopNest.from_dict(nest, "t").loops) == len(LoopNest.from_dict(ORDERED, "t").loops) + 2
    blocks = [OUTER, _block(0x1000, 128), _block(0x1050, 160), _block(0x1100, 96)]
    namer = LoopNamer(nest, _stats(*blocks), "this run")
    loop, candidates = namer.name("main_compute_", 128, 0x1000, 0x1010)
    assert loop is None and [c.var for c in candidates] == ["j", "k"]
    # in the nest's order (n after m), the same block is decided
    blocks[2] = _block(0x1150, 160)
    assert LoopNamer(nest, _stats(*blocks), "this run").name("main_compute_", 128, 0x1000, 0x1010)[0].var == "j"


def test_a_count_no_plain_way_fits_names_the_loop_the_debug_information_places_there():
    # k[256] under i[8]: LLVM's vector loop ran 17 times per entry (8 x 17 = 136): no plain fit
    odd = _block(0x1010, 136)
    nest = {**NEST, "ranges": {"k": [[0x1000, 0x1040]]}}
    loop, _ = LoopNamer(
        {**nest, "loops": [nest["loops"][0], {**nest["loops"][1], "extent": 256}, nest["loops"][2]]},
        _stats(_block(0x1000, 8), odd),
        "t",
    ).name("main_compute_", 136, 0x1010, 0x1020)
    assert (loop.var, loop.approximate, loop.per_execution, loop.located) == ("k", True, 15, True)
    assert "about 15 iterations per execution: rewritten by LLVM" in loop.describe()
    # without the variable's location (or with a count that is no whole number of runs per entry)
    # there is no name
    plain = {**NEST, "loops": [NEST["loops"][0], {**NEST["loops"][1], "extent": 256}, NEST["loops"][2]]}
    assert LoopNamer(plain, _stats(_block(0x1000, 8), odd), "t").name("main_compute_", 136, 0x1010, 0x1020) == (
        None,
        [],
    )


def test_code_no_loop_fits_is_placed_in_the_nest_around_it():
    first, odd, last = _block(0x1000, 128), _block(0x1040, 77), _block(0x1080, 128)
    namer = LoopNamer(ORDERED, _stats(OUTER, first, odd, last, _block(0x1100, 96)), "this run")
    assert namer.name("main_compute_", 77, 0x1040, 0x1050) == (None, [])
    assert namer.nest_of("main_compute_", 0x1040, 77) == 1  # between two of nest a's blocks
    assert namer.nest_of("main_compute_", 0x10F0, 77) is None  # between nest a's and nest c's


def test_the_own_code_of_each_copy_of_a_loop_llvm_unrolled_is_named_as_that_loop():
    # j_0[8] > i[16]: LLVM unrolled j_0, so 8 copies of i run once each, with each copy's own set-up
    # between them; that code runs once per call, as the function's entry and exit do
    nest = LoopNest(
        (Loop("j_0", 8, "serial", None, stores=("out",)), Loop("i", 16, "serial", 0)), ("main_compute_",)
    ).to_dict()
    entry, exit_ = _block(0x1000, 1), _block(0x1400, 1)
    copies = [_block(0x1010 + 0x80 * c, 16) for c in range(8)]
    between = [_block(0x1050 + 0x80 * c, 1) for c in range(7)]
    blocks = [entry, *copies, *between, exit_]
    namer = LoopNamer(nest, _stats(*blocks), "this run")
    assert namer.layout is not None and namer.layout.flat == {0}
    for b in between:
        loop, candidates = namer.name("main_compute_", 1, b.addr, b.end)
        assert loop is not None and candidates == [] and (loop.var, loop.trips, loop.nest_name) == ("j_0", 1, "out")
        assert loop.nest == "j_0[8 unrolled by LLVM]" and not loop.ordered and not loop.located
        assert loop.llvm_notes() == ["its own code in each of the 8 copies LLVM unrolled"]
    assert namer.name("main_compute_", 16, copies[3].addr, copies[3].end)[0].var == "i"
    # the entry and the exit lie outside every copy: no loop
    assert namer.name("main_compute_", 1, entry.addr, entry.end) == (None, []) and namer.name(
        "main_compute_", 1, exit_.addr, exit_.end
    ) == (
        None,
        [],
    )
    # a block run once between blocks of loops that are not inside an unrolled loop: no loop either
    kept = LoopNest((Loop("j_0", 8, "serial", None), Loop("i", 16, "serial", 0)), ("main_compute_",)).to_dict()
    head = _block(0x0F00, 8)  # j_0 kept: its block runs 8 times
    namer = LoopNamer(kept, _stats(*blocks, head), "this run")
    assert namer.layout is not None and namer.layout.flat == set()
    assert namer.name("main_compute_", 1, between[0].addr, between[0].end) == (None, [])


def test_a_baseline_written_before_loop_nests_reads_without_one(tmp_path):
    stats = _stats(Block(0x401000, 4, 1, 128, "90909090", "main_compute_"))
    new = Baseline("k", "x86_64", "gemm", {}, "qemu", "ab" * 32, stats, 1e-3, "pipeline-v2-x", None, "now", loops=NEST)
    assert parse_baseline(new.to_json(), "k.json").loops == NEST
    old = json.loads(new.to_json())
    del old["loops"]
    old["schema"] = 2
    assert parse_baseline(json.dumps(old), "k.json").loops is None


# -- real builds, real simulations (captured: tests/captured/regenerate.py) ---------------------


def _need(profile) -> None:
    missing = [p for p in (profile.cc, profile.qemu, "llvm-mca-19", "llvm-mc-19") if shutil.which(p) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}")


def _hottest(result, most: int = 4) -> list[tuple[Block, object, list]]:
    """The kernel blocks that ran the most instructions, each with its loop and candidates."""
    namer = LoopNamer(result.loops, result.stats, result.kernel)
    kernel = sorted(
        (b for b in result.stats.blocks.blocks if namer.in_kernel(b.symbol)), key=lambda b: (-b.insns * b.count, b.addr)
    )
    return [(b, *namer.name(b.symbol, b.count)) for b in kernel[:most]]


def _gemm(target: str, tile_k: int):
    """gemm 64x64x256 (tile_m 16, tile_n 32, vector 8, no unroll knob) as built and simulated for real."""
    return captured.job(f"gemm_k{tile_k}-{target}")


@pytest.mark.parametrize("target", ["x86_64", "aarch64"])
def test_the_hottest_gemm_blocks_are_named_by_the_k_loop_and_a_tile_k_edit_moves_them(target):
    # tile_k = 64: the k_1 loop (64 iterations, the 4 column chunks j_1_0 unrolled into it by LLVM)
    # runs the products; LLVM peels its first iteration (and on x86_64 unrolls it by 2)
    hot = _hottest(_gemm(target, 64))
    named = [(b, loop) for b, loop, _ in hot if loop is not None]
    assert len(named) >= 3, hot
    for block, loop in named:
        assert loop.var == "k_1" and loop.trips == block.count, (block, loop)
        assert [(s.var, s.extent) for s in loop.path] == [("i_0", 4), ("j_0", 2), ("k_0", 4), ("i_1", 16), ("k_1", 64)]
        assert loop.unrolled == ["j_1_0"] and loop.peeled == 1
        assert block.count == 4 * 2 * 16 * ((64 - 1) // loop.per_execution)  # per copy of k_0 (LLVM unrolled it)
    # tile_k = 16: LLVM unrolls the 16 k_1 iterations completely: the hot blocks are i_1's, k_1 inside
    # (and the column chunks j_1_0 inside k_1 with it)
    hot = _hottest(_gemm(target, 16))
    assert all(loop is not None and loop.var == "i_1" and loop.unrolled == ["k_1", "j_1_0"] for _, loop, _ in hot), hot


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

    from perfguard.shells.cli import main
    from tests.conftest import REPO

    _need(BUILTIN["x86_64"])
    config = project(CHECK_TOML)
    assert main(["baseline", "update", "--config", str(config)]) == 0
    baseline_file = config.parent / "baselines" / "x86_64" / "gemm_t.json"
    stored = json.loads(baseline_file.read_text())
    assert stored["schema"] == 5 and stored["loops"]["version"] == LOOPS_VERSION
    assert any(loop["var"] == "k_1" for loop in stored["loops"]["loops"])

    config.write_text(config.read_text().replace("tile_k = 64", "tile_k = 16"))
    capsys.readouterr()
    # the pipeline model predicts the k-tile of 16 faster (-9.7 % on LLVM 19's znver4 model since harness 4
    # moved the kernel 128 bytes and a page end with it; -16 % before): exit 0. What this test checks is the
    # loop naming; natively the edit measured +7 % (CPU time, a loaded Zen 1 host, issue 28)
    assert main(["check", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    reports = config.parent / "reports"
    data = json.loads((reports / "perfguard.json").read_text())
    jsonschema.validate(
        data, json.loads((REPO / "docs" / "report.schema.json").read_text()), cls=jsonschema.Draft202012Validator
    )
    result = data["results"][0]
    assert result["verdict"] == "improvement" and result["delta_pct"] < -5.0 and result["blocks"]
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


def test_init_and_product_loops_of_one_count_are_ambiguous_until_the_layout_tells_them_apart():
    # gemm 512x64x128, tile_m 16, tile_n 64, tile_k 32, vector 8, unroll 16 on x86_64, its debug
    # information read by llvm-dwarfdump-19 when it was built
    result = captured.job("gemm_init-x86_64")
    namer = LoopNamer(result.loops, result.stats, result.kernel)
    # i_1_init (zeroing C) and i_1 (the products) both run 32 x 16 times per call (each peeled)
    both = [
        b for b in result.stats.blocks.blocks if namer.in_kernel(b.symbol) and len(namer.layout.matches(b.count)) == 2
    ]
    assert both
    for b in both:
        loop, candidates = namer.name(b.symbol, b.count)  # by the count alone: no answer, two candidates
        assert loop is None and sorted(c.var for c in candidates) == ["i_1", "i_1_init"]
        # in the profile: the zeroing nest's code comes first (the nests' order), and the debug
        # information places i_1's variable there, not i_1_init's
        site = namer.sites[b.addr]
        loop, candidates = namer.name(b.symbol, site[1], b.addr, site[2])
        assert loop is not None and (loop.ordered or loop.located) and candidates == []
        assert loop.var == "i_1", (hex(b.addr), b.count, loop)
        nest = namer.layout.nest
        assert nest.located("i_1", b.addr, b.end) and not nest.located("i_1_init", b.addr, b.end)


def _where(base: str, current: str, cache_dir) -> str:
    from perfguard.judge.attribution import attribute
    from perfguard.predict.pipeline import PipelineModel
    from perfguard.report.where import where_line

    a, b = captured.job(base), captured.job(current)
    profile = BUILTIN[a.target]
    _need(profile)
    model = PipelineModel(profile, cache_dir)
    return where_line(attribute(model, a.stats, b.stats, (a.loops, b.loops)).attribution)


@pytest.mark.slow  # llvm-mca times every block of both sides
def test_an_argmax_split_in_4_names_the_loop_its_two_nests_of_one_shape_share(cache_dir):
    # split 8 -> 4: LLVM unrolls k_0[4] completely, so the partial results' nest (i > k_0 > k_1) and the
    # combining nest (i > k_1) are both i[16] > k_1[64] in the code; every k_1 block fits k_1 of both,
    # the arg-max's data-dependent updates fit no count. Before: "main_compute_, no loop named"
    line = _where("argmax_s8-x86_64", "argmax_s4-x86_64", cache_dir)
    assert line.startswith(
        "loop k_1 of nest best.v0.rf, best.v1.rf or nest best.v0, best.v1 in main_compute_ "
        "(nests of one shape: their blocks were not told apart): +"
    ), line
    # the baseline's k_1, told apart by k_0's blocks (8 chunks), is still named as one nest's
    assert "offset by -" in line and "in loop k_1 of nest best.v0.rf, best.v1.rf in main_compute_" in line, line
    namer = LoopNamer(captured.job("argmax_s4-x86_64").loops, captured.job("argmax_s4-x86_64").stats, "this run")
    shared = [a for a, (s, runs, end) in namer.sites.items() if (c := namer.name(s, runs, a, end)[1]) and len(c) == 2]
    assert shared and all(
        {(c.var, c.nest_name) for c in namer.name(namer.sites[a][0], namer.sites[a][1], a, namer.sites[a][2])[1]}
        in (
            {("k_1", "best.v0.rf, best.v1.rf"), ("k_1", "best.v0, best.v1")},
            {("i", "best.v0.rf, best.v1.rf"), ("i", "best.v0, best.v1")},
        )
        for a in shared
    )


@pytest.mark.slow
def test_a_dropped_vectorise_names_the_lanes_llvm_unrolled_into_the_loop_around_them(cache_dir):
    # stencil2d: i_0 > j_0 > i_1 > j_1_0 > j_1_1, the lanes j_1_1 vectorised by TVM and then not: LLVM
    # unrolls i_1 and the column loops j_1_0 and j_1_1 inside it into j_0. Before: "i_1 unrolled ... into it"
    line = _where("stencil2d_v8-x86_64", "stencil2d_v1-x86_64", cache_dir)
    assert line.startswith(
        "loop j_0 of nest out in main_compute_ [i_0[8] > j_0[4]; i_1, j_1_0 and j_1_1 unrolled or vectorised "
        "into it by LLVM]: +"
    ), line


@pytest.mark.slow
def test_a_gathers_chunks_moved_outside_its_rows_name_the_moved_loop_not_no_loop(cache_dir):
    # embed: reorder(j_0, i) puts the column chunks outside the rows; LLVM unrolls j_0 into 8 copies of
    # i, each with set-up code of its own that runs once per call. Before: "nest out in main_compute_,
    # no loop named" after the cache-miss stalls (issue 42, a new user's embed_i64 on x86_64)
    line = _where("embed_ij-x86_64", "embed_ji-x86_64", cache_dir)
    assert line.startswith("cache-miss stalls: +"), line
    assert (
        "; in the code: loop j_0 of nest out in main_compute_ [j_0[8 unrolled by LLVM]; its own code in each of "
        "the 8 copies LLVM unrolled]: +"
    ) in line, line
    assert "no loop named" not in line, line
    current = captured.job("embed_ji-x86_64")
    namer = LoopNamer(current.loops, current.stats, "this run")
    named = {a: namer.name(s, runs, a, end)[0] for a, (s, runs, end) in namer.sites.items() if s == "main_compute_"}
    copies = sorted(a for a, loop in named.items() if loop is not None and loop.var == "j_0")
    loops_i = sorted(a for a, loop in named.items() if loop is not None and loop.var == "i")
    # the 7 stretches between the 8 copies of i, and nothing before the first or after the last
    assert len(copies) == 7 and len(loops_i) == 8 and all(loops_i[0] < a < loops_i[-1] for a in copies)


@pytest.mark.slow
def test_a_dropped_vectorise_names_the_lanes_tvm_vectorised_into_the_loop(cache_dir):
    # the cookbook's stencil i_0 > i_1 > j_0 > j_1, the lanes j_1 vectorised by TVM (no loop of the
    # lowered code) and then not: the baseline's code of i_1 (j_0 unrolled into it by LLVM, j_1's lanes
    # in it) is what went away. Before: "[i_0[4] > i_1[8]; j_0 unrolled or vectorised into it by LLVM]"
    line = _where("stencil_v8-x86_64", "stencil_v1-x86_64", cache_dir)
    assert line.startswith(
        "loop i_1 of nest out in main_compute_ [i_0[4] > i_1[8]; j_0 unrolled or vectorised into it by LLVM; "
        "j_1 vectorised into it by TVM]: -"
    ), line
    # the current side has no lanes of TVM's: its column loop j was unrolled into i_0 by LLVM
    assert "in loop i_0 of nest out in main_compute_" in line, line
