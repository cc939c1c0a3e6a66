"""`perfguard baseline update` then `perfguard check`, both simulated with gem5, on this
repository's kernels: wall time and simulated MIPS per kernel (gem5 AtomicSimpleCPU, classic
caches, two runs per kernel: REPS and REPS=0).

The project is a copy of perfguard.toml with its own baseline folder (gem5's baselines are
kept apart from QEMU's: a check refuses a baseline simulated with another simulator). The
first command simulates (a fresh cache unless --cache-dir names one), the second finds every
simulation in the cache and must give every kernel the verdict "unchanged".

MIPS = simulated instructions of both gem5 runs / wall seconds of the job (build included,
a few seconds). Simulated instructions: the REPS run's whole-program count plus the REPS=0
run's, which is that count minus the kernel calls.

    python benchmarks/gem5_check.py [--targets x86_64v1] [--kernels a,b] [--cache-dir D] [-j N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from perfguard.shells.cli import main as perfguard

REPO = Path(__file__).resolve().parents[1]


def project(root: Path, cache: Path, targets: list[str]) -> Path:
    text = (REPO / "perfguard.toml").read_text()
    text = re.sub(r"^targets = .*$", f"targets = {json.dumps(targets)}", text, count=1, flags=re.M)
    text = re.sub(r"^simulator = .*$", 'simulator = "gem5"', text, count=1, flags=re.M)
    text = re.sub(r"^baseline_dir = .*$", 'baseline_dir = "baselines-gem5"', text, count=1, flags=re.M)
    text = text.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache}"\n', 1)
    root.mkdir(parents=True, exist_ok=True)
    (root / "perfguard.toml").write_text(text)
    if not (root / "examples").exists():  # the [[model]] sources are paths relative to the project
        (root / "examples").symlink_to(REPO / "examples")
    return root / "perfguard.toml"


def simulated_insts(cache: Path) -> dict[tuple[int, int], int]:
    """(kernel insts per call, REPS run insts) of every gem5 record in the simulation cache."""
    found = {}
    for path in (cache / "sims").rglob("*.json"):
        record = json.loads(path.read_text())
        record = record.get("payload", record)  # sealed records (perfguard.sealed) hold it under "payload"
        stats, total = record.get("stats", {}), record.get("total_insts")
        if stats.get("insts") and total:
            found[stats["insts"]] = total
    return found


def main(argv: list[str] | None = None) -> int:
    from perfguard.config import load_config
    from perfguard.runs.baseline_update import write_baselines
    from perfguard.runs.check import make_jobs, measure, select

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="x86_64v1")
    parser.add_argument("--kernels")
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pg-gem5-check-"))
    cache = args.cache_dir or work / "cache"
    config_path = project(work / "proj", cache, args.targets.split(","))
    config = load_config(config_path)
    kernels = args.kernels.split(",") if args.kernels else None
    jobs = make_jobs(config, select(config, kernels, None))
    start = time.monotonic()
    results = measure(config, jobs, args.jobs)  # what `perfguard baseline update` runs
    update_s = time.monotonic() - start
    write_baselines(config, jobs, results)
    start = time.monotonic()
    check = perfguard(
        ["check", "--config", str(config_path), "-j", str(args.jobs), "--json", str(work / "check.json")]
        + (["--kernels", args.kernels] if args.kernels else [])
    )
    check_s = time.monotonic() - start
    verdicts = {
        (r["kernel"], r["target"]): r["verdict"] for r in json.loads((work / "check.json").read_text())["results"]
    }
    totals = simulated_insts(cache)
    print(
        f"\nbaseline update (simulates, -j {args.jobs}): {update_s:.0f} s; check (every simulation cached): "
        f"exit {check}, {check_s:.0f} s\n"
    )
    print("| target | kernel | check verdict | kernel Minsts/call | simulated Minsts (2 runs) | job wall s | MIPS |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for result in results:
        verdict = verdicts.get((result.kernel, result.target), "?")
        insts = result.stats.insts if result.stats else None
        total = totals.get(insts)
        if not result.ok or not insts or not total:
            print(f"| {result.target} | {result.kernel} | {verdict} | error: {result.error} | | | |")
            continue
        simulated = 2 * total - insts
        print(
            f"| {result.target} | {result.kernel} | {verdict} | {insts / 1e6:.2f} | {simulated / 1e6:.1f} "
            f"| {result.seconds:.0f} | {simulated / 1e6 / result.seconds:.2f} |"
        )
    return 0 if all(r.ok for r in results) and check == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
