"""The loop nest recorded beside a build (perfguard.compile.loops): matching execution counts to
loops on hand-made nests, and the nests of real TVM builds."""

from __future__ import annotations

import json

import pytest

from perfguard.compile.loops import (
    LOOPS_FILE,
    Loop,
    LoopLayout,
    LoopMatch,
    LoopNest,
    ensure_loops,
    object_functions,
    record_loops,
)
from perfguard.compile.lower import build_object, inspect_module
from perfguard.errors import InputError
from perfguard.targets import BUILTIN

# gemm 256^3, tiles 32 x 32 x 4, 8 lanes, the j chunks unrolled by TVM (kind "unrolled")
GEMM = LoopNest(
    (
        Loop("i_0", 8, "serial", None),
        Loop("j_0", 8, "serial", 0),
        Loop("k_0", 64, "serial", 1),
        Loop("i_1", 32, "serial", 2),
        Loop("k_1", 4, "serial", 3),
        Loop("j_1_0", 4, "unrolled", 4),
    ),
    ("main_compute_",),
)


ALL = {8, 64, 4096, 131072, 524288}  # every loop kept: a block per loop body


def test_a_count_names_the_innermost_loop_whose_body_runs_that_often():
    assert [GEMM.trips(i) for i in range(6)] == [8, 64, 4096, 131072, 524288, 524288]
    layout = LoopLayout(GEMM, ALL)
    assert layout.flat == set()
    assert layout.matches(524288) == [LoopMatch(4, 524288)]  # k_1, not the unrolled j_1_0 inside it
    assert layout.matches(131072) == [LoopMatch(3, 131072)]  # i_1's own blocks (k_1's set-up and exit)
    assert layout.matches(8) == [LoopMatch(0, 8)]
    assert layout.matches(1) == [] and layout.matches(0) == []  # outside every loop
    assert layout.matches(100) == []  # no loop runs that often: no name, never the nearest


def test_what_llvm_did_to_a_loop_is_read_from_the_counts():
    # k_1 unrolled by 2; with its first iteration peeled off too (a remainder iteration elsewhere)
    long_k = LoopNest(GEMM.loops[:4] + (Loop("k_1", 16, "serial", 3),))
    assert LoopLayout(long_k, {8, 64, 4096, 131072, 131072 * 8}).matches(131072 * 8) == [LoopMatch(4, 131072 * 8, 2)]
    # ... but a loop shorter than REWRITTEN_MIN_EXTENT is only ever matched as it is
    assert LoopLayout(GEMM, {8, 64, 4096, 131072, 262144}).matches(262144) == []
    # (x86_64's gemm with tile_k = 64: 128 x 31 = 128 x (64 - 1) // 2)
    deep = LoopNest((Loop("i", 128, "serial", None), Loop("k", 64, "serial", 0)))
    assert LoopLayout(deep, {128, 128 * 31}).matches(128 * 31) == [LoopMatch(1, 128 * 31, 2, 1)]
    # i_1's first iteration peeled off: its body runs 31 times per entry
    assert LoopLayout(GEMM, {8, 64, 4096, 4096 * 31}).matches(4096 * 31) == [LoopMatch(3, 4096 * 31, peeled=1)]
    # k_1 unrolled completely: no block runs once per its iteration, its code runs in i_1's blocks
    layout = LoopLayout(GEMM, {8, 64, 4096, 131072})
    assert layout.flat == {4} and layout.unrolled_inside(3) == [4]
    assert layout.matches(131072) == [LoopMatch(3, 131072)]


def test_loops_inside_a_loop_llvm_unrolled_are_fitted_per_copy():
    # i[4] > k[4] > j[16]: LLVM unrolled k, so j's loop exists 4 times, each run 4 x 16 times per call
    nest = LoopNest((Loop("i", 4, "serial", None), Loop("k", 4, "serial", 0), Loop("j", 16, "serial", 1)))
    layout = LoopLayout(nest, {4, 64})
    assert layout.flat == {1} and layout.outer[2] == 4
    assert layout.matches(64) == [LoopMatch(2, 64)] and layout.matches(60) == [LoopMatch(2, 60, peeled=1)]
    assert LoopLayout(nest, {4, 16, 256}).matches(256) == [LoopMatch(2, 256)]  # k kept: 4 x 4 x 16


def test_equal_counts_of_two_loops_are_ambiguous_but_copies_of_one_loop_are_not():
    siblings = LoopNest((Loop("i", 64, "serial", None), Loop("j", 64, "serial", None)))
    assert LoopLayout(siblings, {64}).matches(64) == [LoopMatch(0, 64), LoopMatch(1, 64)]
    # TVM unrolled `u` (2 copies of the loop k inside it: the second is a copy of the first)
    copies = LoopNest(
        (Loop("u", 2, "unrolled", None), Loop("k", 16, "serial", 0), Loop("k", 16, "serial", 0, copy_of=1))
    )
    assert LoopLayout(copies, {16}).matches(16) == [LoopMatch(1, 16)]
    # an exact fit is plainer than a peeled one: the peeled candidate is not shown
    plain = LoopNest((Loop("a", 30, "serial", None), Loop("b", 31, "serial", None)))
    assert LoopLayout(plain, {30}).matches(30) == [LoopMatch(0, 30)]


