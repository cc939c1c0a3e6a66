"""The cachegrind back end: its strict cachegrind.out parser, its mapping to Stats, real runs
of small C guests (exact region-of-interest counts, the known straddling-access difference,
determinism, error paths), and the cross-check against the QEMU plugin on one kernel per
built-in family through perfguard.job.run.run_job."""

from __future__ import annotations

import json
import platform
import random
import shutil
import subprocess
import time
from dataclasses import replace

import pytest

from benchmarks.crosscheck import FLOOR, agreements, markdown, run_pairs
from perfguard.config import KernelSpec
from perfguard.errors import InfraError, InputError
from perfguard.shells.cli import main
from perfguard.sim import cachegrind as cg
from perfguard.sim.cachegrind import (
    CachegrindSimulator,
    event_difference,
    parse_cachegrind_out,
    stats_from_events,
)
from perfguard.sim.qemu import QemuSimulator
from perfguard.sim.stats import STAT_FIELDS
from perfguard.targets import BUILTIN, CacheLevel
from tests.conftest import REPO

X86 = BUILTIN["x86_64"]
MAPPED = {"insts", "l1i_accesses", "l1i_misses", "l1d_misses", "l2_accesses", "l2_misses"}

needs_valgrind = pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("valgrind") is None,
    reason="cachegrind runs on x86_64 hosts with valgrind installed",
)
needs_toolchain = pytest.mark.skipif(
    shutil.which(X86.cc) is None or shutil.which(X86.qemu) is None,
    reason=f"{X86.cc} and {X86.qemu} are needed",
)

# ---------------------------------------------------------------------------------------------
# parser

EVENTS = "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim"
SAMPLE = f"""desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         32768 B, 64 B, 8-way associative
desc: LL cache:         1048576 B, 64 B, 16-way associative
cmd: /tmp/perfguard-cachegrind-abcdefgh/harness 2 1
events: {EVENTS}
fl=???
fn=perfguard_roi_begin
0 1 1 1 0 0 0 0 0 0 0 0 0 0
fn=perfguard_roi_end
0 1
fl=./IRModule.CodeGenLLVM
fn=main_compute_
0 1000 4 4 300 20 10 100 8 6 50 3 0 0
fn=perfguard_roi_end
7 2 0 0 1
summary: 1004 5 5 301 20 10 100 8 6 50 3 0 0
"""


def test_parse_sample():
    out = parse_cachegrind_out(SAMPLE.encode(), "sample")
    assert out.events == tuple(EVENTS.split())
    assert out.command == "/tmp/perfguard-cachegrind-abcdefgh/harness 2 1"
    assert out.totals["Ir"] == 1004 and out.totals["Dr"] == 301 and out.totals["Bim"] == 0
    # a function's counts are summed over every file it appears under; missing trailing counts are 0
    assert out.functions["perfguard_roi_end"]["Ir"] == 3
    assert out.functions["perfguard_roi_end"]["Dr"] == 1
    assert out.functions["main_compute_"]["D1mw"] == 8
    assert out.cache_geometry("sample") == {"I1": X86.l1i, "D1": X86.l1d, "LL": X86.l2}


def test_geometry_direct_mapped():
    text = SAMPLE.replace(
        "desc: D1 cache:         32768 B, 64 B, 8-way associative",
        "desc: D1 cache:         4096 B, 32 B, direct-mapped",
    )
    assert parse_cachegrind_out(text).cache_geometry("x")["D1"] == CacheLevel(4096, 1, 32)


