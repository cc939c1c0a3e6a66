"""Hardening figures: bad input, fuzzed readers, injected faults, concurrent writers.

    python benchmarks/hardening.py [--examples 1000] [--writer-rounds 40] [--update-pairs 5]

Runs, in one invocation and with a fresh build cache:
- every row of the bad-input catalogue (tests/input/test_bad_input.py, listed in docs/bad-input.md);
- each reader's property (tests/input/test_fuzz.py) on --examples generated inputs, counting what
  parsed, what was rejected with perfguard's own error, and anything else (a crash);
- every fault scenario of tests/faultlib.py (a simulator that crashes, hangs, runs out of
  memory or is killed, a failing compiler, cut statistics, full disks, Ctrl-C, SIGTERM);
- concurrent writers: processes replacing the same baselines while another reads them, and
  pairs of real `perfguard baseline update` processes on one project at once.

For each: baselines lost (a previous baseline changed, missing or unreadable when it should be
byte-identical) and wrong verdicts (an exit code that is not the expected one, or a result that
claims a verdict for a kernel that was not measured or compared, or a fuzzed reader raising
anything but perfguard's own error). Prints one Markdown table; exit status 1 if any is not 0.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import hypothesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests import faultlib as F  # noqa: E402
from tests.input import test_bad_input as catalogue  # noqa: E402
from tests.input import test_fuzz as fuzz  # noqa: E402

Row = tuple[str, str, str, int, int]  # (part, what, tried, baselines lost, wrong verdicts)


def lost(before: dict[str, bytes], after: dict[str, bytes]) -> int:
    return sum(1 for name, data in before.items() if after.get(name) != data)


def catalogue_rows(work: Path, cache: Path) -> list[Row]:
    seeded = catalogue.seed_project(work / "seed", cache)
    total_lost = total_wrong = 0
    for i, case in enumerate(catalogue.CASES):
        trial = catalogue.try_case(case, seeded, work / f"case-{i}")
        total_lost += lost(trial.before, trial.after)
        total_wrong += catalogue.wrong_verdicts(case, trial)
    return [
        ("bad input", "catalogue rows (docs/bad-input.md)", f"{len(catalogue.CASES)} rows", total_lost, total_wrong)
    ]


def fuzz_rows(examples: int, seed: int | None) -> list[Row]:
    rows = []
    for name, (strategies, body) in fuzz.PROPERTIES.items():
        counts: collections.Counter = collections.Counter()

        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=seed is None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.tuples(*strategies))
        def run(args):
            fuzz.OUTCOMES.clear()
            try:
                body(*args)
            except Exception as exc:  # AssertionError: parsed into values that break the property;
                kind = "invalid" if isinstance(exc, AssertionError) else "crash"  # else not perfguard's error
                if not counts[kind]:
                    print(f"{name}: {kind}: {type(exc).__name__}: {exc}\n  input: {args!r:.2000}", file=sys.stderr)
                counts[kind] += 1
                return
            counts[fuzz.OUTCOMES[0] if fuzz.OUTCOMES else "parsed"] += 1

        (run if seed is None else hypothesis.seed(seed)(run))()
        tried = sum(counts.values())
        detail = f"{tried} inputs: {counts['parsed']} parsed, {counts['rejected']} rejected"
        rows.append(("fuzzing", name, detail, 0, counts["crash"] + counts["invalid"]))
    return rows


def fault_rows(work: Path, cache: Path) -> list[Row]:
    rows = []
    for name, (scenario, faulty, needle) in F.SCENARIOS.items():
        try:
            run = scenario(work / name.replace(" ", "_").replace("/", "_"), cache)
        except F.Unavailable as exc:
            rows.append(("fault", name, f"skipped: {exc}", 0, 0))
            continue
        wrong = int(run.code != 3)
        if run.report is not None:
            wrong += run.wrong_verdicts(faulty) + int(run.report["summary"]["exit_code"] != 3)
            wrong += sum(1 for pair in faulty if needle not in (run.result(*pair) or {}).get("error", ""))
        elif needle not in run.out:
            wrong += 1
        update = run.notes.get("update")
        if update is not None:
            wrong += int(update.code != 3)
        baselines_lost = lost(run.before, run.after) + (lost(update.before, update.after) if update else 0)
        left = len(run.notes.get("leftover", []))
        tried = "1 run" + (" + 1 baseline update" if update else "") + (f", {left} processes left!" if left else "")
        rows.append(("fault", name, tried, baselines_lost, wrong + left))
    return rows


def writer_rows(work: Path, cache: Path, rounds: int, pairs: int) -> list[Row]:
    figures = F.concurrent_writers(work / "stress" / "baselines", writers=4, rounds=rounds)
    wrong = figures["unreadable"] + figures["mixed"] + figures["failed_writers"] + int(figures["final_writers"] != 1)
    rows = [
        (
            "concurrency",
            "4 writer processes replacing 5 baselines, 1 reader (every other pass under the lock)",
            f"{figures['writes']} updates, {figures['reads']} reads",
            len(figures["leftover"]),
            wrong,
        )
    ]
    config = F.seed(work / "pairs" / "proj", cache)
    baselines_lost = wrong = 0
    for _ in range(pairs):
        first = F.start(["baseline", "update", "-j", "1"], config)
        second = F.start(["baseline", "update", "-j", "1"], config)
        runs = [first.finish(), second.finish()]
        wrong += sum(r.code != 0 for r in runs)
        names = sorted(p.name for p in (config.parent / "baselines").rglob("*") if p.is_file())
        baselines_lost += int(names != ["gemm_f.json", "gemv_h.json"])  # a missing file, or a temp/lock left
    rows.append(
        ("concurrency", "2 `perfguard baseline update` processes at once", f"{pairs} pairs", baselines_lost, wrong)
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000, help="generated inputs per reader")
    parser.add_argument("--writer-rounds", type=int, default=40, help="updates per concurrent writer process")
    parser.add_argument("--update-pairs", type=int, default=5, help="pairs of concurrent baseline updates")
    parser.add_argument("--parts", default="catalogue,fuzz,faults,writers", help="which parts to run")
    parser.add_argument(
        "--seed", type=int, help="fuzz with this seed (default: derandomized, the same inputs each run)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="perfguard-hardening-"))
    cache = work / "cache"
    started = time.monotonic()
    parts = {
        "catalogue": lambda: catalogue_rows(work / "catalogue", cache),
        "fuzz": lambda: fuzz_rows(args.examples, args.seed),
        "faults": lambda: fault_rows(work / "faults", cache),
        "writers": lambda: writer_rows(work / "writers", cache, args.writer_rounds, args.update_pairs),
    }
    rows = [row for part in args.parts.split(",") for row in parts[part]()]
    print("| part | what | tried | baselines lost | wrong verdicts |")
    print("| --- | --- | --- | ---: | ---: |")
    for part, what, tried, baselines_lost, wrong in rows:
        print(f"| {part} | {what} | {tried} | {baselines_lost} | {wrong} |")
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s")
    return int(any(r[3] or r[4] for r in rows))


if __name__ == "__main__":
    sys.exit(main())
