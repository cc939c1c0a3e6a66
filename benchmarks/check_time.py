"""What `perfguard check` costs on this repository: cold, nothing changed, one kernel edited.

    python benchmarks/check_time.py [--rev REV] [--runs 1] [-j N] [--json FILE]
    python benchmarks/check_time.py --compare-rev REV [--runs 3]      (two revisions, alternating)
    python benchmarks/check_time.py --compare-model MODEL [--runs 3]  (this tree under --model MODEL)

The default mode clones the repository at REV (default HEAD: commit what you measure) into a
temporary folder, so the check runs on the committed code and config with the baselines' git
history (the report's history needs it), and times three scenarios, each run --runs times:

- cold: an empty cache (every kernel lowered, built, simulated, checked, judged, rendered);
- no-op: the same check again, nothing changed;
- edit: gemm_256's schedule edited in perfguard.toml (tile_k 4 -> 8), then checked: one kernel's
  three results change (exit 1 or 0), every other result is as before.

Each run starts from the cache the cold run of the same round left (the edit from its no-op).
Reported per scenario: wall seconds, CPU seconds (user + sys of the check and every process it
started, from getrusage(RUSAGE_CHILDREN)), CPU per kernel x target result, the 1-minute load
average before and after (wall time on a loaded machine is not the measure; CPU time is), and
the check's own stage timings from its JSON report. Medians over the runs.
"""

from __future__ import annotations

import argparse
import json
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
# perfguard.timings.STAGES, as the measured revision may predate them
STAGE_ORDER = (
    "startup",
    "config",
    "reuse",
    "jobs",
    "lower",
    "compile",
    "simulate",
    "verify",
    "timing_model",
    "workers",
    "judge",
    "explain",
    "render",
)
EDIT = (
    "tile_k = 4, vector = 8, unroll = 4 }\nthreshold = 1.0",
    "tile_k = 8, vector = 8, unroll = 4 }\nthreshold = 1.0",
)


CPU: dict[str, list[float]] = {}  # variant -> CPU seconds (user + sys of the check and its children) per run


