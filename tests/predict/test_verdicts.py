"""The verdict-agreement benchmark (benchmarks/verdicts.py) without timing anything: its pair
list is valid and one-knob, its shapes are new to every calibration dataset, its statistics
and summary give the right numbers on known inputs, stored timings are reused only for the
same binaries, and two real pairs build, simulate and get scored by every model."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from benchmarks import verdicts as vd
from benchmarks.verdict_pairs import PAIRS, Pair
from perfguard.config import load_config
from perfguard.errors import InfraError
from perfguard.job.native import QuietPolicy
from perfguard.kernels import FAMILY_NAMES, get_family
from perfguard.runs.calibration import DEFAULT_GROUPS
from perfguard.targets import BUILTIN
from tests.conftest import REPO

X86 = BUILTIN["x86_64"]
ANY_LOAD = QuietPolicy(bound=None)  # tests of the order and the spread keep every round on the shared machine


def _resolve(family: str, params: dict) -> dict:
    return get_family(family).extra["resolve"](**params)


def _shape(family: str, params: dict) -> tuple:
    p = _resolve(family, params)
    return (family, *(p[k] for k in get_family(family).shape_keys))


# ---------------------------------------------------------------------------------------------
# the pair list


def test_every_pair_is_a_valid_one_knob_edit():
    assert len(PAIRS) >= 80
    assert len({p.name for p in PAIRS}) == len(PAIRS)
    for pair in PAIRS:
        if pair.entry:  # a user's or a model's kernel: its parameters, exactly one of them edited
            before, after = pair.params("before"), pair.params("after")
            assert [k for k in before if before[k] != after[k]] == [pair.knob], pair.name
            assert all(k in before for k in pair.shape_keys) and pair.family not in FAMILY_NAMES, pair.name
            a, b = pair.sides()
            assert a.family is None and a.entry == pair.entry and a.reference == pair.reference, pair.name
            continue
        before, after = (_resolve(pair.family, pair.params(side)) for side in ("before", "after"))
        # every knob explicit: resolving fills nothing in, so no default can move with the edit
        assert before == pair.params("before"), pair.name
        assert [k for k in before if before[k] != after[k]] == [pair.knob], pair.name
        a, b = pair.sides()
        assert a.params == pair.params("before") and b.params == pair.params("after")


FLOAT_FAMILIES = tuple(name for name in FAMILY_NAMES if "dtype" in get_family(name).knobs)


def test_every_family_and_knob_kind_is_covered():
    kinds = {(p.family, p.kind) for p in PAIRS}
    assert len(FLOAT_FAMILIES) == 5
    for family in FLOAT_FAMILIES:
        expected = {"vector width", "tile size", "loop order", "unroll"} | ({"packing"} if family == "gemm" else set())
        assert {k for f, k in kinds if f == family} == expected, family
    for family in ("qgemm", "qconv2d"):  # the quantized families: tiles and int8 output (their unroll
        # knob changes no byte of these kernels: LLVM unrolls the int8 dot products either way)
        assert {k for f, k in kinds if f == family} == {"tile size", "output type"}, family
    assert len([p for p in PAIRS if p.base.get("dtype") == "float16"]) >= 4
    labels = {p.family for p in PAIRS if p.entry}
    assert {"softmax", "layer_norm", "attention"} <= labels  # user-kernel-like code
    assert len([label for label in labels if "." in label]) >= 3  # kernels extracted from whole models


def test_no_pair_shape_is_in_a_dataset_the_defaults_or_the_config():
    seen = set()
    # the project's datasets and those of every machine profile (benchmarks/profiles/NAME/datasets)
    datasets = [
        *(REPO / "baselines" / "datasets").glob("*/*.json"),
        *(REPO / "benchmarks" / "profiles").glob("*/datasets/*/*.json"),
    ]
    assert len(datasets) >= 9
    for path in datasets:
        data = json.loads(path.read_text())
        seen |= {_shape(data["family"], row["params"]) for row in data["rows"]}
    for family, shapes in DEFAULT_GROUPS.items():
        seen |= {_shape(family, shape) for shape in shapes}
    for spec in load_config(REPO / "perfguard.toml").kernels:
        seen.add(_shape(spec.family, spec.params))
    assert len(seen) >= 20  # the datasets and groups were read
    clashes = [p.name for p in PAIRS if not p.entry and _shape(p.family, p.base) in seen]
    assert clashes == []


# ---------------------------------------------------------------------------------------------
# statistics and summary on known inputs


def _record(ratios: list[float]) -> dict:
    return {
        "rounds": [
            {"before": {"median_s": 1e-3, "min_s": 1e-3}, "after": {"median_s": 1e-3 * r, "min_s": 1e-3 * r}}
            for r in ratios
        ]
    }


def test_native_delta_is_the_median_ratio_with_a_deterministic_interval():
    ratios = [1.10, 1.12, 1.11, 1.50, 1.09, 1.11, 1.13]  # one disturbed round
    n = vd.native_delta(_record(ratios))
    assert n.delta == pytest.approx(0.11)
    assert n.rounds == 7
    assert n.low <= n.delta <= n.high and 0.09 - 1e-9 <= n.low and n.high <= 0.13 + 1e-9
    assert n.spread == pytest.approx(1.4826 * 0.01 / 1.11)
    assert n.halfwidth == pytest.approx((n.high - n.low) / 2 / 1.11)
    assert vd.native_delta(_record(ratios)) == n
    slowed = _record(ratios)
    for r in slowed["rounds"]:  # the slow side's median call preempted, its fastest call not
        r["after"]["median_s"] *= 3
    assert vd.native_delta(slowed).delta == pytest.approx(0.11)
    assert vd.native_delta(slowed, "median_s").delta == pytest.approx(3 * 1.11 - 1)


def test_summary_counts_misses_false_alarms_and_signs():
    native = {"reg": 0.40, "small_reg": 0.12, "neutral": 0.01, "faster": -0.30, "mid": 0.05}
    predicted = {"reg": 0.30, "small_reg": 0.04, "neutral": 0.08, "faster": 0.02, "mid": None}
    s = vd.summarize(native, predicted)
    assert s.n == 4  # "mid" is not scored by this model
    assert s.missed == ["small_reg"]
    assert s.false_alarms == ["neutral"]
    assert (s.sign_agree, s.sign_total) == (2, 3)  # "faster" predicted slower
    # ranks: native faster < neutral < small_reg < reg; predicted faster < small_reg < neutral < reg
    assert s.spearman == pytest.approx(0.8)
    perfect = vd.summarize(native, {k: v * 2 for k, v in native.items()})
    assert perfect.spearman == pytest.approx(1.0)
    assert (perfect.missed, perfect.false_alarms, perfect.sign_agree, perfect.sign_total) == ([], [], 3, 3)
    # large slowdowns: predicted time ratio over native time ratio, within x1.3 or not
    big = vd.summarize({"x15": 14.0, "x2": 1.0, "small": 0.3}, {"x15": 8.0, "x2": 0.9, "small": 0.1})
    assert big.large == pytest.approx({"x15": 9.0 / 15.0, "x2": 1.9 / 2.0}) and big.large_within == 1


# ---------------------------------------------------------------------------------------------
# stored timings, and two real pairs


def _fake_side(binary_hash: str):
    result = vd.JobResult("k", "x86_64", "gemm", {}, "qemu", True, binary_hash=binary_hash)
    return vd.Side(None, result, None)


@pytest.mark.skipif(not X86.native(), reason="native timing needs an x86_64 host")
def test_stored_timings_are_reused_only_for_the_same_binaries(tmp_path, monkeypatch):
    timed = []  # the timing itself is replaced: this test is about when it happens, and what is kept

    def time_pair(before, after, rounds, cpu, where, reps=None, first=0, processes=1, quiet=None, budget=None):
        timed.append((rounds, first, reps))
        return {
            **_record([0.9] * rounds),
            "reps": reps or {"before": 7, "after": 8},
            "loadavg": [1.0, 1.0],
            "rejected_rounds": [],
        }

    monkeypatch.setattr(vd, "time_pair", time_pair)
    pair = PAIRS[0]
    sides = {pair.name: (_fake_side("aa"), _fake_side("bb"))}
    store = tmp_path / "native.json"
    stored = {
        **_record([1.2] * 5),
        "pair": pair.name,
        "reps": {"before": 3, "after": 4},
        "loadavg": [2.0, 2.0],
        "timed": ["then"],
    }
    vd.save_native(store, {"schema": vd.NATIVE_SCHEMA, "pairs": {"aa:bb": stored}})

    def run(rounds=5, retime=False):
        got = vd.time_pairs([pair], sides, store, rounds, retime, 0, X86, log=lambda m: None)
        return round(vd.native_delta(got[pair.name]).delta, 6)

    assert (run(), timed) == (0.2, [])  # same binaries, enough rounds: from the file
    # fewer rounds stored than asked: only the missing ones are timed, with the stored calls per
    # round, continuing the alternation, and appended
    assert (run(rounds=8), timed) == (0.2, [(3, 5, {"before": 3, "after": 4})])
    record = vd.load_native(store)["pairs"]["aa:bb"]
    assert len(record["rounds"]) == 8 and len(record["timed"]) == 2 and len(record["loadavg"]) == 4
    assert (run(rounds=8), len(timed)) == (0.2, 1)
    assert (run(retime=True), timed[1:]) == (-0.1, [(5, 0, None)])  # --retime: all of it again
    sides = {pair.name: (_fake_side("aa"), _fake_side("cc"))}  # a binary changed
    assert (run(), timed[2:]) == (-0.1, [(5, 0, None)])
    assert set(vd.load_native(store)["pairs"]) == {"aa:bb", "aa:cc"}
    data = vd.load_native(store)  # cut short by busy neighbours last time: timed anew, however many rounds it has
    data["pairs"]["aa:cc"].update(not_quiet="the other CPUs stayed busy", steady=False)
    vd.save_native(store, data)
    assert (run(rounds=1), timed[3:]) == (-0.1, [(1, 0, None)])
    assert "not_quiet" not in vd.load_native(store)["pairs"]["aa:cc"]
    # --no-timing: the stored record of these binaries, whatever its rounds; none stored, the pair is left out
    left = []
    assert set(vd.time_pairs([pair], sides, store, 50, False, 0, X86, log=left.append, timing=False)) == {pair.name}
    sides = {pair.name: (_fake_side("aa"), _fake_side("dd"))}
    assert vd.time_pairs([pair], sides, store, 5, False, 0, X86, log=left.append, timing=False) == {}
    assert len(timed) == 4 and "no stored timing for these binaries (--no-timing): left out" in left[0]


@pytest.mark.skipif(not X86.native() or shutil.which("gcc") is None, reason="native timing needs an x86_64 host")
def test_each_side_runs_in_several_processes_and_a_spread_pair_is_timed_again(tmp_path):
    """Real processes of small programs with the harness's timing contract (tests/sim/test_native_timing.py):
    the sides alternate process by process, and a pair whose per-round ratios spread beyond the bound is
    timed again, the steadiest attempt kept and flagged."""
    from tests.sim.test_native_timing import _order, _program

    before = _program(tmp_path, "A", 100_000, 0)
    after = _program(tmp_path, "B", 200_000, 0)
    record = vd.time_pair(before, after, 2, 0, "p", processes=3, quiet=ANY_LOAD)
    # probes A B; round 0: A B, B A, A B; round 1: B A, A B, B A
    assert _order(tmp_path) == ["A", "B"] + ["A", "B", "B", "A", "A", "B"] + ["B", "A", "A", "B", "B", "A"]
    assert record["processes"] == 3 and len(record["rounds"]) == 2
    assert all(
        len(r["before"]["processes"]) == 3 and r["after"]["min_s"] == pytest.approx(2e-4) for r in record["rounds"]
    )
    assert vd.native_delta(record).delta == pytest.approx(1.0) and vd.native_delta(record).spread == 0

    logs = tmp_path / "shaky"
    logs.mkdir()
    steady = _program(logs, "S", 100_000, 0)
    shaky = _program(logs, "U", 200_000, 40_000)  # each process of U 20 % slower than the one before
    messages = []
    got = vd.time_steadily(steady, shaky, 4, 0, "p", 1, 0.03, 2, messages.append, ANY_LOAD)
    assert len(got["spreads"]) == 2 and min(got["spreads"]) > 0.03 and got["steady"] is False
    assert _order(logs).count("U") == 2 * (1 + 4)  # two attempts of a probe and four rounds
    assert "timing it again" in messages[0] and "keeping the steadiest" in messages[1]
    calm = vd.time_steadily(before, after, 3, 0, "p", 1, 0.03, 2, messages.append, ANY_LOAD)
    assert calm["spreads"] == [0.0] and calm["steady"] is True


# A harness stand-in that also plays the neighbour: each run moves the jiffies of the CPU beside
# the pinned one in a fake /proc/stat by 100 s of work, until the LIMIT-th run; after that they rest.
NEIGHBOUR = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long reps = strtol(argv[1], 0, 10), k = 0;
  FILE *f = fopen(COUNT, "r");
  if (f) { if (fscanf(f, "%ld", &k) != 1) k = 0; fclose(f); }
  f = fopen(COUNT, "w"); fprintf(f, "%ld\n", ++k); fclose(f);
  f = fopen(STAT, "w");
  fprintf(f, "cpu%d 0 0 0 500 0 0 0 0 0 0\ncpu%d %ld 0 0 500 0 0 0 0 0 0\n", PINNED, PINNED + 1,
          (k < LIMIT ? k : LIMIT) * 10000L);
  fclose(f);
  for (long r = 0; r < reps; ++r) printf("%d\n", BASE);
  return 0;
}
"""


