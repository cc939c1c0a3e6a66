"""A prediction names the machine it stands for (issue 37 item 1), in every output: the llvm-mca CPU
of the pipeline model and the machine profile the interval came from (its CPU, date and pairs), or
why a result is uncalibrated. From the golden reports: tiny (x86_64, the analytical model, the
intel-6-167 profile) and this repository's failing check (x86_64 on intel-6-167; aarch64 and
riscv64 without native runs); a schema-1 report reads as one that did not record its machine."""

from __future__ import annotations

import copy
import json

from rich.console import Console

from perfguard.document.codec import from_json, to_json
from perfguard.document.report import Report, read_report
from perfguard.document.result import Machine
from perfguard.report import text
from perfguard.report.failures import failures
from perfguard.report.html import kernel_file, write_html
from perfguard.report.markdown import render_markdown
from perfguard.report.terminal import print_table
from tests.report import golden

XEON = "intel-6-167: Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167), 85 verdict pairs timed natively 2026-12-02"
TINY_LINE = f"machine [x86_64]: the analytical model's cost table; interval from {XEON}"
NO_RUNS = "uncalibrated: no native runs on this ISA"


def _terminal(report: Report) -> str:
    out = Console(width=400, record=True, force_terminal=False)
    print_table(report, out)
    return out.export_text()


def test_the_tiny_report_names_its_machine_in_every_output(tmp_path):
    report = read_report(golden.TINY)
    for r in report.results:
        m = r.machine
        assert (m.model, m.profile, m.pairs, m.date, m.mca_cpu) == ("analytical", "intel-6-167", 85, "2026-12-02", "")
        assert r.interval is not None and r.interval.basis.endswith("85 verdict pairs timed on intel-6-167")
    assert text.machine_lines(report.results) == [TINY_LINE]

    term = _terminal(report)
    assert TINY_LINE in term
    assert "FAIL gemm_16 [x86_64] regression" in term and "; machine: intel-6-167" in term

    md = render_markdown(report)
    failing = md[md.index("Failing (1)") :].split("\n\n")[1]
    assert "1. " in failing and failing.endswith("machine: intel-6-167")  # on the failing line
    assert "Machine \\[x86\\_64\\]: the analytical model's cost table; interval from intel-6-167" in md
    assert "| analytical (intel-6-167) |" in md  # the unchanged row's model

    write_html(report, tmp_path)
    index = (tmp_path / "index.html").read_text()
    assert "Machine [x86_64]: the analytical model&#39;s cost table; interval from intel-6-167" in index
    assert "machine: intel-6-167" in index  # the failing line
    page = (tmp_path / kernel_file("gemm_16")).read_text()
    assert "Machine: the analytical model&#39;s cost table; interval from intel-6-167: Intel(R) Xeon(R)" in page


def test_the_repository_report_says_which_results_are_uncalibrated_and_why():
    report = read_report(golden.REPOSITORY)
    lines = text.machine_lines(report.results)
    by_target = {r.target for r in report.results if r.machine is not None}
    assert by_target == {"x86_64", "aarch64", "riscv64"}
    for r in report.results:
        if r.machine is None:
            continue
        if r.target == "x86_64":
            assert r.machine.profile == "intel-6-167" and r.machine.mca_cpu == "znver4"
        else:  # no interval borrowed from x86_64's native truth
            assert r.interval is None and r.machine.uncalibrated == "no native runs on this ISA"
            assert r.machine.mca_cpu == {"aarch64": "cortex-a72", "riscv64": "sifive-u74"}[r.target]
    assert f"machine [aarch64]: llvm-mca -mcpu=cortex-a72 (the generic pipeline model); {NO_RUNS}" in lines
    assert f"machine [riscv64]: llvm-mca -mcpu=sifive-u74 (the generic pipeline model); {NO_RUNS}" in lines
    assert f"machine [x86_64]: llvm-mca -mcpu=znver4; interval from {XEON}" in lines
    first = failures(report)[0]
    assert first.kernel == "gemm_256" and first.machine == "znver4, intel-6-167" and "machine: znver4" in first.line()


def test_a_schema_1_report_reads_as_one_that_did_not_record_its_machine():
    data = golden.load(golden.TINY)
    old = copy.deepcopy(data)
    old["schema"] = 1
    for r in old["results"]:
        r.pop("machine", None)
    report = Report.from_json(old, "old.json")
    assert report.schema == 2
    for r in report.results:
        assert r.machine is not None and not r.machine.recorded and r.machine.model == "analytical"
        assert text.machine_tag(r) == "machine not recorded"
        assert text.machine_line(r) == "analytical model; its machine was not recorded (a report older than schema 2)"
    again = json.loads(json.dumps(report.to_json()))
    assert again["results"][0]["machine"] == {"model": "analytical", "recorded": False}


def test_a_calibrated_result_names_whose_native_runs_its_model_learnt_from():
    report = read_report(golden.TINY)
    r = copy.deepcopy(report.results[0])
    r.machine.model, r.machine.mca_cpu = "calibrated", "znver4"
    r.machine.trained_on = "intel-6-167's native runs"
    assert text.machine_line(r) == (
        f"a calibrated model (trained on intel-6-167's native runs) on llvm-mca -mcpu=znver4's cycles; "
        f"interval from {XEON}"
    )
    r.machine.mca_cpu = ""
    assert text.machine_line(r).startswith("a calibrated model (trained on intel-6-167's native runs) on counts;")
    # written and read back: the field is kept; a machine without it (the goldens') reads as ""
    written = to_json(r.machine)
    assert written["trained_on"] == "intel-6-167's native runs"
    assert from_json(Machine, written, "test") == r.machine
    assert "trained_on" not in to_json(report.results[0].machine)
    assert report.results[0].machine.trained_on == ""
