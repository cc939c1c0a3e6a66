"""One edit, one verdict: check, compare, bisect and the pytest plugin judge the same change through
judge.decide with the kernel's resolved judgement, so a project that judges with a non-default model,
a per-metric limit and `gate = "upper"` gets the same answer from each of them.

The edit (gemm_a from 8x16x8 vectorised tiles to whole-matrix scalar ones) moves the analytical
model's time by about +24 %, under the 50 % threshold: only the `insts` limit (1 %) makes it a
regression. A command that judged by itself (bisect did: no limits, no `model` key) calls it good.
Real git repository, real TVM builds and QEMU runs (the session's cache)."""

from __future__ import annotations

import json

import pytest

from perfguard.config import load_config
from perfguard.shells.cli import main
from perfguard.shells.pytest_cases import CaseRunner
from tests.projects import GOOD, WORSE, commit_all, kernel_table, project_repository, with_cache

pytestmark = pytest.mark.slow  # real revisions, measured

JUDGING = 'threshold = 50.0\nmodel = "analytical"\ngate = "upper"\nlimits = { insts = 1.0 }\n'


def toml(params: str) -> str:
    return (
        '[perfguard]\ntargets = ["x86_64"]\n'
        + JUDGING
        + kernel_table("gemm_a", "perfguard.kernels.gemm:gemm", params, "gemm")
    )


@pytest.fixture(scope="module")
def edited(tmp_path_factory, cache_dir):
    """(config, base commit with gemm_a's baseline, head commit with the slower gemm_a)."""
    root = tmp_path_factory.mktemp("one-verdict")
    config = project_repository(root, with_cache(toml(GOOD), cache_dir))
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    base = commit_all(root, "gemm_a and its baseline")
    config.write_text(with_cache(toml(WORSE), cache_dir))
    head = commit_all(root, "whole-matrix scalar tiles")
    return config, base, head


def _result(config) -> dict:
    data = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    (found,) = [r for r in data["results"] if r["kernel"] == "gemm_a"]
    return found


def test_check_compare_bisect_and_pytest_give_one_verdict(edited, tmp_path, capsys):
    config, base, head = edited
    assert main(["check", "--config", str(config), "-j", "1"]) == 1
    checked = _result(config)
    assert checked["verdict"] == "regression" and "insts" in checked["limit_breaches"], checked
    assert checked["model_id"].startswith("analytical")  # the config's model, not the default pipeline one
    assert 2.0 < checked["delta_pct"] < 50.0  # the time alone would pass: the limit decides

    assert main(["compare", base, head, "--config", str(config), "-j", "1"]) == 1
    compared = _result(config)
    assert (compared["verdict"], compared["model_id"], compared["limit_breaches"].keys()) == (
        checked["verdict"],
        checked["model_id"],
        checked["limit_breaches"].keys(),
    )
    assert compared["delta_pct"] == pytest.approx(checked["delta_pct"], rel=1e-12)

    out = tmp_path / "bisect.json"
    assert (
        main(
            [
                "bisect",
                "--good",
                base,
                "--bad",
                head,
                "--kernel",
                "gemm_a",
                "--target",
                "x86_64",
                "--config",
                str(config),
                "-j",
                "1",
                "--json",
                str(out),
            ]
        )
        == 1
    )
    bisected = json.loads(out.read_text())
    assert bisected["outcome"] == "found" and bisected["first_bad"]["commit"] == head
    assert bisected["first_bad"]["delta_pct"] == pytest.approx(checked["delta_pct"], rel=1e-12)

    case = CaseRunner(load_config(config)).run("gemm_a", "x86_64")  # what perfguard_check(...) returns
    assert (case.verdict, case.exit_code) == ("regression", 1)
    assert case.delta_pct == pytest.approx(checked["delta_pct"], rel=1e-12)
    capsys.readouterr()


def test_a_tests_own_threshold_wins_over_the_command_lines_and_the_kernels(edited):
    config, _, _ = edited
    runner = CaseRunner(load_config(config), threshold=7.5)
    assert runner.run("gemm_a", "x86_64").threshold_pct == 7.5  # the command line's over the config's 50
    assert runner.run("gemm_a", "x86_64", threshold=3.0).threshold_pct == 3.0  # the test's over both
