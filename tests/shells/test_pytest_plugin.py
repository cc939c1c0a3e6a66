"""pytest --perfguard in a project of its own (pytester, in subprocesses as a user would run it)."""

from __future__ import annotations

import itertools
import json
import re
import textwrap
import xml.etree.ElementTree as ET

import pytest

from tests.runs.test_orphans import put

pytest_plugins = ["pytester"]

TOML = """
[perfguard]
targets = ["x86_64", "aarch64"]
cache_dir = "{cache_dir}"

[[kernel]]
name = "gemm_a"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = 32, N = 32, K = 32, tile_m = 8, tile_n = 16, tile_k = 8, vector = 8 }}

[[kernel]]
name = "saxpy"
entry = "mykernels.ops:scale_add"
targets = ["aarch64"]
params = {{ n = {n} }}
"""

OPS = '''
import tvm
from tvm import te


def scale_add(n=256):
    A = te.placeholder((n,), "float32", name="A")
    B = te.placeholder((n,), "float32", name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})
'''

USER_TESTS = '''
import sys

import pytest


def test_plain_test_does_not_pay_for_perfguard(request):
    if not any(request.config.getoption(o) for o in ("perfguard", "perfguard_update", "perfguard_native")):
        assert "tvm" not in sys.modules and "perfguard.runs.check" not in sys.modules


@pytest.mark.perfguard(threshold=10000.0)
def test_saxpy_with_its_own_threshold(perfguard_check):
    result = perfguard_check("saxpy", "aarch64")
    assert result.ok and result.threshold_pct == 10000.0, result.explain()


def test_an_ad_hoc_kernel(perfguard_check):
    spec = {"name": "adhoc_gemm", "entry": "perfguard.kernels.gemm:gemm", "family": "gemm",
            "params": {"M": 16, "N": 16, "K": 16}}
    result = perfguard_check(spec, "x86_64")
    assert result.ok and result.verdict in ("new", "unchanged"), result.explain()
'''

ITEMS = {"perfguard::gemm_a[x86_64]", "perfguard::gemm_a[aarch64]", "perfguard::saxpy[aarch64]"}
USER = {"test_user.py::test_plain_test_does_not_pay_for_perfguard", "test_user.py::test_saxpy_with_its_own_threshold",
        "test_user.py::test_an_ad_hoc_kernel"}


_RUNS = itertools.count()


def outcomes(result) -> dict[str, str]:
    """node id -> PASSED/FAILED/SKIPPED/ERROR, from the run's JUnit XML (the same with or without xdist)."""
    found = {}
    for case in ET.parse(result.junitxml).iter("testcase"):
        module = case.get("classname").replace(".", "/")
        nodeid = f"{module}::{case.get('name')}" if module == "perfguard" else f"{module}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        state = ("FAILED" if "failure" in kinds else "ERROR" if "error" in kinds
                 else "SKIPPED" if "skipped" in kinds else "PASSED")
        assert nodeid not in found, f"{nodeid} reported twice"
        found[nodeid] = state
    return found


@pytest.fixture
def user_project(pytester, cache_dir, monkeypatch):
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)  # the inner pytest must not think it is an xdist worker
    def write(n: int) -> None:
        pytester.path.joinpath("perfguard.toml").write_text(TOML.format(cache_dir=cache_dir, n=n))

    write(512)
    pytester.mkpydir("mykernels")
    pytester.path.joinpath("mykernels", "ops.py").write_text(textwrap.dedent(OPS))
    pytester.makepyfile(test_user=USER_TESTS)
    return write


def run(pytester, *args):
    junitxml = pytester.path / f"junit-{next(_RUNS)}.xml"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", f"--junitxml={junitxml}", *args,
                                           timeout=600)
    result.junitxml = junitxml
    return result


# After saxpy's work grows fourfold: its item fails, everything else passes.
REGRESSED = {k: "PASSED" for k in ITEMS | USER} | {"perfguard::saxpy[aarch64]": "FAILED"}