def test_every_truncation_is_refused():
    data = SAMPLE.encode()
    for cut in range(len(data)):
        with pytest.raises(InputError):
            parse_cachegrind_out(data[:cut], "cut")


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("summary: 1004 ", "summary: 1005 ", "summary Ir = 1005"),
        ("summary: 1004 5 5 301 20 10 100 8 6 50 3 0 0", "summary: 1004 5 5", "3 counts for 13 events"),
        ("0 1000 4 4", "0 1000 4 x", "not a non-negative integer"),
        ("0 1000 4 4", "0 1000  4", "not a non-negative integer"),
        ("0 1000 4 4", "0 1000 \u0664 4", "not a non-negative integer"),
        ("0 1000 4 4", f"0 {10**30} 4", "64 bits"),
        ("0 1 1 1 0 0 0 0 0 0 0 0 0 0\n", "0 1 1 1 0 0 0 0 0 0 0 0 0 0 0\n", "14 counts for 13 events"),
        ("fl=???\nfn=perfguard_roi_begin", "fn=perfguard_roi_begin", "before any 'fl='"),
        ("fn=main_compute_\n", "", "counts before any .fn=. line"),
        ("fl=./IRModule.CodeGenLLVM\n", "fi=inlined.h\n", "not a cachegrind.out line"),
        ("cmd: ", "command: ", "expected the 'cmd:' line"),
        (f"events: {EVENTS}", "events: Ir Ir", "named twice"),
        (f"events: {EVENTS}", "events: ", "names no event"),
        (
            "summary: 1004 5 5 301 20 10 100 8 6 50 3 0 0\n",
            "summary: 1004 5 5 301 20 10 100 8 6 50 3 0 0\nfn=late\n",
            "after the summary",
        ),
        ("50 3 0 0\nfn=perfguard_roi_end", "50 3 0 0\r\nfn=perfguard_roi_end", "not a non-negative integer"),
    ],
)
def test_garbage_is_refused(old, new, message):
    assert old in SAMPLE
    with pytest.raises(InputError, match=message):
        parse_cachegrind_out(SAMPLE.replace(old, new, 1), "bad")


def test_binary_data_is_refused():
    with pytest.raises(InputError, match="NUL"):
        parse_cachegrind_out(SAMPLE.encode().replace(b"fl=???", b"fl=\0"), "bad")
    with pytest.raises(InputError, match="empty"):
        parse_cachegrind_out(b"", "bad")


def test_random_mutations_parse_or_raise_input_error():
    rng = random.Random(20240611)
    data = SAMPLE.encode()
    alphabet = b"0123456789 \n=:-abcfilnmsuy\x00\xff"
    parsed = refused = 0
    for _ in range(3000):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(mutated))
            kind = rng.randrange(3)
            if kind == 0:
                mutated[at] = rng.choice(alphabet)
            elif kind == 1:
                del mutated[at]
            else:
                mutated.insert(at, rng.choice(alphabet))
        try:
            out = parse_cachegrind_out(bytes(mutated), "fuzz")
        except InputError as exc:
            refused += 1
            assert exc.message.startswith("fuzz") and "\n" not in exc.message, exc.message
            continue
        parsed += 1
        # what parses is whole: a count per event, none negative, the summary the sum of the functions'
        assert set(out.totals) == set(out.events) and len(out.events) == len(set(out.events)) > 0
        for counts in out.functions.values():
            assert set(counts) == set(out.events) and all(isinstance(v, int) and v >= 0 for v in counts.values())
        for event in out.events:
            assert out.totals[event] == sum(counts[event] for counts in out.functions.values()), event
    # both answers occur (with this seed 2003 refused; 997 parsed, their mutations in text, names or zeros)
    assert refused > 1500 and parsed > 500, (refused, parsed)


# ---------------------------------------------------------------------------------------------
# mapping and difference


def test_mapping_and_none_fields():
    counts = dict(zip(EVENTS.split(), [1000, 7, 3, 400, 30, 20, 100, 9, 8, 77, 5, 4, 2]))
    stats = stats_from_events(counts)
    assert stats.insts == stats.l1i_accesses == 1000
    assert stats.l1i_misses == 7
    assert stats.l1d_misses == 30 + 9
    assert stats.l2_accesses == 7 + 30 + 9
    assert stats.l2_misses == 3 + 20 + 8
    for name in STAT_FIELDS:
        assert (getattr(stats, name) is None) == (name not in MAPPED), name
    with pytest.raises(InputError, match="'D1mr'"):
        stats_from_events({k: v for k, v in counts.items() if k != "D1mr"}, "file")


def test_difference():
    base = dict.fromkeys(cg.EVENTS_NEEDED, 1000)
    longer = dict(base, Ir=5000, D1mr=1002, ILmr=990)  # a miss count may drop by a few: 0
    kernel = event_difference(longer, base, "runs")
    assert kernel["Ir"] == 4000 and kernel["D1mr"] == 2 and kernel["ILmr"] == 0 and kernel["Dw"] == 0
    with pytest.raises(InfraError, match="Ir is 999 with the kernel calls and 1000 without"):
        event_difference(dict(base, Ir=999), base, "runs")
    with pytest.raises(InfraError, match="D1mw"):
        event_difference(dict(base, D1mw=900), base, "runs")


# ---------------------------------------------------------------------------------------------
# availability and fingerprint (no valgrind run needed)


