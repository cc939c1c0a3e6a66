"""Real tests of the QEMU back end: small C guests are cross-compiled statically for each ISA
and simulated through QemuSimulator.run with perfguard's TCG plugin.

The guests put known work inside perfguard_roi_begin/perfguard_roi_end (and other work
outside it); the assertions check exact per-iteration counts (differences between runs with
N and 2N iterations are exact multiples), ROI exclusion, cache behaviour against closed-form
expectations, determinism, and the error paths.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from perfguard.errors import InfraError, InputError
from perfguard.sim.qemu import QemuSimulator, parse_plugin_output
from perfguard.sim.stats import STAT_FIELDS, Stats
from perfguard.targets import BUILTIN

ISAS = ["x86_64", "aarch64", "riscv64"]
BIG = 8 << 20  # streaming array size: far larger than any built-in L2
LINE = 64

GUEST_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void perfguard_roi_begin(void) { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void perfguard_roi_end(void) { asm volatile("" ::: "memory"); }

#define BIG (8L << 20)
long stream_buf[BIG / sizeof(long)] __attribute__((aligned(64)));
long write_buf[BIG / sizeof(long)] __attribute__((aligned(64)));
long small_buf[16384 / sizeof(long)] __attribute__((aligned(64)));
volatile long va[1024], vb[1024], vc[1024];
double scratch[64] __attribute__((aligned(64)));

/* 2 loads and 1 store per iteration */
__attribute__((noinline, noipa)) static void vloop(long n)
{
    for (long i = 0; i < n; i++)
        vc[i & 1023] = va[i & 1023] + vb[i & 1023];
}

__attribute__((noinline, noipa)) void leaf(void) { asm volatile("" ::: "memory"); }
void (*volatile leaf_ptr)(void) = leaf;

/* A fixed instruction mix per iteration, one direct and one indirect call. */
__attribute__((noinline, noipa)) static void classify(long n)
{
    double *p = scratch;
    for (long i = 0; i < n; i++) {
#if defined(__x86_64__)
        asm volatile(
            "vfmadd231ps %%ymm1, %%ymm2, %%ymm0\n\t"   /* vec vec_fp */
            "vmovups (%0), %%ymm3\n\t"                 /* vec, one 256-bit load */
            "vmovups %%ymm3, 64(%0)\n\t"               /* vec, one store */
            "vaddss %%xmm4, %%xmm5, %%xmm6\n\t"        /* fp */
            "vcvtsi2sd %1, %%xmm7, %%xmm7\n\t"         /* fp */
            "vmovsd (%0), %%xmm8\n\t"                  /* load */
            "vucomisd %%xmm8, %%xmm7\n\t"              /* fp */
            "vpaddd %%ymm1, %%ymm2, %%ymm9\n\t"        /* vec */
            "vxorps %%xmm10, %%xmm10, %%xmm10\n\t"     /* vec */
            "addl $1, 128(%0)\n\t"                     /* load and store */
            "vmulpd %%ymm1, %%ymm2, %%ymm11\n\t"       /* vec vec_fp */
            "vbroadcastss (%0), %%ymm12\n\t"           /* vec, load */
            : : "r"(p), "r"(i)
            : "xmm0", "xmm3", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "memory", "cc");
#elif defined(__aarch64__)
        asm volatile(
            "fmla v0.4s, v1.4s, v2.4s\n\t"             /* vec vec_fp */
            "ldr q3, [%0]\n\t"                         /* vec, load */
            "str q3, [%0, #64]\n\t"                    /* vec, store */
            "fadd s4, s5, s6\n\t"                      /* fp */
            "scvtf d7, %1\n\t"                         /* fp */
            "ldr d16, [%0]\n\t"                        /* load */
            "fcmp d16, d7\n\t"                         /* fp */
            "add v17.4s, v1.4s, v2.4s\n\t"             /* vec */
            "ld1 {v18.4s, v19.4s}, [%0]\n\t"           /* vec, one load */
            "ldp x9, x10, [%0]\n\t"                    /* one load */
            "fmov s20, w9\n\t"                         /* nothing */
            "fneg d21, d16\n\t"                        /* nothing */
            "fmul v22.2d, v1.2d, v2.2d\n\t"            /* vec vec_fp */
            "dup v23.4s, v1.s[1]\n\t"                  /* vec */
            : : "r"(p), "r"(i)
            : "v0", "v3", "v4", "v7", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23",
              "x9", "x10", "memory", "cc");
#elif defined(__riscv)
        asm volatile(
            "fmadd.d ft0, ft1, ft2, ft3\n\t"           /* fp */
            "fld ft4, 0(%0)\n\t"                       /* load */
            "fsd ft4, 64(%0)\n\t"                      /* store */
            "fcvt.d.l ft5, %1\n\t"                     /* fp */
            "flt.d t1, ft5, ft4\n\t"                   /* fp */
            "fsgnj.d ft6, ft5, ft5\n\t"                /* nothing (fmv.d) */
            "fmv.x.d t2, ft6\n\t"                      /* nothing */
            "amoadd.d t3, t2, (%0)\n\t"                /* load and store */
            "fdiv.d ft7, ft5, ft4\n\t"                 /* fp */
#if defined(__riscv_vector)
            "vsetivli t4, 4, e32, m1, ta, ma\n\t"      /* nothing */
            "vle32.v v1, (%0)\n\t"                     /* vec, one load */
            "vfmacc.vv v2, v1, v1\n\t"                 /* vec vec_fp */
            "vadd.vv v3, v1, v1\n\t"                   /* vec */
            "vfmv.v.f v4, ft0\n\t"                     /* vec */
            "addi t5, %0, 128\n\t"
            "vse32.v v2, (t5)\n\t"                     /* vec, one store */
#endif
            : : "r"(p), "r"(i)
            : "ft0", "ft4", "ft5", "ft6", "ft7", "t1", "t2", "t3", "t4", "t5", "memory");
#endif
        leaf();
        leaf_ptr();
    }
}

static void *thread_body(void *arg) { return arg; }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 1000;
    long s = 0;
    if (!strcmp(mode, "loop") || !strcmp(mode, "twice") || !strcmp(mode, "open")) {
        vloop(5 * n); /* outside the ROI */
        perfguard_roi_begin();
        vloop(n);
        perfguard_roi_end();
        if (!strcmp(mode, "twice")) {
            perfguard_roi_begin();
            vloop(n);
            perfguard_roi_end();
        }
        if (!strcmp(mode, "open")) {
            perfguard_roi_begin(); /* never ended: dropped */
            vloop(3 * n);
        }
        vloop(5 * n); /* outside the ROI */
    } else if (!strcmp(mode, "stream")) {
        perfguard_roi_begin();
        for (long i = 0; i < BIG / (long)sizeof(long); i++)
            s += ((volatile long *)stream_buf)[i];
        perfguard_roi_end();
    } else if (!strcmp(mode, "reuse")) {
        for (long i = 0; i < 16384 / (long)sizeof(long); i++)
            small_buf[i] = i;
        perfguard_roi_begin();
        for (int r = 0; r < 100; r++)
            for (long i = 0; i < 16384 / (long)sizeof(long); i++)
                s += ((volatile long *)small_buf)[i];
        perfguard_roi_end();
    } else if (!strcmp(mode, "write")) {
        perfguard_roi_begin();
        for (long i = 0; i < BIG / (long)sizeof(long); i++)
            ((volatile long *)write_buf)[i] = i;
        perfguard_roi_end();
    } else if (!strcmp(mode, "classify")) {
        perfguard_roi_begin();
        classify(n);
        perfguard_roi_end();
    } else if (!strcmp(mode, "segv")) {
        perfguard_roi_begin();
        *(volatile long *)(n - n) = 1;
        perfguard_roi_end();
    } else if (!strcmp(mode, "exit3")) {
        perfguard_roi_begin();
        perfguard_roi_end();
        exit(3);
    } else if (!strcmp(mode, "hang")) {
        perfguard_roi_begin();
        for (;;)
            asm volatile("" ::: "memory");
    } else if (!strcmp(mode, "thread")) {
        pthread_t t;
        perfguard_roi_begin();
        pthread_create(&t, NULL, thread_body, NULL);
        pthread_join(t, NULL);
        perfguard_roi_end();
    } else if (!strcmp(mode, "noroi")) {
        vloop(n);
    } else {
        fprintf(stderr, "unknown mode '%s'\n", mode);
        return 2;
    }
    printf("ok %ld\n", s);
    return 0;
}
"""

