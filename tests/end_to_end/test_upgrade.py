"""Upgrading perfguard keeps the guard on (issue 40 item 1): baselines recorded by an older perfguard
(harness 3, its QEMU plugin: other counts) are not compared with this perfguard's measurements;
each result is judged against its base revision measured again with this toolchain.

A real git repository in a temp dir: the project's kernels committed, baselines recorded and
committed, then turned into what perfguard 0.1.0 at 81ac9d1 recorded for them (its toolchain
strings, and a block profile that ran every other block: counts the current harness does not
reproduce). Without an edit the check passes and says what to re-baseline; with a schedule edit it
fails with the same change that baselines recorded by this perfguard give.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfguard import __version__
from perfguard.shells.cli import main
from tests.projects import GOOD, WORSE, commit_all, config_text, git, init_repo, with_cache

TARGET = "x86_64"
OLD = {"harness": "harness 3, template 9c05e39152cb, build recipe 1", "perfguard": "0.1.0"}  # 81ac9d1's
OLD_PLUGIN = "plugin=d0bf293e9b8831be07a5"


def as_recorded_by_0_1_0(path: Path) -> None:
    """The baseline as perfguard 0.1.0 (harness 3) would have written it for the same commit."""
    data = json.loads(path.read_text())
    tools = data["toolchain"]
    tools.update(OLD)
    tools["simulator"] = "; ".join(
        OLD_PLUGIN if part.startswith("plugin=") else part for part in tools["simulator"].split("; ")
    )
    kept = data["stats"]["blocks"]["blocks"][::2]  # another harness, other counts
    data["stats"]["blocks"]["blocks"] = kept
    data["stats"]["insts"] = sum(row[2] * row[3] for row in kept)
    data.update(schema=3, perfguard_version="0.1.0")
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory, cache_dir):
    """(repository, the commit the baselines were measured at, the commit holding 0.1.0's baselines,
    the baselines as this perfguard records them at that commit). Each test works on a copy."""
    root = tmp_path_factory.mktemp("upgrade")
    init_repo(root)
    config = root / "perfguard.toml"
    config.write_text(with_cache(config_text([TARGET]), cache_dir))
    (root / ".gitignore").write_text("reports/\n")
    measured_at = commit_all(root, "kernels")
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    current = {p.name: p.read_text() for p in (root / "baselines" / TARGET).glob("*.json")}
    assert {json.loads(t)["commit"] for t in current.values()} == {measured_at}
    for path in (root / "baselines" / TARGET).glob("*.json"):
        as_recorded_by_0_1_0(path)
    committed = commit_all(root, "baselines (perfguard 0.1.0)")
    return root, measured_at, committed, current


@pytest.fixture
def repo(upgraded, tmp_path):
    root, measured_at, committed, current = upgraded
    copy = tmp_path / "repo"
    shutil.copytree(root, copy, symlinks=True)
    return copy / "perfguard.toml", measured_at, committed, current


def check(config: Path, capsys, *args: str) -> tuple[int, str, dict]:
    code = main(["check", "--config", str(config), "-j", "1", *args])
    out = " ".join(capsys.readouterr().out.split())
    return code, out, json.loads((config.parent / "reports" / "perfguard.json").read_text())


HEADLINE = (
    f"perfguard 0.1.0 \u2192 {__version__} and its toolchain differ from the baselines' (harness 3, template "
    f"9c05e39152cb \u2192 harness 4, template "
)


@pytest.mark.slow
def test_after_the_upgrade_without_an_edit_nothing_regresses_and_the_headline_says_to_rebaseline(repo, capsys):
    config, measured_at, _, _ = repo
    code, out, report = check(config, capsys)
    assert code == 0, out
    assert {(r["kernel"], r["verdict"]) for r in report["results"]} == {
        ("gemm_a", "unchanged"),
        ("gemm_b", "unchanged"),
    }
    for r in report["results"]:
        assert r["base_remeasured"] == measured_at and r["baseline_commit"] == measured_at
        assert r["delta_pct"] == 0.0  # the base measured again is this very code under this very toolchain
        assert set(r["toolchain_changed"]) == {"harness", "perfguard", "simulator"}
        assert r["note"].startswith(f"judged against {measured_at[:12]} measured again with this toolchain")
    assert report["summary"]["remeasured"] == 2 and report["summary"]["toolchain"] == 0
    assert f"measured the base revision {measured_at[:12]} again with this toolchain" in out
    assert f"no regressions; {HEADLINE}" in out
    assert (
        "2 kernel(s) judged against their base revision measured again with this toolchain; re-baseline with: "
        f"perfguard baseline update --targets {TARGET}"
    ) in out


@pytest.mark.slow
def test_after_the_upgrade_a_schedule_regression_fails_as_against_current_baselines(repo, capsys):
    config, measured_at, _, current = repo
    config.write_text(config.read_text().replace(GOOD, WORSE))  # the edit, beside the upgrade
    code, out, report = check(config, capsys)
    assert code == 1, out
    by_kernel = {r["kernel"]: r for r in report["results"]}
    regressed = by_kernel["gemm_a"]
    assert regressed["verdict"] == "regression" and regressed["base_remeasured"] == measured_at
    assert by_kernel["gemm_b"]["verdict"] == "unchanged"
    assert "1 regression(s) found" in out and "gemm_a" in out
    assert HEADLINE in out

    # The same change as judged against baselines this perfguard recorded at that commit, to the last bit.
    for name, text in current.items():
        (config.parent / "baselines" / TARGET / name).write_text(text)
    code, out, fresh = check(config, capsys)
    assert code == 1 and HEADLINE not in out
    against = {r["kernel"]: r for r in fresh["results"]}["gemm_a"]
    assert against["verdict"] == "regression" and "base_remeasured" not in against
    assert regressed["delta_pct"] == against["delta_pct"] > regressed["threshold_pct"]


@pytest.mark.slow
def test_a_pull_request_is_judged_against_its_merge_base_measured_again(repo, capsys):
    config, _, committed, _ = repo
    root = config.parent
    git(root, "checkout", "-q", "-b", "pr")
    config.write_text(config.read_text().replace(GOOD, WORSE))
    commit_all(root, "slower gemm")
    code, out, report = check(config, capsys, "--base", "main")
    assert code == 1, out
    regressed = {r["kernel"]: r for r in report["results"]}["gemm_a"]
    assert regressed["verdict"] == "regression" and regressed["base_remeasured"] == committed


@pytest.mark.slow
def test_a_base_that_cannot_be_measured_again_is_an_error_unless_allowed(repo, capsys):
    config, _, _, _ = repo
    gone = "0123456789abcdef0123456789abcdef01234567"
    for path in (config.parent / "baselines" / TARGET).glob("*.json"):
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "commit": gone}))
    code, out, report = check(config, capsys)
    assert code == 3, out
    by_kernel = {r["kernel"]: r for r in report["results"]}
    # the 0.1.0 baselines ran half their blocks: both moved, so neither can pass unjudged
    assert by_kernel["gemm_a"]["verdict"] == by_kernel["gemm_b"]["verdict"] == "error"
    assert by_kernel["gemm_a"]["error"] == (
        f"gemm_a[{TARGET}]: not judged: its baseline was measured with another toolchain (harness, perfguard, "
        f"simulator) and the base revision {gone[:12]} is not in the history of {config.parent.resolve()} "
        f"(rewritten, or never fetched); re-baseline with: perfguard baseline update --targets {TARGET} (or "
        f"allow_unjudged = true in perfguard.toml)"
    )
    assert f"2 kernel(s) could not be checked; {HEADLINE}" in out
    assert "the errors say which kernels could not be judged; re-baseline with" in out

    config.write_text(config.read_text().replace("[perfguard]\n", "[perfguard]\nallow_unjudged = true\n", 1))
    code, out, report = check(config, capsys)
    assert code == 0, out
    for moved in report["results"]:
        assert moved["verdict"] == "toolchain" and moved["note"].endswith("(allow_unjudged = true)")
    assert "no regressions among the judged kernels" in out and "2 kernel(s) moved but are not judged" in out
