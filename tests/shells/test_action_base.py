"""The Action's base revision on a shallow checkout (what actions/checkout gives by default), with
real git: a bare repository in a temp dir standing for GitHub, a `git clone --depth 1` of the pull
request's branch standing for the runner's checkout. The merge-base is found by fetching the base
and unshallowing; a base that cannot be had is one line, exit 2. And an invalid `mode` input.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perfguard.shells import action
from perfguard.shells.action import choose_base, resolve_base
from perfguard.shells.runner import ActionError
from tests.projects import commit_all, git, init_repo


@pytest.fixture(scope="module")
def remote(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """main: A - B - C; feature: B - D (the pull request); orphan: an unrelated root."""
    work = tmp_path_factory.mktemp("action-base") / "work"
    work.mkdir()
    init_repo(work)
    shas = {}
    for name in ("A", "B"):
        (work / "file.txt").write_text(f"{name}\n")
        shas[name] = commit_all(work, name)
    git(work, "checkout", "-q", "-b", "feature")
    (work / "feature.txt").write_text("D\n")
    shas["D"] = commit_all(work, "D")
    git(work, "checkout", "-q", "main")
    (work / "file.txt").write_text("C\n")
    shas["C"] = commit_all(work, "C")
    git(work, "checkout", "-q", "--orphan", "orphan")
    (work / "file.txt").write_text("unrelated\n")
    shas["O"] = commit_all(work, "O")
    bare = work.parent / "origin.git"
    git(work.parent, "clone", "-q", "--bare", str(work), str(bare))
    return bare, shas


@pytest.fixture
def checkout(remote, tmp_path, monkeypatch) -> Path:
    """The runner's checkout of the pull request: one commit deep, one branch."""
    bare, shas = remote
    clone = tmp_path / "checkout"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{bare}", str(clone)],
        check=True,
        capture_output=True,
    )
    assert git(clone, "rev-parse", "--is-shallow-repository") == "true"
    assert git(clone, "rev-parse", "HEAD") == shas["D"]
    assert subprocess.run(["git", "cat-file", "-e", shas["B"]], cwd=clone, capture_output=True).returncode != 0
    monkeypatch.chdir(clone)
    for name in ("INPUT_BASE", "INPUT_MODE", "INPUT_SHARD", "INPUT_MERGE", "GITHUB_EVENT_PATH", "GITHUB_EVENT_NAME"):
        monkeypatch.delenv(name, raising=False)
    return clone


def test_a_branch_the_shallow_checkout_lacks_is_fetched_and_the_history_unshallowed(checkout, remote):
    _, shas = remote
    assert resolve_base("main") == shas["B"]  # the fork point, not main's tip C
    assert git(checkout, "rev-parse", "--is-shallow-repository") == "false"
    assert git(checkout, "rev-parse", "HEAD") == shas["D"]  # the checkout itself is untouched


def test_a_pull_requests_base_sha_the_checkout_lacks_is_fetched_by_sha(checkout, remote, tmp_path, monkeypatch):
    _, shas = remote
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7, "base": {"ref": "main", "sha": shas["C"]}}}))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    assert choose_base(action.event_payload()) == ("main", shas["B"])


def test_a_base_already_in_the_checkout_needs_no_fetch(checkout, remote):
    _, shas = remote
    assert resolve_base(shas["D"]) == shas["D"]  # HEAD itself
    assert git(checkout, "rev-parse", "--is-shallow-repository") == "true"  # nothing was fetched


@pytest.mark.parametrize(
    "ref, message",
    [
        ("no-such-branch", "base 'no-such-branch': unknown git revision (check out with fetch-depth: 0)"),
        ("-c", "base '-c': not a git revision"),
        ("--upload-pack=touch", "base '--upload-pack=touch': not a git revision"),
        ("orphan", "base 'orphan': no merge-base with HEAD (check out with fetch-depth: 0)"),
    ],
)
def test_a_base_that_cannot_be_had_is_one_line(checkout, ref, message):
    with pytest.raises(ActionError) as info:
        resolve_base(ref)
    assert str(info.value) == message


def test_base_none_compares_with_the_working_tree_and_auto_outside_a_pull_request_too(checkout, monkeypatch):
    monkeypatch.setenv("INPUT_BASE", "none")
    assert choose_base({}) == (None, None)
    monkeypatch.setenv("INPUT_BASE", "auto")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    assert choose_base({"pull_request": {"base": {"sha": "0" * 40}}}) == (None, None)


@pytest.mark.parametrize("value", ["bogus", "check,compare"])
def test_an_invalid_mode_input_is_an_annotated_one_line_error_exit_2(checkout, tmp_path, monkeypatch, capsys, value):
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "runner"))
    monkeypatch.setenv("INPUT_MODE", value)
    assert action.main(["run"]) == 2
    captured = capsys.readouterr()
    message = f"input 'mode' must be check or compare, got {value!r}"
    assert captured.err == f"perfguard action: error: {message}\n"
    assert captured.out.splitlines()[-1] == f"::error title=perfguard action::{message}"


def test_mode_is_read_case_blind_and_defaults_to_check(checkout, monkeypatch):
    assert action.mode() == "check"
    monkeypatch.setenv("INPUT_MODE", " Compare ")
    assert action.mode() == "compare"
