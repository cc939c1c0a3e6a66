"""Reports rendered from a real check's report (tests/report/golden/tiny: gemm_16 made scalar, a
regression, and gemv_16 unchanged, captured by golden/regenerate.py): perfguard.json (schema-valid,
read and written byte for byte), the HTML pages, summary.md, `perfguard report`. No compiler or
simulator runs here: runs/ rebuilding the report's analysis from the statistics is tested in
tests/runs/test_report_build.py, the real check writing these pages in
tests/end_to_end/test_report_pages.py."""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest

from perfguard.document.codec import from_json
from perfguard.document.report import Report
from perfguard.document.result import Result
from perfguard.judge import analysis
from perfguard.report import markdown, text
from perfguard.report.html import kernel_file, render_index, write_html
from perfguard.report.markdown import LIMIT, MARKER, md, render_markdown
from perfguard.report.pages import write_pages
from perfguard.shells.cli import main
from tests.conftest import REPO
from tests.report import golden

SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The golden report of a real check and its pages as the check writes them: one regression
    (gemm_16) and one unchanged kernel (gemv_16)."""
    reports = tmp_path_factory.mktemp("report-pages")
    data = golden.load(golden.TINY)
    (reports / "perfguard.json").write_text(golden.TINY.read_text())
    write_pages(Report.from_json(copy.deepcopy(data)), reports)
    return {"reports": reports, "data": data}


def results(data):
    return {r["kernel"]: r for r in data["results"]}


def test_report_json_follows_its_schema(tiny):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(tiny["data"], SCHEMA, cls=jsonschema.Draft202012Validator)
    broken = copy.deepcopy(tiny["data"])
    broken["results"][0]["analysis"]["current"]["bound"] = "cache-bound"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_every_page_is_written_and_shows_the_result(tiny):
    reports, data = tiny["reports"], tiny["data"]
    index = (reports / "index.html").read_text()
    for name in ("gemm_16", "gemv_16"):
        assert f'href="{kernel_file(name)}#t-x86_64"' in index
        page = (reports / kernel_file(name)).read_text()
        assert name in page and 'href="../index.html"' in page and "roofline: x86_64" in page
        assert page.count('<svg class="chart"') == 3  # roofline, phase split, history
    assert index.count('<svg class="chart"') == 2  # the delta bars and the x86_64 roofline
    assert "1 regression(s) found" in index and "regression" in index and "Content-Security-Policy" in index
    gemm = (reports / kernel_file("gemm_16")).read_text()
    assert "energy, estimate" in gemm and "latency-bound" in gemm and "What changed" in gemm
    assert "baselines for the tiny kernels" in gemm  # the commit in the history table
    assert "Calibration" not in gemm  # no calibrated model: no section
    for page in [index, gemm]:
        assert not re.search(r"<script|(?:src|href)=\"https?:", page)
    summary = (reports / "summary.md").read_text()
    assert summary.startswith(MARKER + "\n")
    assert "1 regression(s) found" in summary
    # the failing row first, linked to its page, its verdict saying what decided it
    assert (
        summary.index("#### Failing (1)")
        < summary.index(
            "1. \u274c **[gemm\\_16](kernels/gemm_16.html#t-x86_64)** \\[x86\\_64\\] regression (estimate over the "
            "threshold; the interval reaches below it): **+38.68 % (90 %: -30.4 .. +176.5 %)**, threshold 2.00 % \u00b7 "
            "change: tile\\_k 8 -&gt; 1, vector 8 -&gt; 1 \u00b7 where: "
        )
        < summary.index("<details><summary>1 unchanged</summary>")
    )
    assert "<details><summary>1 unchanged</summary>" in summary
    assert data["summary"]["regression"] == 1


def test_report_command_re_renders_the_same_pages(tiny, tmp_path, capsys):
    out = tmp_path / "again"
    assert main(["report", "--from", str(tiny["reports"] / "perfguard.json"), "--report-dir", str(out)]) == 0
    for name in ("index.html", "summary.md", kernel_file("gemm_16"), kernel_file("gemv_16")):
        assert (out / name).read_bytes() == (tiny["reports"] / name).read_bytes(), name
    assert json.loads((out / "perfguard.json").read_text()) == tiny["data"]
    assert "1 regression(s) found" in capsys.readouterr().out


def test_report_command_defaults_to_the_config_report_dir(tiny, tmp_path, monkeypatch, capsys):
    from tests.report.golden.regenerate import tiny_toml

    (tmp_path / "perfguard.toml").write_text(tiny_toml(tmp_path / "cache"))
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "perfguard.json").write_text(golden.TINY.read_text())
    stale = reports / "kernels" / "gone_kernel.html"
    stale.parent.mkdir()
    stale.write_text("old page")
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 0
    assert not stale.exists()  # a page of a kernel no longer reported is removed
    assert (reports / kernel_file("gemm_16")).is_file()
    assert (reports / kernel_file("gemm_16")).read_bytes() == (tiny["reports"] / kernel_file("gemm_16")).read_bytes()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "report not found"),
        ("{not json", "not a perfguard report"),
        (
            '{"schema": 1, "summary": {"exit_code": 0}, "results": [{"kernel": "k", "target": "t", '
            '"verdict": "unchanged", "delta_pct": "lots"}]}',
            "results[0].delta_pct: must be a number",
        ),
    ],
)
def test_report_command_rejects_bad_input(tmp_path, capsys, content, message):
    path = tmp_path / "perfguard.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", "--from", str(path)]) == 2
    assert message in capsys.readouterr().err


EVIL = "<script>alert(1)</script>"


def evil_report(tiny) -> dict:
    """The real report with HTML in every untrusted string: names, params, errors, commit messages."""
    data = copy.deepcopy(tiny["data"])
    gemm = results(data)["gemm_16"]
    gemm["kernel"] = EVIL
    gemm["target"] = 'x86"><img src=x onerror=alert(2)>'
    gemm["params"]["tile_m"] = "<b onmouseover=alert(3)>8</b>"
    gemm["history"]["points"][0]["subject"] = "fix <img src=x onerror=alert(4)> & [link](javascript:alert(5)) @team"
    gemm["history"]["points"][0]["commit"] = "<svg onload=alert(7)>"  # a chart's tick label
    data["targets"][gemm["target"]] = data["targets"]["x86_64"]
    err = copy.deepcopy(results(data)["gemv_16"])
    err.update(
        kernel="<i>err</i>|pipe",
        verdict="error",
        error="<script>alert(6)</script> *boom* `x`",
        stats=None,
        analysis=None,
        history=None,
        stat_deltas={},
    )
    data["results"].append(err)
    data["summary"]["error"] = 1
    return data


def test_injection_is_escaped_in_html_and_markdown(tiny, tmp_path, capsys):
    source = tmp_path / "in" / "perfguard.json"
    source.parent.mkdir()
    source.write_text(json.dumps(evil_report(tiny)))
    out = tmp_path / "out"
    assert main(["report", "--from", str(source), "--report-dir", str(out)]) == 0
    pages = [out / "index.html", *sorted((out / "kernels").glob("*.html"))]
    assert len(pages) == 4
    assert all(p.parent in (out, out / "kernels") for p in pages)  # no name escapes the folder
    assert (out / kernel_file(EVIL)).is_file() and kernel_file(EVIL).startswith("kernels/k-")
    for page in pages:
        html = page.read_text()
        assert "<script" not in html and "<img" not in html and "<b onmouseover" not in html and "<i>" not in html
        assert 'x86">' not in html  # no attribute was broken out of
        assert "<svg on" not in html  # nor a chart's text
    index = (out / "index.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in index and "&lt;script&gt;alert(6)&lt;/script&gt;" in index
    evil_page = (out / kernel_file(EVIL)).read_text()
    assert "x86&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in evil_page
    assert "fix &lt;img src=x onerror=alert(4)&gt; &amp; [link](javascript:alert(5))" in evil_page
    assert "&lt;b onmouseover=alert(3)&gt;8&lt;/b&gt;" in evil_page
    assert ">&lt;svg on</text>" in evil_page  # the commit under the history chart, escaped
    summary = (out / "summary.md").read_text()
    assert "<script" not in summary and "<i>" not in summary
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in summary
    assert "&lt;i&gt;err&lt;/i&gt;\\|pipe" in summary  # a pipe cannot split the table row
    assert "\\*boom\\* \\`x\\`" in summary


def test_findings_name_lost_vectorisation_and_a_new_bound_class():
    side = {"compute_s": 1e-3, "memory_s": 1e-4, "flops_per_fp_inst": 16.0, "bound": "compute"}
    result = {
        "kernel": "k",
        "target": "t",
        "verdict": "regression",
        "delta_pct": 80.0,
        "analysis": {
            "baseline": {**side, "time_s": None},
            "current": {**side, "time_s": None, "compute_s": 2e-3, "flops_per_fp_inst": 2.0, "bound": "latency"},
            "drivers": [{"stat": "fp_insts", "baseline": 0, "current": 4096, "delta_pct": None, "time_s": 1e-3}],
        },
    }
    found = text.findings(from_json(Result, result, "test"))
    # the phases say which model split the change, and add up to that model's change
    assert found[0] == "analytical model: compute phase +1.000 ms + memory phase 0.0 ns = +1.000 ms"
    calibrated = {**result, "model_id": "xgb-1", "calibrated": True, "current_time_s": 2.5e-3, "baseline_time_s": 1e-3}
    assert text.findings(from_json(Result, calibrated, "test"))[0] == (
        "analytical model: compute phase +1.000 ms + memory phase 0.0 ns = +1.000 ms "
        "(the verdict's calibrated model: +1.500 ms)"
    )
    assert found[1] == "fp_insts +4,096 \u2192 +1.000 ms"
    assert "vectorisation lost: flops per FP instruction 16 \u2192 2" in found
    assert "bound class compute-bound \u2192 latency-bound" in found


def test_markdown_escaping():
    assert md("a|b") == "a\\|b"
    assert md("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert md("[x](http://evil)") == "\\[x\\](http://evil)"
    assert md("line\nbreak") == "line break"
    assert md("@org/team") == "@\u200borg/team"  # no mention


def synthetic(n: int, verdict_of=lambda i: "regression") -> dict:
    rows = [
        {
            "kernel": f"kernel_with_a_long_name_{i:05d}",
            "target": "x86_64",
            "verdict": verdict_of(i),
            "delta_pct": 3.0 + i % 7,
            "threshold_pct": 2.0,
            "current_time_s": 1e-3,
            "baseline_time_s": 9e-4,
            "simulator": "qemu",
            "model_id": "analytical-v1-x",
            "calibrated": False,
        }
        for i in range(n)
    ]
    counts = {
        v: sum(1 for r in rows if r["verdict"] == v) for v in ("regression", "error", "improvement", "new", "unchanged")
    }
    return {
        "schema": 1,
        "perfguard_version": "0",
        "created": "now",
        "config": None,
        "summary": {"exit_code": 1, **counts},
        "results": rows,
    }


def test_markdown_stays_under_the_limit_cutting_unchanged_rows_before_a_failing_one():
    # 100 regressions among 2,000 results: every failing row is shown; the unchanged rows are cut
    text = render_markdown(Report.from_json(synthetic(2000, lambda i: "regression" if i % 20 == 0 else "unchanged")))
    assert len(text) < LIMIT and text.startswith(MARKER)
    assert len(re.findall(r"^\d+\. \u274c \*\*\[kernel", text, re.M)) == 100 and "more failing" not in text
    shown_rest = text.count("| \u2796 |")
    assert 0 < shown_rest < 1900 and f"_{1900 - shown_rest} more unchanged rows not shown" in text
    assert "<details><summary>1900 unchanged</summary>" in text
    assert text.index("#### Failing (100)") < text.index("<details>")
    # 1,000 regressions do not fit: no unchanged row is shown, and the failing rows left out are counted
    text = render_markdown(Report.from_json(synthetic(5000, lambda i: "regression" if i % 5 == 0 else "unchanged")))
    assert len(text) < LIMIT
    shown = len(re.findall(r"^\d+\. \u274c \*\*\[kernel", text, re.M))
    assert 0 < shown < 1000 and f"_{1000 - shown} more failing results not shown" in text
    assert text.count("| \u2796 |") == 0 and "_4000 more unchanged rows not shown" in text
    small = render_markdown(Report.from_json(synthetic(3)))
    assert "not shown" not in small and len(re.findall(r"^\d+\. \u274c \*\*\[kernel", small, re.M)) == 3
    assert len(render_markdown(Report.from_json(synthetic(200)), limit=5000)) < 5000


def test_calibration_section_shows_only_with_data(tiny, tmp_path):
    data = copy.deepcopy(tiny["data"])
    gemm = results(data)["gemm_16"]
    gemm["calibration"] = {
        "metrics": {"mape_pct": 7.25, "spearman": 0.97, "model": "xgboost"},
        "points": [[1e-6 * (1 + i), 1.1e-6 * (1 + i)] for i in range(25)],
    }
    write_html(Report.from_json(data), tmp_path)
    page = (tmp_path / kernel_file("gemm_16")).read_text()
    assert "<h3>Calibration</h3>" in page and "mape_pct" in page and "xgboost" in page and "7.25" in page
    scatter = page[page.index('id="s0-cal"') :]
    scatter = scatter[: scatter.index("</svg>")]
    assert scatter.count('<circle class="mark"') == 25  # one marker per hold-out point
    assert "<h3>Calibration</h3>" not in (tmp_path / kernel_file("gemv_16")).read_text()


def test_pages_render_from_a_minimal_report(tmp_path):
    """A report without analysis, history or targets (an older or hand-made file) still renders."""
    data = synthetic(2)
    data["results"][1].update(verdict="new", delta_pct=None, baseline_time_s=None, threshold_pct=None)
    data = Report.from_json(data)
    write_html(data, tmp_path)
    assert "kernel_with_a_long_name_00001" in (tmp_path / "index.html").read_text()
    page = (tmp_path / kernel_file("kernel_with_a_long_name_00001")).read_text()
    assert "No baseline yet" in page
    assert render_index(data) == (tmp_path / "index.html").read_text()


@pytest.mark.parametrize(
    "flops, traffic, time_s, bound",
    [
        (96e9 * 0.9, 0, 1.0, "compute"),  # 90 % of peak flops, no DRAM traffic
        (1e6, 20e9 * 0.8, 1.0, "memory"),  # 80 % of peak bandwidth, few flops
        (96e9 * 0.2, 20e9 * 0.1, 1.0, "latency"),  # 20 % of the roof
        (96e9 * 0.5, 0, 1.0, "compute"),  # exactly at the boundary
    ],
)
def test_bound_class(flops, traffic, time_s, bound):
    assert analysis.bound_class(flops, traffic, time_s, 96.0, 20.0)[0] == bound


def test_energy_estimate_formula():
    from perfguard.sim.stats import Stats
    from perfguard.targets import BUILTIN

    target = analysis.target_summary(BUILTIN["x86_64"])
    s = Stats(insts=1000, l1i_accesses=1000, l1d_accesses=500, l2_accesses=40, l2_misses=10, l2_writebacks=2)
    e = analysis.energy(s, target)
    assert e.total_j == pytest.approx((1000 * 10 + 1500 * 5 + 40 * 25 + 12 * 640) * 1e-12)
    assert analysis.energy(Stats(insts=5), target) is None  # unknown counters: no estimate, not a 0
    assert analysis.dram_bytes(s, 64) == 12 * 64 and analysis.dram_bytes(Stats(), 64) is None


def test_markdown_marker_is_stable():
    assert markdown.MARKER == "<!-- perfguard-report -->"  # CI finds its comment by it: never change it


def test_calibration_comes_from_the_model_that_scored_the_result(tmp_path):
    import json
    from types import SimpleNamespace

    from perfguard.predict.select import predictor_for
    from perfguard.runs import report_build
    from perfguard.targets import BUILTIN
    from tests.conftest import REPO

    meta = {
        "holdout": {"summary": {"mape": 6.5, "spearman": float("nan"), "groups": 4, "nested": {"x": 1}}},
        "scatter": [[1e-3, 1.1e-3], [2e-3, float("inf")], [3e-3, 2.9e-3]],
    }
    cal = report_build.calibration(SimpleNamespace(calibrated=True, meta=meta))
    assert cal.metrics == {"mape": 6.5, "spearman": None, "groups": 4}  # JSON-safe, flat
    assert cal.points == [[1e-3, 1.1e-3], [3e-3, 2.9e-3]] and "in-sample" in cal.points_label
    assert report_build.calibration(SimpleNamespace(calibrated=False, meta=meta)) is None
    # the calibrated model `auto` scores gemm with carries its own file's metadata: nothing looks it up again
    zen = REPO / "benchmarks" / "profiles" / "amd-23-1"  # Zen 1's calibration, as a project's own models
    scored = predictor_for(BUILTIN["x86_64"], "gemm", "qemu", zen, cache_dir=tmp_path, params={"dtype": "float32"})
    stored = json.loads((zen / "models" / "x86_64" / "gemm.json").read_text())
    assert scored.calibrated and scored.meta["model_id"] == stored["model_id"]
    assert report_build.calibration(scored).metrics["spearman"] == stored["holdout"]["summary"]["spearman"]


def test_typed_report_reads_and_writes_perfguard_json_byte_for_byte(tiny):
    from perfguard.document.report import report_text
    from perfguard.document.result import Analysis, History, HistoryPoint, Metrics

    written = (tiny["reports"] / "perfguard.json").read_text()
    report = Report.from_json(json.loads(written))
    assert report_text(report) == written
    gemm = next(r for r in report.results if r.kernel == "gemm_16")
    assert isinstance(gemm.analysis, Analysis) and isinstance(gemm.analysis.current, Metrics)
    assert isinstance(gemm.history, History) and isinstance(gemm.history.points[0], HistoryPoint)
    assert (
        gemm.analysis.current.energy.total_j
        == gemm.analysis.current.energy.core_j
        + gemm.analysis.current.energy.l1_j
        + gemm.analysis.current.energy.l2_j
        + gemm.analysis.current.energy.dram_j
    )
    assert report.targets["x86_64"].peak_gflops == 96.0 and report.summary.regression == 1


def test_typed_report_keeps_what_it_does_not_know_and_names_a_wrong_type(tiny):
    from perfguard.document.report import report_text
    from perfguard.errors import InputError

    data = copy.deepcopy(tiny["data"])
    data["from_the_future"] = {"x": [1, 2]}
    data["results"][0]["loop_names"] = ["i", "j"]
    again = json.loads(report_text(Report.from_json(data)))
    assert again["from_the_future"] == {"x": [1, 2]} and again["results"][0]["loop_names"] == ["i", "j"]
    data["results"][0]["analysis"]["current"]["gflops"] = "fast"
    with pytest.raises(
        InputError,
        match=r"^r\.json: results\[0\]\.analysis\.current\.gflops: must be a number or "
        r"null, got 'fast'$",
    ):
        Report.from_json(data, "r.json")
    data = copy.deepcopy(tiny["data"])
    data["results"][1]["history"]["points"][0]["time_s"] = None
    with pytest.raises(InputError, match=r"results\[1\]\.history\.points\[0\]\.time_s: must be a number, got None"):
        Report.from_json(data, "r.json")


def test_typed_report_optional_additions_stay_absent_until_set():
    from perfguard.document.codec import to_json
    from perfguard.document.report import Summary

    plain = to_json(Summary(exit_code=0))
    assert "interrupted" not in plain and "errors_allowed" not in plain and "not_measured" not in plain
    assert plain["toolchain_changed"] == {}
    assert to_json(Summary(exit_code=3, interrupted=True, not_measured=0))["interrupted"] is True


def test_report_schema_upgrades_run_before_reading(monkeypatch):
    from perfguard.document import report as report_module
    from perfguard.errors import InputError

    def from_zero(doc):  # a made-up schema 0 that called the verdict "outcome"
        return {
            **doc,
            "results": [
                {**{k: v for k, v in r.items() if k != "outcome"}, "verdict": r["outcome"]} for r in doc["results"]
            ],
        }

    old = {
        "schema": 0,
        "summary": {"exit_code": 1},
        "results": [{"kernel": "k", "target": "x86_64", "outcome": "regression", "delta_pct": 5.0}],
    }
    with pytest.raises(InputError, match="report schema 0 is not 2"):
        Report.from_json(copy.deepcopy(old))
    monkeypatch.setitem(report_module.UPGRADES, 0, from_zero)
    report = Report.from_json(copy.deepcopy(old))  # 0 -> 1 (made up) -> 2 (the machine, not recorded)
    assert report.schema == 2 and report.results[0].verdict == "regression" and report.summary.regression == 1
    assert report.results[0].machine is None  # no model scored it: nothing to name
    with pytest.raises(InputError, match=r"report schema 3, written by a newer perfguard; .*: upgrade perfguard$"):
        Report.from_json({**old, "schema": 3})


def test_the_change_is_named_as_the_params_diff_against_the_baseline(tiny):
    """gemm_16's baseline recorded tile_k 8 and vector 8, the check ran tile_k 1 and vector 1; gemv_16 was
    built from the baseline's very build key. Each output names that, not the current params alone."""
    reports, data = tiny["reports"], tiny["data"]
    gemm, gemv = results(data)["gemm_16"], results(data)["gemv_16"]
    assert (gemm["baseline_params"]["tile_k"], gemm["params"]["tile_k"]) == (8, 1)
    assert gemv["baseline_content_hash"] == gemv["content_hash"] != gemm["baseline_content_hash"]
    report = Report.from_json(copy.deepcopy(data))
    by_name = {r.kernel: r for r in report.results}
    assert text.change_text(by_name["gemm_16"]) == "tile_k 8 -> 1, vector 8 -> 1"
    assert text.change_text(by_name["gemv_16"]) == "same machine code as the baseline"  # not rebuilt: reused
    rebuilt = copy.deepcopy(by_name["gemv_16"])
    rebuilt.rebuilt = True
    assert text.change_text(rebuilt) == "rebuilt, same machine code as the baseline"
    assert " \u00b7 change: tile\\_k 8 -&gt; 1, vector 8 -&gt; 1 \u00b7 " in (reports / "summary.md").read_text()
    index = (reports / "index.html").read_text()
    assert '<span class="change">tile_k 8 -&gt; 1, vector 8 -&gt; 1</span>' in index.split('id="overview"')[0]
    page = (reports / kernel_file("gemm_16")).read_text()
    assert 'What changed: <span class="change">tile_k 8 -&gt; 1, vector 8 -&gt; 1</span>' in page
    assert "same machine code as the baseline" in (reports / kernel_file("gemv_16")).read_text()
