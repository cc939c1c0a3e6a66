"""Calibrated intervals on predicted changes (perfguard.predict.intervals): the conformal quantile,
the interval's arithmetic, the file (deterministic bytes, strict reading), which entry a result
gets, and the packaged calibration itself."""

from __future__ import annotations

import math

import pytest

from perfguard.predict import intervals as iv


def test_conformal_quantile_is_the_ceil_n_plus_1_level_th_smallest():
    scores = [0.5, 0.1, 0.4, 0.2, 0.3, 0.9, 0.8, 0.7, 0.6]  # n = 9: ceil(10 x 0.9) = 9th smallest
    assert iv.conformal_quantile(scores, 0.9) == 0.9
    assert iv.conformal_quantile(scores, 0.5) == 0.5  # ceil(10 x 0.5) = 5th
    assert iv.conformal_quantile(scores[:8], 0.9) == math.inf  # ceil(9 x 0.9) = 9 > 8: no finite interval
    assert iv.conformal_quantile([], 0.9) == math.inf


def test_score_and_bounds_are_in_log_ratio_relative_to_the_predicted_change():
    # predicted 2x, native 3x: off by ln 1.5, relative to SCALE + ln 2
    assert iv.score(2.0, 3.0) == pytest.approx(math.log(1.5) / (iv.SCALE + math.log(2.0)))
    low, high = iv.ratio_bounds(2.0, 0.5)
    half = 0.5 * (iv.SCALE + math.log(2.0))
    assert (low, high) == pytest.approx((2.0 * math.exp(-half), 2.0 * math.exp(half)))
    # a pair scored at exactly q lies on the bound: covered
    q = iv.score(2.0, 3.0)
    assert iv.coverage([(2.0, 3.0), (2.0, 3.01), (2.0, 1.0)], q) == (1, 3)


def test_a_split_conformal_interval_covers_exchangeable_pairs_at_its_level():
    """On synthetic residuals drawn from one distribution, calibrating on one half and scoring the
    other covers about the nominal level (the property the verdict benchmark measures)."""
    import numpy as np

    rng = np.random.default_rng(7)
    predicted = np.exp(rng.normal(0.0, 0.8, 4000))
    native = predicted * np.exp(rng.standard_t(3, 4000) * 0.1 * (iv.SCALE + np.abs(np.log(predicted))))
    pairs = list(zip(predicted.tolist(), native.tolist()))
    q = iv.conformal_quantile([iv.score(p, n) for p, n in pairs[:2000]], 0.9)
    covered, total = iv.coverage(pairs[2000:], q)
    assert 0.88 <= covered / total <= 0.92


def _calibration() -> iv.IntervalCalibration:
    residuals = {
        ("x86_64", "pipeline-v2-aaa", "pipeline"): [(1.0 + d / 100, 1.0 + d / 100 * 1.2) for d in range(1, 20)],
        ("x86_64", "xgboost-bbb", "calibrated"): [(1.1, 1.0)] * 9,
        ("x86_64", "gp-ccc", "calibrated"): [(1.1, 1.0)] * 5,
    }  # too few for 90 %: no entry
    return iv.calibrate(residuals, {"command": "test"})


def test_the_file_is_deterministic_and_entries_need_enough_pairs(tmp_path):
    cal = _calibration()
    assert [e.model_id for e in cal.entries] == ["pipeline-v2-aaa", "xgboost-bbb"]
    path = cal.save(tmp_path / "intervals.json")
    assert path.read_text() == cal.to_json() == _calibration().to_json()  # the same residuals, the same bytes


def test_a_result_gets_its_own_model_then_the_same_kind_then_another_target():
    cal = _calibration()
    assert cal.find("x86_64", "pipeline-v2-aaa", "pipeline")[1] is True
    entry, exact = cal.find("x86_64", "pipeline-v2-new", "pipeline")  # the pipeline model changed since
    assert entry.model_id == "pipeline-v2-aaa" and not exact
    entry, exact = cal.find("x86_64v1", "pipeline-v2-zzz", "pipeline")  # another target of the section's ISA
    assert entry.target == "x86_64" and not exact
    assert cal.find("x86_64", "analytical-v1-x", "analytical") is None
    # a calibrated model's column scored by the pipeline model shares its id, not its errors
    mixed = iv.calibrate(
        {
            ("x86_64", "pipeline-v2-aaa", "calibrated"): [(1.1, 2.0)] * 9,
            ("x86_64", "pipeline-v2-aaa", "pipeline"): [(1.1, 1.1)] * 9,
        },
        {},
    )
    own, exact = mixed.find("x86_64", "pipeline-v2-aaa", "pipeline")
    assert exact and own.kind == "pipeline" and own.quantile == 0.0

    got = iv.delta_interval(cal, "x86_64v1", "pipeline-v2-zzz", False, 1.0, 1.5)
    low, high = iv.ratio_bounds(1.5, entry.quantile)
    assert (got.low_pct, got.high_pct) == (round(100 * (low - 1), 6), round(100 * (high - 1), 6))
    assert got.low_pct < 50.0 < got.high_pct and got.basis == "pipeline-v2-aaa on x86_64, 19 verdict pairs"
    assert iv.delta_interval(cal, "x86_64", "pipeline-v2-aaa", False, 1.0, 1.5, same_statistics=True).high_pct == 0.0
    assert iv.delta_interval(cal, "x86_64", "analytical-v1-x", False, 1.0, 1.5) is None
    assert iv.delta_interval(None, "x86_64", "pipeline-v2-aaa", False, 1.0, 1.5) is None


def test_the_committed_machine_profiles_cover_the_default_models_of_x86_64_and_no_other_isa():
    """perfguard/machine_profiles/*.json, written by benchmarks/verdicts.py --machine-profile from the
    committed native timings: the pipeline and analytical models of x86_64 and each committed
    calibrated model have an entry with enough pairs, the quantiles are finite and positive, and an
    ISA without native runs gets no calibration (no interval borrowed from x86_64)."""
    from perfguard import machines

    assert machines.names() == ["amd-23-1", "intel-6-167"]
    files = {
        "amd-23-1": "benchmarks/verdicts-native.json",
        "intel-6-167": "benchmarks/verdicts-native-intel-6-167.json",
    }
    for name, native in files.items():
        profile = machines.load(name)
        assert list(profile.isas) == ["x86_64"] and profile.isas["x86_64"].pairs == 85
        assert profile.isas["x86_64"].source["native_file"] == native
        cal = iv.for_machine(profile, "x86_64")
        assert cal.level == 0.9 and cal.scale == iv.SCALE and cal.machine == name
        assert {e.kind for e in cal.entries} == {"pipeline", "analytical", "calibrated"}
        for e in cal.entries:
            assert e.pairs >= 9 and 0 < e.quantile < 10
            assert (e.kind == "pipeline") == e.model_id.startswith("pipeline-")
        assert iv.for_machine(profile, "aarch64") is None and iv.for_machine(profile, "riscv64") is None
    amd, intel = machines.load("amd-23-1"), machines.load("intel-6-167")
    assert (amd.cpu.vendor, amd.cpu.family, amd.cpu.model) == ("AuthenticAMD", 23, 1)
    assert (intel.cpu.vendor, intel.cpu.family, intel.cpu.model) == ("GenuineIntel", 6, 167)
    # the two CPUs' residuals differ: each profile is its own CPU's (the pipeline model's quantile)
    q = {
        n: next(e.quantile for e in iv.for_machine(machines.load(n), "x86_64").entries if e.kind == "pipeline")
        for n in files
    }
    assert q == {"amd-23-1": 0.692473, "intel-6-167": 0.652911}
