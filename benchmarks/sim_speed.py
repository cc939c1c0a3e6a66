"""Simulated MIPS per ISA: plain QEMU, QEMU with perfguard's plugin, cachegrind on x86_64.

All three run the same statically linked harness binaries (a TVM GEMM). MIPS = whole-program
guest instructions (as counted by the plugin) / wall seconds; medians of --runs runs, all
measured in one invocation so the ratios compare like with like.

    python benchmarks/sim_speed.py [--size 384] [--runs 3] [--reps 1] [--compare-plugin REV]

--compare-plugin REV also times the plugin as it was at git revision REV (its
perfguard/sim/qemu_plugin.c built the same way), interleaved run by run with the current one,
and prints both and their ratio: the cost of a plugin change, measured in one invocation.
--reps N runs the kernel N times per process, so that translation and start-up (the same with
either plugin) weigh less against the per-instruction work a plugin change can slow down.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from perfguard.compile.cache import BuildCache
from perfguard.config import KernelSpec
from perfguard.job.run import Job, run_job
from perfguard.sim.qemu import QemuSimulator
from perfguard.targets import BUILTIN


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def plugin_at(rev: str, work: Path) -> Path:
    """The plugin built from its source at git revision `rev`."""
    source = subprocess.run(
        ["git", "show", f"{rev}:perfguard/sim/qemu_plugin.c"], capture_output=True, check=True
    ).stdout
    src, lib = work / f"plugin-{rev}.c", work / f"plugin-{rev}.so"
    src.write_bytes(source)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def compare_plugins(sim: QemuSimulator, old: Path, binaries: dict, runs: int, rev: str, reps: int) -> None:
    """Interleaved runs (old, new, new, old, ...) of the same command with either plugin."""
    print(f"\nplugin at {rev} against this tree's plugin, interleaved, median of {runs} runs each, simulated MIPS\n")
    print(f"| ISA | plugin at {rev} | this plugin | this / {rev} |")
    print("| --- | ---: | ---: | ---: |")
    new = sim.plugin_path()
    for isa, (binary, insts) in binaries.items():
        profile = BUILTIN[isa]
        times: dict[Path, list[float]] = {old: [], new: []}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(runs):
                for lib in (old, new) if i % 2 == 0 else (new, old):
                    arg = sim._plugin_arg(lib, Path(tmp) / "stats.txt", profile)
                    times[lib].append(
                        timed([profile.qemu, *profile.qemu_cpu, "-plugin", arg, str(binary), str(reps), "0"])
                    )
        before, after = (insts / 1e6 / statistics.median(times[lib]) for lib in (old, new))
        print(f"| {isa} | {before:.0f} | {after:.0f} | {after / before:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=384)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reps", type=int, default=1, help="kernel runs per process")
    parser.add_argument("--compare-plugin", metavar="REV", help="also time the plugin of this git revision")
    args = parser.parse_args()
    cache_dir = Path(tempfile.mkdtemp(prefix="pg-bench-"))
    n = args.size
    spec = KernelSpec(
        "bench_gemm",
        "perfguard.kernels.gemm:gemm",
        "gemm",
        {"M": n, "N": n, "K": n, "tile_m": 32, "tile_n": 32, "tile_k": 32, "vector": 8},
    )
    sim = QemuSimulator(cache_dir)
    rows = []
    binaries = {}
    for isa in ("x86_64", "aarch64", "riscv64"):
        profile = BUILTIN[isa]
        result = run_job(Job(spec, profile, Path.cwd(), cache_dir, "qemu", 3600, 1, 0))
        assert result.ok, result.error
        binary = BuildCache(cache_dir).lookup_build(result.content_hash) / "harness"
        reps = [str(args.reps), "0"]
        insts = sim.run(binary, profile, reps, 3600).total_insts
        binaries[isa] = (binary, insts)
        plain = [timed([profile.qemu, *profile.qemu_cpu, str(binary), *reps]) for _ in range(args.runs)]
        plugin = []
        for _ in range(args.runs):
            start = time.perf_counter()
            sim.run(binary, profile, reps, 3600)
            plugin.append(time.perf_counter() - start)
        row = {
            "isa": isa,
            "minsts": insts / 1e6,
            "plain": insts / 1e6 / statistics.median(plain),
            "plugin": insts / 1e6 / statistics.median(plugin),
            "cachegrind": None,
        }
        if isa == "x86_64":
            grind = [
                timed(
                    [
                        "valgrind",
                        "--tool=cachegrind",
                        "--cache-sim=yes",
                        "--branch-sim=yes",
                        "--I1=32768,8,64",
                        "--D1=32768,8,64",
                        "--LL=1048576,16,64",
                        "--cachegrind-out-file=/dev/null",
                        str(binary),
                        *reps,
                    ]
                )
                for _ in range(args.runs)
            ]
            row["cachegrind"] = insts / 1e6 / statistics.median(grind)
        rows.append(row)
    print(
        f"GEMM {n}x{n}x{n} float32, {args.reps} kernel run(s) per process, median of {args.runs} runs, "
        "simulated MIPS (whole program)\n"
    )
    print(
        "| ISA | guest Minsts | plain QEMU | QEMU + perfguard plugin (full cache model) | plugin / plain | cachegrind (cache + branch sim) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        grind = "-" if r["cachegrind"] is None else f"{r['cachegrind']:.0f}"
        print(
            f"| {r['isa']} | {r['minsts']:.1f} | {r['plain']:.0f} | {r['plugin']:.0f} | "
            f"{r['plugin'] / r['plain']:.2f} | {grind} |"
        )
    if args.compare_plugin:
        compare_plugins(
            sim, plugin_at(args.compare_plugin, cache_dir), binaries, args.runs, args.compare_plugin, args.reps
        )


if __name__ == "__main__":
    main()
