"""perfguard check --base REF: baselines come from REF's tree, so a PR cannot hide its own regression."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfguard.baselines.git_revision import GitBaselineStore
from perfguard.baselines.store import BaselineStore
from perfguard.errors import InputError
from perfguard.shells.cli import main
from tests.conftest import write_project
from tests.projects import GOOD, WORSE, commit_all, config_text, git, init_repo

TOML = config_text(["x86_64"])


@pytest.fixture(scope="module")
def pr_repo_made(tmp_path_factory, cache_dir):
    """A repository whose project lives in a subfolder; main has baselines; branch 'pr' regresses
    gemm_a and rewrites its baseline in the same commit. Made once: each test gets a copy."""
    root = tmp_path_factory.mktemp("pr-repo")
    config = write_project(root / "proj", TOML.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache_dir}"\n', 1))
    init_repo(root)
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    base = commit_all(root, "kernels and baselines")
    git(root, "checkout", "-q", "-b", "pr")
    config.write_text(config.read_text().replace(GOOD, WORSE))
    assert main(["baseline", "update", "--config", str(config), "-j", "1", "--kernels", "gemm_a"]) == 0
    head = commit_all(root, "faster gemm (honest)")
    return root, base, head


@pytest.fixture
def pr_repo(pr_repo_made, tmp_path):
    """A copy of the repository (its .git too) for one test to check, edit and commit in."""
    made, base, head = pr_repo_made
    root = tmp_path / "repo"
    shutil.copytree(made, root, symlinks=True)
    return root / "proj" / "perfguard.toml", base, head


def report(config: Path) -> dict:
    return json.loads((config.parent / "reports" / "perfguard.json").read_text())


@pytest.mark.slow
def test_pr_rewriting_its_own_baseline_is_caught_with_base(pr_repo, capsys):
    config, base, _ = pr_repo
    assert main(["check", "--config", str(config), "-j", "1"]) == 0  # the working tree hides it
    capsys.readouterr()

    assert main(["check", "--config", str(config), "-j", "1", "--base", "main"]) == 1
    out = capsys.readouterr().out
    assert f"baselines from main ({base[:12]})" in out
    data = report(config)
    verdicts = {r["kernel"]: r for r in data["results"]}
    assert verdicts["gemm_a"]["verdict"] == "regression" and verdicts["gemm_a"]["delta_pct"] > 2.0
    assert verdicts["gemm_b"]["verdict"] == "unchanged"
    assert data["base"] == {"ref": "main", "commit": base}
    # The working tree was not touched: the PR's rewritten baseline is still there.
    assert 'tile_m": 32' in (config.parent / "baselines" / "x86_64" / "gemm_a.json").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("ref", ["no-such-branch", "0123456789abcdef0123456789abcdef01234567", "HEAD~99"])
def test_unknown_ref_is_exit_2_in_one_line(pr_repo, capsys, ref):
    config, _, _ = pr_repo
    assert main(["check", "--config", str(config), "--base", ref]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"perfguard: error: --base {ref}: unknown git revision in {config.parent.parent}"]


def test_base_outside_a_repository_is_exit_2(project, capsys):
    config = project(TOML, name="norepo")
    assert main(["check", "--config", str(config), "--base", "main"]) == 2
    assert "is not in a git repository" in capsys.readouterr().err


@pytest.mark.slow
def test_git_store_reads_what_the_working_tree_store_reads(pr_repo):
    config, base, head = pr_repo
    folder = config.parent / "baselines"
    at_head = GitBaselineStore(folder, "HEAD")
    assert at_head.sha == head
    assert at_head.read("x86_64", "gemm_a") == BaselineStore(folder).read("x86_64", "gemm_a")
    assert at_head.read("x86_64", "missing") is None and at_head.read("riscv64", "gemm_a") is None
    at_base = GitBaselineStore(folder, base)
    assert at_base.read("x86_64", "gemm_a") != at_head.read("x86_64", "gemm_a")
    assert at_base.path("x86_64", "gemm_a") == f"{base} ({base[:12]}):proj/baselines/x86_64/gemm_a.json"
    # calibrated models: the working tree's files (read by predict.select), or the revision's
    assert BaselineStore(folder).models() is None and at_base.models() is at_base
    assert at_base.read_file("models/x86_64/gemm.json") is None
    assert at_base.read_file("x86_64/gemm_a.json")[1] == f"{base} ({base[:12]}):proj/baselines/x86_64/gemm_a.json"


@pytest.mark.slow
def test_corrupted_committed_baseline_names_the_revision(pr_repo):
    config, _, _ = pr_repo
    path = config.parent / "baselines" / "x86_64" / "gemm_b.json"
    path.write_text('{"schema": 1, "kernel": "gemm_b"')
    commit_all(config.parent.parent, "oops")
    with pytest.raises(InputError, match=r"HEAD \([0-9a-f]{12}\):proj/baselines/x86_64/gemm_b.json: corrupted"):
        GitBaselineStore(config.parent / "baselines", "HEAD").read("x86_64", "gemm_b")