def _neighbour_program(tmp_path, name: str, base: int, limit: int, pinned: int):
    src = tmp_path / f"{name}.c"
    src.write_text(NEIGHBOUR)
    out = tmp_path / name
    subprocess.run(
        [
            "gcc",
            "-O1",
            f'-DCOUNT="{tmp_path / "count"}"',
            f'-DSTAT="{tmp_path / "stat"}"',
            f"-DLIMIT={limit}",
            f"-DPINNED={pinned}",
            f"-DBASE={base}",
            "-o",
            str(out),
            str(src),
        ],
        check=True,
    )
    return out


@pytest.mark.skipif(not X86.native() or shutil.which("gcc") is None, reason="native timing needs an x86_64 host")
def test_rounds_with_a_busy_neighbour_are_rejected_recorded_and_a_pair_that_stays_busy_is_not_scored(
    tmp_path, monkeypatch
):
    from perfguard.job import native

    monkeypatch.setattr(native, "PROC_STAT", tmp_path / "stat")
    cpu = native.pick_cpu()
    policy = QuietPolicy(bound=0.25, wait_s=0.0, retries=3, budget_s=60)
    # the neighbour works through the probes (runs 1, 2) and round 0's first try (3, 4), then rests
    before = _neighbour_program(tmp_path, "A", 100_000, 4, cpu)
    after = _neighbour_program(tmp_path, "B", 150_000, 4, cpu)
    messages = []
    record = vd.time_steadily(before, after, 3, cpu, "p", 1, 0.03, 2, messages.append, policy)
    assert [r["neighbour_load"] for r in record["rounds"]] == [0.0, 0.0, 0.0] and record["steady"] is True
    assert [(r["round"], r["neighbour_load"] > 100) for r in record["rejected_rounds"]] == [(0, True)]
    assert record["rejected_rounds"][0]["after"]["min_s"] == pytest.approx(1.5e-4)  # the rejected try's times kept
    assert vd.native_delta(record).delta == pytest.approx(0.5) and record["neighbour_bound"] == 0.25
    assert "not_quiet" not in record and messages == []

    restless = tmp_path / "restless"
    restless.mkdir()
    before = _neighbour_program(restless, "A", 100_000, 10**6, cpu)
    after = _neighbour_program(restless, "B", 150_000, 10**6, cpu)
    monkeypatch.setattr(native, "PROC_STAT", restless / "stat")
    busy = vd.time_steadily(before, after, 3, cpu, "q", 1, 0.03, 2, messages.append, policy)
    assert busy["rounds"] == [] and len(busy["rejected_rounds"]) == 3 and busy["steady"] is False
    assert busy["not_quiet"].startswith("the other CPUs stayed busy: 3 tries of a round rejected")
    assert messages == [f"q: {busy['not_quiet']}: 0 of 3 rounds kept, not scored"]
    summary = vd.neighbour_summary({"p": record, "q": busy, "old": _record([1.1, 1.2])})
    assert {k: summary[k] for k in ("rounds_kept", "rounds_rejected", "kept_without_load", "bounds")} == {
        "rounds_kept": 5,
        "rounds_rejected": 4,
        "kept_without_load": 2,
        "bounds": [0.25],
    }
    assert summary["rejected_share"] == pytest.approx(4 / 9) and summary["kept_load_max"] == 0.0
    assert list(summary["not_quiet"]) == ["q"]
    line = vd.neighbour_line(summary)
    assert line.startswith(
        "busy neighbours (bound in CPUs: 0.25): 4 rounds rejected (44 % of the tries), 5 kept; "
        "their neighbour load median 0.00, max 0.00 CPUs; 2 kept rounds without a figure"
    )
    assert "1 pairs not quiet, left out of the scores: `q`: the other CPUs stayed busy" in line


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which(X86.cc) is None or shutil.which(X86.qemu) is None, reason="the x86_64 compiler and QEMU are needed"
)
def test_two_real_pairs_build_simulate_and_score(cache_dir):
    by_name = {p.name: p for p in PAIRS}
    pairs = [by_name["depthwise_conv2d/1x48x40x40x3x3x1x1/vector:8->4"], by_name["dense_relu/24x384x192/vector:4->8"]]
    config = load_config(REPO / "perfguard.toml").with_cache_dir(cache_dir)
    sides = vd.build_sides(pairs, config, X86, workers=1)
    for pair in pairs:
        before, after = sides[pair.name]
        assert before.binary.is_file() and after.binary.is_file()
        assert before.result.binary_hash != after.result.binary_hash
        assert before.stats.insts > 0 and after.stats.insts > 0
    predicted = vd.predicted_deltas(pairs, sides, X86, config, list(vd.MODELS))
    conv, dense = (p.name for p in pairs)
    before, after = sides[conv]
    assert predicted["insts"][conv] == pytest.approx(after.stats.insts / before.stats.insts - 1)
    # no calibrated dense_relu model (intel-6-167 left its own out: it lost on its pairs): n/a, not a guess
    assert predicted["calibrated"][dense] is None
    # the depthwise model the x86_64 target's machine profile (intel-6-167) carries
    assert isinstance(predicted["calibrated"][conv], float)
    assert predicted["calibrated"][conv] != predicted["pipeline"][conv]
    # vector 4 -> 8: about half the instructions, so the count-based model must say faster
    assert predicted["analytical"][dense] < -0.2
    native = {conv: vd.native_delta(_record([1.05] * 3)), dense: vd.native_delta(_record([0.5] * 3))}
    summaries = {m: vd.summarize({k: v.delta for k, v in native.items()}, predicted[m]) for m in predicted}
    assert summaries["calibrated"].n == 1 and summaries["analytical"].n == summaries["insts"].n == 2
    table = vd.markdown(pairs, native, predicted, summaries)
    assert f"`{dense}`" in table and "n/a" in table and "| analytical | 2 |" in table
    families = vd.by_family(pairs, {k: v.delta for k, v in native.items()}, predicted)
    assert families["dense_relu"]["calibrated"].n == 0 and families["depthwise_conv2d"]["calibrated"].n == 1
    assert "| dense_relu | 1 |" in vd.family_markdown(families)