# A register-blocked float32 GEMM like the kernels TVM emits; N is a multiple of every
# vector width, so the compiler's vectorised loop has no scalar epilogue.
GEMM_N = 32
GEMM_C = r"""
#include <stdio.h>
#define N 32
__attribute__((noinline)) void perfguard_roi_begin(void) { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void perfguard_roi_end(void) { asm volatile("" ::: "memory"); }
static float A[N * N] __attribute__((aligned(64)));
static float B[N * N] __attribute__((aligned(64)));
static float C[N * N] __attribute__((aligned(64)));
__attribute__((noinline, noipa)) void gemm(float *restrict c, const float *restrict a, const float *restrict b)
{
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) {
            float x = a[i * N + k];
            for (int j = 0; j < N; j++)
                c[i * N + j] += x * b[k * N + j];
        }
}
int main(void)
{
    for (int i = 0; i < N * N; i++) { A[i] = i % 7; B[i] = i % 5; }
    perfguard_roi_begin();
    gemm(C, A, B);
    perfguard_roi_end();
    double s = 0;
    for (int i = 0; i < N * N; i++) s += C[i];
    printf("%.1f\n", s);
    return 0;
}
"""

# Per-iteration counts of classify(): the asm block plus loop control (one conditional
# branch), a direct call, an indirect call (loading the volatile pointer) and two returns.
# x86 calls push and returns pop, hence 2 extra stores and 2 extra loads there.
CLASSIFY_EXPECTED = {
    "x86_64": dict(loads=7, stores=4, fp_insts=3, vec_insts=7, vec_fp_insts=2),
    "aarch64": dict(loads=5, stores=1, fp_insts=3, vec_insts=7, vec_fp_insts=2),
    "riscv64": dict(loads=3, stores=2, fp_insts=4, vec_insts=0, vec_fp_insts=0),
    "riscv64v": dict(loads=4, stores=3, fp_insts=4, vec_insts=5, vec_fp_insts=1),
}
BRANCHES_PER_ITER = dict(branches=5, cond_branches=1, indirect_branches=1, calls=2, returns=2)


