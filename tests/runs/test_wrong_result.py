"""A kernel whose output differs from its reference: the verdict `wrong result`, exit 4, in every output.

Each layer at its own level: the worst element from numpy arrays (verify), the exit code from
judged results (runs.check, merge), every renderer from a report made by hand, the action and
the pytest plugin's case from the same. The real TVM + QEMU run of a wrong kernel is in
tests/compile/test_harness.py and the bad-input catalogue.
"""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from perfguard.document.report import Report, read_report, report_text, write_report
from perfguard.document.verdicts import ERROR, REGRESSION, WRONG_RESULT
from perfguard.errors import EXIT_INFRA, EXIT_REGRESSION, EXIT_WRONG_RESULT, WrongResult
from perfguard.job.run import JobResult
from perfguard.job.verify import mismatch_error
from perfguard.judge.merge import combined_exit_code
from perfguard.judge.verdicts import Verdict
from perfguard.runs.check import CheckRun, JudgedResult
from perfguard.runs.report_build import build_report
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())


def mismatch_of(got, want, rtol=1e-5, atol=1e-5) -> WrongResult:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    diff = np.abs(got - want)
    allowed = atol + rtol * np.abs(want)
    with np.errstate(invalid="ignore"):
        bad = ~(diff <= allowed)
    return mismatch_error("k[x86_64]", "C", got, want, diff, allowed, bad, rtol, atol)


def test_the_worst_element_is_the_one_furthest_over_its_tolerance():
    # [0, 1] is off by the most (50) but within its tolerance (rtol 0.1 of 1000); of the two that are
    # over theirs, [1, 0] (0.5 over 0.21) is further over than [1, 1] (0.4 over 0.31)
    want = [[1.0, 1000.0], [2.0, 3.0]]
    got = [[1.0, 1050.0], [2.5, 3.4]]
    exc = mismatch_of(got, want, rtol=0.1, atol=0.01)
    m = exc.mismatch
    assert m["index"] == [1, 0] and m["value"] == 2.5 and m["expected"] == 2.0
    assert m["tolerance"] == pytest.approx(0.01 + 0.1 * 2.0) and m["elements_off"] == 2 and m["elements"] == 4
    assert exc.exit_code == EXIT_WRONG_RESULT == 4
    assert "output 'C'[1, 0] = 2.5, expected 2: off by 0.5, 2.38x the tolerance 0.21" in exc.message
    assert "(2 of 4 elements off; rtol 0.1, atol 0.01)" in exc.message


def test_a_non_finite_output_is_named_first_and_the_report_can_hold_it():
    exc = mismatch_of([1.0, 5.0, np.nan], [1.0, 2.0, 3.0])
    m = exc.mismatch
    assert m["index"] == [2] and m["value"] is None and m["nonfinite"] == "nan" and m["elements_off"] == 2
    assert "output 'C'[2] = nan, expected 3: not a finite number" in exc.message


def outcome(verdict: str, exit_code: int = 0, mismatch: dict | None = None, error: str | None = None) -> JudgedResult:
    ok = verdict not in (ERROR, WRONG_RESULT)
    result = JobResult("k", "x86_64", None, {}, "qemu", ok=ok, error=error, exit_code=exit_code, mismatch=mismatch)
    return JudgedResult(result, Verdict(verdict, 2.0), error=error)


WRONG = outcome(
    WRONG_RESULT,
    EXIT_WRONG_RESULT,
    mismatch_of([0.0, 2.0], [0.0, 1.0]).mismatch,
    "k[x86_64]: wrong result: output 'C'[1] = 2, expected 1",
)