def test_pair_names_say_family_shape_and_edit():
    pair = Pair(
        "gemv", dict(M=8, K=16, dtype="float32", tile_m=8, tile_k=16, vector=8, unroll=16, order="ik"), "vector", 1
    )
    assert pair.name == "gemv/8x16/vector:8->1" and pair.kind == "vector width" and pair.before == 8
    assert vd.select_pairs("gemv/640x1536/vector") == [p for p in PAIRS if p.name.startswith("gemv/640x1536/vector")]


def test_a_model_that_fails_on_a_pair_leaves_it_unscored_and_says_why(monkeypatch):
    def picky(profile, family, sides, config):
        if family == "gemv":
            raise InfraError("llvm-mca-19 failed on block 0x10")
        return np.array([1.0, 1.5])

    monkeypatch.setitem(vd.MODELS, "picky", picky)
    gemm = next(p for p in PAIRS if p.family == "gemm")
    gemv = next(p for p in PAIRS if p.family == "gemv")
    sides = {p.name: (None, None) for p in (gemm, gemv)}
    errors: dict = {}
    got = vd.predicted_deltas([gemm, gemv], sides, X86, None, ["picky"], errors)
    assert got == {"picky": {gemm.name: pytest.approx(0.5), gemv.name: None}}
    assert errors == {"picky": {gemv.name: "llvm-mca-19 failed on block 0x10"}}
    with pytest.raises(InfraError):  # without an errors dict (tests, other callers) it raises
        vd.predicted_deltas([gemm, gemv], sides, X86, None, ["picky"])