def test_check_available_names_the_reason(tmp_path, monkeypatch):
    sim = CachegrindSimulator(tmp_path)
    host = {"isa": "aarch64"}
    monkeypatch.setattr(cg.platform, "machine", lambda: host["isa"])
    with pytest.raises(InfraError, match="needs an x86_64 host; this host is aarch64"):
        sim.check_available(X86)
    host["isa"] = "x86_64"
    with pytest.raises(InfraError, match="cannot run target aarch64"):
        sim.check_available(BUILTIN["aarch64"])
    narrow = replace(X86, l1d=CacheLevel(32768, 8, 16))
    with pytest.raises(InfraError, match="l1d line of 16 B"):
        sim.check_available(narrow)
    monkeypatch.setattr(cg, "VALGRIND", "valgrind-not-installed-here")
    with pytest.raises(InfraError, match="apt-get install valgrind"):
        sim.check_available(X86)


def test_harness_arguments(tmp_path):
    sim = CachegrindSimulator(tmp_path)
    for args in (["0", "1"], ["1"], ["1", "1", "time"], ["-1", "0"], ["a", "0"]):
        with pytest.raises(InputError, match="REPS WARMUP"):
            sim.run(tmp_path / "harness", X86, args, 10)


@needs_valgrind
def test_fingerprint(tmp_path):
    sim = CachegrindSimulator(tmp_path)
    data = json.loads(sim.fingerprint(X86))
    assert data["valgrind"].startswith("valgrind-3.")
    assert data["geometry"] == "--I1=32768,8,64 --D1=32768,8,64 --LL=1048576,16,64"
    assert data["run"] == cg.RUN_RECIPE and "REPS=0" in data["roi"]
    other = replace(X86, l2=CacheLevel(2 * 1048576, 16, 64))
    assert sim.fingerprint(other) != sim.fingerprint(X86)


# ---------------------------------------------------------------------------------------------
# real runs of small guests

GUEST_C = r"""
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline, noipa, used)) void perfguard_roi_begin(void) { __asm__ volatile("# begin" ::: "memory"); }
__attribute__((noinline, noipa, used)) void perfguard_roi_end(void) { __asm__ volatile("# end" ::: "memory"); }

#define BYTES (8L << 20)
static char *buf;

/* One 8-byte load per STRIDE bytes at OFFSET: every load touches lines no earlier load did. */
__attribute__((noinline, noipa)) static void kernel(void)
{
    for (long at = OFFSET; at + 8 <= BYTES; at += STRIDE) {
        long v;
        __asm__ volatile("movq (%1), %0" : "=r"(v) : "r"(buf + at) : "memory");
    }
}

#ifdef MARGINAL
/* perfguard's harness since version 4: the region twice, with no call and with REPS calls */
__attribute__((used)) const char perfguard_roi_marginal[] = "no calls, then REPS calls";
__attribute__((noinline, noipa)) static void region(long reps)
{
    perfguard_roi_begin();
    for (long r = 0; r < reps; ++r) kernel();
    perfguard_roi_end();
}
#endif

int main(int argc, char **argv)
{
    if (argc != 3) return 64;
    long reps = atol(argv[1]), warmup = atol(argv[2]);
    if (posix_memalign((void **)&buf, 64, BYTES)) return 70;
    for (long i = 0; i < BYTES; i += 4096) buf[i] = 1;
#ifdef FAIL
    if (reps > 0) { fprintf(stderr, "guest: deliberate failure\n"); return 3; }
#endif
#ifdef HANG
    if (reps > 0) for (;;) __asm__ volatile("");
#endif
    for (long w = 0; w < warmup; ++w) kernel();
#if defined(MARGINAL) && defined(ONE_REGION)
    region(reps);
#elif defined(MARGINAL)
    region(0);
    region(reps);
#else
    perfguard_roi_begin();
    for (long r = 0; r < reps; ++r) kernel();
    perfguard_roi_end();
#endif
    fputs("done\n", stdout);
    return 0;
}
"""

LINES = (8 << 20) // 64