def test_debug_ranges_say_where_a_variable_lives_and_round_trip():
    nest = LoopNest(GEMM.loops, ("main_compute_",), ranges={"k_1": [[0x401000, 0x401040]]})
    assert nest.located("k_1", 0x401030, 0x401050) and not nest.located("k_1", 0x401040, 0x401080)
    assert not nest.located("i_1", 0x401000, 0x401040)
    assert LoopNest.from_dict(json.loads(json.dumps(nest.to_dict())), "x") == nest
    with pytest.raises(InputError, match="'ranges' must map variables to lists of"):
        LoopNest.from_dict({**nest.to_dict(), "ranges": {"k_1": [[1]]}}, "x")


def test_loops_that_do_not_iterate_are_never_named():
    nest = LoopNest(
        (
            Loop("i", 16, "parallel", None),
            Loop("v", 8, "vectorized", 0),
            Loop("one", 1, "serial", 0),
            Loop("n", None, "serial", 0),
            Loop("m", 4, "serial", 3),
        )
    )
    assert nest.iterating() == [0]  # extent 1 and vectorized do not loop; n's extent is not constant
    assert LoopLayout(nest, {16}).matches(16) == [LoopMatch(0, 16)] and nest.trips(4) is None


def test_the_nest_round_trips_and_bad_files_are_input_errors_naming_the_source():
    again = LoopNest.from_dict(json.loads(json.dumps(GEMM.to_dict())), "loops.json")
    assert again == GEMM
    good = GEMM.to_dict()
    # a version 1 nest (a baseline recorded before loops named what they store) reads without stores
    old = {**good, "version": 1, "loops": [{k: v for k, v in row.items() if k != "stores"} for row in good["loops"]]}
    assert LoopNest.from_dict(old, "old.json") == GEMM
    for bad, message in [
        (
            {**good, "version": 4},
            r"version 4, written by a newer perfguard; this is perfguard .* \(reads up to loop "
            r"nest version 3\): upgrade perfguard$",
        ),
        ({**good, "version": 0}, r"version 0 is not one of \[1, 2, 3\]"),
        ({**good, "version": 1}, "loop 0 must be"),  # version 1 rows have no stores
        ({**good, "loops": [dict(good["loops"][0], stores="C")]}, "loop 0 must be"),
        ({**good, "loops": [dict(good["loops"][0], kind="diagonal")]}, "loop 0 must be"),
        ({**good, "loops": [dict(good["loops"][0], parent=0)]}, "loop 0 must be"),  # itself as parent
        ({**good, "loops": [dict(good["loops"][0], extent=True)]}, "loop 0 must be"),
        ({**good, "functions": [1]}, "'functions' must be a list of strings"),
        ([], "must be an object"),
    ]:
        with pytest.raises(InputError, match=f"^x.json: loop nest.*{message}"):
            LoopNest.from_dict(bad, "x.json")


# -- real builds --------------------------------------------------------------------------------


def _gemm_nest(tmp_path, target: str, **params) -> tuple[LoopNest, object]:
    from perfguard.kernels.gemm import gemm

    lowered = inspect_module(gemm(**params), 1, "gemm")
    build_object(lowered, BUILTIN[target].tvm_target, tmp_path / "kernel.o", "gemm")
    return record_loops(lowered.mod, BUILTIN[target].tvm_target, tmp_path / "kernel.o"), lowered


GEMM_PARAMS = dict(M=64, N=64, K=64, tile_m=16, tile_n=32, tile_k=8, vector=8, unroll=0)