def test_the_check_column_scores_each_dtype_as_check_does(cache_dir):
    # `perfguard check` scores a kernel with a family's calibrated model only in a dtype the model
    # was trained on; the benchmark's "check" column once scored half-precision gemm pairs with the
    # float32 gemm model (two false alarms that check itself never raised). On the committed
    # baselines' statistics of a float32 and a float16 gemm kernel:
    import dataclasses
    from types import SimpleNamespace

    from perfguard.config import KernelSpec
    from perfguard.sim.stats import Stats

    config = load_config(REPO / "perfguard.toml").with_cache_dir(cache_dir)
    # Zen 1's float32 gemm model (benchmarks/profiles/amd-23-1), as the project's own model
    zen = REPO / "benchmarks" / "profiles" / "amd-23-1"
    config = dataclasses.replace(config, storage=dataclasses.replace(config.storage, baseline_dir=zen))

    def sides(name: str) -> list:
        stored = json.loads((REPO / "baselines/x86_64" / f"{name}.json").read_text())
        spec = KernelSpec(name, "", "gemm", stored["params"])
        return [vd.Side(spec, SimpleNamespace(stats=Stats.from_dict(stored["stats"])), REPO)] * 2

    half, single = sides("gemm_fp16_64x64x128"), sides("gemm_256")
    assert half[0].spec.params["dtype"] == "float16" and single[0].spec.params.get("dtype", "float32") == "float32"
    assert vd._calibrated(X86, "gemm", half, config) is None  # the gemm model knows float32 only
    assert list(vd._check(X86, "gemm", half, config)) == list(vd._pipeline(X86, "gemm", half, config))
    calibrated = vd._calibrated(X86, "gemm", single, config)
    assert calibrated is not None and list(vd._check(X86, "gemm", single, config)) == list(calibrated)
    assert list(calibrated) != list(vd._pipeline(X86, "gemm", single, config))


