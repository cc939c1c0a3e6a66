"""The GitHub Action and the workflows: linted (each linter with a negative control), validated, and
action.yml's steps run locally as GitHub runs a composite action (tests/shells/workflow_runner.py),
with a real pull_request payload and the marketplace actions replaced by what they leave on disk."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml

from perfguard.shells.action import on_github
from perfguard.shells.runner import annotation
from tests.conftest import REPO
from tests.projects import commit_all, config_text, init_repo, pr_event
from tests.shells.workflow_runner import Runner, read_file_commands, venv_of_this_interpreter

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
ACTION = REPO / "action.yml"

TOML = config_text(["x86_64"])


# -- linters --------------------------------------------------------------------------------------


def tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return path


def run_tool(*cmd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=300)


def test_workflows_exist():
    names = {p.name for p in WORKFLOWS}
    assert {"perfguard.yml", "perfguard-comment.yml", "recalibrate.yml", "tests.yml"} <= names


def test_actionlint_is_clean():
    proc = run_tool(tool("actionlint"), "-color=false", *map(str, WORKFLOWS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("persona", ["regular", "pedantic"])
def test_zizmor_is_clean_offline(persona):
    proc = run_tool(
        tool("zizmor"),
        "--offline",
        "--no-progress",
        f"--persona={persona}",
        "--format=plain",
        str(ACTION),
        *map(str, WORKFLOWS),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# A workflow with known problems: a pull request's title interpolated into a script, an action by
# a movable tag, a step output of a step that does not exist.
KNOWN_BAD = """name: bad
on: pull_request
permissions: {}
jobs:
  x:
    runs-on: ubuntu-24.04
    permissions: {}
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
      - run: echo "${{ steps.nope.outputs.value }}"
"""


def test_actionlint_fails_a_workflow_with_known_problems(tmp_path):
    """The negative control: the linter the suite relies on does fail (and says why)."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(KNOWN_BAD)
    proc = run_tool(tool("actionlint"), "-color=false", str(bad))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert '"github.event.pull_request.title" is potentially untrusted' in proc.stdout
    assert 'property "nope" is not defined' in proc.stdout


def test_zizmor_fails_a_workflow_with_known_problems(tmp_path):
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(KNOWN_BAD)
    proc = run_tool(tool("zizmor"), "--offline", "--no-progress", "--persona=regular", "--format=plain", str(bad))
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "template-injection" in proc.stdout and "unpinned-uses" in proc.stdout, proc.stdout


@pytest.mark.parametrize("schema, files", [("vendor.github-workflows", WORKFLOWS), ("vendor.github-actions", [ACTION])])
def test_schemas_validate(schema, files):
    proc = run_tool(tool("check-jsonschema"), "--builtin-schema", schema, *map(str, files))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# Negative controls: the same linters, same options, on files with the defects they are run to
# catch, so that a clean answer above means clean files and not a linter that saw nothing.
INSECURE_WORKFLOW = """\
name: insecure
on: pull_request_target
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
"""


def test_actionlint_catches_an_untrusted_expression_in_a_script(tmp_path):
    path = tmp_path / "insecure.yml"
    path.write_text(INSECURE_WORKFLOW.replace("    runs-on:", "    needs: missing\n    runs-on:"))
    proc = run_tool(tool("actionlint"), "-color=false", str(path))
    assert proc.returncode == 1
    assert '"github.event.pull_request.title" is potentially untrusted' in proc.stdout
    assert 'job "build" needs job "missing" which does not exist' in proc.stdout


@pytest.mark.parametrize("persona", ["regular", "pedantic"])
def test_zizmor_catches_template_injection_an_unpinned_action_and_a_dangerous_trigger(tmp_path, persona):
    path = tmp_path / "insecure.yml"
    path.write_text(INSECURE_WORKFLOW)
    proc = run_tool(tool("zizmor"), "--offline", "--no-progress", f"--persona={persona}", "--format=plain", str(path))
    assert proc.returncode != 0
    for audit in ("template-injection", "unpinned-uses", "dangerous-triggers"):
        assert f"error[{audit}]" in proc.stdout, audit