@pytest.mark.slow
def test_regression_fails_exactly_its_item(pytester, user_project):
    result = run(pytester, "--perfguard-update")
    assert result.ret == 0, result.stdout.str()
    assert "collected 6 items" in result.stdout.str()  # 3 kernel items + 3 user tests, counted before running
    assert outcomes(result) == {k: "PASSED" for k in ITEMS | USER}
    # 3 items + the 2 checks of the user tests; saxpy[aarch64] is checked twice (its item and a user
    # test): the second finds the baseline the first wrote, identical, and leaves it alone
    assert "5 kernel check(s): 4 new, 1 unchanged" in result.stdout.str()
    assert "rewrote 4 baseline(s)" in result.stdout.str()
    assert (pytester.path / "baselines" / "aarch64" / "saxpy.json").is_file()

    user_project(2048)  # four times the work for saxpy only
    put(pytester.path, "aarch64", "sxapy")  # and a baseline no kernel is configured for (nor checked by a test)
    result = run(pytester, "--perfguard")
    text = result.stdout.str()
    assert result.ret == 1, text
    assert outcomes(result) == REGRESSED  # the test's own kernel (adhoc_gemm) has a baseline too: not orphaned
    assert ("sxapy[aarch64]: removed: no kernel or [[model]] named 'sxapy' is configured in perfguard.toml: its "
            "committed baseline baselines/aarch64/sxapy.json is no longer checked (renamed to 'saxpy'? run "
            "'perfguard baseline rename sxapy saxpy'") in " ".join(text.split())
    orphan = json.loads((pytester.path / "reports" / "perfguard.json").read_text())
    assert [(r["kernel"], r["verdict"], r.get("orphaned")) for r in orphan["results"] if r["kernel"] == "sxapy"] \
        == [("sxapy", "removed", True)] and orphan["summary"]["orphaned"] == 1
    failure = text[text.index("_ perfguard::saxpy[aarch64] _"):]
    assert re.search(r"saxpy\[aarch64\]: regression \+\d+\.\d\d % \(threshold 2\.00 %\)", failure), failure
    assert "changed statistics (baseline -> current):" in failure and "loads" in failure
    assert "Traceback" not in failure
    # where, as `perfguard check` says it: the saxpy loop (nest C), four times as often
    where = re.search(r"\nwhere: (.*)\n", failure)
    assert where and where.group(1).startswith("loop i of nest C in "), failure
    report = json.loads((pytester.path / "reports" / "perfguard.json").read_text())
    saxpy = next(r for r in report["results"] if r["kernel"] == "saxpy" and r["verdict"] == "regression")
    from perfguard.document.report import Result, from_json
    from perfguard.report.text import what_changed_most
    assert where.group(1) == what_changed_most(from_json(Result, saxpy, "perfguard.json"))
    assert report["summary"]["exit_code"] == 2 and report["summary"]["regression"] == 1  # 2: the orphan beats 1
    # The same slowdown passes the user's test, whose marker allows 10000 %.
    assert sorted(r["verdict"] for r in report["results"] if r["kernel"] == "saxpy") == ["regression", "unchanged"]


@pytest.mark.slow
def test_regression_fails_exactly_its_item_under_xdist(pytester, user_project):
    pytest.importorskip("xdist", reason="runs the project's pytest with -n 2, which needs pytest-xdist")
    assert run(pytester, "--perfguard-update").ret == 0
    user_project(2048)
    xdist = run(pytester, "--perfguard", "-n", "2")
    assert xdist.ret == 1 and outcomes(xdist) == REGRESSED, xdist.stdout.str()
    report = json.loads((pytester.path / "reports" / "perfguard.json").read_text())
    pairs = sorted((r["kernel"], r["target"]) for r in report["results"])
    # 3 items + 2 checks from user tests, each once: nothing lost, nothing duplicated across workers.
    assert pairs == sorted([("gemm_a", "x86_64"), ("gemm_a", "aarch64"), ("saxpy", "aarch64"),
                            ("saxpy", "aarch64"), ("adhoc_gemm", "x86_64")])