def test_a_machine_profile_carries_a_model_only_where_it_won_on_its_family_pairs():
    """verdicts.carried: `auto` must use the model, its pairs must calibrate an interval, and on them
    it may not miss more regressions or raise more false alarms than the pipeline model, nor rank
    them more than 0.02 Spearman worse."""
    meta = {"model_id": "xgboost-1", "auto": {"use": True}}
    pipe = vd.Summary(9, 0.80, missed=[], false_alarms=["a"])

    def won(own: vd.Summary, **changes) -> str:
        return vd.carried({**meta, **changes}, {"xgboost-1"}, {"calibrated": own, "pipeline": pipe})

    assert won(vd.Summary(9, 0.79, false_alarms=["b"])) == ""  # as many errors, 0.01 lower: carried
    assert won(vd.Summary(9, 0.90)) == ""
    assert won(vd.Summary(9, 0.77)).startswith("on its family's 9 pairs it loses to the pipeline model: Spearman 0.77")
    assert "2 missed or false alarms against 1" in won(vd.Summary(9, 0.95, missed=["c"], false_alarms=["d"]))
    assert won(vd.Summary(9, 0.95), auto={"use": False}).startswith("`auto` does not use it")
    assert vd.carried(meta, set(), {}) == "too few pairs of its family to calibrate its interval"
    assert vd.carried(meta, {"xgboost-1"}, {}) == "its family's pairs were not scored"
