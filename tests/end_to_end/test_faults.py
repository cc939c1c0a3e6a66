"""Faults: a crashing, hanging, starved or killed simulator, a failing compiler, a full disk,
Ctrl-C and SIGTERM in the middle of a check, concurrent baseline writers.

For each: exit code 3, a report that says what was measured and what was not (when a report
can be written at all), no result of a kernel that was not measured passing as anything but an
error, and every baseline byte for byte what it was. Real TVM builds, cross compilers and QEMU
throughout; only the faulty tool is replaced (tests/faultlib.py). Failures are not retried
(docs/troubleshooting.md, "When something fails"): the transient-crash scenario shows the error, then a clean next run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import jsonschema
import pytest

from perfguard.baselines.lock import LOCK_NAME, baselines_lock
from perfguard.baselines.store import BaselineStore
from tests import faultlib as F

# Seconds from the signal to the exit of an interrupted check: writing its partial report (the
# simulators are gone within a second).
INTERRUPTED_EXIT_S = 30

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "report.schema.json").read_text())

pytestmark = pytest.mark.skipif(None in F.REAL.values(), reason=f"needs {', '.join(F.REAL)} (scripts/setup.sh)")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("faults")


def run_scenario(name: str, work: Path, cache_dir: Path) -> F.Run:
    scenario, _, _ = F.SCENARIOS[name]
    folder = work / name.replace(" ", "_").replace("/", "_")
    try:
        return scenario(folder, cache_dir)
    except F.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in F.SCENARIOS if n.split(":")[0] != "full disk"])
def test_fault_is_exit_3_with_a_partial_report_and_baselines_kept(name, work, cache_dir):
    _, faulty, needle = F.SCENARIOS[name]
    run = run_scenario(name, work, cache_dir)
    assert run.code == 3, run.out
    assert run.baselines_kept
    assert run.report is not None and run.report["summary"]["exit_code"] == 3
    jsonschema.validate(run.report, SCHEMA)  # a partial report (an interrupted check's too) is a valid one
    assert run.wrong_verdicts(faulty) == 0, run.report["results"]
    for pair in faulty:
        result = run.result(*pair)
        assert needle in result["error"] and "\n" not in result["error"]
        assert result["stats"] is None and result["delta_pct"] is None
    healthy = run.result(*F.HEALTHY)
    if healthy["verdict"] != "error":
        assert healthy["verdict"] == "unchanged" and healthy["measured"] is True
    assert run.report["summary"]["not_measured"] == sum(1 for r in run.report["results"] if r["verdict"] == "error")
    assert run.notes.get("leftover", []) == []  # no simulator or wrapper left running
    if "update" in run.notes:  # the same fault during a baseline update writes nothing
        update = run.notes["update"]
        assert update.code == 3 and update.baselines_kept, update.out
    if name.startswith(("Ctrl-C", "CI cancel")):
        assert run.notes["simulators_gone_s"] < 1.0, run.out  # every simulator stopped within a second
        # ... and the process exited once its partial report was written (a missed signal runs the hanging
        # simulator to its 120 s timeout)
        assert run.notes["exit_s"] < INTERRUPTED_EXIT_S, run.out
        assert run.report["summary"]["interrupted"] is True
        assert "interrupted" in run.out and "Traceback" not in run.out.split("perfguard: interrupted")[0][-200:]
    if name.startswith("transient"):  # no retry: the error stands, and the next run is clean
        assert run.notes["next"].code == 0


@pytest.mark.slow
def test_full_disk_while_writing_baselines_keeps_every_old_file(work, cache_dir):
    run = run_scenario("full disk: baselines", work, cache_dir)
    assert run.code == 3, run.out
    assert "No space left on device" in run.out and "baselines" in run.out
    assert run.baselines_kept  # neither kernel's baseline was replaced: one fitted, so none is
    assert run.notes["leftover"] == []  # no temp file, no lock file


def test_full_disk_while_writing_reports_still_shows_the_results(work, cache_dir):
    run = run_scenario("full disk: reports", work, cache_dir)
    assert run.code == 3
    assert "perfguard.json: cannot write: No space left on device" in run.out
    assert "gemv_h" in run.out and "gemm_f" in run.out  # the table was printed all the same
    assert run.baselines_kept and run.notes["leftover"] == []


def test_full_disk_cache_measures_nothing_and_says_so(work, cache_dir):
    _, faulty, needle = F.SCENARIOS["full disk: cache"]
    run = run_scenario("full disk: cache", work, cache_dir)
    assert run.code == 3 and run.baselines_kept
    assert run.wrong_verdicts(faulty) == 0
    assert all(needle in r["error"] for r in run.report["results"])
    assert "2 kernel(s) could not be measured" in run.out


# -- concurrent writers ------------------------------------------------------------------------------


@pytest.mark.slow
def test_second_writer_waits_for_the_lock_then_writes(work, cache_dir):
    config = F.seed(work / "lock-wait" / "proj", cache_dir)
    baselines = config.parent / "baselines"
    with baselines_lock(baselines, notify=lambda message: None):
        process = F.start(["baseline", "update", "-j", "1"], config)
        process.wait_for_output(f"waiting for perfguard process {os.getpid()}")  # it measured and reached the lock
        time.sleep(0.5)
        assert process.popen.poll() is None
        assert F.snapshot(baselines) == process.before  # nothing written while the lock is held
    run = process.finish()
    assert run.code == 0, run.out
    assert f"waiting for perfguard process {os.getpid()}" in run.out
    assert not (baselines / LOCK_NAME).exists()


@pytest.mark.slow
def test_second_writer_gives_up_clearly_when_the_lock_stays_held(work, cache_dir):
    config = F.seed(work / "lock-timeout" / "proj", cache_dir)
    baselines = config.parent / "baselines"
    with baselines_lock(baselines, notify=lambda message: None):
        run = F.start(["baseline", "update", "-j", "1"], config, PERFGUARD_LOCK_TIMEOUT="1").finish()
        assert run.code == 3, run.out
        assert f"{LOCK_NAME}: perfguard process {os.getpid()} has been updating these baselines" in run.out
        assert run.baselines_kept


@pytest.mark.slow
def test_two_baseline_updates_at_once_both_succeed_whole(work, cache_dir):
    config = F.seed(work / "two-updates" / "proj", cache_dir)
    first = F.start(["baseline", "update", "-j", "1"], config)
    second = F.start(["baseline", "update", "-j", "1"], config)
    runs = [first.finish(), second.finish()]
    assert [r.code for r in runs] == [0, 0], [r.out for r in runs]
    baselines = config.parent / "baselines"
    names = sorted(p.relative_to(baselines).as_posix() for p in baselines.rglob("*") if p.is_file())
    assert names == ["aarch64/gemm_f.json", "x86_64/gemv_h.json"]  # no temp or lock file left
    store = BaselineStore(baselines)  # both files whole and readable
    assert store.read("x86_64", "gemv_h").stats.insts > 0 and store.read("aarch64", "gemm_f").stats.insts > 0


@pytest.mark.slow
def test_concurrent_writers_and_readers_never_see_a_torn_update(tmp_path):
    figures = F.concurrent_writers(tmp_path / "baselines", writers=3, rounds=15)
    assert figures["reads"] > 0 and figures["unreadable"] == 0
    assert figures["mixed"] == 0  # under the lock, never two updates' files at once (without it: dozens)
    assert figures["final_writers"] == 1  # the last update is there whole, not a mix of two
    assert figures["leftover"] == []
    assert figures["writes"] == 3 * 15


def test_lock_is_reentrant_in_a_process(tmp_path):
    with baselines_lock(tmp_path, notify=lambda m: None) as path:
        with baselines_lock(tmp_path, notify=lambda m: None):
            assert path.exists()
        assert path.exists()  # still held by the outer block
    assert not path.exists()