@pytest.mark.parametrize("target", ["x86_64", "aarch64"])
def test_a_real_gemm_nest_is_the_schedule_as_lowered(tmp_path, target):
    nest, _ = _gemm_nest(tmp_path, target, **GEMM_PARAMS)
    assert nest.error is None
    by_var = {loop.var: i for i, loop in enumerate(nest.loops)}
    # the product's nest: i_0 > j_0 > k_0 > i_1 > k_1 > j_1_0 (the 8 lanes j_1_1 became SIMD)
    k_1 = by_var["k_1"]
    assert [nest.loops[i].var for i in nest.path(k_1)] == ["i_0", "j_0", "k_0", "i_1", "k_1"]
    assert [nest.loops[i].extent for i in nest.path(k_1)] == [4, 2, 8, 16, 8]
    assert nest.trips(k_1) == 64 * 64 * (64 // 32)  # every (i, k) pair once per j tile
    # the lanes TVM vectorised are no loop of the lowered code: recorded from the schedule, inside j_1_0
    j_1_1 = by_var["j_1_1"]
    assert (nest.loops[j_1_1].kind, nest.loops[j_1_1].extent, nest.loops[nest.loops[j_1_1].parent].var) == (
        "vectorized",
        8,
        "j_1_0",
    )
    assert j_1_1 not in nest.iterating() and nest.trips(j_1_1) == nest.trips(nest.loops[j_1_1].parent)
    # the nest's name: what its blocks write (the zeroing and the product both write C)
    assert (
        {nest.loops[i].var: nest.loops[i].stores for i in range(len(nest.loops)) if nest.loops[i].stores}
        == {"i_0": ("C",)}
        and nest.nest_name(k_1) == "C"
        and nest.nest_index(k_1) == 1
    )
    assert any(f.startswith("__tvm_ffi_") for f in nest.functions)
    assert set(nest.functions) == set(object_functions(tmp_path / "kernel.o"))


def test_the_nest_is_written_once_beside_the_build_and_read_back(tmp_path):
    nest, lowered = _gemm_nest(tmp_path, "x86_64", **GEMM_PARAMS)
    obj = (tmp_path / "kernel.o").read_bytes()
    first = ensure_loops(tmp_path, lowered.mod, BUILTIN["x86_64"].tvm_target)
    assert first == nest.to_dict() and (tmp_path / LOOPS_FILE).is_file()
    assert (tmp_path / "kernel.o").read_bytes() == obj  # recording it changes no byte of the build
    assert ensure_loops(tmp_path, None, {}) == first  # read, not recorded again (mod None would fail)
    # a file of an older version (no stores) is recorded again, not read as it is
    old = dict(first, version=1, loops=[{k: v for k, v in row.items() if k != "stores"} for row in first["loops"]])
    (tmp_path / LOOPS_FILE).write_text(json.dumps(old))
    assert ensure_loops(tmp_path, lowered.mod, BUILTIN["x86_64"].tvm_target) == first
    assert json.loads((tmp_path / LOOPS_FILE).read_text())["version"] == 3
    (tmp_path / LOOPS_FILE).write_text("{cut")
    assert ensure_loops(tmp_path, None, {}) is None  # a damaged file names no loop, never an error


def test_nests_are_named_by_what_they_write_before_lowering_merges_buffers(tmp_path):
    """Lowering lets an attention's exponentials and probabilities reuse the scores' storage (one
    buffer name for three nests); the names come from the scheduled module, where each is its own."""
    from examples.kernels.attention import attention

    target = BUILTIN["x86_64"].tvm_target
    lowered = inspect_module(attention(S=16, D=16, vector=4), 1, "attention")
    build_object(lowered, target, tmp_path / "kernel.o", "attention")
    nest = record_loops(lowered.mod, target, tmp_path / "kernel.o")
    roots = [i for i, loop in enumerate(nest.loops) if loop.parent is None]
    assert [nest.nest_name(i) for i in roots] == ["scores", "row_max", "e", "row_sum", "p", "out"]
    assert [nest.nest_index(i) for i in roots] == [1, 2, 3, 4, 5, 6]
    # every loop of a nest carries its nest's name; the order of nests is the order of their code
    inner = [i for i in range(len(nest.loops)) if nest.loops[i].parent is not None]
    assert all(nest.nest_name(i) == nest.nest_name(nest.path(i)[0]) for i in inner)
    assert nest.before(roots[0], roots[1]) and not nest.before(roots[1], roots[0])
    assert not nest.before(roots[0], inner[0]) and not nest.before(inner[0], roots[0])  # inside it: neither


def test_loops_tvm_vectorised_are_recorded_inside_the_loop_around_them(tmp_path):
    """Lowering turns a vectorised loop into vector instructions: the lowered module has no loop of
    it. It is read from the schedule and recorded inside the loop around it that lowering kept."""
    from examples.cookbook.recipes.stencil import stencil

    target = BUILTIN["x86_64"].tvm_target
    nests = {}
    for vector in (8, 1):
        lowered = inspect_module(stencil(H=32, W=64, tile=8, vector=vector), 1, "stencil")
        build_object(lowered, target, tmp_path / f"kernel{vector}.o", "stencil")
        nests[vector] = record_loops(lowered.mod, target, tmp_path / f"kernel{vector}.o")
    nest = nests[8]
    assert nest.error is None
    assert [(x.var, x.extent, x.kind, x.parent) for x in nest.loops] == [
        ("i_0", 4, "serial", None),
        ("i_1", 8, "serial", 0),
        ("j_0", 8, "serial", 1),
        ("j_1", 8, "vectorized", 2),
    ]
    assert nest.iterating() == [0, 1, 2] and nest.nest_name(3) == "out"
    # LLVM unrolled j_0 into i_1 (no block runs 4 x 8 x 8 times): j_1's lanes are in i_1's blocks
    layout = LoopLayout(nest, {4, 32})
    assert layout.flat == {2} and layout.unrolled_inside(1) == [2] and layout.vectorised_inside(1) == [3]
    assert layout.vectorised_inside(0) == []  # i_1 keeps its blocks: the lanes are not i_0's
    # without the vectorise TVM keeps the column loop j: nothing vectorised to record
    assert [(x.var, x.kind) for x in nests[1].loops] == [("i_0", "serial"), ("i_1", "serial"), ("j", "serial")]
