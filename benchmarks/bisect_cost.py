"""What `perfguard bisect` costs: a temporary repository of N commits with one regression in it.

    python benchmarks/bisect_cost.py [--commits 32] [--target x86_64]

The repository holds one small GEMM (64^3) on one target; commit N*2/3 makes its schedule slower,
every other commit edits an unrelated file. Runs bisect twice over the whole range: cold (a
fresh, empty cache), then warm (the cache the first run filled). Prints the wall times, the
revisions measured, and how many were rebuilt or re-simulated.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

GOOD = "M = 64, N = 64, K = 64, tile_m = 16, tile_n = 32, tile_k = 8, vector = 8"
SLOW = "M = 64, N = 64, K = 64, tile_m = 64, tile_n = 64, tile_k = 64, vector = 1"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def make_repo(root: Path, commits: int, target: str) -> tuple[list[str], int]:
    git(root, "init", "-q", "-b", "main")
    config = root / "perfguard.toml"
    text = (
        f'[perfguard]\ntargets = ["{target}"]\n\n[[kernel]]\nname = "gemm"\n'
        f'entry = "perfguard.kernels.gemm:gemm"\nfamily = "gemm"\nparams = {{ {GOOD} }}\n'
    )
    config.write_text(text)
    (root / ".gitignore").write_text("reports/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "good")
    shas = [git(root, "rev-parse", "HEAD")]
    regressed = commits * 2 // 3
    for i in range(1, commits + 1):
        config.write_text(text if i < regressed else text.replace(GOOD, SLOW))
        (root / "notes.txt").write_text(f"{i}\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", f"change {i}")
        shas.append(git(root, "rev-parse", "HEAD"))
    return shas, regressed


def bisect(root: Path, cache: Path, good: str, target: str, out: Path) -> float:
    env = dict(os.environ, PERFGUARD_CACHE_DIR=str(cache))
    start = time.perf_counter()
    proc = subprocess.run(
        [
            "perfguard",
            "bisect",
            "--good",
            good,
            "--bad",
            "HEAD",
            "--kernel",
            "gemm",
            "--target",
            target,
            "-j",
            "1",
            "--json",
            str(out),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 1:
        raise SystemExit(f"bisect exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=32)
    parser.add_argument("--target", default="x86_64")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pg-bisect-"))
    try:
        repo, cache = work / "repo", work / "cache"
        repo.mkdir()
        shas, regressed = make_repo(repo, args.commits, args.target)
        print("| run | wall s | measured | rebuilt | re-simulated | first bad found | bound ceil(log2 n)+2 |")
        print("|---|--:|--:|--:|--:|---|--:|")
        for name in ("cold", "warm"):
            out = work / f"{name}.json"
            seconds = bisect(repo, cache, shas[0], args.target, out)
            data = json.loads(out.read_text())
            visits = data["visits"]
            print(
                f"| {name} | {seconds:.1f} | {len(visits)} | {sum(bool(v['rebuilt']) for v in visits)} | "
                f"{sum(bool(v['resimulated']) for v in visits)} | "
                f"{data['first_bad']['commit'] == shas[regressed]} | {math.ceil(math.log2(args.commits)) + 2} |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
