"""The report's analysis, target numbers and baseline history, rebuilt by runs/ (report_build.explain_result)
from the statistics of a real check: tests/report/golden/tiny holds the check's perfguard.json
(gemm_16 made scalar: a regression; gemv_16 unchanged) and the baselines it compared with. The
baselines are committed to a fresh git repository, the golden report's analysis and history are
dropped, and explain_result() must give them back from each result's statistics, the baseline's
(its stat deltas) and the model the check judged with (the tiny project names the analytical
model): no TVM, compiler or simulator runs here. test_one_judgement.py checks that a check's own
report is explained with the model it judged with."""

from __future__ import annotations

import shutil

import pytest

from perfguard.config import load_config
from perfguard.document.codec import to_json
from perfguard.document.report import Report
from perfguard.judge import analysis
from perfguard.judge.analysis import target_summary
from perfguard.judge.history import BaselineHistory
from perfguard.predict.analytical import AnalyticalModel
from perfguard.runs.report_build import explain_result
from perfguard.sim.stats import STAT_FIELDS, Stats
from tests.report import golden
from tests.report.golden.regenerate import BASELINE_COMMIT, SLOWER, commit_all, tiny_toml


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """(the golden report, the same report with analysis, targets and history rebuilt by runs/)."""
    root = tmp_path_factory.mktemp("tiny-project")
    (root / "perfguard.toml").write_text(tiny_toml(root / "cache"))
    shutil.copytree(golden.TINY_BASELINES, root / "baselines")
    commit_all(root, BASELINE_COMMIT, "perfguard.toml", "baselines")
    (root / "perfguard.toml").write_text((root / "perfguard.toml").read_text().replace(*SLOWER))
    data = golden.load(golden.TINY)
    report = Report.from_json(golden.load(golden.TINY))
    for r in report.results:
        r.analysis = r.history = r.calibration = None
    report.targets, report.commit = {}, None
    config = load_config(root / "perfguard.toml")
    history = BaselineHistory(config.storage.baseline_dir)
    report.commit = history.head
    for r in report.results:
        profile = config.profile(r.target)
        target = report.targets.setdefault(r.target, target_summary(profile))
        predictor = AnalyticalModel(profile)
        assert r.model_id == predictor.model_id  # the model the check judged with
        current = Stats.from_dict(r.stats, r.label)
        baseline = (
            Stats(**{name: d.baseline if (d := r.stat_deltas.get(name)) else None for name in STAT_FIELDS})
            if r.stat_deltas
            else None
        )
        explain_result(r, predictor, current, baseline, profile, target, history)
    return data, to_json(report)


def by_kernel(data):
    return {r["kernel"]: r for r in data["results"]}


def test_the_rebuilt_analysis_is_the_checks(rebuilt):
    data, again = rebuilt
    assert again["targets"] == data["targets"]
    for kernel, r in by_kernel(data).items():
        mine = by_kernel(again)[kernel]
        assert mine["analysis"] == r["analysis"], kernel
        history, expected = mine["history"], r["history"]
        # The same history but for the commit: ours was made just now.
        for point, golden_point in zip(history["points"], expected["points"], strict=True):
            assert {**point, "commit": "", "date": ""} == {**golden_point, "commit": "", "date": ""}
        assert {**history, "points": []} == {**expected, "points": []}


def test_analysis_explains_the_real_regression(rebuilt):
    _, data = rebuilt
    gemm, gemv = by_kernel(data)["gemm_16"], by_kernel(data)["gemv_16"]
    assert gemm["verdict"] == "regression" and gemv["verdict"] == "unchanged"
    target = data["targets"]["x86_64"]
    assert target["peak_gflops"] == 96.0 and target["dram_line_bytes"] == 64
    cur, base = gemm["analysis"]["current"], gemm["analysis"]["baseline"]
    # The analytical model scores: its phases add up to the predicted time.
    assert cur["compute_s"] + cur["memory_s"] == pytest.approx(gemm["current_time_s"], rel=1e-9)
    assert base["compute_s"] + base["memory_s"] == pytest.approx(gemm["baseline_time_s"], rel=1e-9)
    assert cur["gflops"] == pytest.approx(2 * 16**3 / gemm["current_time_s"] / 1e9)
    assert cur["peak_pct"] == pytest.approx(100 * cur["gflops"] / 96.0)
    assert cur["bound"] in analysis.BOUNDS and cur["energy"]["total_j"] > 0
    stats = gemm["stats"]
    assert cur["dram_bytes"] == (stats["l2_misses"] + stats["l2_writebacks"]) * 64
    # AVX2 FMAs on 8 lanes: 16 flops per FP instruction.
    assert base["flops_per_fp_inst"] == 16.0 and base["vector_fp_share_pct"] == 100.0
    # The counters' parts add up to the whole change (the model is linear).
    drivers = gemm["analysis"]["drivers"]
    assert sum(d["time_s"] for d in drivers) == pytest.approx(gemm["current_time_s"] - gemm["baseline_time_s"])
    assert abs(drivers[0]["time_s"]) == max(abs(d["time_s"]) for d in drivers)
    assert gemv["analysis"]["drivers"] == []
    # History: the one committed version, re-scored with this run's model.
    history = gemm["history"]
    assert len(history["points"]) == 1 and history["change_points"] == []
    assert history["points"][0]["subject"] == "baselines for the tiny kernels"
    assert history["points"][0]["time_s"] == pytest.approx(gemm["baseline_time_s"])
    assert data["commit"] == history["points"][0]["commit"]
