"""Native timing that survives a noisy machine (perfguard.job.native): several separate processes per
timing, interleaved across binaries, re-timed while their medians disagree, the CPU and its cycle
counter recorded. Real processes of small host programs that follow the harness's timing contract
(`prog REPS WARMUP time` prints one line of nanoseconds per call) and log the order they ran in."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from perfguard.job import native
from perfguard.targets import BUILTIN

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("gcc") is None,
    reason="needs an x86_64 host with gcc (native timing of x86_64 binaries)",
)

# Process k (counted in the log) prints BASE + k * STEP ns for every call: STEP 0 is a steady
# binary, STEP > 0 one whose processes disagree (a layout that differs per process).
PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long reps = strtol(argv[1], 0, 10), k = 0;
  char line[64];
  FILE *log = fopen(LOG, "r");
  if (log) { while (fgets(line, sizeof line, log)) if (line[0] == NAME[0]) ++k; fclose(log); }
  log = fopen(LOG, "a"); fprintf(log, "%s\n", NAME); fclose(log);
  for (long r = 0; r < reps; ++r) printf("%ld\n", (long)(BASE + k * STEP));
  return 0;
}
"""


# These tests are about the order and the spread, not the neighbours (tested below): every round
# kept whatever else the shared machine runs.
ANY_LOAD = native.QuietPolicy(bound=None)


def _program(tmp_path: Path, name: str, base: int, step: int) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(PROGRAM)
    out = tmp_path / name
    subprocess.run(
        [
            "gcc",
            "-O1",
            f'-DLOG="{tmp_path / "order.log"}"',
            f'-DNAME="{name}"',
            f"-DBASE={base}",
            f"-DSTEP={step}",
            "-o",
            str(out),
            str(src),
        ],
        check=True,
    )
    return out


def _order(tmp_path: Path) -> list[str]:
    return (tmp_path / "order.log").read_text().split()


def test_binaries_are_timed_in_separate_interleaved_processes(tmp_path):
    a, b = _program(tmp_path, "A", 100_000, 0), _program(tmp_path, "B", 200_000, 0)
    timings = native.time_interleaved(
        [a, b], BUILTIN["x86_64"], ["a", "b"], processes=3, cpu=native.pick_cpu(), quiet=ANY_LOAD
    )
    order = _order(tmp_path)
    assert order[:2] == ["A", "B"]  # the probes
    assert order[2:] == ["A", "B", "B", "A", "A", "B"]  # three processes each, the order reversed every other one
    assert [t.median_s for t in timings] == [pytest.approx(1e-4), pytest.approx(2e-4)]
    assert all(t.steady and t.attempts == 1 and t.processes == 3 and t.process_spread == 0 for t in timings)
    assert all(t.samples > 3 * 10 and t.preempted >= 0 for t in timings)


def test_a_binary_whose_processes_disagree_is_timed_again_and_flagged(tmp_path):
    steady, shaky = _program(tmp_path, "S", 100_000, 0), _program(tmp_path, "U", 100_000, 10_000)
    timings = native.time_interleaved(
        [steady, shaky], BUILTIN["x86_64"], ["s", "u"], cv_bound=0.03, attempts=2, processes=3, quiet=ANY_LOAD
    )
    good, bad = timings
    assert good.steady and good.attempts == 1
    # U's probe is its process 0; then 110, 120, 130 us (spread 20 / 120), and 140, 150, 160 us (20 / 150):
    # above the 3 % bound in both attempts, the steadier one kept
    assert not bad.steady and bad.attempts == 2 and bad.process_spread == pytest.approx(20 / 150)
    assert bad.median_s == pytest.approx(150e-6)
    order = _order(tmp_path)
    assert order.count("S") == 1 + 3 and order.count("U") == 1 + 2 * 3  # only the unsteady one again
    one = native.time_native(steady, BUILTIN["x86_64"], "s", quiet=ANY_LOAD)  # the old single-process call still works
    assert one.processes == 1 and one.steady