@pytest.fixture(scope="module")
def guests(tmp_path_factory):
    """name -> static x86_64 guest: aligned (one load per line), straddling (each load crosses
    into the next line, both cold), failing, hanging, stripped."""
    if shutil.which(X86.cc) is None:
        pytest.skip(f"{X86.cc} is needed")
    root = tmp_path_factory.mktemp("cachegrind-guests")
    source = root / "guest.c"
    source.write_text(GUEST_C)
    variants = {
        "aligned": ["-DOFFSET=0", "-DSTRIDE=64"],
        "straddling": ["-DOFFSET=60", "-DSTRIDE=128"],
        "failing": ["-DOFFSET=0", "-DSTRIDE=64", "-DFAIL"],
        "hanging": ["-DOFFSET=0", "-DSTRIDE=64", "-DHANG"],
        "marginal": ["-DOFFSET=0", "-DSTRIDE=64", "-DMARGINAL"],
        "one_region": ["-DOFFSET=0", "-DSTRIDE=64", "-DMARGINAL", "-DONE_REGION"],
    }
    built = {}
    for name, flags in variants.items():
        built[name] = root / name
        subprocess.run([X86.cc, "-O2", "-static", "-no-pie", *flags, str(source), "-o", str(built[name])], check=True)
    built["stripped"] = root / "stripped"
    shutil.copy(built["aligned"], built["stripped"])
    subprocess.run(["strip", str(built["stripped"])], check=True)
    return built


@needs_valgrind
def test_marginal_regions_count_exactly_what_the_two_run_difference_counts(guests, tmp_path):
    """A guest that runs its region with no call and then with REPS calls (perfguard's harness) is
    counted by the plugin as the second region minus the first: the same instructions, branches,
    calls and returns as cachegrind's REPS=R minus REPS=0 runs, to the count. A guest with one
    region (the old harness) counts the region's fixed code too (the marker's return, the loop
    guard, the call to the end marker), which the two-run difference cancels in part."""
    from perfguard.errors import InfraError
    from perfguard.sim.qemu import QemuSimulator

    qemu, grind = QemuSimulator(tmp_path / "qemu"), CachegrindSimulator(tmp_path / "grind")
    for reps in (1, 3):
        plugin = qemu.run(guests["marginal"], X86, [str(reps), "1"], 120)
        valgrind = grind.run(guests["marginal"], X86, [str(reps), "1"], 120)
        assert plugin.roi_count == 1 and plugin.stdout == b"done\n"
        assert plugin.stats.insts == valgrind.stats.insts, reps  # to the instruction
        assert plugin.stats.l1i_accesses == valgrind.stats.l1i_accesses, reps
        assert sum(b.insns * b.count for b in plugin.stats.blocks.blocks) == plugin.stats.insts
        assert abs(plugin.stats.l1d_misses - reps * LINES) <= FLOOR  # misses: the second region's
    old_plugin = qemu.run(guests["aligned"], X86, ["1", "1"], 120).stats.insts
    old_grind = grind.run(guests["aligned"], X86, ["1", "1"], 120).stats.insts
    assert 0 < old_plugin - old_grind <= 8
    with pytest.raises(InfraError, match="plugin wrote no statistics file.*completed 1 region"):
        qemu.run(guests["one_region"], X86, ["2", "1"], 120)


@needs_valgrind
def test_region_of_interest_is_exact(guests, tmp_path):
    sim = CachegrindSimulator(tmp_path)
    one = sim.run(guests["aligned"], X86, ["1", "1"], 120)
    three = sim.run(guests["aligned"], X86, ["3", "1"], 120)
    assert one.stdout == b"done\n" and one.roi_count == 1
    # R kernel calls plus R loop trips, plus the loop's set-up when R > 0: linear in R
    per_call, remainder = divmod(three.stats.insts - one.stats.insts, 2)
    assert remainder == 0 and 0 <= one.stats.insts - per_call <= 8
    assert 4 * LINES < per_call < 8 * LINES
    assert one.total_insts > one.stats.insts
    # every load misses L1D and L2 (8 MiB streamed through 1 MiB): one miss per line
    for stats, reps in ((one.stats, 1), (three.stats, 3)):
        assert abs(stats.l1d_misses - reps * LINES) <= FLOOR
        assert abs(stats.l2_misses - reps * LINES) <= FLOOR
        assert stats.l1i_accesses == stats.insts
        assert stats.l2_accesses == stats.l1i_misses + stats.l1d_misses
        assert all((getattr(stats, f) is None) == (f not in MAPPED) for f in STAT_FIELDS)


