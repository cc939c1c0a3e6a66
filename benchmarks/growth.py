"""`perfguard check` on a synthetic project of many kernels: cold, no-op, one kernel edited.

    python benchmarks/growth.py [--kernels 100] [--targets x86_64,aarch64,riscv64] [-j N] [--keep DIR]

Generates a project of --kernels built-in-family kernels (gemm, gemv, conv2d, depthwise,
dense_relu; shapes and schedules drawn with a fixed seed, so every run checks the same
kernels) on every target, records its baselines with `perfguard baseline update` (not timed),
then times, each in a process of its own with a private cache:

- cold: `perfguard check` after the cache is emptied (every job lowered, built, simulated,
  checked; every result judged and rendered);
- no-op: the same check again;
- edit: one kernel's schedule changed, checked again.

Reported: CPU seconds (user + sys of the check and all it started), wall seconds with the
1-minute load average before and after (the machine is shared: CPU is the figure to compare),
the peak memory of the check's whole process tree (the sum of the resident sets of the check and
its workers and tools, sampled every 0.2 s), and the check's own stage timings.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]


def kernels(count: int, seed: int = 22) -> list[str]:
    """`count` [[kernel]] tables, distinct, small enough that a job simulates in about a second."""
    rng = random.Random(seed)
    out, seen = [], set()
    makers = [
        lambda: (
            "gemm",
            "perfguard.kernels.gemm:gemm",
            {
                "M": rng.choice([32, 48, 64, 96]),
                "N": rng.choice([32, 64]),
                "K": rng.choice([32, 64, 128]),
                "tile_m": rng.choice([4, 8, 16]),
                "tile_n": rng.choice([8, 16, 32]),
                "tile_k": rng.choice([4, 8]),
                "vector": 8,
            },
        ),
        lambda: (
            "gemv",
            "perfguard.kernels.gemv:gemv",
            {
                "M": rng.choice([64, 128, 256]),
                "K": rng.choice([64, 128, 256]),
                "tile_m": rng.choice([4, 8]),
                "tile_k": rng.choice([32, 64]),
                "vector": 8,
            },
        ),
        lambda: (
            "conv2d",
            "perfguard.kernels.conv2d:conv2d",
            {
                "C": rng.choice([4, 8]),
                "H": rng.choice([8, 12]),
                "W": rng.choice([8, 12]),
                "F": rng.choice([8, 16]),
                "tile_f": rng.choice([4, 8]),
            },
        ),
        lambda: (
            "depthwise_conv2d",
            "perfguard.kernels.depthwise:depthwise_conv2d",
            {"C": rng.choice([4, 8, 16]), "H": rng.choice([10, 14]), "W": rng.choice([10, 14])},
        ),
        lambda: (
            "dense_relu",
            "perfguard.kernels.dense_relu:dense_relu",
            {
                "B": rng.choice([2, 4]),
                "I": rng.choice([32, 64, 128]),
                "O": rng.choice([16, 32, 64]),
                "tile_o": rng.choice([4, 8]),
                "vector": 8,
            },
        ),
    ]
    while len(out) < count:
        family, entry, params = rng.choice(makers)()
        key = (family, tuple(sorted(params.items())))
        if key in seen:
            continue
        seen.add(key)
        table = ", ".join(f"{k} = {v}" for k, v in params.items())
        out.append(
            f'[[kernel]]\nname = "k{len(out):03d}_{family}"\nentry = "{entry}"\nfamily = "{family}"\n'
            f"params = {{ {table} }}\n"
        )
    return out


def project(root: Path, count: int, targets: list[str]) -> Path:
    root.mkdir(parents=True)
    config = root / "perfguard.toml"
    config.write_text(
        "[perfguard]\n" + f"targets = {json.dumps(targets)}\n" + 'cache_dir = "cache"\n\n' + "\n".join(kernels(count))
    )
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return config


class PeakMemory:
    """The largest sum of resident sets of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.2):
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
                total = 0
                for proc in procs:
                    try:
                        total += proc.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                pass
            self._stop.wait(self.every)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def timed(config: Path, args: list[str], ok: tuple[int, ...] = (0,)) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfguard.shells.cli", *args, "--config", str(config)],
        cwd=config.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    memory = PeakMemory(proc.pid)
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    peak = memory.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(f"perfguard {' '.join(args)} exited {proc.returncode}:\n{out[-3000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak / 2**20, "load": [load, os.getloadavg()[0]]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--targets", default="x86_64,aarch64,riscv64")
    parser.add_argument("-j", "--jobs", type=int)
    parser.add_argument("--keep", type=Path, help="build the project here and keep it (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    targets = args.targets.split(",")
    work = args.keep or Path(tempfile.mkdtemp(prefix="pg-growth-"))
    config = project(work / "project", args.kernels, targets)
    jobs = ["-j", str(args.jobs)] if args.jobs else []
    report = config.parent / "reports" / "perfguard.json"
    rows = {}
    try:
        rows["baseline update (untimed setup)"] = timed(config, ["baseline", "update", *jobs])
        shutil.rmtree(config.parent / "cache")
        for name, extra, ok in (("cold", [], (0,)), ("no-op", [], (0,))):
            rows[name] = timed(config, ["check", *jobs, *extra], ok)
            rows[name]["stages"] = json.loads(report.read_text()).get("timings", {}).get("stages", {})
        text = config.read_text()
        config.write_text(
            text.replace("tile_m = 4,", "tile_m = 2,", 1)
            if "tile_m = 4," in text
            else text.replace("vector = 8", "vector = 4", 1)
        )
        rows["edit"] = timed(config, ["check", *jobs], (0, 1))
        rows["edit"]["stages"] = json.loads(report.read_text()).get("timings", {}).get("stages", {})
        results = len(json.loads(report.read_text())["results"])
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"{args.kernels} kernels x {len(targets)} targets = {results} results, {os.cpu_count()} CPUs\n")
    print("| run | CPU s | CPU s per result | wall s | load before / after | peak memory MB |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for name, r in rows.items():
        print(
            f"| {name} | {r['cpu_s']:.1f} | {r['cpu_s'] / results:.2f} | {r['wall_s']:.1f} | "
            f"{r['load'][0]:.1f} / {r['load'][1]:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    names = list(dict.fromkeys(s for r in rows.values() for s in r.get("stages", {})))
    print("\n| stage (CPU s / wall s) | " + " | ".join(n for n in rows if "stages" in rows[n]) + " |")
    print("| --- |" + " ---: |" * sum("stages" in r for r in rows.values()))
    for stage in names:
        cells = [
            f"{r['stages'][stage]['cpu_s']:.1f} / {r['stages'][stage]['wall_s']:.1f}" if stage in r["stages"] else ""
            for r in rows.values()
            if "stages" in r
        ]
        print(f"| {stage} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