def _require(target_name: str):
    target = BUILTIN[target_name]
    missing = [p for p in (target.cc, target.qemu, "cc") if shutil.which(p) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)}")
    return target


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> QemuSimulator:
    return QemuSimulator(cache_dir=tmp_path_factory.mktemp("qemu-cache"))


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    root = tmp_path_factory.mktemp("guests")
    built: dict[tuple, Path] = {}
    lock = threading.Lock()

    def _build(name: str, source: str, target_name: str, flags: tuple[str, ...] = ()) -> Path:
        target = _require(target_name)
        key = (name, target_name, flags)
        with lock:
            if key not in built:
                src = root / f"{name}.c"
                if not src.exists():
                    src.write_text(source)
                out = root / f"{name}-{target_name}"
                cmd = [target.cc, "-O1", "-static", "-no-pie", *flags, "-o", str(out), str(src)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                assert proc.returncode == 0, proc.stderr
                built[key] = out
        return built[key]

    return _build


def guest(build, target_name: str) -> Path:
    flags = ("-march=rv64gcv", "-mabi=lp64d") if target_name == "riscv64v" else ()
    return build("guest", GUEST_C, target_name, flags)


def run(sim, binary, target_name, *args, timeout=60.0):
    return sim.run(binary, BUILTIN[target_name], [str(a) for a in args], timeout)


@pytest.mark.parametrize("isa", ISAS)
def test_loop_counts_are_exact_and_roi_only(sim, build, isa):
    binary = guest(build, isa)
    one = run(sim, binary, isa, "loop", 1000)
    two = run(sim, binary, isa, "loop", 2000)
    assert one.stdout == b"ok 0\n" and one.roi_count == 1
    s1, s2 = one.stats, two.stats
    # known work: 2 loads and 1 store per iteration, plus a few for the calls around it
    assert 2000 <= s1.loads <= 2004
    assert 1000 <= s1.stores <= 1004
    # doubling N adds exactly N iterations' worth
    assert s2.loads - s1.loads == 2000
    assert s2.stores - s1.stores == 1000
    assert s2.cond_branches - s1.cond_branches == 1000
    per_iter, rest = divmod(s2.insts - s1.insts, 1000)
    assert rest == 0 and 3 <= per_iter <= 15
    # the 10 N iterations before begin and after end are excluded from the ROI ...
    assert s1.insts < 1000 * per_iter + 40
    # ... but present in the whole-program count
    assert one.total_insts > 11 * 1000 * per_iter
    assert s1.l1i_accesses == s1.insts
    assert s1.l1d_accesses >= s1.loads + s1.stores
    assert s1.fp_insts == s1.vec_insts == s1.vec_fp_insts == 0


@pytest.mark.parametrize("isa", ISAS + ["riscv64v"])
@pytest.mark.parametrize("mode,n", [("loop", 1000), ("twice", 700), ("classify", 300)])
def test_block_profile_sums_to_the_instruction_count(sim, build, isa, mode, n):
    result = run(sim, guest(build, isa), isa, mode, n)
    profile = result.stats.blocks
    assert profile is not None
    assert profile.insts == result.stats.insts  # every ROI instruction is in exactly one block
    blocks = profile.blocks
    assert list(blocks) == sorted(blocks, key=lambda b: (b.addr, b.size, b.insns, b.code, b.symbol))
    assert all(len(b.code) == 2 * b.size and b.count > 0 for b in blocks)
    # the loop body runs n times per region (n - 1 when the compiler peels the first iteration into
    # the entry block): the 10 n iterations outside the regions are not counted
    regions = 2 if mode == "twice" else 1
    body = max((b for b in blocks if b.symbol in ("vloop", "classify")), key=lambda b: b.count)
    assert regions * (n - 1) <= body.count <= regions * n


@pytest.mark.parametrize("isa", ISAS)
def test_block_profile_drops_a_region_still_open_at_exit(sim, build, isa):
    # the profile counts move at the region markers, not per execution: the work of a region that
    # never ends (3 n iterations of the same blocks) must not reach it, like the statistics
    binary = guest(build, isa)
    closed, open_at_exit = run(sim, binary, isa, "loop", 1000), run(sim, binary, isa, "open", 1000)
    assert open_at_exit.roi_count == 1 and open_at_exit.stats.insts == closed.stats.insts
    body = {b.addr: b.count for b in closed.stats.blocks.blocks if b.symbol == "vloop"}
    assert body and {b.addr: b.count for b in open_at_exit.stats.blocks.blocks if b.symbol == "vloop"} == body
    assert open_at_exit.stats.blocks.insts == open_at_exit.stats.insts


@pytest.mark.parametrize("isa", ISAS)
def test_two_regions_are_summed(sim, build, isa):
    binary = guest(build, isa)
    once = run(sim, binary, isa, "loop", 1000).stats
    twice = run(sim, binary, isa, "twice", 1000)
    assert twice.roi_count == 2
    for field in ("insts", "loads", "stores", "branches", "cond_branches", "calls", "returns"):
        assert getattr(twice.stats, field) == 2 * getattr(once, field), field


@pytest.mark.parametrize("isa", ISAS)
def test_streaming_pass_misses_once_per_line(sim, build, isa):
    result = run(sim, guest(build, isa), isa, "stream")
    s = result.stats
    lines = BIG // LINE
    assert abs(s.loads - BIG // 8) <= 8
    assert abs(s.l1d_misses - lines) <= 0.02 * lines
    assert abs(s.l2_misses - lines) <= 0.02 * lines  # never touched before: cold in L2 too
    assert s.l2_accesses == s.l1d_misses + s.l1i_misses
    assert s.l1d_writebacks <= 0.01 * lines  # read-only pass: nothing dirty to write back


@pytest.mark.parametrize("isa", ISAS)
def test_l1_resident_array_has_no_extra_misses(sim, build, isa):
    s = run(sim, guest(build, isa), isa, "reuse").stats
    assert s.l1d_accesses >= 100 * 16384 // 8
    assert s.l1d_misses <= 16


@pytest.mark.parametrize("isa", ISAS)
def test_store_stream_writes_back_dirty_lines(sim, build, isa):
    target = BUILTIN[isa]
    s = run(sim, guest(build, isa), isa, "write").stats
    lines = BIG // LINE
    l1_lines = target.l1d.size // target.l1d.line
    assert abs(s.stores - BIG // 8) <= 8
    assert abs(s.l1d_misses - lines) <= 0.02 * lines  # write-allocate
    # every dirtied line is written back except those still in L1 when the ROI ends
    assert lines - l1_lines - 16 <= s.l1d_writebacks <= lines
    assert s.l2_writebacks > 0.5 * lines  # 8 MiB of dirty lines cannot stay in L2


@pytest.mark.parametrize("isa", ISAS + ["riscv64v"])
def test_classifier_counts_each_instruction_class(sim, build, isa):
    binary = guest(build, isa)
    a = run(sim, binary, isa, "classify", 1000).stats
    b = run(sim, binary, isa, "classify", 2000).stats
    expected = dict(CLASSIFY_EXPECTED[isa], **BRANCHES_PER_ITER)
    got = {k: (getattr(b, k) - getattr(a, k)) / 1000 for k in expected}
    assert got == expected
    # split vector accesses reach the D-cache as several accesses but count as one load
    if isa == "x86_64":
        assert (b.l1d_accesses - a.l1d_accesses) / 1000 > expected["loads"] + expected["stores"]


@pytest.mark.parametrize("isa,lanes", [("x86_64", 8), ("aarch64", 4), ("riscv64", 1)])
def test_gemm_kernel_classification(sim, build, isa, lanes):
    target = BUILTIN[isa]
    flags = tuple(f for f in target.cflags if not f.startswith("-O")) + ("-O3",)
    binary = build("gemm", GEMM_C, isa, flags)
    result = run(sim, binary, isa)
    n = GEMM_N
    a = [i % 7 for i in range(n * n)]
    b = [i % 5 for i in range(n * n)]
    total = sum(a[i * n + k] * b[k * n + j] for i in range(n) for k in range(n) for j in range(n))
    assert result.stdout == f"{total:.1f}\n".encode()
    s = result.stats
    if lanes == 1:  # rv64gc: scalar fmadd.s
        assert s.fp_insts == n**3 and s.vec_insts == 0
    else:
        assert s.vec_fp_insts * lanes == n**3 and s.fp_insts == 0
        assert s.vec_insts > s.vec_fp_insts  # vector loads/stores/broadcasts too
    assert s.cond_branches > 0 and s.loads > 0 and s.stores > 0
    # A and B were just initialised (warm in L1), C is cold: one miss per line of C
    assert n * n * 4 // LINE <= s.l1d_misses <= 3 * n * n * 4 // LINE + 16


@pytest.mark.parametrize("isa", ISAS)
def test_deterministic_and_independent_of_binary_location(sim, build, isa, tmp_path):
    binary = guest(build, isa)
    first = json.dumps(run(sim, binary, isa, "loop", 3000).stats.to_record(), sort_keys=True)
    second = json.dumps(run(sim, binary, isa, "loop", 3000).stats.to_record(), sort_keys=True)
    assert first == second
    elsewhere = tmp_path / "a" / "much" / "longer" / "directory" / "name" / "other-binary-name"
    elsewhere.parent.mkdir(parents=True)
    shutil.copy2(binary, elsewhere)
    assert json.dumps(run(sim, elsewhere, isa, "loop", 3000).stats.to_record(), sort_keys=True) == first


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize(
    "mode,needle",
    [("segv", "SIGSEGV"), ("exit3", "status 3"), ("noroi", "region of interest"), ("thread", "single-threaded")],
)
def test_guest_failures_raise_infra_error(sim, build, isa, mode, needle):
    binary = guest(build, isa)
    with pytest.raises(InfraError) as info:
        run(sim, binary, isa, mode, 10)
    message = str(info.value)
    assert needle in message
    assert binary.name in message and isa in message
    assert "\n" not in message


def test_segfault_message_carries_qemu_stderr(sim, build):
    with pytest.raises(InfraError, match="uncaught target signal 11"):
        run(sim, guest(build, "x86_64"), "x86_64", "segv", 10)


def test_hang_times_out_quickly(sim, build):
    binary = guest(build, "riscv64")
    start = time.monotonic()
    with pytest.raises(InfraError, match="timed out after 1.5 s"):
        run(sim, binary, "riscv64", "hang", timeout=1.5)
    assert time.monotonic() - start < 10


def test_stripped_binary_is_reported(sim, build, tmp_path):
    binary = guest(build, "x86_64")
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(binary)], check=True)
    with pytest.raises(InfraError, match="never entered its region of interest.*not found in the symbol table"):
        run(sim, stripped, "x86_64", "loop", 10)


def test_plugin_is_cached_and_built_atomically(tmp_path):
    _require("x86_64")
    cache = tmp_path / "cache"
    sims = [QemuSimulator(cache) for _ in range(4)]
    paths: list[Path] = []
    errors: list[BaseException] = []

    def work(s):
        try:
            paths.append(s.plugin_path())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in sims]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(paths)) == 1
    so = paths[0]
    assert so.name == "perfguard_plugin.so" and so.parent.parent == cache / "plugin"
    # no temp files left; the plugin and the sha256 it is checked against before each use
    assert sorted(p.name for p in so.parent.iterdir()) == ["perfguard_plugin.so", "perfguard_plugin.so.sha256"]
    mtime = so.stat().st_mtime_ns
    assert QemuSimulator(cache).plugin_path() == so and so.stat().st_mtime_ns == mtime


