"""Mutation checks of the rules that turn a number into a verdict or an error (issue 28).

Each mutant breaks one rule on purpose in a fresh copy of the committed tree (`git archive HEAD`),
runs the quick tests that guard that rule, and says which test failed; a mutant that no test
catches is a gap in the tests. The copy is thrown away afterwards: nothing here touches the tree.

    python scripts/mutants.py                  # every mutant (a few minutes)
    python scripts/mutants.py -k tolerance     # those whose name contains 'tolerance'
    python scripts/mutants.py --list

Not part of the test suite (it runs the suite). Exit 1 when a mutant survives or is stale (its
text is no longer in the file: update the mutant with the code).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICK = "not slow"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # in the repository
    old: str  # must occur exactly once
    new: str
    tests: tuple[str, ...]  # pytest paths or node ids
    markers: str = QUICK  # "" for a slow test chosen by id


MUTANTS = [
    # the verdict rules (judge/verdicts.py), kernels and models alike
    Mutant(
        "regression rule > made >=",
        "perfguard/judge/verdicts.py",
        "if delta_pct > threshold_pct:",
        "if delta_pct >= threshold_pct:",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    Mutant(
        "improvement rule < made <=",
        "perfguard/judge/verdicts.py",
        "if delta_pct < -threshold_pct:",
        "if delta_pct <= -threshold_pct:",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    Mutant(
        "threshold doubled",
        "perfguard/judge/verdicts.py",
        "def classify(delta_pct: float, threshold_pct: float) -> str:\n",
        "def classify(delta_pct: float, threshold_pct: float) -> str:\n    threshold_pct *= 2\n",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    Mutant(
        "model total's own percentage formula",
        "perfguard/judge/model_totals.py",
        "delta = change_pct(baseline, current) if current is not None and baseline else None",
        "delta = (current - baseline) / baseline * 100.0 if current is not None and baseline else None",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    Mutant(
        "--threshold 0 taken as unset",
        "perfguard/judging.py",
        "        if imposed is not None:\n            return imposed",
        "        if imposed:\n            return imposed",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    # per-metric limits (judging.py)
    Mutant(
        "limit made exclusive (at the limit breaches)",
        "perfguard/judging.py",
        "if current <= baseline + self.allowance(baseline):",
        "if current < baseline + self.allowance(baseline):",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    Mutant(
        "kernel limit no longer replaces the global one",
        "perfguard/judging.py",
        "return {**self.limits, **own}",
        "return {**own, **self.limits}",
        ("tests/judge", "tests/runs", "tests/baselines"),
    ),
    # the output check (verify.py)
    Mutant(
        "tolerance doubled",
        "perfguard/job/verify.py",
        "allowed = atol + rtol * np.abs(want)",
        "allowed = 2 * (atol + rtol * np.abs(want))",
        ("tests/compile",),
    ),
    Mutant(
        "default float32 tolerance doubled",
        "perfguard/job/verify.py",
        'DEFAULT_TOL = {"float32": 1e-5,',
        'DEFAULT_TOL = {"float32": 2e-5,',
        ("tests/compile",),
    ),
    Mutant(
        "tolerance made inclusive (an error at it fails)",
        "perfguard/job/verify.py",
        "bad = ~(diff <= allowed)",
        "bad = ~(diff < allowed)",
        ("tests/compile",),
    ),
    Mutant(
        "atol without the all-zero floor",
        "perfguard/job/verify.py",
        "default * (largest if largest > 0 else 1.0)",
        "default * largest",
        ("tests/compile",),
    ),
    Mutant(
        "a non-finite reference let through",
        "perfguard/job/verify.py",
        "if not np.all(np.isfinite(want)):",
        "if False:",
        ("tests/compile",),
    ),
    Mutant(
        "shapes compared by size (broadcast)",
        "perfguard/job/verify.py",
        "if tuple(want.shape) != tuple(got.shape):",
        "if want.size != got.size:",
        ("tests/compile",),
    ),
    # block pairing and the differential view (judge/block_pairs.py, judge/attribution.py, document/result.py)
    Mutant(
        "block shares not normalised",
        "perfguard/document/result.py",
        "return 100.0 * cycles / change if change else None",
        "return cycles if change else None",
        ("tests/judge/test_block_pairing.py",),
    ),
    Mutant(
        "blocks ordered by signed change",
        "perfguard/judge/attribution.py",
        "key=lambda i: (-abs(pairs[i].delta), pairs[i].start),",
        "key=lambda i: (-pairs[i].delta, pairs[i].start),",
        ("tests/judge/test_block_pairing.py",),
    ),
    Mutant(
        "blocks at one address: first one's executions only",
        "perfguard/judge/block_pairs.py",
        "return sum(c.block.count for c in self.costs)",
        "return self.costs[0].block.count",
        ("tests/judge/test_block_pairing.py",),
    ),
    Mutant(
        "no cap on the blocks kept",
        "perfguard/judge/attribution.py",
        "pairs[i].start),\n    )[:MAX_BLOCKS]",
        "pairs[i].start),\n    )",
        ("tests/judge/test_block_pairing.py",),
    ),
    # the pipeline model against llvm-mca (predict/)
    Mutant(
        "llvm-mca's reciprocal throughput read as its cycles",
        "perfguard/sim/mca.py",
        "per_iter = int(cycles.group(1)) / int(iters.group(1))",
        "per_iter = float(rthru.group(1))",
        ("tests/predict/test_pipeline_against_mca.py",),
    ),
    Mutant(
        "loop scale inverted",
        "perfguard/predict/pipeline.py",
        "cycles / alone if alone else 1.0",
        "alone / cycles if cycles else 1.0",
        ("tests/predict/test_pipeline_against_mca.py",),
    ),
    Mutant(
        "loop body count spread 5 % -> 6 %",
        "perfguard/predict/pipeline.py",
        "LOOP_COUNT_SPREAD = 1.05",
        "LOOP_COUNT_SPREAD = 1.06",
        ("tests/predict/test_pipeline_model.py",),
    ),
    # other limit rules
    Mutant(
        "drift: MAPE at the limit asks for retraining",
        "perfguard/runs/calibration_models.py",
        "    if mape > max_mape:\n        reasons.append",
        "    if mape >= max_mape:\n        reasons.append",
        ("tests/predict/test_predict.py",),
    ),
    Mutant(
        "change point: a step of exactly min_step dropped",
        "perfguard/judge/changepoint.py",
        "if gaps[k] >= step:",
        "if gaps[k] > step:",
        ("tests/judge/test_history.py",),
    ),
    # determinism across processes: a renderer iterating a set (its order follows the process's hash seed)
    Mutant(
        "a report table in set order",
        "perfguard/report/html.py",
        "    for name in STATISTICS:\n        d = r.stat_deltas.get(name)",
        "    for name in set(STATISTICS):\n        d = r.stat_deltas.get(name)",
        (
            "tests/end_to_end/test_determinism.py::"
            "test_a_cold_process_and_this_one_write_byte_identical_baselines_and_reports",
        ),
        "",  # a slow test (3.3 s in tests/durations.json), chosen by id
    ),
    # the Action's base on a shallow checkout (action.py)
    Mutant(
        "no unshallowing",
        "perfguard/shells/action.py",
        '_git("fetch", "--no-tags", "--unshallow", "origin")',
        "pass",
        ("tests/shells/test_action_base.py",),
    ),
    Mutant(
        "base not fetched when missing",
        "perfguard/shells/action.py",
        'if sha is None and _git("fetch", "--no-tags", "origin", ref).returncode == 0:',
        "if False:",
        ("tests/shells/test_action_base.py",),
    ),
    # bisect (slow: real revisions)
    Mutant(
        "bisect: skipped commits ignored (never ambiguous)",
        "perfguard/runs/bisect.py",
        "out.outcome = AMBIGUOUS if between else FOUND",
        "out.outcome = FOUND",
        (
            "tests/runs/test_compare.py::test_bisect_names_every_candidate_when_the_revision_before_the_first_bad_one"
            "_does_not_compile",
        ),
        "",
    ),
]


def committed_tree(dest: Path) -> None:
    """The tree as committed at HEAD, as a fresh clone would have it."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def run_tests(tree: Path, tests: tuple[str, ...], markers: str, cache: Path) -> tuple[int, list[str], str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PERFGUARD_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", markers, *tests]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    failed = re.findall(r"^FAILED (\S+)", proc.stdout, re.M)
    return proc.returncode, failed, proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only mutants whose name contains this")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--no-control", action="store_true", help="skip running the tests on the unmutated tree")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if args.k.lower() in m.name.lower()]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.path} -> {' '.join(m.tests)}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="perfguard-mutants-"))
    bad = 0
    try:
        tree = work / "tree"
        cache = Path(os.environ.get("PERFGUARD_CACHE_DIR") or work / "cache")  # content-addressed: safe to share
        tree.mkdir()
        committed_tree(tree)
        if not args.no_control:
            for markers in sorted({m.markers for m in chosen}):
                tests = tuple(sorted({t for m in chosen if m.markers == markers for t in m.tests}))
                code, failed, last = run_tests(tree, tests, markers, cache)
                print(
                    f"control (unmutated, -m {markers!r}): exit {code}, {last}"
                    + (f": {', '.join(failed)}" if failed else ""),
                    flush=True,
                )
                if code != 0:
                    print("the tests fail without a mutant: fix them first", file=sys.stderr)
                    return 1
        for m in chosen:
            path = tree / m.path
            original = path.read_text()
            if original.count(m.old) != 1:
                print(f"STALE    {m.name}: {m.old!r} occurs {original.count(m.old)} times in {m.path}")
                bad += 1
                continue
            path.write_text(original.replace(m.old, m.new))
            start = time.monotonic()
            try:
                code, failed, last = run_tests(tree, m.tests, m.markers, cache)
            finally:
                path.write_text(original)  # revert
            took = time.monotonic() - start
            if code == 1 and failed:
                print(f"caught   {m.name} ({m.path}): {failed[0]} [{took:.0f} s]", flush=True)
            else:
                bad += 1
                print(f"SURVIVED {m.name} ({m.path}): exit {code}, {last} [{took:.0f} s]", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(chosen) - bad} of {len(chosen)} mutants caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
