"""Each chart on its own: well-formed SVG, ids of its own, the same bytes for the same data, every
text escaped, and the edge cases a report can hold (long labels, no usable points). What the
charts show is read back in a browser in test_report_browser.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from perfguard.document.result import ChangePoint, HistoryPoint
from perfguard.judge.analysis import target_summary
from perfguard.report import charts
from perfguard.targets import BUILTIN

SVG = "{http://www.w3.org/2000/svg}"
EVIL = '<script>alert(1)</script> & "quotes"'


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == SVG + "svg" and root.get("class") == "chart"
    return root


def every_chart(label: str = "gemm [x86_64]", commit: str = "0123456789abcdef") -> dict[str, str]:
    target = target_summary(BUILTIN["x86_64"])
    series = [
        {"name": "baseline", "colour": "#9e9e9e", "hollow": True, "points": [{"intensity": 2.0, "gflops": 20.0}]},
        {"name": label, "colour": "#c62828", "points": [{"label": label, "intensity": None, "gflops": 5.0}]},
    ]
    points = [
        HistoryPoint(commit if i == 0 else f"{i:040x}", "2026-01-01", label, 1e-3 * (1 + (i >= 3))) for i in range(6)
    ]
    return {
        "roof": charts.roofline(target, series, "c-roof", f"roofline: {label}", arrow=True),
        "phases": charts.phases(
            [
                {"label": "baseline", "compute_s": 1e-3, "memory_s": 2e-4},
                {"label": label, "compute_s": 2e-3, "memory_s": 1e-4},
            ],
            "c-phases",
            label,
        ),
        "history": charts.history(
            points, [ChangePoint(3, points[3].commit, 1e-3, 2e-3, 100.0)], 2.1e-3, "c-history", label
        ),
        "cal": charts.calibration([[1e-6 * (1 + i), 1.1e-6 * (1 + i)] for i in range(30)], "c-cal", label),
        "deltas": charts.deltas(
            [
                {"label": label, "delta_pct": 12.5, "threshold_pct": 2.0, "verdict": "regression"},
                {"label": "other", "delta_pct": -3.0, "threshold_pct": None, "verdict": "improvement"},
            ],
            "c-deltas",
            label,
        ),
    }


def test_each_chart_is_svg_with_ids_of_its_own_and_the_same_bytes_each_time():
    first, again = every_chart(), every_chart()
    assert first == again
    for name, svg in first.items():
        root = parse(svg)
        chart_id = root.get("id")
        ids = [e.get("id") for e in root.iter() if e.get("id")]
        assert ids and all(i == chart_id or i.startswith(chart_id + "-") for i in ids), (name, ids)
        for ref in re.findall(r"url\(#([^)]+)\)", svg):
            assert ref in ids, (name, ref)  # every reference points inside the chart
        marks = [e for e in root.iter() if (e.get("class") or "").startswith("mark")]
        assert marks and all(m.find(SVG + "title") is not None for m in marks), name  # a tooltip per mark


def test_marks_per_chart():
    svgs = every_chart()
    count = {name: len(re.findall(r'class="mark\b', svg)) for name, svg in svgs.items()}
    assert count == {"roof": 2, "phases": 4, "history": 7, "cal": 30, "deltas": 2}
    assert svgs["history"].count('class="change"') == 1 and "change +100.0 %" in svgs["history"]
    assert svgs["roof"].count('class="arrow"') == 1 and "no DRAM traffic" in svgs["roof"]
    assert svgs["deltas"].count("<line x1=") >= 2 + 2  # the zero line, the grid and one pair of threshold ticks


def test_every_text_is_escaped():
    for name, svg in every_chart(label=EVIL, commit='"><svg onload=x>').items():
        parse(svg)
        assert "<script>" not in svg and "<svg onload" not in svg, name
        assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp;" in svg, name


def test_a_long_bar_label_is_cut_and_kept_whole_in_its_tooltip():
    label = "m.conv2d_add_relu_" + "k" * 200 + ".0fa122 [x86_64]"
    svg = charts.deltas([{"label": label, "delta_pct": 5.0, "threshold_pct": 1.0, "verdict": "regression"}], "d", "t")
    shown = re.findall(r"<text[^>]*>(m\.conv2d[^<]*)</text>", svg)
    assert shown == ["m.conv2d_add_relu_kkk\u2026kkkkkk.0fa122 [x86_64]"]  # the start and the end
    assert len(shown[0]) == charts.MAX_LABEL
    assert f"<title>{label}: +5.00 % (regression, threshold 1.00 %)</title>" in svg
    width = float(parse(svg).get("width"))
    assert float(re.search(r'<clipPath id="d-plot"><rect x="([\d.]+)"', svg).group(1)) < width / 2  # room to draw


def test_a_scatter_without_usable_points_draws_empty_axes():
    svg = charts.calibration([[0.0, 1e-6], [-1.0, 2e-6]], "e", "nothing to show")
    root = parse(svg)
    assert "mark" not in svg and root.find(f".//{SVG}g[@class='legend']") is None
    assert "nothing to show" in svg


@pytest.mark.parametrize("value, text", [(0.0, "0"), (-0.04, "0"), (12.0, "12"), (12.34, "12.3"), (-7.25, "-7.2")])
def test_coordinates_are_short(value, text):
    assert charts.coordinate(value) == text


def test_crowded_roofline_labels_do_not_run_into_each_other():
    """Twenty kernels without DRAM traffic sit in one column at the right edge: their numbers are set
    apart (estimated text boxes, as the chart lays them out) and every one stays in the chart."""
    target = target_summary(BUILTIN["x86_64"])
    points = [{"label": str(n), "intensity": None, "gflops": 10.0 * (1 + 0.04 * n)} for n in range(1, 21)]
    svg = charts.roofline(target, [{"name": "latency-bound", "colour": "#e65100", "points": points}], "r", "crowded")
    labels = re.search(r'<g class="point-labels"[^>]*>(.*?)</g>', svg, re.S).group(1)
    boxes = [
        (float(x), float(y) - charts.LABEL_SIZE, float(x) + charts.text_width(t, charts.LABEL_SIZE), float(y) + 2)
        for x, y, t in re.findall(r'<text x="([-\d.]+)" y="([-\d.]+)">([^<]*)</text>', labels)
    ]
    assert len(boxes) == 20
    width, height = (float(v) for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    for i, a in enumerate(boxes):
        assert 0 <= a[0] and a[2] <= width and 0 <= a[1] and a[3] <= height
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_a_kernel_has_the_same_number_on_every_targets_roofline():
    from perfguard.document.report import read_report
    from perfguard.report.html import render_index
    from tests.report import golden

    page = render_index(read_report(golden.REPOSITORY))
    captions = re.findall(r"<figcaption>Roofline of (\w+):.*?</figcaption>", page, re.S)
    numbers = {
        t: dict(
            (k, n)
            for n, k in re.findall(
                r">(\d+)&nbsp;([\w.]+)</a>", page.split(f"<figcaption>Roofline of {t}:")[1].split("</figcaption>")[0]
            )
        )
        for t in captions
    }
    assert sorted(numbers) == ["aarch64", "riscv64", "x86_64"]
    assert numbers["x86_64"]["gemm_256"] == numbers["aarch64"]["gemm_256"] == numbers["riscv64"]["gemm_256"] == "1"
    for kernel in set(numbers["x86_64"]) & set(numbers["riscv64"]):
        assert numbers["x86_64"][kernel] == numbers["riscv64"][kernel]