@pytest.mark.parametrize(
    "schema, text, message",
    [
        (
            "vendor.github-workflows",
            INSECURE_WORKFLOW.replace("    runs-on:", "    timeout-minutes: soon\n    runs-on:"),
            "'soon' is not of type 'number'",
        ),
        (
            "vendor.github-actions",
            "name: x\ndescription: y\nruns:\n  using: composite\n  step: []\n",
            "'steps' is a required property",
        ),
    ],
)
def test_the_schemas_catch_a_file_out_of_shape(tmp_path, schema, text, message):
    path = tmp_path / "bad.yml"
    path.write_text(text)
    proc = run_tool(tool("check-jsonschema"), "--verbose", "--builtin-schema", schema, str(path))
    assert proc.returncode == 1 and message in proc.stdout, proc.stdout


def test_every_action_is_pinned_to_a_full_commit_sha():
    for path in [ACTION, *WORKFLOWS]:
        for ref in re.findall(r"uses:\s*([^\s#]+)", path.read_text()):
            if ref.startswith("./"):
                continue
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{path.name}: {ref}"


def test_no_expression_is_interpolated_into_a_script():
    for path in [ACTION, *WORKFLOWS]:
        document = yaml.safe_load(path.read_text())
        jobs = document.get("jobs", {"action": {"steps": document.get("runs", {}).get("steps", [])}})
        for job in jobs.values():
            for step in job.get("steps", []):
                assert "${{" not in step.get("run", ""), f"{path.name}: {step.get('name')}"


# -- the action's steps, run locally ---------------------------------------------------------------


class LocalRunner:
    """action.yml as the one step of a job, run by tests/shells/workflow_runner.py (the install step
    replaced by the venv it leaves), one action after another on the same machine."""

    def __init__(self, workspace: Path, temp: Path, event: dict, event_name: str = "pull_request"):
        self.runner = Runner(
            workspace, temp, event_name=event_name, event=event, replaced={"setup": venv_of_this_interpreter("VENV")}
        )
        self.summary, self.log = "", []

    def run_action(self, with_: dict[str, str]) -> tuple[int, dict, dict]:
        """(exit code of the check step, the action's outputs, every step's result by name)."""
        result = self.runner.run_action(REPO, {"python-version": "system", **with_})
        self.log.append(result.log)
        self.summary += result.summary
        found = re.search(r"\[exit (\d+)\]$", result.step("Check kernels").log)
        return int(found.group(1)) if found else -1, result.outputs, {step.name: step for step in result.steps}


@pytest.fixture
def pr_workspace(measured_pull_request, tmp_path):
    """A copy of the session's pull request (tests/shells/conftest.py): main holds the baselines; the
    PR branch makes gemm_a slower and rewrites its baseline."""
    pr = measured_pull_request.copy(tmp_path / "ws")
    temp = tmp_path / "runner"
    temp.mkdir()
    return pr.root, temp, pr_event(17, "main", pr.base, pr.head)


