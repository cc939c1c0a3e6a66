"""pytest --perfguard in a project of its own, as a user runs it.

What crosses a process boundary runs as `python -m pytest` (pytest-xdist's controller and workers,
what a plain run imports); the plugin's own logic (writing baselines, a regression's failure,
native timing, usage errors) runs pytest in this process (pytester), where TVM is loaded once. The
update, the regression and the xdist run share one project: each run starts where the last left it."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.projects import GOOD, copy_baseline, kernel_table, with_cache
from tests.shells.user_pytest import outcomes, run

pytest_plugins = ["pytester"]


def config_text(cache_dir: Path, n: int) -> str:
    """gemm_a (tests/projects.py's GOOD schedule) on x86_64 and aarch64, the user's saxpy of size n on aarch64."""
    return (
        with_cache('[perfguard]\ntargets = ["x86_64", "aarch64"]\n', cache_dir)
        + kernel_table("gemm_a", "perfguard.kernels.gemm:gemm", GOOD, "gemm")
        + kernel_table("saxpy", "mykernels.ops:scale_add", f"n = {n}", targets='["aarch64"]')
    )


OPS = """
import tvm
from tvm import te


def scale_add(n=256):
    A = te.placeholder((n,), "float32", name="A")
    B = te.placeholder((n,), "float32", name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})
"""

USER_TESTS = """
import sys

import pytest


def test_plain_test_does_not_pay_for_perfguard(request):
    if not any(request.config.getoption(o) for o in ("perfguard", "perfguard_update", "perfguard_native")):
        assert "tvm" not in sys.modules and "perfguard.runs.check" not in sys.modules


@pytest.mark.perfguard(threshold=10000.0)
def test_gemm_a_with_its_own_threshold(perfguard_check):  # replaces the item perfguard::gemm_a[x86_64]
    result = perfguard_check("gemm_a", "x86_64")
    assert result.ok and result.threshold_pct == 10000.0, result.explain()


def test_an_ad_hoc_kernel(perfguard_check):
    spec = {"name": "adhoc_gemm", "entry": "perfguard.kernels.gemm:gemm", "family": "gemm",
            "params": {"M": 16, "N": 16, "K": 16}}
    result = perfguard_check(spec, "x86_64")
    assert result.ok and result.verdict in ("new", "unchanged"), result.explain()