def run_check(
    cache: Path,
    report_dir: Path,
    tree: Path = REPO,
    args: tuple[str, ...] = (),
    key: str = "",
    ok: tuple[int, ...] = (0,),
) -> float:
    env = dict(os.environ, PERFGUARD_CACHE_DIR=str(cache), PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "perfguard.shells.cli", "check", "--report-dir", str(report_dir), *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time is what the machine's other load leaves alone (wall time on a shared machine is not)
    CPU.setdefault(key or str(tree), []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode not in ok:
        raise SystemExit(f"perfguard check exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def clone(rev: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(REPO), str(into)], check=True)
    subprocess.run(["git", "checkout", "--quiet", "--detach", rev], cwd=into, check=True)
    return into


def scenarios(rev: str, runs: int, jobs: int | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix="pg-check-"))
    tree = clone(rev, work / "repo")
    config = tree / "perfguard.toml"
    original = config.read_text()
    if EDIT[0] not in original:
        raise SystemExit(f"{config}: gemm_256's schedule is not as expected ({EDIT[0]!r}): update EDIT")
    extra = ("-j", str(jobs)) if jobs else ()
    rows: dict[str, list[dict]] = {"cold": [], "no-op": [], "edit": []}
    try:
        for i in range(runs):
            cache = work / f"cache{i}"
            config.write_text(original)
            for name, ok in (("cold", (0,)), ("no-op", (0,))):
                rows[name].append(one(tree, cache, work / f"reports-{name}", extra, ok))
            config.write_text(original.replace(EDIT[0], EDIT[1]))
            rows["edit"].append(one(tree, cache, work / "reports-edit", extra, (0, 1)))
    finally:
        config.write_text(original)
        shutil.rmtree(work, ignore_errors=True)
    return rows


def one(tree: Path, cache: Path, reports: Path, extra: tuple[str, ...], ok: tuple[int, ...]) -> dict:
    load_before = os.getloadavg()[0]
    wall = run_check(cache, reports, tree, extra, "scenario", ok)
    report = json.loads((reports / "perfguard.json").read_text())
    timings = report.get("timings") or {}
    return {
        "wall_s": wall,
        "cpu_s": CPU["scenario"][-1],
        "load": (load_before, os.getloadavg()[0]),
        "results": len(report["results"]),
        "stages": timings.get("stages", {}),
        "jobs_ran": sum(1 for j in timings.get("jobs", []) if not j.get("reused")),
        "reused": bool(timings.get("reused")),
    }


def print_scenarios(sha: str, runs: int, rows: dict) -> None:
    print(f"perfguard check on this repository at {sha} ({os.cpu_count()} CPUs), median of {runs} run(s)\n")
    print("| scenario | results | jobs run | CPU s | CPU s per result | wall s | load before / after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, items in rows.items():
        cpu = statistics.median(r["cpu_s"] for r in items)
        n = items[0]["results"]
        loads = ", ".join(f"{a:.1f} / {b:.1f}" for a, b in (r["load"] for r in items))
        ran = (
            "whole check reused"
            if all(r["reused"] for r in items)
            else str(int(statistics.median(r["jobs_ran"] for r in items)))
        )
        print(
            f"| {name} | {n} | {ran} | {cpu:.1f} | {cpu / n:.2f} | "
            f"{statistics.median(r['wall_s'] for r in items):.1f} | {loads} |"
        )
    cold = statistics.median(r["cpu_s"] for r in rows["cold"])
    edit = statistics.median(r["cpu_s"] for r in rows["edit"])
    print(f"\nedit / cold CPU: {edit / cold:.3f}")
    order = {name: i for i, name in enumerate(STAGE_ORDER)}
    names = sorted(
        {s for items in rows.values() for r in items for s in r["stages"]}, key=lambda s: order.get(s, len(order))
    )
    print("\nStage timings from the check's own report (median CPU s / wall s; job stages summed over jobs):\n")
    print("| stage | " + " | ".join(rows) + " |")
    print("| --- |" + " ---: |" * len(rows))
    for stage in names:
        cells = []
        for items in rows.values():
            found = [r["stages"][stage] for r in items if stage in r["stages"]]
            cells.append(
                f"{statistics.median(f['cpu_s'] for f in found):.2f} / "
                f"{statistics.median(f['wall_s'] for f in found):.2f}"
                if found
                else ""
            )
        print(f"| {stage} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rev", default="HEAD", help="the revision to measure (cloned; default HEAD)")
    parser.add_argument("-j", "--jobs", type=int, help="the check's -j (default: its own, the CPU count)")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument("--compare-rev", metavar="REV", help="time the check of this git revision against this tree")
    parser.add_argument("--compare-model", metavar="MODEL", help="time this tree's check with --model MODEL against it")
    args = parser.parse_args()
    if args.compare_rev or args.compare_model:
        return compare(args.compare_rev, args.compare_model, args.runs)
    sha = subprocess.run(
        ["git", "rev-parse", "--short", args.rev], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    rows = scenarios(sha, args.runs, args.jobs)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print_scenarios(sha, args.runs, rows)


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
        for name in list(variants) if i % 2 == 0 else list(variants)[::-1]:
            cold[name].append(one(name, f"cache{i}"))
    for i in range(runs):
        for name in list(variants) if i % 2 == 0 else list(variants)[::-1]:
            warm[name].append(one(name, "cache0"))
    shutil.rmtree(work, ignore_errors=True)
    first = other[0]
    print(
        f"perfguard check on this repository ({os.cpu_count()} CPUs), {first} against this tree, "
        f"alternating, median of {runs} runs\n"
    )
    print(f"| run | {first} median s | this tree median s | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, values in (("cold (empty cache)", cold), ("warm (nothing changed)", warm)):
        before, after = (statistics.median(values[name]) for name in variants)
        print(f"| {label} | {before:.1f} | {after:.1f} | {after / before:.2f} |")
    cold_cpu = {name: statistics.median(CPU[name][:runs]) for name in variants}
    warm_cpu = {name: statistics.median(CPU[name][runs:]) for name in variants}
    print(
        "\ncold CPU seconds (user + sys, check and children), median: "
        + ", ".join(f"{name} {v:.1f}" for name, v in cold_cpu.items())
        + f" (ratio {cold_cpu['this tree'] / cold_cpu[first]:.2f})"
    )
    print(
        "warm CPU seconds, median: "
        + ", ".join(f"{name} {v:.1f}" for name, v in warm_cpu.items())
        + f" (ratio {warm_cpu['this tree'] / warm_cpu[first]:.2f})"
    )


if __name__ == "__main__":
    main()
