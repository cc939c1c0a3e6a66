"""gem5 timing CPUs as references in the verdict-agreement benchmark (benchmarks/verdicts.py
--reference): the cycle statistic is found and refused when ambiguous, deltas come from cycles,
and on a real gem5 (skipped without one) O3 and Minor give the cycles of the kernel alone (they
double with the kernel's work) in a plausible proportion to its instructions."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from benchmarks import verdicts as vd
from benchmarks.verdict_pairs import PAIRS
from perfguard.errors import InfraError
from perfguard.sim.gem5 import ENV_BY_ISA, find_gem5
from perfguard.targets import BUILTIN


def test_cycles_come_from_the_one_cpu_and_an_ambiguous_dump_is_refused():
    dump = {"simTicks": 10**9, "system.cpu.numCycles": 4321, "system.cpu.icache.overallMisses::total": 7}
    assert vd.cycles_of(dump) == 4321
    with pytest.raises(InfraError, match="found 0"):
        vd.cycles_of({"simTicks": 10**9})
    with pytest.raises(InfraError, match="found 2"):
        vd.cycles_of({"system.cpu0.numCycles": 1, "system.cpu1.numCycles": 2})


def test_reference_deltas_are_cycle_ratios_and_unsimulated_pairs_are_unscored():
    a, b = PAIRS[0], PAIRS[1]
    runs = {"gem5-o3": {a.name: {"before": {"cycles": 2000.0}, "after": {"cycles": 2500.0}}}}
    deltas = vd.reference_deltas([a, b], runs)
    assert deltas["gem5-o3"][a.name] == pytest.approx(0.25)
    assert deltas["gem5-o3"][b.name] is None
    # an unscored pair is left out of the summary, not counted as "no change"
    assert vd.summarize({a.name: 0.3, b.name: 0.3}, deltas["gem5-o3"]).n == 1


def test_each_profile_keeps_its_own_timings_and_gem5_results():
    assert vd.native_file_for("x86_64") == vd.NATIVE_FILE
    v1 = vd.native_file_for("x86_64v1")
    assert v1 != vd.NATIVE_FILE and v1.parent == vd.NATIVE_FILE.parent and "x86_64v1" in v1.name
    assert vd.gem5_file_for("x86_64v1") not in (v1, vd.NATIVE_FILE)
    assert vd.gem5_key("o3", "abc", "fp") != vd.gem5_key("minor", "abc", "fp") != vd.gem5_key("o3", "abc", "fp2")


def test_a_reference_needs_a_profile_gem5_decodes(capsys):
    with pytest.raises(SystemExit, match="unknown reference 'gem5-atomic'"):
        vd.main(["--reference", "gem5-atomic", "--pairs", PAIRS[0].name])


# The same loop over N and over 2N elements: the kernel's cycles must double, which the whole
# run's cycles (start-up and set-up included) would not.
LOOP_C = r"""
#include <stdio.h>
#include <stdlib.h>
static float a[N], b[N];
static void kernel(void) { for (int i = 0; i < N; i++) b[i] = b[i] * 0.5f + a[i]; }
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int reps = atoi(argv[1]), warmup = atoi(argv[2]);
  for (int i = 0; i < N; i++) a[i] = (float)i;
  for (int i = 0; i < warmup; i++) kernel();
  for (int i = 0; i < reps; i++) kernel();
  printf("%f\n", b[N - 1]);
  return 0;
}
"""


CPI = {"o3": (0.5, 1.2), "minor": (2.0, 5.0)}


@pytest.mark.slow  # two real gem5 timing-CPU runs
@pytest.mark.parametrize("cpu_type", ["o3", "minor"])
def test_real_gem5_timing_cpu_counts_the_kernel_cycles(cpu_type, tmp_path):
    target = BUILTIN["x86_64v1"]
    if find_gem5(target.isa) is None:
        pytest.skip(f"no gem5 binary for {target.isa}: set {ENV_BY_ISA[target.isa]} to run this test")
    if shutil.which(target.cc) is None:
        pytest.skip(f"no {target.cc} to build the test harness")
    source = tmp_path / "loop.c"
    source.write_text(LOOP_C)
    got = {}
    for n in (2048, 4096):
        binary = tmp_path / f"loop{n}"
        subprocess.run(
            [
                target.cc,
                "-O2",
                "-march=x86-64",
                "-fno-tree-vectorize",
                "-static",
                f"-DN={n}",
                "-o",
                str(binary),
                str(source),
            ],
            check=True,
        )
        got[n] = vd.gem5_cycles(vd.Gem5Run(binary, target, cpu_type, tmp_path / "cache", 1, 1, 1800))
    small, big = got[2048], got[4096]
    for n, run in got.items():
        assert run["cycles"] == run["cycles_runs"][0] - run["cycles_runs"][1] > 0, got
        assert n * 4 <= run["insts"] <= n * 12, got  # a handful of instructions per element
        # cycles depend on gem5's build and CPU parameters as well as the binary, so not exact: a window per
        # CPU type around what gem5 24.0.0.1 gives (O3 CPI 0.75-0.81, in-order Minor 3.28-3.40)
        low, high = CPI[cpu_type]
        assert low * run["insts"] <= run["cycles"] <= high * run["insts"], (cpu_type, n, run["cycles"] / run["insts"])
    assert 1.7 <= big["cycles"] / small["cycles"] <= 2.3, got  # the kernel alone, not the whole run
    assert 8 * 2048 <= big["insts"] - small["insts"] <= 8 * 2048 + 64, got  # the loop: 8 per element (gcc -O2)
    assert not list((tmp_path / "cache" / "gem5").iterdir())  # the run directories are removed


def test_stored_gem5_results_are_reused_per_binary_and_cpu(tmp_path, monkeypatch):
    """A side whose (CPU type, binary, gem5 fingerprint) is stored is not simulated again; one
    CPU type stored does not stand in for the other; a file of another schema is refused."""
    from perfguard.config import load_config
    from perfguard.job.run import JobResult
    from perfguard.sim.gem5 import Gem5Simulator
    from perfguard.sim.stats import Stats

    target = BUILTIN["x86_64v1"]
    if find_gem5(target.isa) is None:
        pytest.skip(f"no gem5 binary for {target.isa}: set {ENV_BY_ISA[target.isa]} to run this test")
    config = load_config(vd.REPO / "perfguard.toml").with_cache_dir(tmp_path / "cache")
    pair = PAIRS[0]
    sides = {
        pair.name: tuple(
            vd.Side(
                spec,
                JobResult(
                    spec.name,
                    target.name,
                    pair.family,
                    spec.params,
                    "qemu",
                    True,
                    stats=Stats(insts=1000),
                    binary_hash=h,
                ),
                tmp_path / h,
            )
            for spec, h in zip(pair.sides(), ("b" * 64, "a" * 64))
        )
    }
    fingerprint = Gem5Simulator(config.storage.cache_dir, cpu_type="o3").fingerprint(target)
    stored = {vd.gem5_key("o3", h, fingerprint): {"cycles": c} for h, c in (("b" * 64, 1000.0), ("a" * 64, 1300.0))}
    path = tmp_path / "gem5.json"
    path.write_text(json.dumps({"schema": vd.GEM5_SCHEMA, "runs": stored}))
    ran = []
    monkeypatch.setattr(vd, "gem5_cycles", lambda run: ran.append(run) or {"cycles": 1.0, "wall_s": 0.0})
    runs = vd.gem5_references([pair], sides, target, config, ["gem5-o3"], path, 1, log=lambda m: None)
    assert ran == [] and vd.reference_deltas([pair], runs)["gem5-o3"][pair.name] == pytest.approx(0.3)
    vd.gem5_references([pair], sides, target, config, ["gem5-o3", "gem5-minor"], path, 1, log=lambda m: None)
    assert sorted((r.cpu_type, r.binary.name) for r in ran) == [("minor", "a" * 64), ("minor", "b" * 64)]
    path.write_text(json.dumps({"schema": 99, "runs": {}}))
    with pytest.raises(SystemExit, match="gem5.json: not a gem5 results file"):
        vd.gem5_references([pair], sides, target, config, ["gem5-o3"], path, 1)


def test_tracking_error_is_the_median_log_ratio_of_the_scored_pairs():
    native = {"a": 0.0, "b": 1.0, "c": -0.5, "d": 0.2}
    predicted = {"a": 0.1, "b": 1.0, "c": -0.75, "d": None}
    # |ln 1.1|, 0, |ln(0.25 / 0.5)|: median ln 1.1; "d" is unscored
    assert vd.tracking_error(native, predicted) == pytest.approx(np.log(1.1))


def test_a_gem5_core_takes_the_place_of_native_time_on_aarch64():
    """benchmarks/verdicts_gem5.py: every other column is scored against the chosen core's deltas
    (the truth column itself is not scored), and the stored aarch64 cycles are those of the table in
    benchmarks/RESULTS.md."""
    from benchmarks.verdicts_gem5 import score_against
    from tests.conftest import REPO

    deltas = {
        "pipeline": {"a": 0.03, "b": 0.10, "c": 0.30, "d": None},
        "gem5-o3": {"a": 0.50, "b": 0.00, "c": 0.20, "d": 0.40},
        "gem5-minor": {"a": 0.45, "b": 0.01, "c": 0.15, "d": 0.30},
    }
    scores = score_against("gem5-o3", deltas)
    assert set(scores) == {"pipeline", "gem5-minor"}
    assert (scores["pipeline"].n, scores["pipeline"].missed, scores["pipeline"].false_alarms) == (3, ["a"], ["b"])
    assert scores["gem5-minor"].n == 4 and scores["gem5-minor"].spearman == pytest.approx(1.0)
    data = json.loads((REPO / "benchmarks" / "verdicts-gem5-aarch64.json").read_text())
    runs = {(r["cpu_type"], r["kernel"]): r for r in data["runs"].values()}
    before, after = (runs[("o3", f"gemm/160x96x128/unroll:0->64#{side}")] for side in ("before", "after"))
    assert (before["cycles"], after["cycles"]) == (437158, 439583)  # +0.6 % in the table