"""

# gemm_a[x86_64] has a test of its own (test_gemm_a_with_its_own_threshold): no item beside it (issue 42)
ITEMS = {"perfguard::gemm_a[aarch64]", "perfguard::saxpy[aarch64]"}
USER = {
    "test_user.py::test_plain_test_does_not_pay_for_perfguard",
    "test_user.py::test_gemm_a_with_its_own_threshold",
    "test_user.py::test_an_ad_hoc_kernel",
}


def write_user_project(root: Path, cache_dir: Path, n: int = 512) -> Path:
    """The user's project in `root`: perfguard.toml (saxpy of size n), mykernels/ops.py, test_user.py."""
    root.mkdir(parents=True, exist_ok=True)
    set_saxpy(root, cache_dir, n)
    (root / "mykernels").mkdir(exist_ok=True)
    (root / "mykernels" / "__init__.py").write_text("")
    (root / "mykernels" / "ops.py").write_text(textwrap.dedent(OPS))
    (root / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    return root


def set_saxpy(root: Path, cache_dir: Path, n: int) -> None:
    (root / "perfguard.toml").write_text(config_text(cache_dir, n))


# Which processes of a run imported TVM: a file per process (the xdist controller and each worker).
TVM_PROBE = """
import os
import sys
from pathlib import Path


def pytest_sessionfinish(session):
    Path(str(session.config.rootpath), f"tvm-{os.getpid()}.txt").write_text(str("tvm" in sys.modules))
"""


# After saxpy's work grows fourfold: its item fails, everything else passes.
REGRESSED = {k: "PASSED" for k in ITEMS | USER} | {"perfguard::saxpy[aarch64]": "FAILED"}


@pytest.mark.slow
def test_update_then_a_regression_fails_exactly_its_item_in_one_process_and_under_xdist(in_process, cache_dir):
    pytest.importorskip("xdist", reason="runs the project's pytest with -n 2, which needs pytest-xdist")
    root = write_user_project(in_process.root, cache_dir)
    update = in_process.run("--perfguard-update")
    assert update.ret == 0, update.out
    assert "collected 5 items" in update.out  # 2 kernel items + 3 user tests, counted before running
    assert outcomes(update) == {k: "PASSED" for k in ITEMS | USER}
    # 2 items + the 2 checks of the user tests, each kernel x target once
    assert "4 kernel check(s): 4 new" in update.out
    assert "rewrote 4 baseline(s)" in update.out
    assert (root / "baselines" / "aarch64" / "saxpy.json").is_file()

    shutil.rmtree(root / "reports")
    set_saxpy(root, cache_dir, 2048)  # four times the work for saxpy only
    copy_baseline(root, "aarch64", "sxapy")  # and a baseline no kernel is configured for (nor checked by a test)
    result = in_process.run("--perfguard")
    text = result.out
    assert result.ret == 1, text
    assert outcomes(result) == REGRESSED  # the test's own kernel (adhoc_gemm) has a baseline too: not orphaned
    assert (
        "sxapy[aarch64]: removed: no kernel or [[model]] named 'sxapy' is configured in perfguard.toml: its "
        "committed baseline baselines/aarch64/sxapy.json is no longer checked (renamed to 'saxpy'? run "
        "'perfguard baseline rename sxapy saxpy'"
    ) in " ".join(text.split())
    orphan = json.loads((root / "reports" / "perfguard.json").read_text())
    assert [(r["kernel"], r["verdict"], r.get("orphaned")) for r in orphan["results"] if r["kernel"] == "sxapy"] == [
        ("sxapy", "removed", True)
    ] and orphan["summary"]["orphaned"] == 1
    failure = text[text.index("_ perfguard::saxpy[aarch64] _") :]
    # the delta and the threshold; no interval: aarch64 has no native runs to calibrate one on (issue 37),
    # and the failure says what machine its time stands for
    found = re.search(r"saxpy\[aarch64\]: regression \+(\d+\.\d\d) % \(threshold 2\.00 %\)", failure)
    assert found and float(found.group(1)) > 2.0, failure
    assert (
        "machine: llvm-mca -mcpu=cortex-a72 (the generic pipeline model); uncalibrated: no native runs on this ISA"
    ) in failure
    assert "machine [aarch64]: llvm-mca -mcpu=cortex-a72 (the generic pipeline model); uncalibrated" in text
    assert "changed statistics (baseline -> current):" in failure and "loads" in failure
    assert "Traceback" not in failure
    # where, as `perfguard check` says it: the saxpy loop (nest C), four times as often
    where = re.search(r"\nwhere: (.*)\n", failure)
    assert where and where.group(1).startswith("loop i of nest C in "), failure
    report = json.loads((root / "reports" / "perfguard.json").read_text())
    saxpy = next(r for r in report["results"] if r["kernel"] == "saxpy" and r["verdict"] == "regression")
    from perfguard.document.codec import from_json
    from perfguard.document.result import Result
    from perfguard.report.text import what_changed_most

    assert where.group(1) == what_changed_most(from_json(Result, saxpy, "perfguard.json"))
    assert "\nchange: n 512 -> 2048\n" in failure  # the params' diff against the baseline's
    # the session's perfguard summary opens with one line per failing result, as every report does
    summary = text[text.rindex("- perfguard -") :].splitlines()[1:]
    assert summary[0].startswith("FAIL saxpy [aarch64] regression +") and "; where: loop i of nest C in " in summary[0]
    # no interval (no native runs on aarch64); the machine its time stands for, last
    assert summary[0].endswith("; change: n 512 -> 2048; machine: cortex-a72, uncalibrated") and summary[1].startswith(
        "FAIL sxapy [aarch64] removed"
    )
    assert report["summary"]["exit_code"] == 2 and report["summary"]["regression"] == 1  # 2: the orphan beats 1
    # one result per kernel x target
    assert sorted((r["kernel"], r["target"]) for r in report["results"]) == sorted(
        [
            ("gemm_a", "x86_64"),
            ("gemm_a", "aarch64"),
            ("saxpy", "aarch64"),
            ("adhoc_gemm", "x86_64"),
            ("sxapy", "aarch64"),
        ]
    )

    # The same project under pytest-xdist (a real `python -m pytest -n 2`): each item on one worker,
    # every result once in the controller's one report, the orphan found by the controller. Every
    # job is recorded now (the update, the run above): no process of the run imports TVM.
    shutil.rmtree(root / "reports")
    (root / "conftest.py").write_text(TVM_PROBE)
    xdist = run(root, "--perfguard", "-n", "2")
    assert xdist.ret == 1 and outcomes(xdist) == REGRESSED, xdist.out
    report = json.loads((root / "reports" / "perfguard.json").read_text())
    pairs = sorted((r["kernel"], r["target"]) for r in report["results"])
    # 2 items + 2 checks from user tests, each once: nothing lost, nothing duplicated across workers.
    assert pairs == sorted(
        [
            ("gemm_a", "x86_64"),
            ("gemm_a", "aarch64"),
            ("saxpy", "aarch64"),
            ("adhoc_gemm", "x86_64"),
            ("sxapy", "aarch64"),
        ]
    )
    assert report["summary"]["orphaned"] == 1 and report["summary"]["regression"] == 1
    probes = {p.name: p.read_text() for p in root.glob("tvm-*.txt")}
    assert len(probes) == 3 and set(probes.values()) == {"False"}, (probes, xdist.out)  # the controller, 2 workers


TWICE = """
def test_gemm_a_everywhere(perfguard_check):
    for target in ("x86_64", "aarch64"):
        assert perfguard_check(kernel="gemm_a", target=target).ok


def test_gemm_a_again(perfguard_check):
    assert perfguard_check("gemm_a", "aarch64").ok
"""


@pytest.mark.slow
def test_a_test_file_selects_only_what_it_holds_and_each_kernel_counts_once(in_process, cache_dir):
    root = write_user_project(in_process.root, cache_dir)
    (root / "test_twice.py").write_text(TWICE)
    # one file named: its two tests, no configured kernel's item (saxpy is in no test of it)
    result = in_process.run("--perfguard-update", "test_twice.py")
    assert result.ret == 0, result.out
    assert outcomes(result) == {
        "test_twice.py::test_gemm_a_everywhere": "PASSED",
        "test_twice.py::test_gemm_a_again": "PASSED",
    }
    # gemm_a[aarch64] was checked twice: one result for it, the later one's (the first wrote its baseline)
    assert "2 kernel check(s): 1 new, 1 unchanged" in result.out, result.out
    report = json.loads((root / "reports" / "perfguard.json").read_text())
    assert sorted((r["kernel"], r["target"]) for r in report["results"]) == [
        ("gemm_a", "aarch64"),
        ("gemm_a", "x86_64"),
    ]
    # the whole project: a test with a non-literal target covers every target of its kernel, so gemm_a has
    # no item; saxpy has one
    result = in_process.run("--perfguard")
    assert result.ret == 0, result.out
    assert {k for k in outcomes(result) if k.startswith("perfguard::")} == {"perfguard::saxpy[aarch64]"}
    assert "4 kernel check(s): " in result.out and "perfguard::gemm_a" not in result.out


@pytest.mark.slow
def test_without_perfguard_nothing_is_collected_or_imported(tmp_path, cache_dir):
    root = write_user_project(tmp_path / "project", cache_dir)
    result = run(root)
    assert result.ret == 0, result.out
    assert outcomes(result) == {
        "test_user.py::test_plain_test_does_not_pay_for_perfguard": "PASSED",
        "test_user.py::test_gemm_a_with_its_own_threshold": "SKIPPED",
        "test_user.py::test_an_ad_hoc_kernel": "SKIPPED",
    }
    assert "perfguard tests run with --perfguard" in result.out
    assert not (root / "reports").exists()


@pytest.mark.slow
def test_filters_and_native_timing_with_pytest_benchmark(in_process, cache_dir, capsys):
    root = write_user_project(in_process.root, cache_dir)
    out = root / "bench.json"
    result = in_process.run(
        "--perfguard-native",
        "--perfguard-kernels",
        "gemm_a",
        "-k",
        "gemm_a",
        f"--benchmark-json={out}",
        "--benchmark-max-time=0.02",
        "--benchmark-min-rounds=3",
    )
    text = result.out
    assert result.ret == 0, text
    # native timing keeps the items of kernels a test also checks (its perfguard_check times nothing natively)
    assert outcomes(result) == {
        "perfguard::gemm_a[x86_64]": "PASSED",
        "perfguard::gemm_a[aarch64]": "SKIPPED",
        "test_user.py::test_gemm_a_with_its_own_threshold": "PASSED",
    }
    assert "aarch64 is not this machine's ISA" in text
    bench = json.loads(out.read_text())["benchmarks"]
    assert len(bench) == 1 and bench[0]["fullname"] == "perfguard::gemm_a[x86_64]"
    info = bench[0]["extra_info"]
    assert (info["kernel"], info["target"], info["family"]) == ("gemm_a", "x86_64", "gemm")
    assert info["params"]["tile_m"] == 8 and info["group"] == "K=32,M=32,N=32,dtype=float32"
    assert info["stats"]["insts"] > 0 and info["machine"]["machine"] and bench[0]["stats"]["median"] > 0

    # The benchmark JSON is a calibration source: `perfguard calibrate ingest` turns it into dataset rows.
    from perfguard.predict.dataset import load_dataset
    from perfguard.shells.cli import main

    assert (
        main(
            [
                "calibrate",
                "ingest",
                "--config",
                str(root / "perfguard.toml"),
                "--target",
                "x86_64",
                "--family",
                "gemm",
                "--benchmark-json",
                str(out),
            ]
        )
        == 0
    )
    rows = load_dataset(root / "baselines/datasets/x86_64/gemm.json").rows
    assert len(rows) == 1 and rows[0].group == info["group"] and rows[0].params == info["params"]
    assert rows[0].native_s == bench[0]["stats"]["median"] and rows[0].stats.insts == info["stats"]["insts"]
    # the row knows its CPU beyond the model name; times from another CPU are not mixed in
    from perfguard.job.native import this_machine

    assert rows[0].machine["cpu_id"] == this_machine().cpu_id != ""
    doc = json.loads(out.read_text())
    doc["benchmarks"][0]["extra_info"]["machine"]["cpu_id"] = "AuthenticAMD cpu family 25 model 17 stepping 1"
    other = root / "other.json"
    other.write_text(json.dumps(doc))
    capsys.readouterr()
    assert (
        main(
            [
                "calibrate",
                "ingest",
                "--config",
                str(root / "perfguard.toml"),
                "--target",
                "x86_64",
                "--family",
                "gemm",
                "--benchmark-json",
                str(other),
            ]
        )
        == 2
    )
    assert re.search(r"timed on .*model 17 stepping 1: times from different CPUs do not mix", capsys.readouterr().err)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--perfguard", "--perfguard-kernels", "nope"], "perfguard: --perfguard-kernels: unknown kernel 'nope'"),
        (
            ["--perfguard", "--perfguard-targets", "vax"],
            "perfguard: --perfguard-targets: unknown target 'vax' (known: ",
        ),
        (["--perfguard-kernels", "gemm_a"], "--perfguard-kernels needs --perfguard"),
        (["--perfguard-update", "--perfguard-native"], "cannot be combined"),
    ],
)
def test_usage_errors_are_one_line(pytester, cache_dir, monkeypatch, args, needle):
    """Refused before any kernel is looked at: pytest in this process (pytester), on the project's files."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # the inner pytest must not think it is an xdist worker
    write_user_project(pytester.path, cache_dir)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str()
