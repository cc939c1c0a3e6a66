"""The golden reports (tests/report/golden/, captured from real checks by its regenerate.py) are
current: each follows docs/report.schema.json, reads as this perfguard's typed Report with no key
it does not know, and writes back byte for byte, so a field added, renamed or removed since the
capture fails here (tests/end_to_end/test_report_pages.py compares their shape with a fresh
check's). And each still holds what the tests that read it rely on."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from perfguard.document.report import REPORT_SCHEMA, Report, report_text
from tests.conftest import REPO
from tests.report import golden

SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())
GOLDEN = [golden.TINY, golden.REPOSITORY]


def unknown_keys(report: Report) -> list[str]:
    """Keys of the file the typed report kept aside as unknown (`extra`)."""
    found = [f"{k}" for k in report.extra]
    for i, r in enumerate(report.results):
        found += [f"results[{i}].{k}" for k in r.extra]
    return found


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.parent.name)
def test_golden_report_is_current(path: Path):
    text = path.read_text()
    data = json.loads(text)
    jsonschema.Draft202012Validator(SCHEMA).validate(data)  # (the schema itself is checked in test_report.py)
    stale = f"{path} is stale: regenerate it ({golden.REGENERATE}) and commit the diff"
    assert data["schema"] == REPORT_SCHEMA, stale
    report = Report.from_json(data, str(path))
    assert unknown_keys(report) == [], stale
    assert report_text(report) == text, stale


def test_golden_reports_hold_what_the_tests_read():
    tiny = golden.load(golden.TINY)
    assert [(r["kernel"], r["verdict"]) for r in tiny["results"]] == [
        ("gemm_16", "regression"),
        ("gemv_16", "unchanged"),
    ]
    assert all(r["analysis"] and r["history"] for r in tiny["results"]) and tiny["config"] == "perfguard.toml"
    assert sorted(p.name for p in (golden.TINY_BASELINES / "x86_64").iterdir()) == ["gemm_16.json", "gemv_16.json"]
    repo = golden.load(golden.REPOSITORY)
    results = repo["results"]
    assert len(results) >= 59 and {r["target"] for r in results} >= {"x86_64", "aarch64", "riscv64"}
    assert {(r["kernel"], r["target"]) for r in results if r["delta_pct"]} >= {("gemm_256", "x86_64")}
    assert sum(bool((r.get("calibration") or {}).get("points")) for r in results) >= 1
    assert sum(len((r.get("history") or {}).get("points") or []) > 1 for r in results) >= 1
    assert repo["models"] and any(r.get("blocks") for r in results)
