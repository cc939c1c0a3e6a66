"""CI security policy of action.yml and .github/workflows/, checked on the parsed YAML.

tests/shells/test_action.py runs the linters (actionlint, zizmor at the regular and pedantic
personas, the JSON schemas) and checks that every action is pinned to a commit. This file
states perfguard's own rules on top, as properties of every workflow present and future:

- nothing reaches a shell (or an inline github-script) through `${{ }}`: inputs, PR titles,
  branch names and step outputs go through `env:` and are quoted by the script;
- a workflow is denied every permission by default, and each job asks for what it needs;
- code from a pull request (a `pull_request` workflow) runs without secrets and without any
  write permission; `pull_request_target` is not used at all;
- a job that can write (comments, branches, pull requests) runs no code from the repository
  checkout and no shell step, and a `workflow_run` job never checks anything out: it only handles
  data (a read-only one may check that data in a shell step);
- a checkout never leaves its token in .git/config;
- every job that builds or simulates kernels runs in the pinned toolchain: a `container:` whose
  image is pinned by digest, the Dockerfile's Debian 12 base (scripts/setup.sh then installs the
  package versions of scripts/toolchain.lock), except a self-hosted leg for an ISA that image
  does not exist for, which checks its runner first (scripts/check-runner.sh).

tests/shells/test_ci_rules.py checks how the jobs would run: shells, caches, apt sources, sudo.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "action.yml", *sorted((REPO / ".github" / "workflows").glob("*.y*ml"))]
WORKFLOWS = [p for p in FILES if p.parent.name == "workflows"]


def load(path: Path) -> dict:
    document = yaml.safe_load(path.read_text())
    if True in document:  # YAML 1.1 reads the key `on` as a boolean
        document["on"] = document.pop(True)
    return document


def walk(node: Any, where: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, key, value) for every mapping entry in the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{where}.{key}", key, value
            yield from walk(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{where}[{i}]")


def steps(document: dict) -> Iterator[tuple[str, dict, dict]]:
    """(job name, job, step) for every step; a composite action is one job named 'action'."""
    if "runs" in document:
        for step in document["runs"].get("steps", []):
            yield "action", document["runs"], step
    for name, job in (document.get("jobs") or {}).items():
        for step in job.get("steps", []):
            yield name, job, step


def triggers(document: dict) -> set[str]:
    on = document.get("on") or {}
    if isinstance(on, str):
        return {on}
    return set(on)


def writes(job: dict) -> list[str]:
    permissions = job.get("permissions")
    if permissions == "write-all":
        return ["write-all"]
    if isinstance(permissions, dict):
        return sorted(scope for scope, level in permissions.items() if level == "write")
    return []


def test_files_exist():
    assert FILES[0].is_file() and WORKFLOWS, FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_expression_reaches_a_script(path):
    for where, key, value in walk(load(path)):
        if key == "run" and isinstance(value, str):
            assert "${{" not in value, f"{path.name}{where}: use env: and a quoted variable instead"
    for job, _, step in steps(load(path)):
        if str(step.get("uses", "")).startswith("actions/github-script@"):
            script = (step.get("with") or {}).get("script", "")
            assert "${{" not in script, f"{path.name}: job {job}: github-script reads process.env instead"
        assert "${{" not in str(step.get("shell", "")), f"{path.name}: job {job}: shell"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_permissions_are_denied_by_default_and_asked_per_job(path):
    document = load(path)
    assert document.get("permissions") == {}, f"{path.name}: top-level permissions must be {{}}"
    for name, job in document["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} must say which permissions it needs"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_pull_request_code_gets_no_secret_and_no_write(path):
    document = load(path)
    assert "pull_request_target" not in triggers(document), f"{path.name}: pull_request_target runs PR code privileged"
    if "pull_request" not in triggers(document):
        return
    text = path.read_text()
    assert "secrets." not in text, f"{path.name}: a pull_request workflow must not use secrets"
    for name, job in document["jobs"].items():
        assert writes(job) == [], f"{path.name}: job {name} runs pull-request code with {writes(job)}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_privileged_jobs_run_no_repository_code(path):
    document = load(path)
    data_only = "workflow_run" in triggers(document)  # runs with the base repository's token
    for name, job in document["jobs"].items():
        if not writes(job) and not data_only:
            continue
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            # A read-only job of a workflow_run workflow may check the data in a shell step (the
            # script is the default branch's); a job that can write runs none.
            assert "run" not in step or not writes(job), f"{path.name}: job {name} can write and runs a shell step"
            assert not uses.startswith("./"), f"{path.name}: job {name} can write and runs a local action"
            if data_only:
                assert not uses.startswith("actions/checkout@"), f"{path.name}: job {name} checks out code"
            ref = str((step.get("with") or {}).get("ref", ""))
            assert "head" not in ref, f"{path.name}: job {name} checks out a pull request's head"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checkout_never_keeps_its_token(path):
    for job, _, step in steps(load(path)):
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert (step.get("with") or {}).get("persist-credentials") is False, f"{path.name}: job {job}"


def test_action_inputs_reach_scripts_through_env_only():
    """Every input the composite action declares is read by some step, and only through env:."""
    document = load(REPO / "action.yml")
    used_in_env = set()
    for _, _, step in steps(document):
        for value in (step.get("env") or {}).values():
            used_in_env.update(name for name in document["inputs"] if f"inputs.{name}" in str(value))
        assert "inputs." not in str(step.get("run", "")), step.get("name")
    assert used_in_env, "the action passes no input to its scripts"


# A step that builds or simulates kernels: the local action (except when it only merges reports),
# the set-up or test scripts, or a perfguard command that measures.
_MEASURES = re.compile(
    r"scripts/(setup|test)\.sh|perfguard(\.action)? +(check|calibrate|baseline|tune|bisect|recalibrate)"
)


def measuring_jobs(document: dict) -> list[str]:
    names = []
    for name, job in (document.get("jobs") or {}).items():
        for step in job.get("steps", []):
            local = str(step.get("uses", "")).startswith("./") and not (step.get("with") or {}).get("merge")
            if local or _MEASURES.search(str(step.get("run", ""))):
                names.append(name)
                break
    return names


def dockerfile_base() -> str:
    match = re.search(r"^FROM\s+(\S+)", (REPO / "Dockerfile").read_text(), re.M)
    assert match, "Dockerfile: no FROM line"
    return match.group(1)


def test_the_dockerfile_base_is_debian_12_pinned_by_digest():
    assert re.fullmatch(r"debian:(12|bookworm)@sha256:[0-9a-f]{64}", dockerfile_base()), dockerfile_base()


def self_hosted_and_checked(job: dict) -> bool:
    """A leg on a self-hosted runner (named by a repository variable) for an ISA no pinned image
    exists for, whose requirements scripts/check-runner.sh checks before scripts/setup.sh runs."""
    runs = [str(step.get("run", "")) for step in job.get("steps", [])]
    check = next((i for i, r in enumerate(runs) if "scripts/check-runner.sh" in r), None)
    setup = next((i for i, r in enumerate(runs) if "scripts/setup.sh" in r), None)
    return "vars." in str(job.get("runs-on")) and check is not None and setup is not None and check < setup


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_jobs_that_build_or_simulate_kernels_run_in_the_pinned_toolchain(path):
    document = load(path)
    for name in measuring_jobs(document):
        if self_hosted_and_checked(document["jobs"][name]):
            continue
        container = document["jobs"][name].get("container")
        image = container.get("image") if isinstance(container, dict) else container
        assert image, f"{path.name}: job {name} builds or simulates kernels outside the pinned container"
        assert re.search(r"@sha256:[0-9a-f]{64}$", str(image)), (
            f"{path.name}: job {name}: {image} is not pinned by digest"
        )
        assert image == dockerfile_base(), f"{path.name}: job {name}: {image} is not the Dockerfile's base"


def test_the_measuring_jobs_are_found():
    """The rule above must not pass by finding nothing: these jobs build or simulate kernels."""
    found = {(path.name, name) for path in WORKFLOWS for name in measuring_jobs(load(path))}
    assert {
        ("perfguard.yml", "check"),
        ("tests.yml", "test"),
        ("recalibrate.yml", "calibrate"),
        ("recalibrate.yml", "calibrate-riscv64"),
        ("gem5-crosscheck.yml", "crosscheck"),
    } <= found, found
    assert ("perfguard.yml", "merge") not in found  # only merges reports
