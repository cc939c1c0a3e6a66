"""Wall time of `perfguard check` on this repository: cold (empty cache) and warm (nothing changed).

    python benchmarks/check_time.py [--runs 3] [--compare-rev REV]

Cold runs each start from a fresh, empty cache; warm runs reuse the cache the first cold run
filled. Medians over --runs runs, measured in one invocation. --compare-rev REV also runs the
check of git revision REV (exported to a temporary folder, run with its own code on its own
copy of the repository), alternating with this tree run by run, and prints both and the ratio.
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


CPU: dict[str, list[float]] = {}  # tree -> CPU seconds (user + sys of the check and its children) per run


def run_check(cache: Path, report_dir: Path, tree: Path = REPO) -> float:
    env = dict(os.environ, PERFGUARD_CACHE_DIR=str(cache), PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "perfguard.cli", "check", "--report-dir", str(report_dir)], cwd=tree,
                          env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time is what the machine's other load leaves alone (wall time on a shared machine is not)
    CPU.setdefault(str(tree), []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"perfguard check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--compare-rev", metavar="REV", help="also time the check of this git revision")
    args = parser.parse_args()
    if args.compare_rev:
        return compare(args.compare_rev, args.runs)
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


def compare(rev: str, runs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="pg-check-"))
    old = work / "old-tree"
    old.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    trees = {rev: old, "this tree": REPO}
    cold: dict[str, list[float]] = {name: [] for name in trees}
    warm: dict[str, list[float]] = {name: [] for name in trees}
    for i in range(runs):  # alternate which goes first, so load from other processes hits both alike
        for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
            cold[name].append(run_check(work / f"{name.replace(' ', '-')}-cache{i}", work / "reports", trees[name]))
    for i in range(runs):
        for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
            warm[name].append(run_check(work / f"{name.replace(' ', '-')}-cache0", work / "reports", trees[name]))
    shutil.rmtree(work, ignore_errors=True)
    print(f"perfguard check on this repository ({os.cpu_count()} CPUs), {rev} against this tree, "
          f"alternating, median of {runs} runs\n")
    print(f"| run | {rev} median s | this tree median s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, values in (("cold (empty cache)", cold), ("warm (nothing changed)", warm)):
        before, after = (statistics.median(values[name]) for name in trees)
        print(f"| {label} | {before:.1f} | {after:.1f} | {after / before:.2f} |")
    print(f"\nCPU seconds (user + sys, check and children), median over all its runs (cold and warm): "
          + ", ".join(f"{name} {statistics.median(CPU[str(tree)]):.1f}" for name, tree in trees.items()))
    cold_cpu = {name: statistics.median(CPU[str(tree)][:runs]) for name, tree in trees.items()}
    print("cold CPU seconds, median: " + ", ".join(f"{name} {v:.1f}" for name, v in cold_cpu.items()))


if __name__ == "__main__":
    main()
