"""The model view in every format, from a report made by hand (no TVM, no simulator): the model first,
each kernel's layer and graph nodes beside its key, changed kernels counted and named, a new
kernel's page saying what it replaces, and no hint that does not apply to a model's kernels."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from perfguard.document.report import ModelKernel, Report, Summary
from perfguard.document.result import Result
from perfguard.judge.model_totals import count_kernels, kernel_row, total
from perfguard.report import html, markdown
from perfguard.report.model_view import TOP_KERNELS, terminal_lines
from perfguard.report.terminal import print_table

CONV = {
    "op": "conv2d",
    "in": [1, 128, 8, 8],
    "out": [1, 256, 4, 4],
    "weight": [256, 128, 3, 3],
    "window": [3, 3],
    "stride": [2, 2],
    "groups": 1,
}
WIDER = {**CONV, "out": [1, 320, 4, 4], "weight": [320, 128, 3, 3]}
FC = {"op": "matmul", "in": [1, 512], "out": [1, 1000], "weight": [512, 1000]}


def _params(layer: dict, nodes: list[str], calls: int = 1, op: str = "conv2d_add_relu") -> dict:
    return {
        "model": "r",
        "op": op,
        "calls": calls,
        "shapes": "float32[...]",
        "layer": layer,
        "nodes": [[[n, "Conv"]] for n in nodes],
        "graph": "onnx",
        "schedule": "default",
    }


def _row(kernel, verdict, params, baseline_params, now, before, positions=(), baseline_positions=()) -> ModelKernel:
    return kernel_row(
        kernel,
        (params or baseline_params)["op"],
        verdict,
        None if params is None else params["calls"],
        None if baseline_params is None else baseline_params["calls"],
        now,
        before,
        params,
        baseline_params,
        positions,
        baseline_positions,
    )


def _report() -> Report:
    """resnet r on x86_64: layer3.0.conv1 widened 256 -> 320 (a new kernel and a removed one), fc unchanged."""
    old, new = _params(CONV, ["layer3.0.conv1"]), _params(WIDER, ["layer3.0.conv1"])
    fc = _params(FC, ["fc"], op="matmul_add")
    rows = [
        _row("r.conv2d_add_relu.aaaaaa", "removed", None, old, None, 2e-3, baseline_positions=[0]),
        _row("r.conv2d_add_relu.bbbbbb", "new", new, None, 2.5e-3, None, positions=[0]),
        _row("r.matmul_add.cccccc", "unchanged", fc, fc, 1e-3, 1e-3, [1], [1]),
    ]
    view = total(
        "r",
        "x86_64",
        1.0,
        rows,
        skipped=["skipped (skip = [...]): argmax argmax 1x1000 -> 1 (r.argmax.dddddd) x1: not guarded, in no total"],
    )
    results = [
        Result(
            "r.conv2d_add_relu.bbbbbb",
            "x86_64",
            "new",
            params=new,
            current_time_s=2.5e-3,
            reference="self",
            measured=True,
            flops=1e6,
        ),
        Result(
            "r.matmul_add.cccccc",
            "x86_64",
            "unchanged",
            params=fc,
            current_time_s=1e-3,
            baseline_time_s=1e-3,
            delta_pct=0.0,
            reference="self",
            measured=True,
        ),
        Result(
            "gemv_1024",
            "x86_64",
            "unchanged",
            params={"M": 1024},
            current_time_s=1e-4,
            baseline_time_s=1e-4,
            delta_pct=0.0,
            reference="self",
            measured=True,
        ),
    ]
    summary = Summary(exit_code=1, new=1, unchanged=2, model_regressions=1)
    count_kernels(summary, results, [view])
    return Report(summary=summary, results=results, models=[view])


def test_a_widened_layer_is_one_changed_kernel_everywhere():
    report = _report()
    (view,) = report.models
    assert view.verdict == "regression" and view.delta_pct == pytest.approx(50 / 3)
    (line,) = [c for c in view.changes if c.startswith("changed: ")]
    assert line == (
        "changed: layer3.0.conv1 conv2d 1x128x8x8 -> 1x320x4x4 3x3/2 (r.conv2d_add_relu.bbbbbb): widened "
        "256 -> 320 output channels (was r.conv2d_add_relu.aaaaaa; 2.000 ms -> 2.500 ms per inference)"
    )
    assert (report.summary.new, report.summary.removed, report.summary.changed) == (0, 0, 1)
    assert view.schedule == ("TVM's default CPU schedule rules with fixed decisions (perfguard's default): 2 kernels")


def test_the_terminal_opens_with_the_failing_model_and_lists_other_kernels_after():
    buffer = io.StringIO()
    print_table(_report(), Console(file=buffer, width=200, highlight=False))
    out = " ".join(buffer.getvalue().split())
    assert out.startswith("1 model total(s) regressed FAIL model r [x86_64] regression +16.67 %; where: changed: ")
    assert out.index("model r [x86_64]: regression +16.67 %") < out.index("gemv_1024")
    assert "unchanged: 1 kernel x target result: gemv_1024 [x86_64]" in out
    assert "layer3.0.conv1 conv2d 1x128x8x8 -> 1x320x4x4 3x3/2: widened 256 -> 320 output channels" in out
    assert "r.conv2d_add_relu.aaaaaa (x1) changed (was): - (baseline 2.000 ms)" in out
    assert "r.conv2d_add_relu.bbbbbb x1 changed" in out and "skipped (skip = [...]): argmax" in out
    assert "r.matmul_add.cccccc" not in out.split("gemv_1024")[1]  # in its model's view, not the table
    assert 'Add reference = "module:function"' in out  # for gemv_1024, a configured kernel
    assert "2 [[model]] kernel result(s) checked against the same kernel built for the host" in out


def test_markdown_and_html_put_the_failing_model_first_and_count_changed_kernels():
    report = _report()
    text = markdown.render_markdown(report)
    # the failing model total's row opens the comment, linked to its table; then its table; the
    # unchanged gemv_1024 folded last, counted as the header counts it (2 unchanged: one in the model)
    failing = text.index("#### Failing (1)")
    assert (
        text.index(
            "1. \u274c **[model r](index.html#m-r-x86_64)** \\[x86\\_64\\] regression: **+16.67 %**, "
            "threshold 1.00 % \u00b7 where: changed: "
        )
        > failing
    )
    assert failing < text.index("#### Models that changed") < text.index("| \u2796 | gemv\\_1024")
    assert "**2** unchanged" in text and "<details><summary>2 unchanged (1 in the models above, 1 in the table)" in text
    assert "**1** changed" in text and "**0** removed" in text
    assert "layer3.0.conv1 conv2d 1x128x8x8 -&gt; 1x320x4x4 3x3/2: widened 256 -&gt; 320 output channels" in text
    page = html.render_index(report)
    assert (
        page.index('<section id="failing">')
        < page.index("<h2>Models</h2>")
        < page.index('<details id="unchanged">')
        < page.index("gemv_1024")
    )
    assert '<a href="#m-r-x86_64"><b>model r</b> [x86_64]</a>' in page and 'id="m-r-x86_64"' in page
    # every in-page link (the count chips, the failing line) leads to a section the page has
    ids = set(re.findall(r' id="([^"]+)"', page))
    assert set(re.findall(r'href="#([^"]+)"', page)) <= ids and '<a class="chip" href="#unchanged">' in page
    assert '<span class="verdict changed">changed</span> <b>1</b>' in page
    assert 'href="kernels/r.conv2d_add_relu.bbbbbb.html#t-x86_64"' in page
    # the flop-count hint counts gemv_1024 alone: r.matmul_add.cccccc has no [[kernel]] table to add one to
    assert "1 kernel x target result without a flop count is not on the rooflines" in page


def test_a_new_kernels_page_names_what_it_replaces_and_gives_no_kernel_hints():
    report = _report()
    page = html.render_kernel(report, "r.conv2d_add_relu.bbbbbb")
    assert (
        "Changed from r.conv2d_add_relu.aaaaaa (layer3.0.conv1 conv2d 1x128x8x8 -&gt; 1x256x4x4 3x3/2): widened "
        "256 -&gt; 320 output channels; that kernel&#39;s baseline: 2.000 ms per inference, this one 2.500 ms"
    ) in page
    assert "No baseline yet" not in page
    assert "reference = " not in page and "[[kernel]]" not in page.split("How these numbers")[0]
    assert "layer <code>conv2d 1x128x8x8 -&gt; 1x320x4x4 3x3/2</code>" in page


def test_a_model_with_more_kernels_than_shown_names_how_many_more():
    n = TOP_KERNELS + 3
    rows = [
        ModelKernel(
            f"m.op.{i:06x}",
            "op",
            "unchanged",
            1,
            1,
            1e-6 * (i + 1),
            1e-6 * (i + 1),
            current_total_s=1e-6 * (i + 1),
            baseline_total_s=1e-6 * (i + 1),
        )
        for i in range(n)
    ]
    view = total("m", "x86_64", 1.0, rows)
    lines = terminal_lines([view])
    assert view.verdict == "unchanged" and view.current_total_s == sum(1e-6 * (i + 1) for i in range(n))
    assert lines[1].split()[2] == f"m.op.{n - 1:06x}"  # largest share first
    assert "  ... 3 more unchanged kernel(s) in perfguard.json" in lines


def test_the_phase_split_says_whether_it_adds_up_to_the_predicted_time():
    from perfguard.document.result import Metrics
    from perfguard.report.html import phase_note

    assert (
        phase_note(Metrics(time_s=2e-3, compute_s=1.5e-3, memory_s=0.5e-3))
        == "The phases add up to the predicted time (2.000 ms)."
    )
    note = phase_note(Metrics(time_s=41.4e-3, compute_s=40.0e-3, memory_s=14.3e-3))
    assert note.startswith(
        "The phases add up to 54.300 ms, the analytical model's time; the predicted time (41.400 ms)"
    )
    assert note.endswith("74 % compute and 26 % memory.")