def test_fingerprint_names_version_plugin_and_geometry(sim):
    target = _require("aarch64")
    fp = sim.fingerprint(target)
    assert "version" in fp and "qemu-aarch64" in fp
    assert QemuSimulator.plugin_source_hash()[:20] in fp
    assert "l1d=32768/2/64" in fp and "l1i=49152/3/64" in fp and "l2=1048576/16/64" in fp
    changed = dataclasses.replace(target, l2=dataclasses.replace(target.l2, size=2097152))
    assert sim.fingerprint(changed) != fp


def test_missing_tools_are_named(sim, monkeypatch):
    target = dataclasses.replace(BUILTIN["riscv64"], qemu="qemu-riscv64-does-not-exist")
    with pytest.raises(InfraError, match="qemu-riscv64-does-not-exist.*qemu-user"):
        sim.check_available(target)
    monkeypatch.setattr("perfguard.sim.qemu.HOST_CC", "cc-does-not-exist")
    _require("riscv64")
    with pytest.raises(InfraError, match="cc-does-not-exist.*gcc"):
        sim.check_available(BUILTIN["riscv64"])


def test_plugin_rejects_bad_arguments(sim, build, tmp_path):
    binary = guest(build, "x86_64")
    so = sim.plugin_path()
    cases = {
        f"{so},arch=x86_64": "missing required argument out",
        f"{so},out={tmp_path}/o": "missing required argument arch",
        f"{so},arch=mips,out={tmp_path}/o": "unknown arch",
        f"{so},arch=aarch64,out={tmp_path}/o": "QEMU emulates x86_64",
        f"{so},arch=x86_64,out={tmp_path}/o,l1d_size=1000": "bad l1d geometry",
        f"{so},arch=x86_64,out={tmp_path}/o,colour=blue": "unknown or empty argument",
    }
    for plugin_arg, needle in cases.items():
        proc = subprocess.run(
            [shutil.which("qemu-x86_64"), "-cpu", "max", "-plugin", plugin_arg, str(binary), "loop", "1"],
            capture_output=True,
            text=True,
            env={},
        )
        assert proc.returncode != 0 and needle in proc.stderr, (plugin_arg, proc.stderr)