@pytest.mark.parametrize(
    "others, allow_errors, interrupted",
    [
        ([], False, False),
        ([outcome(REGRESSION)], False, False),
        ([outcome(ERROR, EXIT_INFRA, error="simulator crashed")], False, False),
        ([outcome(ERROR, EXIT_INFRA, error="simulator crashed")], True, False),
        ([], True, True),
    ],
)
def test_a_wrong_result_exits_4_whatever_else_happened(others, allow_errors, interrupted):
    run = CheckRun([WRONG, *others], interrupted=interrupted)
    run.allow_errors = allow_errors
    assert run.exit_code() == EXIT_WRONG_RESULT
    assert combined_exit_code([EXIT_REGRESSION, EXIT_INFRA, EXIT_WRONG_RESULT]) == EXIT_WRONG_RESULT


@pytest.fixture(scope="module")
def wrong_report() -> Report:
    return build_report(CheckRun([WRONG, outcome("unchanged")]))


def test_the_report_counts_it_keeps_the_mismatch_and_follows_its_schema(wrong_report, tmp_path):
    data = json.loads(report_text(wrong_report))
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    assert data["summary"]["exit_code"] == 4 and data["summary"]["wrong_result"] == 1
    assert data["results"][0]["verdict"] == "wrong result"
    assert data["results"][0]["mismatch"] == {
        "output": "C",
        "index": [1],
        "value": 2.0,
        "expected": 1.0,
        "tolerance": pytest.approx(1e-5 + 1e-5),
        "rtol": 1e-5,
        "atol": 1e-5,
        "elements_off": 1,
        "elements": 2,
    }
    again = read_report(write_report(wrong_report, tmp_path / "perfguard.json"))
    assert again.results[0].mismatch.index == [1] and again.summary.wrong_result == 1
    older = {k: v for k, v in data.items()}  # a report of an older perfguard: no count, no mismatch
    older["summary"] = {k: v for k, v in data["summary"].items() if k != "wrong_result"} | {"exit_code": 0}
    older["results"] = [r for r in data["results"] if r["verdict"] != "wrong result"]
    assert Report.from_json(older).summary.wrong_result == 0


def test_every_renderer_says_wrong_result_and_where(wrong_report, tmp_path):
    from perfguard.report.html import write_html
    from perfguard.report.markdown import render_markdown
    from perfguard.report.terminal import console, print_table

    text = render_markdown(wrong_report)
    assert "\U0001f6ab perfguard: 1 wrong result(s): output differs from the reference" in text
    # the failing line opens the comment, linked to the kernel's page, with the output's worst element
    assert text.index("#### Failing (1)") < text.index(
        "1. \U0001f6ab **[k](kernels/k.html#t-x86_64)** \\[x86\\_64\\] wrong result \u00b7 k\\[x86\\_64\\]: "
        "wrong result: output 'C'\\[1\\] = 2, expected 1"
    )
    out = console()
    with out.capture() as captured:
        print_table(wrong_report, out)
    shown = captured.get()
    assert "wrong result k[x86_64]: wrong result: output 'C'[1] = 2, expected 1" in " ".join(shown.split())
    write_html(wrong_report, tmp_path)
    index = (tmp_path / "index.html").read_text()
    assert '<span class="verdict wrong-result">wrong result</span>' in index and 'class="top fail"' in index
    page = (tmp_path / "kernels" / "k.html").read_text()
    assert "worst element: <code>C[1]</code> = 2.0, expected 1.0" in page


def test_the_action_fails_on_a_wrong_result_even_without_fail_on_regression(wrong_report):
    from perfguard.shells.action import action_result, annotation_lines

    result = action_result(wrong_report, EXIT_WRONG_RESULT)
    assert (result.verdict, result.exit_code) == ("wrong-result", 4)
    assert any(
        line.startswith("::error") and "title=perfguard wrong result%3A k[x86_64]" in line
        for line in annotation_lines(wrong_report)
    )


def test_a_pytest_case_with_a_wrong_result_fails_with_its_message():
    from perfguard.shells.pytest_cases import CaseResult

    case = CaseResult("k", "x86_64", WRONG_RESULT, 2.0, EXIT_WRONG_RESULT, error=WRONG.error)
    assert not case.ok
    assert case.explain() == "k[x86_64]: wrong result: k[x86_64]: wrong result: output 'C'[1] = 2, expected 1"
