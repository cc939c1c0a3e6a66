"""One judgement carried to the report: the report of a check is explained with the predictor each
result was judged with and the baseline it was judged against, never with a model looked up again.

The judged model here is the analytical model with every time doubled (a model the config does not
name, so a second look-up would find the plain analytical one and halve every number below). The
statistics are the golden tiny check's (real QEMU counts of gemm_16: baseline, and made scalar);
the baselines are committed to a fresh git repository for the history. No TVM, compiler or
simulator runs here."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from perfguard.baselines.store import parse_baseline
from perfguard.config import load_config
from perfguard.document.verdicts import REGRESSION
from perfguard.job.run import JobResult
from perfguard.judge.verdicts import judge
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.runs.check import CheckRun, JudgedResult
from perfguard.runs.report_build import build_report
from perfguard.sim.stats import Stats
from tests.report import golden
from tests.report.golden.regenerate import BASELINE_COMMIT, commit_all, tiny_toml


class Doubled(Predictor):
    """The analytical model's seconds, doubled: a model no config can name."""

    name, model_id = "doubled", "doubled-1"

    def __init__(self, profile):
        self.inner = AnalyticalModel(profile)

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return 2.0 * self.inner.predict_stats(stats)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-project")
    (root / "perfguard.toml").write_text(tiny_toml(root / "cache"))
    shutil.copytree(golden.TINY_BASELINES, root / "baselines")
    commit_all(root, BASELINE_COMMIT, "perfguard.toml", "baselines")
    config = load_config(root / "perfguard.toml")
    profile = config.profile("x86_64")
    path = root / "baselines" / "x86_64" / "gemm_16.json"
    baseline = parse_baseline(path.read_text(), str(path))
    entry = next(r for r in golden.load(golden.TINY)["results"] if r["kernel"] == "gemm_16")
    current = Stats.from_dict(entry["stats"], "golden gemm_16")
    predictor = Doubled(profile)
    verdict = judge(current, baseline, predictor, 2.0, baseline.toolchain, str(path))
    result = JobResult(
        "gemm_16",
        "x86_64",
        "gemm",
        entry["params"],
        "qemu",
        ok=True,
        stats=current,
        flops=entry["flops"],
        toolchain=baseline.toolchain,
    )
    outcome = JudgedResult(
        result,
        verdict,
        predictor.model_id,
        predictor.calibrated,
        baseline.commit,
        predictor=predictor,
        baseline=baseline,
    )
    report = build_report(CheckRun([outcome]), config.path, config)
    return report.results[0], predictor, baseline, current, profile


def test_the_report_carries_the_judged_model_and_its_numbers(judged):
    r, predictor, baseline, current, profile = judged
    assert r.verdict == REGRESSION and r.model_id == "doubled-1"
    plain = AnalyticalModel(profile)
    assert r.current_time_s == pytest.approx(2.0 * float(plain.predict_stats([current])[0]), rel=1e-12)
    assert r.analysis.current.time_s == r.current_time_s and r.analysis.baseline.time_s == r.baseline_time_s


def test_drivers_and_history_are_scored_by_the_judged_model(judged):
    r, predictor, baseline, current, profile = judged
    drivers = r.analysis.drivers
    assert drivers, "gemm_16 made scalar changes counts the model scores"
    # each driver is its count moved alone from the baseline's value, scored by the doubled model
    plain = AnalyticalModel(profile)
    for d in drivers[:3]:
        moved = Stats(**{**baseline.stats.to_dict(), d.stat: d.current})
        expected = float(predictor.predict_stats([moved])[0] - predictor.predict_stats([baseline.stats])[0])
        assert d.time_s == pytest.approx(expected, rel=1e-9)
        assert d.time_s == pytest.approx(
            2.0 * float(plain.predict_stats([moved])[0] - plain.predict_stats([baseline.stats])[0]), rel=1e-9
        )
    # the history's point is the committed baseline under the doubled model too
    assert [p.time_s for p in r.history.points] == pytest.approx([float(predictor.predict_stats([baseline.stats])[0])])
