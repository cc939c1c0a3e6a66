"""Wall time of `perfguard check` on this repository: cold (empty cache) and warm (nothing changed).

    python benchmarks/check_time.py [--runs 3] [--compare-rev REV | --compare-model MODEL]

Cold runs each start from a fresh, empty cache; warm runs reuse the cache the first cold run
filled. Medians over --runs runs, measured in one invocation. --compare-rev REV also runs the
check of git revision REV (exported to a temporary folder, run with its own code on its own
copy of the repository), alternating with this tree run by run, and prints both and the ratio.
--compare-model MODEL does the same with this tree's check under `--model MODEL`: with
`analytical`, what the pipeline model (llvm-mca on every block) adds to a check.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


CPU: dict[str, list[float]] = {}  # variant -> CPU seconds (user + sys of the check and its children) per run


def run_check(cache: Path, report_dir: Path, tree: Path = REPO, args: tuple[str, ...] = (), key: str = "") -> float:
    env = dict(os.environ, PERFGUARD_CACHE_DIR=str(cache), PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "perfguard.cli", "check", "--report-dir", str(report_dir), *args],
                          cwd=tree, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time is what the machine's other load leaves alone (wall time on a shared machine is not)
    CPU.setdefault(key or str(tree), []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"perfguard check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--compare-rev", metavar="REV", help="also time the check of this git revision")
    parser.add_argument("--compare-model", metavar="MODEL", help="also time this tree's check with --model MODEL")
    args = parser.parse_args()
    if args.compare_rev or args.compare_model:
        return compare(args.compare_rev, args.compare_model, args.runs)
    work = Path(tempfile.mkdtemp(prefix="pg-check-"))
    cold, warm = [], []
    for i in range(args.runs):
        cache = work / f"cache{i}"
        cold.append(run_check(cache, work / "reports"))
    for _ in range(args.runs):
        warm.append(run_check(work / "cache0", work / "reports"))
    shutil.rmtree(work, ignore_errors=True)
    print(f"perfguard check on this repository ({os.cpu_count()} CPUs), median of {args.runs} runs\n")
    print("| run | median s | min s | max s |")
    print("| --- | ---: | ---: | ---: |")
    for name, values in (("cold (empty cache)", cold), ("warm (nothing changed)", warm)):
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")


def compare(rev: str | None, model: str | None, runs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="pg-check-"))
    if rev:
        old = work / "old-tree"
        old.mkdir()
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        other = (rev, old, ())
    else:
        other = (f"--model {model}", REPO, ("--model", model))
    variants = {name: (tree, extra) for name, tree, extra in (other, ("this tree", REPO, ()))}
    cold: dict[str, list[float]] = {name: [] for name in variants}
    warm: dict[str, list[float]] = {name: [] for name in variants}

    def one(name: str, cache: str) -> float:
        tree, extra = variants[name]
        return run_check(work / f"{name.replace(' ', '-')}-{cache}", work / "reports", tree, extra, name)

    for i in range(runs):  # alternate which goes first, so load from other processes hits both alike
        for name in (list(variants) if i % 2 == 0 else list(variants)[::-1]):
            cold[name].append(one(name, f"cache{i}"))
    for i in range(runs):
        for name in (list(variants) if i % 2 == 0 else list(variants)[::-1]):
            warm[name].append(one(name, "cache0"))
    shutil.rmtree(work, ignore_errors=True)
    first = other[0]
    print(f"perfguard check on this repository ({os.cpu_count()} CPUs), {first} against this tree, "
          f"alternating, median of {runs} runs\n")
    print(f"| run | {first} median s | this tree median s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, values in (("cold (empty cache)", cold), ("warm (nothing changed)", warm)):
        before, after = (statistics.median(values[name]) for name in variants)
        print(f"| {label} | {before:.1f} | {after:.1f} | {after / before:.2f} |")
    cold_cpu = {name: statistics.median(CPU[name][:runs]) for name in variants}
    warm_cpu = {name: statistics.median(CPU[name][runs:]) for name in variants}
    print("\ncold CPU seconds (user + sys, check and children), median: "
          + ", ".join(f"{name} {v:.1f}" for name, v in cold_cpu.items())
          + f" (ratio {cold_cpu['this tree'] / cold_cpu[first]:.2f})")
    print("warm CPU seconds, median: " + ", ".join(f"{name} {v:.1f}" for name, v in warm_cpu.items())
          + f" (ratio {warm_cpu['this tree'] / warm_cpu[first]:.2f})")


if __name__ == "__main__":
    main()
