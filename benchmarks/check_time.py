"""Wall time of `perfguard check` on this repository: cold (empty cache) and warm (nothing changed).

    python benchmarks/check_time.py [--runs 3]

Cold runs each start from a fresh, empty cache; warm runs reuse the cache the first cold run
filled. Medians over --runs runs, measured in one invocation.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_check(cache: Path, report_dir: Path) -> float:
    env = dict(os.environ, PERFGUARD_CACHE_DIR=str(cache))
    start = time.perf_counter()
    proc = subprocess.run(["perfguard", "check", "--report-dir", str(report_dir)], cwd=REPO, env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"perfguard check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