@needs_valgrind
@needs_toolchain
def test_straddling_loads_count_once_in_cachegrind_per_line_in_the_plugin(guests, tmp_path):
    """The one cache-model difference the cross-check has to live with: a load that crosses a
    line boundary and misses both lines is one miss to cachegrind, two to the plugin."""
    grind = CachegrindSimulator(tmp_path).run(guests["straddling"], X86, ["1", "1"], 120).stats
    plugin = QemuSimulator(tmp_path).run(guests["straddling"], X86, ["1", "1"], 120).stats
    loads = LINES // 2
    assert abs(grind.insts - plugin.insts) <= FLOOR
    assert abs(grind.l1d_misses - loads) <= FLOOR and abs(plugin.l1d_misses - 2 * loads) <= FLOOR
    assert abs(grind.l2_misses - loads) <= FLOOR and abs(plugin.l2_misses - 2 * loads) <= FLOOR
    aligned_grind = CachegrindSimulator(tmp_path).run(guests["aligned"], X86, ["1", "1"], 120).stats
    aligned_plugin = QemuSimulator(tmp_path).run(guests["aligned"], X86, ["1", "1"], 120).stats
    assert abs(aligned_grind.l1d_misses - aligned_plugin.l1d_misses) <= FLOOR


@needs_valgrind
def test_counts_do_not_depend_on_location_or_environment(guests, tmp_path, monkeypatch):
    sim = CachegrindSimulator(tmp_path)
    first = sim.run(guests["aligned"], X86, ["1", "1"], 120)
    deep = tmp_path / ("very-long-directory-name-" * 4) / "elsewhere"
    deep.mkdir(parents=True)
    shutil.copy(guests["aligned"], deep / "harness-with-another-name")
    (tmp_path / ".valgrindrc").write_text("--D1=1024,1,64\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VALGRIND_OPTS", "--I1=1024,1,64")
    monkeypatch.setenv("PERFGUARD_NOISE", "x" * 300)
    second = sim.run(deep / "harness-with-another-name", X86, ["1", "1"], 120)
    assert json.dumps(first.stats.to_record(), sort_keys=True) == json.dumps(second.stats.to_record(), sort_keys=True)
    assert first.total_insts == second.total_insts


@pytest.mark.slow
@needs_valgrind
def test_failures_are_one_line_infra_errors(guests, tmp_path):
    sim = CachegrindSimulator(tmp_path)
    with pytest.raises(InfraError) as failed:
        sim.run(guests["failing"], X86, ["1", "0"], 120)
    message = failed.value.message
    assert str(guests["failing"]) in message and "x86_64" in message
    assert "exited with status 3" in message and message.endswith("guest: deliberate failure")
    assert "\n" not in message

    with pytest.raises(InfraError, match="never ran perfguard_roi_begin"):
        sim.run(guests["stripped"], X86, ["1", "0"], 120)

    started = time.monotonic()
    with pytest.raises(InfraError, match="timed out"):
        sim.run(guests["hanging"], X86, ["1", "0"], 3)
    assert time.monotonic() - started < 30

    with pytest.raises(InfraError, match="does not exist"):
        sim.run(tmp_path / "no-such-harness", X86, ["1", "0"], 10)


FAKE_VALGRIND = """#!/bin/sh
if [ "$1" = "--version" ]; then echo valgrind-3.19.0; exit 0; fi
for arg in "$@"; do
  case "$arg" in --cachegrind-out-file=*) out="${arg#--cachegrind-out-file=}";; esac
done
echo "fake valgrind: {last}" >&2
{action}
"""


@pytest.mark.parametrize(
    "action, expected",
    [
        (
            'printf "desc: I1 cache: 1 B\\nsummary: 1\\n" > "$out"',
            r"cachegrind output .*harness on target x86_64.*expected the 'cmd:' line.*garbage output.*fake valgrind: wrote garbage",
        ),
        ('printf "\\377\\376not text" > "$out"', r"garbage output"),
        (":", r"cachegrind wrote no output file; stderr: fake valgrind: wrote nothing"),
        ("kill -SEGV $$", r"killed by SIGSEGV; stderr: fake valgrind: crashed"),
    ],
)
def test_broken_valgrind_output(tmp_path, monkeypatch, action, expected):
    last = {"kill": "crashed", ":": "wrote nothing"}.get(action.split()[0], "wrote garbage")
    fake = tmp_path / "valgrind"
    fake.write_text(FAKE_VALGRIND.replace("{last}", last).replace("{action}", action))
    fake.chmod(0o755)
    binary = tmp_path / "harness"
    binary.write_bytes(b"\x7fELF")
    monkeypatch.setattr(cg, "VALGRIND", str(fake))
    monkeypatch.setattr(cg.platform, "machine", lambda: "x86_64")
    with pytest.raises(InfraError, match=expected):
        CachegrindSimulator(tmp_path).run(binary, X86, ["1", "0"], 30)