@pytest.mark.slow
def test_action_on_a_pull_request_that_regresses_one_kernel(pr_workspace):
    workspace, temp, event = pr_workspace
    runner = LocalRunner(workspace, temp, event)
    code, outputs, used = runner.run_action({"targets": "x86_64"})
    log = "\n".join(runner.log)
    assert code == 1, log  # fail-on-regression defaults to true

    assert outputs["verdict"] == "regression" and outputs["regressions"] == "1", outputs
    report_dir = Path(outputs["report"])
    assert report_dir == temp / "runner-temp" / "perfguard" / "targets-x86_64"
    data = json.loads((report_dir / "perfguard.json").read_text())
    assert data["base"]["commit"] == event["pull_request"]["base"]["sha"]  # the merge-base, not the PR's baselines
    assert {(r["kernel"], r["verdict"]) for r in data["results"]} == {("gemm_a", "regression"), ("gemm_b", "unchanged")}
    assert (report_dir / "index.html").is_file()

    line = 1 + (workspace / "perfguard.toml").read_text().splitlines().index('name = "gemm_a"')
    errors = [x for x in log.splitlines() if x.startswith("::error")]
    assert len(errors) == 1, log
    assert errors[0].startswith(
        f"::error file=perfguard.toml,line={line},title=perfguard regression%3A gemm_a[x86_64]::gemm_a[x86_64] is +"
    ), errors[0]

    summary = runner.summary
    assert "gemm" in summary and "regression" in summary

    comment_dir = Path(outputs["report"]) / "comment"
    assert (comment_dir / "pr-number").read_text().strip() == "17"
    body = (comment_dir / "comment.md").read_text()
    run = "https://github.com/octo/kernels/actions/runs/4242"
    # summary.md's links into the report folder lead to the run (its artifact holds the pages) on GitHub
    assert "](kernels/gemm_a.html#t-x86_64)" in (report_dir / "summary.md").read_text()
    assert f"**[gemm\\_a]({run})**" in body and "](kernels/" not in body and "](kernels/" not in summary
    with mock.patch.dict(
        os.environ,
        {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "octo/kernels", "GITHUB_RUN_ID": "4242"},
    ):
        expected = on_github((report_dir / "summary.md").read_text())
    assert body.startswith(expected.rstrip()) and "regression" in body

    # The red check still uploads its report and comment, and saves its caches for the next run.
    assert outputs["artifact-name"] == "perfguard-report-targets-x86_64"
    artifacts = runner.runner.store / "artifacts"
    assert (artifacts / "perfguard-report-targets-x86_64" / "perfguard.json").is_file()
    assert (artifacts / "perfguard-comment" / "pr-number").read_text().strip() == "17"
    assert used["Save the perfguard environment"].outcome == "success"
    # The save runs after the red check (this project keeps its cache where its config's cache_dir
    # says, so the action's cache folder stays empty and actions/cache/save warns, as documented).
    saved = used["Save the build and simulation cache (also after a regression or an error)"]
    assert saved.outcome == "success" and "no cache saved" in saved.log, saved
    assert used["Build gem5 where no cached build was restored (about an hour per ISA on 2 cores)"].outcome == "skipped"


@pytest.mark.slow
def test_action_shards_then_merge_give_one_verdict(pr_workspace):
    workspace, temp, event = pr_workspace
    runner = LocalRunner(workspace, temp, event)
    for i in (1, 2):
        code, outputs, _ = runner.run_action({"shard": f"{i}/2", "fail-on-regression": "false", "comment": "false"})
        assert code == 0, "\n".join(runner.log)
        assert outputs["artifact-name"] == f"perfguard-report-shard-{i}-of-2"
        assert not (Path(outputs["report"]) / "comment").exists()
    code, outputs, used = runner.run_action({"merge": str(temp / "runner-temp" / "perfguard")})
    assert code == 1, "\n".join(runner.log)
    merged = json.loads((Path(outputs["report"]) / "perfguard.json").read_text())
    assert len(merged["results"]) == 2 and len(merged["merged_from"]) == 2  # one kernel from each shard
    verdicts = {(r["kernel"], r["target"]): r["verdict"] for r in merged["results"]}
    assert verdicts[("gemm_a", "x86_64")] == "regression" and verdicts[("gemm_b", "x86_64")] == "unchanged"
    assert outputs["verdict"] == "regression"
    assert outputs["regressions"] == str(list(verdicts.values()).count("regression"))
    assert (Path(outputs["report"]) / "comment" / "pr-number").read_text().strip() == "17"


@pytest.mark.slow
def test_action_without_a_pull_request_compares_with_the_working_tree(pr_workspace):
    workspace, temp, _ = pr_workspace
    runner = LocalRunner(workspace, temp, {"ref": "refs/heads/faster-gemm"}, event_name="push")
    code, outputs, _ = runner.run_action({"targets": "x86_64"})
    assert code == 0, "\n".join(runner.log)
    assert outputs["verdict"] == "pass" and outputs["regressions"] == "0"
    assert not (Path(outputs["report"]) / "comment").exists()


@pytest.mark.slow
def test_action_bad_input_is_one_annotated_error(pr_workspace):
    workspace, temp, event = pr_workspace
    runner = LocalRunner(workspace, temp, event)
    code, outputs, _ = runner.run_action({"base": "no-such-branch"})
    assert code == 2
    assert "::error title=perfguard action::base 'no-such-branch': unknown git revision" in "\n".join(runner.log)
    code, outputs, _ = runner.run_action({"base": "none", "targets": "vax"})
    assert code == 2 and outputs["verdict"] == "error", outputs