def test_output_parser_is_strict():
    counts = {k: i for i, k in enumerate(STAT_FIELDS)} | {"insts": 17}
    good = "perfguard_qemu_plugin 2\n" + "".join(f"{k} {counts[k]}\n" for k in STAT_FIELDS)
    good += "roi_count 2\ntotal_insts 99\nblocks 3\n"
    # a block QEMU translated twice (merged), another at the same address with other code, one without symbol
    good += "401000 8 2 3 0011223344556677 kernel\n401010 3 1 7 c3c3c3 -\n401000 8 2 2 0011223344556677 kernel\n"
    stats, roi, total = parse_plugin_output(good, "x")
    assert (stats.l2_writebacks, roi, total) == (len(STAT_FIELDS) - 1, 2, 99)
    assert [(b.addr, b.count, b.symbol) for b in stats.blocks.blocks] == [(0x401000, 5, "kernel"), (0x401010, 7, "")]
    assert stats.blocks.insts == stats.insts == 17
    assert Stats.from_dict(stats.to_record(), "round trip") == stats
    bad = [
        "",
        "garbage\n",
        good.replace("perfguard_qemu_plugin 2", "perfguard_qemu_plugin 1"),
        good.replace("loads 1\n", ""),
        good.replace("loads 1\n", "loads -1\n"),
        good.replace("loads 1\n", "loads 1.5\n"),
        good.replace("loads 1\n", "stores 1\n"),
        good + "extra 1\n",
        good.replace("roi_count 2\n", ""),
        good.replace("insts 17\n", "insts 18\n"),  # the block profile must add up to insts
        good.replace("blocks 3\n", "blocks 2\n"),
        good.replace("c3c3c3 -", "c3c3 -"),  # code shorter than the size
        good.replace("401010 3 1 7", "401010 3 1 0"),  # a block that never ran
        good.replace(" kernel\n401010", "\n401010"),  # a field missing
    ]
    for text in bad:
        with pytest.raises(InputError):
            parse_plugin_output(text, "x")