# ---------------------------------------------------------------------------------------------
# cross-check against the QEMU plugin, one kernel per built-in family, through run_job

# Shapes that stay off the layout effects docs/simulators.md's cross-check section explains: no
# per-call workspace (conv2d and depthwise without padding, dense_relu with its accumulator
# below 1 KiB) and conv2d rows a whole number of lines wide. gemv streams a 4 MiB matrix,
# so its L2 misses are real.
FAMILIES = [
    (
        "gemm_x",
        "perfguard.kernels.gemm:gemm",
        "gemm",
        {"M": 64, "N": 64, "K": 128, "tile_m": 8, "tile_n": 32, "tile_k": 8, "vector": 8},
    ),
    ("gemv_x", "perfguard.kernels.gemv:gemv", "gemv", {"M": 1024, "K": 1024, "tile_m": 8, "tile_k": 256, "vector": 8}),
    (
        "conv2d_x",
        "perfguard.kernels.conv2d:conv2d",
        "conv2d",
        {
            "N": 1,
            "C": 32,
            "H": 16,
            "W": 16,
            "F": 64,
            "R": 1,
            "S": 1,
            "stride": 1,
            "padding": 0,
            "tile_f": 8,
            "tile_p": 2,
            "tile_q": 16,
        },
    ),
    (
        "depthwise_x",
        "perfguard.kernels.depthwise:depthwise_conv2d",
        "depthwise_conv2d",
        {
            "N": 1,
            "C": 16,
            "H": 34,
            "W": 34,
            "R": 3,
            "S": 3,
            "stride": 1,
            "padding": 0,
            "tile_c": 4,
            "tile_p": 4,
            "tile_q": 32,
            "vector": 8,
        },
    ),
    (
        "dense_relu_x",
        "perfguard.kernels.dense_relu:dense_relu",
        "dense_relu",
        {"B": 8, "I": 256, "O": 128, "tile_b": 2, "tile_o": 8, "tile_i": 128, "vector": 8},
    ),
]


@pytest.mark.slow
@needs_valgrind
@needs_toolchain
def test_crosscheck_every_family(cache_dir):
    specs = [KernelSpec(name, entry, family, params) for name, entry, family, params in FAMILIES]
    # in this process, which has TVM loaded: a pool's workers would each import it again (~4 CPU-s),
    # and a job's statistics do not depend on the process that ran it
    pairs = run_pairs(specs, REPO, cache_dir, X86, workers=1)
    table = markdown(pairs)
    for qemu, grind in pairs:
        assert qemu.ok and grind.ok, table
        assert grind.simulator == "cachegrind" and grind.max_error is not None
        assert all(row.ok for row in agreements(qemu.stats, grind.stats)), table
        # the harness's marginal region: the same instructions, to the count (issue 26 item 5)
        assert qemu.stats.insts == grind.stats.insts, table
    gemv = next(g for q, g in pairs if q.kernel == "gemv_x")
    assert gemv.stats.l2_misses > 60000  # the matrix does not fit in L2: the L2 bound was tested


@pytest.mark.slow
@needs_valgrind
@needs_toolchain
def test_check_with_cachegrind_then_refuses_qemu_baselines(project, capsys):
    name, entry, family, params = FAMILIES[0]
    body = ", ".join(f"{k} = {v}" for k, v in params.items())
    config = project(f"""
        [perfguard]
        targets = ["x86_64"]

        [[kernel]]
        name = "{name}"
        entry = "{entry}"
        family = "{family}"
        params = {{ {body} }}
        """)
    assert main(["check", "--config", str(config), "--simulator", "cachegrind"]) == 0
    result = json.loads((config.parent / "reports" / "perfguard.json").read_text())["results"][0]
    assert result["verdict"] == "new" and result["simulator"] == "cachegrind"
    assert result["stats"]["l1d_accesses"] is None and result["stats"]["insts"] > 1000
    assert main(["baseline", "update", "--config", str(config)]) == 0  # the config's simulator: qemu
    capsys.readouterr()
    assert main(["check", "--config", str(config), "--simulator", "cachegrind"]) == 2
    out = capsys.readouterr()
    assert "baseline was simulated with qemu, this run with cachegrind; refusing to compare" in out.out + out.err
