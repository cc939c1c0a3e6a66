"""A block side's TIR loop in the typed report: it round-trips, follows the schema, an older
report without it still reads, and every renderer shows it (escaped) or says nothing."""

from __future__ import annotations

import copy
import io
import json

import jsonschema
import pytest
from rich.console import Console

from perfguard.document.report import Report, report_text
from perfguard.errors import InputError
from perfguard.report import terminal, text
from perfguard.report.html import kernel_file, write_html
from perfguard.report.markdown import render_markdown
from tests.conftest import REPO

# the schema of a result's "blocks" (the rest of a result is tested on a real run's golden report in test_report.py)
BLOCKS = json.loads((REPO / "docs" / "report.schema.json").read_text())["properties"]["results"]["items"]["properties"][
    "blocks"
]


def valid(data: dict) -> None:
    jsonschema.validate(data["results"][0]["blocks"], BLOCKS, cls=jsonschema.Draft202012Validator)


def _step(var: str, extent: int, kind: str = "serial") -> dict:
    return {"var": var, "extent": extent, "kind": kind}


K_1 = {
    "var": "k_1",
    "path": [_step("i_0", 4), _step("j_0", 2), _step("k_0", 4), _step("i_1", 16), _step("k_1", 16)],
    "trips": 8192,
}
I_1 = {
    "var": "i_1",
    "path": [_step("i_0", 4), _step("j_0", 2), _step("k_0", 16), _step("i_1", 16)],
    "trips": 2048,
    "unrolled": ["k_1"],
}


def _side(start: int, executions: int, **loop) -> dict:
    return {
        "symbol": "main_compute_",
        "start": start,
        "end": start + 40,
        "insns": 12,
        "executions": executions,
        "cycles_per_execution": 4.0,
        "cycles": 4.0 * executions,
        "bound": "latency",
        "asm": ["vfmadd231ps %ymm1, %ymm2, %ymm0"],
        **loop,
    }


def report(baseline: dict | None, current: dict | None) -> dict:
    block = {"start": 0x401000, "delta_cycles": 5000.0, "share_pct": 80.0, "baseline": baseline, "current": current}
    result = {
        "kernel": "gemm_k",
        "target": "x86_64",
        "verdict": "regression",
        "delta_pct": 40.0,
        "threshold_pct": 2.0,
        "current_time_s": 1.4e-3,
        "baseline_time_s": 1e-3,
        "simulator": "qemu",
        "model_id": "pipeline-v2-x",
        "calibrated": False,
        "blocks": [block],
    }
    return {
        "schema": 1,
        "perfguard_version": "0",
        "created": "now",
        "config": None,
        "summary": {"exit_code": 1, "regression": 1},
        "results": [result],
    }


TILE_K_EDIT = report(_side(0x401000, 8192, loop=K_1), _side(0x401000, 2048, loop=I_1))


def test_the_loop_round_trips_and_follows_the_schema():
    valid(TILE_K_EDIT)
    typed = Report.from_json(copy.deepcopy(TILE_K_EDIT))
    change = typed.results[0].blocks[0]
    assert change.baseline.loop.var == "k_1" and change.baseline.loop.trips == 8192
    assert [s.extent for s in change.baseline.loop.path] == [4, 2, 4, 16, 16]
    assert change.current.loop.unrolled == ["k_1"] and change.current.loop_candidates == []
    again = json.loads(report_text(typed))["results"][0]["blocks"]
    assert again == TILE_K_EDIT["results"][0]["blocks"]  # per_execution 1, peeled 0 and empty lists stay absent


def test_a_report_from_before_loop_names_reads_and_renders_without_them(tmp_path):
    old = report(_side(0x401000, 8192), _side(0x401000, 2048))
    valid(old)
    typed = Report.from_json(copy.deepcopy(old))
    side = typed.results[0].blocks[0].current
    assert side.loop is None and side.loop_candidates == [] and side.loop_text == ""
    assert " in loop" not in text.block_line(typed.results[0].blocks[0])
    assert json.loads(report_text(typed))["results"][0]["blocks"] == old["results"][0]["blocks"]


def test_a_loop_of_the_wrong_type_is_an_input_error_naming_the_key():
    bad = copy.deepcopy(TILE_K_EDIT)
    bad["results"][0]["blocks"][0]["current"]["loop"]["trips"] = "many"
    with pytest.raises(
        InputError,
        match=r"^r\.json: results\[0\]\.blocks\[0\]\.current\.loop\.trips: must be an "
        r"integer, got 'many'$",
    ):
        Report.from_json(bad, "r.json")
    with pytest.raises(jsonschema.ValidationError):
        valid(bad)


def test_every_renderer_names_the_loop_of_each_side(tmp_path):
    typed = Report.from_json(copy.deepcopy(TILE_K_EDIT))
    line = text.block_line(typed.results[0].blocks[0])
    assert "0x401000-0x401028 in loop k_1 (i_0[4] > j_0[2] > k_0[4] > i_1[16] > k_1[16]), 12 insns x 8,192" in line
    assert (
        "in loop i_1 (i_0[4] > j_0[2] > k_0[16] > i_1[16]; k_1 unrolled or vectorised into it by LLVM), "
        "12 insns x 2,048"
    ) in line
    out = io.StringIO()
    terminal.print_table(typed, Console(file=out, width=400))
    assert "where gemm_k[x86_64]:" in out.getvalue() and "in loop k_1 (i_0[4] > j_0[2]" in out.getvalue()
    summary = render_markdown(typed)
    assert r"in loop k\_1 (i\_0\[4\] &gt; j\_0\[2\] &gt; k\_0\[4\] &gt; i\_1\[16\] &gt; k\_1\[16\])" in summary
    write_html(typed, tmp_path)
    page = (tmp_path / kernel_file("gemm_k")).read_text()
    assert "in loop k_1 (i_0[4] &gt; j_0[2] &gt; k_0[4] &gt; i_1[16] &gt; k_1[16])" in page


def test_candidates_are_shown_as_candidates_and_names_are_escaped(tmp_path):
    evil = {"var": "<script>alert(1)</script>", "path": [_step("<script>alert(1)</script>", 16)], "trips": 16}
    plain = {"var": "b", "path": [_step("b", 16)], "trips": 16}
    typed = Report.from_json(report(None, _side(0x401000, 16, loop_candidates=[evil, plain])))
    side = typed.results[0].blocks[0].current
    assert side.loop is None
    assert side.loop_text == (
        "ambiguous loop: loop <script>alert(1)</script> (<script>alert(1)</script>[16]) or loop b (b[16])"
    )
    write_html(typed, tmp_path)
    page = (tmp_path / kernel_file("gemm_k")).read_text()
    assert "<script>alert" not in page and "ambiguous loop: loop &lt;script&gt;alert(1)&lt;/script&gt;" in page
    summary = render_markdown(typed)
    assert "<script>" not in summary and "ambiguous loop" in summary
