"""Simulated MIPS per ISA: plain QEMU, QEMU with perfguard's plugin, cachegrind on x86_64.

All three run the same statically linked harness binaries (a TVM GEMM). MIPS = whole-program
guest instructions (as counted by the plugin) / wall seconds; medians of --runs runs, all
measured in one invocation so the ratios compare like with like.

    python benchmarks/sim_speed.py [--size 384] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from perfguard.config import KernelSpec
from perfguard.pipeline import Job, run_job
from perfguard.build.cache import BuildCache
from perfguard.sim.qemu import QemuSimulator
from perfguard.targets import BUILTIN


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env={}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=384)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cache_dir = Path(tempfile.mkdtemp(prefix="pg-bench-"))
    n = args.size
    spec = KernelSpec("bench_gemm", "perfguard.kernels.gemm:gemm", "gemm",
                      {"M": n, "N": n, "K": n, "tile_m": 32, "tile_n": 32, "tile_k": 32, "vector": 8})
    sim = QemuSimulator(cache_dir)
    rows = []
    for isa in ("x86_64", "aarch64", "riscv64"):
        profile = BUILTIN[isa]
        result = run_job(Job(spec, profile, Path.cwd(), cache_dir, "qemu", 3600, 1, 0))
        assert result.ok, result.error
        binary = BuildCache(cache_dir).lookup_build(result.content_hash) / "harness"
        insts = sim.run(binary, profile, ["1", "0"], 3600).total_insts
        plain = [timed([profile.qemu, *profile.qemu_cpu, str(binary), "1", "0"]) for _ in range(args.runs)]
        plugin = []
        for _ in range(args.runs):
            start = time.perf_counter()
            sim.run(binary, profile, ["1", "0"], 3600)
            plugin.append(time.perf_counter() - start)
        row = {"isa": isa, "minsts": insts / 1e6, "plain": insts / 1e6 / statistics.median(plain),
               "plugin": insts / 1e6 / statistics.median(plugin), "cachegrind": None}
        if isa == "x86_64":
            grind = [timed(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes",
                            "--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64",
                            "--cachegrind-out-file=/dev/null", str(binary), "1", "0"]) for _ in range(args.runs)]
            row["cachegrind"] = insts / 1e6 / statistics.median(grind)
        rows.append(row)
    print(f"GEMM {n}x{n}x{n} float32, median of {args.runs} runs, simulated MIPS (whole program)\n")
    print("| ISA | guest Minsts | plain QEMU | QEMU + perfguard plugin (full cache model) | plugin / plain | cachegrind (cache + branch sim) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        grind = "-" if r["cachegrind"] is None else f"{r['cachegrind']:.0f}"
        print(f"| {r['isa']} | {r['minsts']:.1f} | {r['plain']:.0f} | {r['plugin']:.0f} | "
              f"{r['plugin'] / r['plain']:.2f} | {grind} |")


if __name__ == "__main__":
    main()