@pytest.mark.slow
def test_without_perfguard_nothing_is_collected_or_imported(pytester, user_project):
    result = run(pytester)
    assert result.ret == 0, result.stdout.str()
    assert outcomes(result) == {
        "test_user.py::test_plain_test_does_not_pay_for_perfguard": "PASSED",
        "test_user.py::test_saxpy_with_its_own_threshold": "SKIPPED",
        "test_user.py::test_an_ad_hoc_kernel": "SKIPPED",
    }
    assert "perfguard tests run with --perfguard" in result.stdout.str()
    assert not (pytester.path / "reports").exists()


@pytest.mark.slow
def test_filters_and_native_timing_with_pytest_benchmark(pytester, user_project, capsys):
    out = pytester.path / "bench.json"
    result = run(pytester, "--perfguard-native", "--perfguard-kernels", "gemm_a", "-k", "gemm_a",
                 f"--benchmark-json={out}", "--benchmark-max-time=0.02", "--benchmark-min-rounds=3")
    text = result.stdout.str()
    assert result.ret == 0, text
    assert outcomes(result) == {"perfguard::gemm_a[x86_64]": "PASSED", "perfguard::gemm_a[aarch64]": "SKIPPED"}
    assert "aarch64 is not this machine's ISA" in text
    bench = json.loads(out.read_text())["benchmarks"]
    assert len(bench) == 1 and bench[0]["fullname"] == "perfguard::gemm_a[x86_64]"
    info = bench[0]["extra_info"]
    assert (info["kernel"], info["target"], info["family"]) == ("gemm_a", "x86_64", "gemm")
    assert info["params"]["tile_m"] == 8 and info["group"] == "K=32,M=32,N=32,dtype=float32"
    assert info["stats"]["insts"] > 0 and info["machine"]["machine"] and bench[0]["stats"]["median"] > 0

    # The benchmark JSON is a calibration source: `perfguard calibrate ingest` turns it into dataset rows.
    from perfguard.cli import main
    from perfguard.predict.dataset import load_dataset

    assert main(["calibrate", "ingest", "--config", str(pytester.path / "perfguard.toml"), "--target", "x86_64",
                 "--family", "gemm", "--benchmark-json", str(out)]) == 0
    rows = load_dataset(pytester.path / "baselines/datasets/x86_64/gemm.json").rows
    assert len(rows) == 1 and rows[0].group == info["group"] and rows[0].params == info["params"]
    assert rows[0].native_s == bench[0]["stats"]["median"] and rows[0].stats.insts == info["stats"]["insts"]
    # the row knows its CPU beyond the model name; times from another CPU are not mixed in
    from perfguard.native import this_machine

    assert rows[0].machine["cpu_id"] == this_machine().cpu_id != ""
    doc = json.loads(out.read_text())
    doc["benchmarks"][0]["extra_info"]["machine"]["cpu_id"] = "AuthenticAMD cpu family 25 model 17 stepping 1"
    other = pytester.path / "other.json"
    other.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["calibrate", "ingest", "--config", str(pytester.path / "perfguard.toml"), "--target", "x86_64",
                 "--family", "gemm", "--benchmark-json", str(other)]) == 2
    assert re.search(r"timed on .*model 17 stepping 1: times from different CPUs do not mix", capsys.readouterr().err)


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["--perfguard", "--perfguard-kernels", "nope"], "perfguard: --perfguard-kernels: unknown kernel 'nope'"),
    (["--perfguard", "--perfguard-targets", "vax"], "perfguard: --perfguard-targets: unknown target 'vax' (known: "),
    (["--perfguard-kernels", "gemm_a"], "--perfguard-kernels needs --perfguard"),
    (["--perfguard-update", "--perfguard-native"], "cannot be combined"),
])
def test_usage_errors_are_one_line(pytester, user_project, args, needle):
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str()