# An 8-byte load that straddles a page end, third in its loop: QEMU 7.2 stops decoding it when
# its displacement would need the next page, ends the block before it and runs it in a block of
# its own, yet hands the plugin the first block with the load's first 4 bytes in it.
STRADDLE_C = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void perfguard_roi_begin(void) { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void perfguard_roi_end(void) { asm volatile("" ::: "memory"); }
void straddle(long n, const float *p);
asm(".text\n.p2align 12\n"
    ".fill 4080, 1, 0xcc\n"                   /* never executed: puts the loop at page offset 0xff0 */
    ".globl straddle\nstraddle:\n"
    "1: add $1, %rax\n"                       /* 0xff0, 4 bytes */
    "   add $1, %rdx\n"                       /* 0xff4, 4 bytes */
    "   nop\n"                                /* 0xff8 */
    "   movups -0x130(%rsi), %xmm9\n"         /* 0xff9: 44 0f 10 8e d0 fe ff ff, to 0x1001 */
    "   sub $1, %rdi\n"
    "   jnz 1b\n"
    "   ret\n");
static float buf[256] __attribute__((aligned(64)));
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    perfguard_roi_begin();
    straddle(n, buf + 0x130 / sizeof(float));
    perfguard_roi_end();
    printf("ok\n");
    return 0;
}
"""


def test_an_instruction_straddling_a_page_end_counts_once(sim, build):
    binary = build("straddle", STRADDLE_C, "x86_64")
    one, two = (run(sim, binary, "x86_64", n).stats for n in (1000, 2000))
    # six instructions and one load per iteration; the cut load was counted twice before
    assert two.insts - one.insts == 6 * 1000
    assert two.loads - one.loads == 1000
    for stats in (one, two):
        assert stats.blocks is not None and stats.blocks.insts == stats.insts
    cut = [b for b in two.blocks.blocks if b.end & 4095 and -b.end % 4096 < 16 and b.count >= 1000]
    assert cut and all(b.code.endswith("90") for b in cut)  # the block ends at the nop, without the load's bytes
