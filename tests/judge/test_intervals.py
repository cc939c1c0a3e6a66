"""The calibrated interval of a predicted change through the guard and every output: the verdict
carries it, the gate is on the estimate unless `gate` names the interval's lower or upper end, a
result whose interval holds its threshold says so (terminal, Markdown, HTML, JSON, pytest), and
reports without intervals still read and render. Judged with the real analytical model on captured
statistics; rendered from typed reports."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
from rich.console import Console

from perfguard.baselines.store import Baseline
from perfguard.document.report import Report
from perfguard.document.verdicts import IMPROVEMENT, REGRESSION, UNCHANGED
from perfguard.judge.verdicts import judge
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.intervals import IntervalCalibration, calibrate, ratio_bounds
from perfguard.report.html import kernel_file, write_html
from perfguard.report.markdown import render_markdown
from perfguard.report.terminal import print_table
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN
from tests.conftest import REPO

X86 = BUILTIN["x86_64"]
MODEL = AnalyticalModel(X86)


def _stats(insts: int) -> Stats:
    return Stats(
        insts=insts, loads=insts // 4, stores=insts // 8, branches=insts // 10, l1d_misses=0, l1i_misses=0, l2_misses=0
    )


def _baseline(stats: Stats) -> Baseline:
    return Baseline("k", "x86_64", "gemm", {}, "qemu", "h", stats, 1.0, MODEL.model_id, None, "now")


def _calibration(quantile: float) -> IntervalCalibration:
    cal = calibrate({("x86_64", MODEL.model_id, "analytical"): [(1.1, 1.1)] * 19}, {})
    return IntervalCalibration(
        cal.level, cal.scale, (cal.entries[0].__class__("x86_64", MODEL.model_id, "analytical", 19, quantile),), {}
    )


def _judge(insts: int, gate: str, quantile: float = 0.2, threshold: float = 5.0):
    return judge(
        _stats(insts),
        _baseline(_stats(10000)),
        MODEL,
        threshold,
        intervals=_calibration(quantile),
        target="x86_64",
        gate=gate,
    )


def test_the_verdict_carries_the_interval_of_its_change():
    v = _judge(10600, "estimate")
    low, high = ratio_bounds(1 + v.delta_pct / 100, 0.2)
    assert (v.interval.low_pct, v.interval.high_pct) == (round(100 * (low - 1), 6), round(100 * (high - 1), 6))
    assert v.interval.low_pct < v.delta_pct < v.interval.high_pct and v.interval.exact
    assert v.verdict == REGRESSION and v.gate == "estimate" and v.straddles  # the 5 % lies inside
    same = judge(_stats(10000), _baseline(_stats(10000)), MODEL, 5.0, intervals=_calibration(0.2), target="x86_64")
    assert (same.interval.low_pct, same.interval.high_pct) == (0.0, 0.0) and not same.straddles
    assert judge(_stats(10600), _baseline(_stats(10000)), MODEL, 5.0).interval is None  # no calibration: none


def test_the_gate_compares_the_named_end_of_the_interval():
    estimate = _judge(10600, "estimate")
    assert estimate.delta_pct > 5.0 and estimate.interval.low_pct < 5.0 < estimate.interval.high_pct
    assert _judge(10600, "lower").verdict == UNCHANGED  # not sure enough to fail
    assert _judge(10600, "upper").verdict == REGRESSION
    small = _judge(10300, "estimate")
    assert small.delta_pct < 5.0 < small.interval.high_pct
    assert small.verdict == UNCHANGED and _judge(10300, "upper").verdict == REGRESSION  # may be one: fails
    big = _judge(13000, "lower")
    assert big.interval.low_pct > 5.0 and big.verdict == REGRESSION and big.gate == "lower"
    faster = _judge(8000, "upper", quantile=0.05)
    assert faster.verdict == IMPROVEMENT  # improvements stay on the estimate
    # no interval for the model: the estimate is gated, and the verdict says so
    bare = judge(_stats(10600), _baseline(_stats(10000)), MODEL, 5.0, gate="lower", target="x86_64")
    assert bare.verdict == REGRESSION and bare.gate == "estimate"


def _report(with_interval: bool = True) -> dict:
    row = {
        "kernel": "gemm_a",
        "target": "x86_64",
        "verdict": "regression",
        "delta_pct": 5.7,
        "threshold_pct": 5.0,
        "current_time_s": 1.057e-3,
        "baseline_time_s": 1e-3,
        "simulator": "qemu",
        "model_id": "pipeline-v3-x",
        "calibrated": False,
    }
    big = {**row, "kernel": "gemv_b", "delta_pct": 140.0, "current_time_s": 2.4e-3}
    if with_interval:
        row["interval"] = {
            "low_pct": 1.2,
            "high_pct": 10.4,
            "level": 0.9,
            "basis": "pipeline-v3-x on x86_64, 56 verdict pairs",
            "exact": True,
            "straddles": True,
        }
        big["interval"] = {
            "low_pct": 96.0,
            "high_pct": 194.0,
            "level": 0.9,
            "basis": "pipeline-v3-x on x86_64, 56 verdict pairs",
            "exact": True,
        }
    return {
        "schema": 1,
        "perfguard_version": "0",
        "created": "now",
        "config": None,
        "summary": {"exit_code": 1, "regression": 2},
        "results": [row, big],
    }


def _terminal(report: Report) -> str:
    out = Console(width=400, record=True, force_terminal=False)
    print_table(report, out)
    return out.export_text()


def test_every_output_shows_the_interval_and_says_when_it_straddles_the_threshold(tmp_path):
    data = _report()
    schema = json.loads((REPO / "docs" / "report.schema.json").read_text())["properties"]["results"]["items"]
    report = Report.from_json(copy.deepcopy(data))
    for key in ("interval", "gate"):  # docs/report.schema.json describes both (whole reports: tests/report)
        for row in report.to_json()["results"]:
            if key in row:
                jsonschema.validate(row[key], schema["properties"][key], cls=jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data["results"][0]["interval"], "level": 90}, schema["properties"]["interval"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("middle", schema["properties"]["gate"])
    assert report.to_json()["results"][0]["interval"]["straddles"] is True
    assert "straddles" not in report.to_json()["results"][1]["interval"]  # absent while false

    term = _terminal(report)
    assert "90 % interval" in term and "+1.2 .. +10.4 %" in term and "+96.0 .. +194.0 %" in term
    assert "gemm_a[x86_64]: the 90 % interval +1.2 .. +10.4 % straddles the 5.00 % threshold" in term
    assert "gemv_b[x86_64]: the 90 % interval" not in term

    summary = render_markdown(report)
    assert "+5.70 % (90 %: +1.2 .. +10.4 %)" in summary and "+140.00 % (90 %: +96.0 .. +194.0 %)" in summary
    # the verdict says what decided it, and the two regressions apart: one could be under the threshold natively
    assert "regression (estimate over the threshold; the interval reaches below it)" in summary
    assert "regression (the whole interval over the threshold)" in summary
    assert 'gate = "estimate": a result is a regression when its predicted change is over its threshold' in summary
    assert (
        "FAIL gemm_a [x86_64] regression (estimate over the threshold; the interval reaches below it) +5.70 % "
        "(90 %: +1.2 .. +10.4 %)" in term
    )

    write_html(report, tmp_path)
    index = (tmp_path / "index.html").read_text()
    assert "+1.2 .. +10.4 %" in index and "straddles the 5.00 % threshold" in index
    page = (tmp_path / kernel_file("gemm_a")).read_text()
    assert "90 % interval +1.2 .. +10.4 %" in page and "straddles the 5.00 % threshold" in page  # one precision
    assert "+1.20 %" not in page and "estimate over the threshold; the interval reaches below it" in page


def test_a_report_without_intervals_still_reads_and_renders(tmp_path):
    report = Report.from_json(_report(with_interval=False))
    assert all(r.interval is None and r.gate == "estimate" for r in report.results)
    assert "interval" not in json.dumps(report.to_json())
    term = _terminal(report)
    assert "straddles" not in term and "+5.70 %" in term
    assert "(90 %" not in render_markdown(report)
    write_html(report, tmp_path)
    assert "straddles" not in (tmp_path / "index.html").read_text()


def test_a_gate_on_an_end_is_said_and_a_borrowed_calibration_named():
    data = _report()
    data["results"][0].update(gate="lower", verdict="unchanged")
    data["results"][0]["interval"]["exact"] = False
    report = Report.from_json(data)
    term = _terminal(report)
    assert "gated on the interval's lower end" in term
    # it passed on its interval's lower end alone (+5.70 % is over the threshold): the note says it could flip
    assert "gemm_a[x86_64]: the 90 % interval +1.2 .. +10.4 % straddles the 5.00 % threshold" in term
    # gated on the estimate, an unchanged result gets no such note, whatever its interval
    data["results"][0].update(gate="estimate", delta_pct=4.0)
    assert "gemm_a[x86_64]: the 90 % interval" not in _terminal(Report.from_json(data))
    assert "interval calibrated for pipeline-v3-x on x86_64, 56 verdict pairs" in term


def test_the_pytest_failure_message_carries_the_interval():
    from perfguard.shells.pytest_cases import CaseResult

    report = Report.from_json(_report())
    case = CaseResult("gemm_a", "x86_64", "regression", 5.0, 1, 5.7, 1.057e-3, 1e-3, report=report.results[0])
    message = case.explain()
    assert "regression +5.70 % (90 %: +1.2 .. +10.4 %) (threshold 5.00 %)" in message
    assert "straddles the 5.00 % threshold" in message


def test_a_recorded_result_gives_back_its_interval_and_gate():
    from perfguard.runs.result_record import verdict_of

    data = _report()
    data["results"][0].update(gate="upper")
    entry = Report.from_json(data).results[0]
    verdict = verdict_of(entry)  # a reused record is judged as it was: same interval, same gate
    assert (verdict.interval.low_pct, verdict.interval.high_pct, verdict.interval.level) == (1.2, 10.4, 0.9)
    assert verdict.interval.basis == "pipeline-v3-x on x86_64, 56 verdict pairs" and verdict.interval.exact
    assert verdict.gate == "upper" and verdict.straddles
    bare = verdict_of(Report.from_json(_report(with_interval=False)).results[0])
    assert bare.interval is None and bare.gate == "estimate"