def test_the_machine_record_names_the_cpu_and_its_cycle_counter():
    machine = native.this_machine()
    assert machine.cpu_id.startswith(("AuthenticAMD", "GenuineIntel")) and " model " in machine.cpu_id
    counter = native.cycle_counter()
    assert counter == "cycles" or counter.startswith("not exposed: ")
    assert machine.cycle_counter == counter
    # what `perf stat -e cycles` says about this kernel agrees, where perf is installed
    if shutil.which("perf"):
        out = subprocess.run(["perf", "stat", "-x,", "-e", "cycles", "true"], capture_output=True, text=True).stderr
        if "<not supported>" in out:
            assert counter.startswith("not exposed: ")


# -- busy neighbours: how busy the other CPUs were during a round (perfguard.job.native) ---------------

# Two /proc/stat snapshots of this 2-CPU VM, 2 s apart (captured while both cores were busy).
STAT_BEFORE = """cpu  1590602 2555144 404946 222470 10379 0 4175 35732 0 0
cpu0 778510 1304866 185546 121154 3382 0 420 17841 0 0
cpu1 812091 1250277 219400 101316 6997 0 3755 17890 0 0
intr 123456 0 0
ctxt 987654
btime 1700000000
"""
STAT_AFTER = """cpu  1590827 2555288 404972 222470 10379 0 4176 35736 0 0
cpu0 778545 1305010 185564 121154 3382 0 420 17844 0 0
cpu1 812281 1250277 219407 101316 6997 0 3756 17892 0 0
intr 123999 0 0
"""


def test_cpu_jiffies_split_each_cpu_into_non_idle_and_idle():
    got = native.cpu_jiffies(STAT_BEFORE)
    assert set(got) == {0, 1}  # the aggregate "cpu" line and the other lines are not CPUs
    # non-idle: user nice system irq softirq steal; idle: idle iowait; guest fields are inside user and nice
    assert got[0] == (778510 + 1304866 + 185546 + 0 + 420 + 17841, 121154 + 3382)
    assert native.cpu_jiffies("cpu3 10 0 5 100 1 0 0 2 7 7\n")[3] == (17, 101)
    assert native.cpu_jiffies("cpu0 10 0 5 100\n")[0] == (15, 100)  # an old kernel's four fields


def test_neighbour_load_counts_every_cpu_but_the_pinned_one_over_the_wall_time():
    before, after = native.cpu_jiffies(STAT_BEFORE), native.cpu_jiffies(STAT_AFTER)
    # pinned to CPU 1: CPU 0 did 35 + 144 + 18 + 3 = 200 jiffies (2 s at 100 Hz) in 2 s: one CPU's worth
    assert native.neighbour_load(before, after, 1, 2.0, hz=100) == pytest.approx(1.0)
    # pinned to CPU 0: CPU 1 did 190 + 7 + 1 + 2 = 200
    assert native.neighbour_load(before, after, 0, 2.0, hz=100) == pytest.approx(1.0)
    assert native.neighbour_load(before, after, 1, 4.0, hz=100) == pytest.approx(0.5)
    # this process's own CPU time is not a neighbour's; never below 0
    assert native.neighbour_load(before, after, 1, 2.0, own_s=0.5, hz=100) == pytest.approx(0.75)
    assert native.neighbour_load(before, after, 1, 2.0, own_s=9.0, hz=100) == 0.0
    # a CPU missing from one snapshot (taken offline) is left out; no other CPU: nothing beside
    assert native.neighbour_load(before, {1: after[1]}, 1, 2.0, hz=100) == 0.0
    assert native.neighbour_load({0: before[0]}, {0: after[0]}, 0, 2.0, hz=100) == 0.0
    # summed over the neighbours: two busy CPUs beside the pinned one are two CPUs' worth
    three = {**before, 2: before[0]}, {**after, 2: after[0]}
    assert native.neighbour_load(*three, 1, 2.0, hz=100) == pytest.approx(2.0)
    # a wall time shorter than a jiffy counts as one jiffy
    assert native.neighbour_load(before, after, 1, 0.0, hz=100) == pytest.approx(200.0)