def test_keys_need_only_the_standard_library(tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "GITHUB_OUTPUT": str(tmp_path / "out"),
        "RUNNER_TEMP": str(tmp_path),
        "INPUT_SHARD": "2/3",
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "perfguard.shells.action", "keys"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    outputs = read_file_commands(tmp_path / "out")
    assert outputs["cache-dir"] == str(tmp_path / "perfguard-cache")
    assert outputs["sim-key"].startswith(outputs["sim-restore"]) and "shard-2-of-3" in outputs["sim-restore"]


def test_annotation_escaping():
    line = annotation("error", "50% slower\nsee: a, b", "perfguard: k[t]", "dir/a,b.toml", 3)
    assert line == "::error file=dir/a%2Cb.toml,line=3,title=perfguard%3A k[t]::50%25 slower%0Asee: a, b"


# -- the recalibration step -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "models, drift, calls, outputs, code",
    [
        ([], None, ["collect gemm", "collect gemv"], {"drifted": "true"}, 0),
        (["gemm", "gemv"], 0, ["drift"], {"drifted": "false", "families": ""}, 0),
        (["gemm", "gemv"], 1, ["drift", "collect gemv", "train gemv"], {"drifted": "true", "families": "gemv"}, 0),
        (["gemm"], 3, ["drift"], {}, 3),
    ],
)
def test_recalibrate_retrains_only_what_drifted(project, tmp_path, monkeypatch, models, drift, calls, outputs, code):
    import perfguard.shells.action as action

    config = project(TOML, name="cal")
    for family in models:
        path = config.parent / "baselines" / "models" / "x86_64" / f"{family}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    seen = []

    def fake(*args):
        seen.append(" ".join([args[1]] + ([args[args.index("--family") + 1]] if "--family" in args else [])))
        assert args[args.index("--target") + 1] == "x86_64" and args[args.index("--config") + 1] == str(config)
        if args[1] == "drift":
            Path(args[args.index("--json") + 1]).write_text(
                json.dumps({"gemm": {"needs_retraining": False}, "gemv": {"needs_retraining": True}})
            )
            return drift
        return 0

    monkeypatch.setattr(action, "_perfguard", fake)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path))
    monkeypatch.setattr("perfguard.kernels.FAMILY_NAMES", ("gemm", "gemv"))
    assert action.main(["recalibrate", "--target", "x86_64", "--config", str(config)]) == code
    expected = calls if models else calls + ["train gemm", "train gemv"]
    assert seen == expected
    got = read_file_commands(tmp_path / "out")
    assert {k: got[k] for k in outputs} == outputs


# -- mode: compare ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_action_compare_mode_measures_the_merge_base_instead_of_reading_baselines(pr_workspace):
    workspace, temp, event = pr_workspace
    for path in (workspace / "baselines").rglob("*.json"):  # no committed baseline is needed: drop them all
        path.unlink()
    head = commit_all(workspace, "no baselines")
    event["pull_request"]["head"]["sha"] = head
    runner = LocalRunner(workspace, temp, event)
    code, outputs, _ = runner.run_action({"mode": "compare", "targets": "x86_64", "comment": "false"})
    log = "\n".join(runner.log)
    assert code == 1, log
    assert f"building and simulating main at {event['pull_request']['base']['sha']} as the base" in log
    data = json.loads((Path(outputs["report"]) / "perfguard.json").read_text())
    assert data["base"]["commit"] == event["pull_request"]["base"]["sha"] and data["compare"]["head"]["commit"] == head
    assert {(r["kernel"], r["verdict"]) for r in data["results"]} == {("gemm_a", "regression"), ("gemm_b", "unchanged")}
    assert outputs["verdict"] == "regression" and outputs["regressions"] == "1"
    assert "::error file=perfguard.toml" in log  # annotated on the kernel's line, as in check mode

    code, outputs, _ = runner.run_action({"mode": "compare", "shard": "1/2"})
    assert code == 2 and "input 'shard' does not apply to mode compare" in "\n".join(runner.log)


