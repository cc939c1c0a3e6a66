"""A user kernel's change named by its lines (issue 38 item 3): the entry function its baseline
recorded against this run's, as a unified diff on the kernel page (escaped) and in a short form on
the failure line of summary.md; a configured input's change beside the params' ("inputs.idx.high
16 -> 4096"). Rendered from the golden report of this repository's failing check, its gemm_256
regression given a user kernel's recorded source and inputs."""

from __future__ import annotations

import dataclasses
import html
import re

import pytest

from perfguard.baselines.store import parse_baseline
from perfguard.document.report import read_report
from perfguard.job.run import JobResult
from perfguard.judge.verdicts import Verdict
from perfguard.report.html import render_kernel
from perfguard.report.markdown import render_markdown
from perfguard.report.text import change_text
from perfguard.runs.check import JudgedResult
from perfguard.runs.report_build import SOURCE_DIFF_LINES, source_diff
from tests.report import golden

BEFORE = """def gather(V=512, D=32, N=64, vector=8):
    table = te.placeholder((V, D), "float32", name="table")
    sch = tvm.s_tir.Schedule(mod)
    i, j = sch.get_loops(sch.get_sblock("out"))
    if vector > 1 and D % vector == 0:
        _, lanes = sch.split(j, [None, vector])
        sch.vectorize(lanes)
    return sch.mod
"""
AFTER = BEFORE.replace("        sch.vectorize(lanes)\n", "        sch.unroll(lanes)  # <b>&</b>\n")


def judged(before: str | None, after: str | None) -> JudgedResult:
    path = golden.TINY_BASELINES / "x86_64" / "gemm_16.json"
    baseline = parse_baseline(path.read_bytes(), str(path))
    baseline = dataclasses.replace(baseline, schema=5, source=before, inputs={})
    result = JobResult("gather", "x86_64", None, {}, "qemu", ok=True, source=after)
    return JudgedResult(result, Verdict("unchanged", 1.0, 1.0, 1.0, 0.0), baseline=baseline)


@pytest.fixture(scope="module")
def report():
    report = read_report(golden.REPOSITORY)
    diff = source_diff(judged(BEFORE, AFTER))
    for r in report.results:
        if r.kernel == "gemm_256" and r.target == "x86_64":
            r.source_diff = diff
            r.baseline_inputs, r.inputs = {"idx": {"low": 0, "high": 16}}, {"idx": {"low": 0, "high": 4096}}
    return report


def test_the_diff_is_the_entry_functions_changed_lines_with_context():
    diff = source_diff(judged(BEFORE, AFTER))
    assert diff[:3] == ["--- baseline", "+++ current", "@@ -5,4 +5,4 @@"]
    assert diff[3:] == [
        "     if vector > 1 and D % vector == 0:",
        "         _, lanes = sch.split(j, [None, vector])",
        "-        sch.vectorize(lanes)",
        "+        sch.unroll(lanes)  # <b>&</b>",
        "     return sch.mod",
    ]
    # nothing recorded (a family's kernel, a baseline before schema 5) or nothing changed: no diff
    assert source_diff(judged(None, AFTER)) == source_diff(judged(AFTER, AFTER)) == []
    long = "".join(f"    x{i} = {i}\n" for i in range(400))
    assert (
        len(source_diff(judged("def f():\n" + long, "def f():\n" + long.replace(" = ", " == "))))
        == SOURCE_DIFF_LINES + 1
    )


def test_the_kernel_page_shows_the_diff_escaped_and_the_change_line_names_the_inputs(report):
    page = render_kernel(report, "gemm_256")
    x86 = re.split(r'<section class="target" id="t-', page)[1:]
    x86 = next(p for p in x86 if p.startswith("x86_64"))
    block = re.search(r'<pre class="source-diff">(.*?)</pre>', x86, re.S).group(1)
    assert '<span class="removed">-        sch.vectorize(lanes)</span>' in block
    assert '<span class="added">+        sch.unroll(lanes)  # &lt;b&gt;&amp;&lt;/b&gt;</span>' in block
    assert (
        "<b>" not in block
        and block.count('class="same"') == 3
        and block.count('class="head"') == 2
        and block.count('class="hunk"') == 1
    )
    line = re.search(r'What changed: <span class="change">([^<]*)</span>', x86).group(1)
    assert html.unescape(line).startswith(
        "tile_k 4 -> 1, inputs.idx.high 16 -> 4096, entry - sch.vectorize(lanes) + sch.unroll(lanes)  # <b>&</b>"
    )
    # the other targets recorded nothing of the kind: no diff, the params only
    aarch64 = next(p for p in re.split(r'<section class="target" id="t-', page)[1:] if p.startswith("aarch64"))
    assert "source-diff" not in aarch64 and "inputs." not in aarch64


def test_the_summary_failure_line_has_the_short_form_and_a_long_diff_is_counted(report):
    summary = render_markdown(report)
    line = html.unescape(next(line for line in summary.splitlines() if "gemm\\_256" in line and "x86\\_64" in line))
    assert "inputs.idx.high 16 -> 4096" in line and "sch.unroll(lanes)" in line and "sch.vectorize(lanes)" in line
    r = next(r for r in report.results if r.kernel == "gemm_256" and r.target == "x86_64")
    many = dataclasses.replace(
        r,
        source_diff=source_diff(
            judged(BEFORE, AFTER.replace("table", "tab").replace("sch.mod", "sch.mod  # scheduled"))
        ),
    )
    assert change_text(many).endswith("entry source: 3 lines removed, 3 added (the diff is on the kernel's page)")


def test_inputs_a_baseline_did_not_record_are_among_the_causes_it_names(report):
    """Against a baseline before schema 5 (inputs not recorded) an inputs-only change cannot be
    named; the line says the inputs may be what changed."""
    r = next(r for r in report.results if r.kernel == "gemm_256" and r.target == "aarch64")
    old = dataclasses.replace(
        r,
        baseline_params=dict(r.params),
        inputs={"idx": {"low": 0, "high": 4096}},
        baseline_inputs=None,
        source_diff=[],
    )
    assert old.content_hash != old.baseline_content_hash and not old.same_code
    assert change_text(old) == "same params as the baseline, another build (kernel source, inputs, TVM or toolchain)"
    recorded = dataclasses.replace(old, baseline_inputs={"idx": {"low": 0, "high": 4096}})
    assert change_text(recorded) == "same params as the baseline, another build (kernel source, TVM or toolchain)"