def _stat(busy: int, pinned: int) -> str:
    """A /proc/stat whose neighbour of `pinned` has done `busy` jiffies."""
    return f"cpu  0 0 0 0 0 0 0 0 0 0\ncpu{pinned} 0 0 0 500 0 0 0 0 0 0\ncpu{pinned + 1} {busy} 0 0 500 0 0 0 0 0 0\n"


def test_a_busy_round_is_timed_again_and_a_round_that_stays_busy_gives_up_with_the_reason(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    monkeypatch.setattr(native, "PROC_STAT", stat)
    stat.write_text(_stat(0, 1))
    busy = iter([10_000, 10_000])  # the neighbour works through the first try only

    def run():  # a round: the neighbour's jiffies move on while it runs
        stat.write_text(_stat(next(busy), 1))
        return "timings"

    policy = native.QuietPolicy(bound=0.25, wait_s=0.0, retries=5, budget_s=60)
    budget = native.QuietBudget(policy.budget_s)
    got = native.time_quietly(run, 1, policy, budget)
    assert got.kept == "timings" and got.load == pytest.approx(0.0, abs=0.2) and got.not_quiet == ""
    assert len(got.rejected) == 1 and got.rejected[0][1] > 10  # 100 s of work in a moment
    assert 0 < budget.spent < 5  # the rejected try's time was charged

    counter = iter(range(2, 100))

    def always():  # the neighbour never rests
        stat.write_text(_stat(10_000 * next(counter), 1))
        return "t"

    got = native.time_quietly(always, 1, native.QuietPolicy(0.25, wait_s=0.0, retries=3), native.QuietBudget(60))
    assert got.kept is None and len(got.rejected) == 3
    assert got.not_quiet.startswith("the other CPUs stayed busy: 3 tries of a round rejected")
    assert got.not_quiet.endswith("3 tries at most")
    # the budget ends it before the retry limit; a wait is cut to what is left
    got = native.time_quietly(always, 1, native.QuietPolicy(0.25, wait_s=30.0, retries=50), native.QuietBudget(0.05))
    assert len(got.rejected) == 1 and got.not_quiet.endswith("the 0.05 s budget for rejected rounds is spent")
    # the check off: every round kept, its load still measured
    got = native.time_quietly(always, 1, native.QuietPolicy(bound=None), native.QuietBudget(0))
    assert got.kept == "t" and got.load > 10 and not got.rejected
    # /proc/stat unreadable: the round is kept with an unknown load
    monkeypatch.setattr(native, "PROC_STAT", tmp_path / "missing")
    got = native.time_quietly(lambda: "t", 1, policy, native.QuietBudget(0))
    assert (got.kept, got.load, got.rejected) == ("t", None, [])


def test_the_bound_comes_from_a_percentage():
    assert native.QuietPolicy.from_percent(25).bound == 0.25
    assert native.QuietPolicy.from_percent(0).bound is None
    assert native.QuietPolicy.from_percent(150, budget_s=5).budget_s == 5
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(native.InputError, match="--max-neighbour-busy"):
            native.QuietPolicy.from_percent(bad)


# PROGRAM, and from the FROM-th run on (counted over every binary) each run also moves the jiffies
# of the CPU beside the pinned one in a fake /proc/stat by 100 s of work.
RESTLESS = PROGRAM.replace(
    "  for (long r = 0;",
    r"""  long n = 0;
  FILE *count = fopen(COUNT, "r");
  if (count) { if (fscanf(count, "%ld", &n) != 1) n = 0; fclose(count); }
  count = fopen(COUNT, "w"); fprintf(count, "%ld\n", ++n); fclose(count);
  FILE *stat = fopen(STAT, "w");
  fprintf(stat, "cpu%d 0 0 0 500 0 0 0 0\ncpu%d %ld 0 0 500 0 0 0 0\n", PINNED, PINNED + 1,
          (n > FROM ? n : FROM) * 10000L);
  fclose(stat);
  for (long r = 0;""",
    1,
)


def test_a_group_whose_neighbours_get_busy_keeps_its_steady_timings_and_flags_the_pending_one(tmp_path, monkeypatch):
    cpu = native.pick_cpu()
    monkeypatch.setattr(native, "PROC_STAT", tmp_path / "stat")

    def program(name: str, step: int) -> Path:
        src = tmp_path / f"{name}.c"
        src.write_text(RESTLESS)
        out = tmp_path / name
        subprocess.run(
            [
                "gcc",
                "-O1",
                f'-DLOG="{tmp_path / "order.log"}"',
                f'-DNAME="{name}"',
                "-DBASE=100000",
                f"-DSTEP={step}",
                f'-DCOUNT="{tmp_path / "count"}"',
                f'-DSTAT="{tmp_path / "stat"}"',
                f"-DPINNED={cpu}",
                "-DFROM=6",
                "-o",
                str(out),
                str(src),
            ],
            check=True,
        )
        return out

    # runs 1-2 the probes, 3-6 attempt 1 (S U U S: quiet; U's processes disagree), then U alone
    # while the neighbour works: two tries of attempt 2, both rejected
    steady, shaky = program("S", 0), program("U", 20_000)
    policy = native.QuietPolicy(bound=0.25, wait_s=0.0, retries=2, budget_s=60)
    good, bad = native.time_interleaved(
        [steady, shaky], BUILTIN["x86_64"], ["s", "u"], attempts=3, processes=2, cpu=cpu, quiet=policy
    )
    assert _order(tmp_path) == ["S", "U", "S", "U", "U", "S", "U", "U", "U", "U"]
    assert good.steady and good.quiet and good.neighbour_load == 0.0 and good.neighbour_rejected == 0
    assert not bad.steady and not bad.quiet and bad.neighbour_rejected == 2
    assert bad.unsteady.startswith("the other CPUs stayed busy: 2 tries of a round rejected")
    assert bad.attempts == 1 and bad.neighbour_load == 0.0  # the quiet attempt it had is the one kept


# A harness stand-in that sleeps: the round lasts long enough for /proc/stat's jiffies while the
# pinned CPU itself stays idle.
SLEEPER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  long reps = strtol(argv[1], 0, 10);
  usleep(150000);
  for (long r = 0; r < reps; ++r) printf("100000\n");
  return 0;
}
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a busy neighbour needs a second CPU")
def test_a_round_beside_a_real_busy_process_is_rejected(tmp_path):
    src = tmp_path / "sleeper.c"
    src.write_text(SLEEPER)
    sleeper = tmp_path / "sleeper"
    subprocess.run(["gcc", "-O1", "-o", str(sleeper), str(src)], check=True)
    cpu = native.pick_cpu()
    neighbour = min(os.sched_getaffinity(0) - {cpu})
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=lambda: os.sched_setaffinity(0, {neighbour}))
    try:
        timing = native.time_native(
            sleeper,
            BUILTIN["x86_64"],
            "s",
            cpu=cpu,
            processes=2,
            quiet=native.QuietPolicy(bound=0.25, wait_s=0.1, retries=2, budget_s=5),
        )
    finally:
        hog.kill()
        hog.wait()
    # the loop alone keeps its CPU busy through each 0.3 s try (whatever else runs there adds to it)
    assert timing.neighbour_rejected == 2 and timing.neighbour_load >= 0.8
    assert not timing.steady and not timing.quiet
    assert timing.unsteady.startswith("the other CPUs stayed busy: 2 tries of a round rejected")