def test_on_github_the_links_into_the_report_folder_lead_to_the_run(monkeypatch):
    text = (
        "1. x **[gemm\\_\\[a\\]](kernels/gemm_a.html#t-x86_64)** \\[x86\\_64\\] regression\n"
        "2. x **[model r](index.html#m-r-x86_64)** \\[x86\\_64\\]\n[docs](https://example.org/x.html)\n"
    )
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    assert on_github(text) == (
        "1. x **gemm\\_\\[a\\]** \\[x86\\_64\\] regression\n2. x **model r** \\[x86\\_64\\]\n"
        "[docs](https://example.org/x.html)\n"
    )  # no run: plain text, other links kept
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "octo/kernels")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    run = "https://github.com/octo/kernels/actions/runs/42"
    assert on_github(text) == (
        f"1. x **[gemm\\_\\[a\\]]({run})** \\[x86\\_64\\] regression\n"
        f"2. x **[model r]({run})** \\[x86\\_64\\]\n[docs](https://example.org/x.html)\n"
    )


def test_the_action_writes_the_same_markdown_as_perfguard_when_summary_md_is_missing(tmp_path):
    from perfguard.document.report import Report
    from perfguard.report.markdown import MARKER
    from perfguard.shells.action import markdown_for

    report = Report.from_json(
        {
            "schema": 1,
            "summary": {"exit_code": 1},
            "results": [
                {
                    "kernel": "gemm_<b>",
                    "target": "x86_64",
                    "verdict": "regression",
                    "delta_pct": 7.5,
                    "threshold_pct": 2.0,
                    "current_time_s": 2e-3,
                    "baseline_time_s": 1.86e-3,
                    "model_id": "pipeline-x",
                    "simulator": "qemu",
                }
            ],
        }
    )
    text = markdown_for(report, tmp_path)  # no summary.md: rendered by report/markdown.py, not a second renderer
    assert text.startswith(MARKER) and "1 regression(s) found" in text
    # the failing row, linked to the kernel's page (a name that is no file name gets a hashed one)
    assert re.search(
        r"1\. \u274c \*\*\[gemm\\_&lt;b&gt;\]\(kernels/k-[0-9a-f]{16}\.html#t-x86_64\)\*\* "
        r"\\\[x86\\_64\\\] regression: \*\*\+7\.50 %\*\*, threshold 2\.00 %",
        text,
    )
    (tmp_path / "summary.md").write_text("as perfguard wrote it\n")
    assert markdown_for(report, tmp_path) == "as perfguard wrote it\n"


# -- a checkout git refuses -------------------------------------------------------------------------


def test_a_checkout_owned_by_another_user_names_gits_cause(project, tmp_path):
    """In a container without the safe.directory step git refuses the checkout: the action says so,
    with the step that fixes it, instead of calling the base an unknown revision."""
    workspace = project(TOML, name="owned").parent
    init_repo(workspace)
    commit_all(workspace, "kernels")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(tmp_path / "out"),
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "INPUT_BASE": "main",
        "INPUT_TARGETS": "vax",
        "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO)),
    }
    (tmp_path / "home").mkdir()
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "12345:12345", str(workspace)], check=True)  # the runner's user, not root
    else:
        env["GIT_TEST_ASSUME_DIFFERENT_OWNER"] = "1"  # git's own switch for the same check
    run = [sys.executable, "-m", "perfguard.shells.action", "run"]
    proc = subprocess.run(run, cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        f"::error title=perfguard action::git refuses the checkout at {workspace}: detected dubious ownership"
        in proc.stdout
    ), proc.stdout
    assert "git config --global --add safe.directory" in proc.stdout and "unknown git revision" not in proc.stdout
    # The control: with the step the message names, git reads the checkout and the run goes on to
    # the next problem (here, a bad mode input).
    subprocess.run(["git", "config", "--global", "--add", "safe.directory", str(workspace)], env=env, check=True)
    proc = subprocess.run(
        run, cwd=workspace, env=dict(env, INPUT_MODE="bogus"), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "dubious ownership" not in proc.stdout + proc.stderr
    assert "input 'mode' must be check or compare, got 'bogus'" in proc.stdout
