"""The report of a real check, end to end: TVM, the cross compiler and QEMU run the tiny project of
tests/report/golden/regenerate.py once (baselines committed, gemm_16 made scalar, checked).

The report tests render the golden copy of this report; what only a real run shows is here: the
check's exit code and verdicts, that the pages the check wrote are the ones `perfguard report`
renders from its perfguard.json, and that a fresh report has the golden one's shape (else the
golden files are stale: regenerate them)."""

from __future__ import annotations

import json

import pytest

from perfguard.report.html import kernel_file
from perfguard.shells.cli import main
from tests.report import golden
from tests.report.golden.regenerate import run_tiny


def shape(value, path: str = "") -> set[str]:
    """Every key path of a JSON document (list items share one path)."""
    if isinstance(value, dict):
        return {path} | {p for k, v in value.items() for p in shape(v, f"{path}.{k}")}
    if isinstance(value, list):
        return {path} | {p for v in value for p in shape(v, f"{path}[]")}
    return {path}


def fixed(paths: set[str]) -> set[str]:
    """The key paths every run has: which stages a check timed depends on what its cache held."""
    return {p for p in paths if not p.startswith((".timings.stages.", ".timings.jobs[].stages."))}


@pytest.mark.slow
def test_a_real_check_writes_the_report_the_golden_copy_stands_for(tmp_path, cache_dir, capsys):
    root = tmp_path / "project"
    assert run_tiny(root, cache_dir) == 1  # the regression
    reports = root / "reports"
    data = json.loads((reports / "perfguard.json").read_text())
    verdicts = {r["kernel"]: r["verdict"] for r in data["results"]}
    assert verdicts == {"gemm_16": "regression", "gemv_16": "unchanged"} and data["summary"]["regression"] == 1
    stale = f"the golden report differs in shape from a fresh one: regenerate it ({golden.REGENERATE})"
    assert fixed(shape(data)) == fixed(shape(golden.load(golden.TINY))), stale

    index = (reports / "index.html").read_text()
    assert index.count('<svg class="chart"') == 2 and "1 regression(s) found" in index
    for name in ("gemm_16", "gemv_16"):
        assert (reports / kernel_file(name)).read_text().count('<svg class="chart"') == 3
    capsys.readouterr()
    out = tmp_path / "again"
    assert main(["report", "--from", str(reports / "perfguard.json"), "--report-dir", str(out)]) == 0
    for name in ("index.html", "summary.md", kernel_file("gemm_16"), kernel_file("gemv_16")):
        assert (out / name).read_bytes() == (reports / name).read_bytes(), name
    assert json.loads((out / "perfguard.json").read_text()) == data
    assert "1 regression(s) found" in capsys.readouterr().out
