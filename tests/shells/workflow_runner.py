"""A local stand-in for the GitHub Actions runner: runs one job of a workflow (or a composite action)
the way the runner does, as GitHub documents it, so the workflows' shell logic is tested here.

What it does as GitHub does (docs.github.com: "Workflow syntax for GitHub Actions", "Workflow
commands for GitHub Actions", "Variables reference", "Evaluate expressions in workflows and
actions", "Metadata syntax for GitHub Actions"):

- each `run:` step is written to a script file and run with its shell's command line: `shell:
  bash` is `bash --noprofile --norc -eo pipefail {0}`, no shell at all is `bash -e {0}` (no
  pipefail), `sh` is `sh -e {0}`; `defaults.run.shell` of the workflow and of the job apply;
- `env:` of the workflow, the job and the step; the default variables (GITHUB_WORKSPACE,
  GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_API_URL, RUNNER_TEMP, ...);
- a fresh GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH and GITHUB_STEP_SUMMARY file per step, read back
  after it (`name=value` and `name<<DELIMITER` blocks): outputs for `steps.<id>.outputs`,
  variables and PATH entries for the steps after it, summaries for the job;
- `${{ }}` expressions in `env`, `with`, `if`, `name` and job fields: contexts (github, env,
  inputs, matrix, steps, runner, vars, secrets, needs), literals, `! == != < > <= >= && ||`, and
  the functions success, failure, always, cancelled, contains, startsWith, endsWith, format,
  join, toJSON, fromJSON; `if:` without a status function means `success() && (...)`;
- `continue-on-error` (outcome failure, conclusion success), and a job that fails once a step's
  conclusion is failure;
- a local composite action (`uses: ./`): its inputs with their defaults, GITHUB_ACTION_PATH and
  `github.action_path`, its steps and its outputs.

What it does not run: actions from the marketplace. Each action a test reaches is replaced by
what its documentation says it leaves behind (STAND_INS below: checkout leaves the repository at
GITHUB_WORKSPACE; cache/restore puts a saved entry's files back at its path when the key or a
restore-keys prefix matches an entry of the same version, that is the same paths; cache/save
stores them; upload-artifact and download-artifact copy files to and from a store shared by the
jobs of a test; download of a missing artifact fails). A step a test cannot run here (apt-get in
a container, the toolchain install) is replaced by a function that leaves what it would leave.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SHELLS = {
    "bash": "bash --noprofile --norc -eo pipefail {0}",
    "sh": "sh -e {0}",
    None: "bash -e {0}",  # no shell given: bash without pipefail
}


# -- expressions ------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\],.*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
)""",
    re.X,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ValueError(f"cannot read expression {text!r} at {text[pos:]!r}")
        kind = match.lastgroup
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _truthy(value: Any) -> bool:
    if isinstance(value, float) and value != value:
        return False
    return value not in (None, False, 0, "") and value != 0.0


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip()) if value.strip() else 0.0
        except ValueError:
            return float("nan")
    return float("nan")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()  # string comparison ignores case
    if type(a) is type(b) or isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a == b
    return _number(a) == _number(b)


def as_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


class Expression:
    """Recursive descent over the expression grammar GitHub documents."""

    def __init__(self, text: str, context: dict[str, Any], status: dict[str, bool]):
        self.tokens, self.pos, self.context, self.status = _tokens(text), 0, context, status

    def value(self) -> Any:
        result = self.or_()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.pos][1]!r}")
        return result

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.pos]
        if expected is not None and token[1] != expected:
            raise ValueError(f"expected {expected!r}, got {token[1]!r}")
        self.pos += 1
        return token

    def or_(self) -> Any:
        left = self.and_()
        while self.peek() == "||":
            self.take()
            right = self.and_()
            left = left if _truthy(left) else right
        return left

    def and_(self) -> Any:
        left = self.compare()
        while self.peek() == "&&":
            self.take()
            right = self.compare()
            left = right if _truthy(left) else left
        return left

    def compare(self) -> Any:
        left = self.unary()
        op = self.peek()
        if op in ("==", "!=", "<", ">", "<=", ">="):
            self.take()
            right = self.unary()
            if op == "==":
                return _equal(left, right)
            if op == "!=":
                return not _equal(left, right)
            a, b = _number(left), _number(right)
            return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return left

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not _truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, text = self.take()
        if text == "(":
            value = self.or_()
            self.take(")")
            return self.postfix(value)
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if kind != "name":
            raise ValueError(f"unexpected {text!r}")
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        if self.peek() == "(":
            self.take()
            args = []
            while self.peek() != ")":
                args.append(self.or_())
                if self.peek() == ",":
                    self.take()
            self.take(")")
            return self.postfix(self.call(text, args))
        if text not in self.context:
            raise ValueError(f"unknown context {text!r}")
        return self.postfix(self.context[text])

    def postfix(self, value: Any) -> Any:
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                key = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            if key == "*":
                raise ValueError("object filters are not supported here")
            if isinstance(value, dict):
                match = next((k for k in value if str(k).lower() == str(key).lower()), None)
                value = value.get(match) if match is not None else None
            elif isinstance(value, list) and isinstance(key, float):
                value = value[int(key)] if int(key) < len(value) else None
            else:
                value = None
        return value

    def call(self, name: str, args: list[Any]) -> Any:
        name = name.lower()
        if name == "success":
            return not self.status["failed"] and not self.status["cancelled"]
        if name == "failure":
            return self.status["failed"]
        if name == "always":
            return True
        if name == "cancelled":
            return self.status["cancelled"]
        if name == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(_equal(item, needle) for item in hay)
            return as_string(needle).lower() in as_string(hay).lower()
        if name == "startswith":
            return as_string(args[0]).lower().startswith(as_string(args[1]).lower())
        if name == "endswith":
            return as_string(args[0]).lower().endswith(as_string(args[1]).lower())
        if name == "format":
            text = as_string(args[0])
            for i, arg in enumerate(args[1:]):
                text = text.replace("{" + str(i) + "}", as_string(arg))
            return text
        if name == "join":
            items = args[0] if isinstance(args[0], list) else [args[0]]
            return (as_string(args[1]) if len(args) > 1 else ",").join(as_string(i) for i in items)
        if name == "tojson":
            return json.dumps(args[0], indent=2)
        if name == "fromjson":
            return json.loads(as_string(args[0]))
        raise ValueError(f"unknown function {name}()")


_TEMPLATE = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_STATUS = re.compile(r"\b(success|failure|always|cancelled)\s*\(", re.I)


def evaluate(text: Any, context: dict[str, Any], status: dict[str, bool] | None = None) -> Any:
    """A value with `${{ }}` templates: one template alone keeps its type, else a string."""
    status = status or {"failed": False, "cancelled": False}
    if not isinstance(text, str):
        return text
    whole = _TEMPLATE.fullmatch(text.strip())
    if whole:
        return Expression(whole.group(1), context, status).value()
    return _TEMPLATE.sub(lambda m: as_string(Expression(m.group(1), context, status).value()), text)


def condition(text: Any, context: dict[str, Any], status: dict[str, bool]) -> bool:
    if text is None or text == "":
        return not status["failed"] and not status["cancelled"]
    if isinstance(text, bool):
        return text
    inner = str(text).strip()
    whole = _TEMPLATE.fullmatch(inner)
    if whole:
        inner = whole.group(1).strip()
    if not _STATUS.search(inner):
        inner = f"success() && ({inner})"
    return _truthy(Expression(inner, context, status).value())


# -- the runner's files ---------------------------------------------------------------------------


def read_file_commands(path: Path) -> dict[str, str]:
    """`name=value` lines and `name<<DELIMITER` ... `DELIMITER` blocks (GITHUB_OUTPUT, GITHUB_ENV)."""
    values, lines, i = {}, path.read_text().splitlines() if path.is_file() else [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, i + 1)  # ValueError: an unterminated block fails, as on GitHub
            values[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path.name}: line {line!r} is neither name=value nor name<<DELIMITER")
        values[name] = value
        i += 1
    return values


# -- jobs -----------------------------------------------------------------------------------------


@dataclass
class StepResult:
    name: str
    outcome: str  # success | failure | skipped
    conclusion: str
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""


@dataclass
class JobResult:
    steps: list[StepResult]
    outputs: dict[str, str]
    summary: str
    env: dict[str, str]
    home: Path  # the job's machine: its HOME and RUNNER_TEMP
    runner_temp: Path

    @property
    def succeeded(self) -> bool:
        return all(s.conclusion != "failure" for s in self.steps)

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name} ({s.outcome})\n{s.log}" for s in self.steps)

    def step(self, name: str) -> StepResult:
        found = [s for s in self.steps if s.name == name]
        assert len(found) == 1, f"no single step named {name!r} in {[s.name for s in self.steps]}"
        return found[0]


def _needs(job: dict) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)


def load_yaml(path: Path) -> dict:
    document = yaml.safe_load(path.read_text())
    if True in document:  # YAML 1.1 reads the key `on` as a boolean
        document["on"] = document.pop(True)
    return document


class Runner:
    """Runs jobs of workflows for one simulated repository and event.

    stand_ins: action name (owner/repo[/path], without @ref) -> function(runner, step, with, env)
    returning (succeeded, outputs, log). replaced: step name or id -> function(runner, env) that
    leaves on disk what the real step would (for steps that cannot run here).
    """

    def __init__(
        self,
        workspace: Path,
        temp: Path,
        *,
        event_name: str,
        event: dict,
        repository: str = "octo/kernels",
        sha: str | None = None,
        vars: dict | None = None,
        secrets: dict | None = None,
        inputs: dict | None = None,
        local_action: Path | None = None,
        api_url: str = "https://api.github.com",
        replaced: dict[str, Callable] | None = None,
        base_env: dict[str, str] | None = None,
    ):
        self.workspace, self.temp = workspace, temp
        self.home = temp / "home"
        self.store = temp / "github-store"  # caches and artifacts, shared by the jobs of one test
        for folder in (self.home, self.store / "caches", self.store / "artifacts", temp / "runner-temp", temp / "jobs"):
            folder.mkdir(parents=True, exist_ok=True)
        self.event_name, self.event = event_name, event
        event_path = temp / "event.json"
        event_path.write_text(json.dumps(event))
        self.repository = repository
        self.sha = sha or "0" * 40
        self.vars, self.secrets, self.inputs = vars or {}, secrets or {}, inputs or {}
        self.local_action = local_action or workspace
        self.replaced = replaced or {}
        base = (
            base_env
            if base_env is not None
            else {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
        )
        self.default_env = dict(base)
        self.default_env.update(
            {
                "HOME": str(self.home),
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_EVENT_NAME": event_name,
                "GITHUB_EVENT_PATH": str(event_path),
                "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_REPOSITORY": repository,
                "GITHUB_RUN_ID": "4242",
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_API_URL": api_url,
                "GITHUB_SHA": self.sha,
                "RUNNER_TEMP": str(temp / "runner-temp"),
                "RUNNER_OS": "Linux",
                "RUNNER_ARCH": "X64",
            }
        )
        self.api_url = api_url

    # -- contexts
    def github_context(self) -> dict:
        return {
            "event_name": self.event_name,
            "event": self.event,
            "repository": self.repository,
            "sha": self.sha,
            "token": "ghs_local-stand-in-token",
            "workspace": str(self.workspace),
            "run_id": "4242",
            "api_url": self.api_url,
            "server_url": "https://github.com",
            "ref": self.event.get("ref", ""),
            "action_path": "",
        }

    def run_job(self, path: Path, job_id: str, matrix: dict | None = None, needs: dict | None = None) -> JobResult:
        """One job on a fresh machine (its own HOME and RUNNER_TEMP; the workspace is the checkout)."""
        workflow = load_yaml(path)
        job = workflow["jobs"][job_id]
        machine = self.temp / "jobs" / f"{job_id}-{len(list((self.temp / 'jobs').glob(job_id + '-*')))}"
        (machine / "home").mkdir(parents=True)
        (machine / "temp").mkdir()
        env = dict(self.default_env, HOME=str(machine / "home"), RUNNER_TEMP=str(machine / "temp"))
        context = {
            "github": self.github_context(),
            "inputs": self.inputs,
            "vars": self.vars,
            "secrets": self.secrets,
            "matrix": matrix or {},
            "needs": needs or {},
            "runner": {"temp": env["RUNNER_TEMP"], "os": "Linux", "arch": "X64"},
            "steps": {},
            "env": {},
        }
        for scope in (workflow.get("env") or {}, job.get("env") or {}):
            for key, value in scope.items():
                env[key] = as_string(evaluate(value, context))
                context["env"] = {k: v for k, v in env.items() if k not in self.default_env}
        shell = ((job.get("defaults") or {}).get("run") or {}).get("shell") or (
            (workflow.get("defaults") or {}).get("run") or {}
        ).get("shell")
        state = {"failed": False, "cancelled": False, "env": env, "summary": [], "path": []}
        results = self._run_steps(job.get("steps", []), context, state, shell, action_path=None)
        outputs = {k: as_string(evaluate(v, context)) for k, v in (job.get("outputs") or {}).items()}
        return JobResult(results, outputs, "".join(state["summary"]), state["env"], machine / "home", machine / "temp")

    def run_workflow(self, path: Path, matrices: dict[str, dict] | None = None) -> dict[str, JobResult | None]:
        """Every job, after the jobs it needs; a job whose `if` is false (by default: a needed job did
        not succeed) is skipped (None). A matrix job runs the one combination `matrices` gives it."""
        workflow = load_yaml(path)
        done: dict[str, JobResult | None] = {}
        results: dict[str, str] = {}
        pending = list(workflow["jobs"])
        while pending:
            job_id = next(j for j in pending if all(n in done for n in _needs(workflow["jobs"][j])))
            pending.remove(job_id)
            job = workflow["jobs"][job_id]
            needs = {n: {"result": results[n], "outputs": done[n].outputs if done[n] else {}} for n in _needs(job)}
            context = {
                "github": self.github_context(),
                "inputs": self.inputs,
                "vars": self.vars,
                "secrets": self.secrets,
                "needs": needs,
            }
            # success() of a job: every job it needs succeeded (a skipped one did not)
            status = {"failed": any(v["result"] != "success" for v in needs.values()), "cancelled": False}
            if not condition(job.get("if"), context, status):
                done[job_id], results[job_id] = None, "skipped"
                continue
            done[job_id] = self.run_job(path, job_id, (matrices or {}).get(job_id), needs)
            results[job_id] = "success" if done[job_id].succeeded else "failure"
        return done

    def run_action(self, action_dir: Path, with_: dict[str, str], context_extra: dict | None = None) -> JobResult:
        """The composite action at action_dir as the one step of a job (`uses: ./` with `with_`)."""
        context = {
            "github": self.github_context(),
            "inputs": {},
            "vars": self.vars,
            "secrets": self.secrets,
            "matrix": {},
            "needs": {},
            "steps": {},
            "env": {},
            "runner": {"temp": self.default_env["RUNNER_TEMP"], "os": "Linux", "arch": "X64"},
        }
        context.update(context_extra or {})
        state = {"failed": False, "cancelled": False, "env": dict(self.default_env), "summary": [], "path": []}
        result, outputs = self._composite(action_dir, with_, context, state)
        return JobResult(
            result, outputs, "".join(state["summary"]), state["env"], self.home, Path(self.default_env["RUNNER_TEMP"])
        )

    # -- steps
    def _run_steps(
        self, steps: list[dict], context: dict, state: dict, shell: str | None, action_path: Path | None
    ) -> list[StepResult]:
        results = []
        for index, step in enumerate(steps):
            sid = step.get("id") or f"__step{index}"
            name = step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0]
            context["env"] = {k: v for k, v in state["env"].items() if k not in self.default_env}
            if not condition(step.get("if"), context, state):
                result = StepResult(name, "skipped", "skipped")
            else:
                result = self._step(step, name, sid, context, state, shell, action_path)
                if result.outcome == "failure" and not _truthy(evaluate(step.get("continue-on-error", False), context)):
                    result.conclusion = "failure"
                    state["failed"] = True
            context["steps"][sid] = {
                "outputs": result.outputs,
                "outcome": result.outcome,
                "conclusion": result.conclusion,
            }
            results.append(result)
        return results

    def _step_env(self, step: dict, context: dict, state: dict, action_path: Path | None) -> dict[str, str]:
        env = dict(state["env"])
        if state["path"]:
            env["PATH"] = os.pathsep.join([*reversed(state["path"]), env.get("PATH", "")])
        if action_path is not None:
            env["GITHUB_ACTION_PATH"] = str(action_path)
        for key, value in (step.get("env") or {}).items():
            env[key] = as_string(evaluate(value, context))
        return env

    def _step(
        self, step: dict, name: str, sid: str, context: dict, state: dict, shell: str | None, action_path: Path | None
    ) -> StepResult:
        env = self._step_env(step, context, state, action_path)
        if name in self.replaced or sid in self.replaced:
            ok, outputs, log = (self.replaced.get(name) or self.replaced[sid])(self, env)
            return StepResult(name, "success" if ok else "failure", "success", outputs, log)
        if "uses" in step:
            uses = step["uses"]
            with_ = {k: as_string(evaluate(v, context)) for k, v in (step.get("with") or {}).items()}
            if uses.startswith("./"):
                inner, outputs = self._composite(self.local_action / uses[2:], with_, context, state)
                failed = any(r.conclusion == "failure" for r in inner)
                log = "\n".join(f"  --- {r.name} ({r.outcome})\n{r.log}" for r in inner)
                return StepResult(name, "failure" if failed else "success", "success", outputs, log)
            action = uses.split("@", 1)[0]
            if action not in STAND_INS:
                raise AssertionError(f"step {name!r}: no stand-in for {action} (add one to STAND_INS)")
            ok, outputs, log = STAND_INS[action](self, with_, env)
            return StepResult(name, "success" if ok else "failure", "success", outputs, log)
        return self._run_script(step, name, context, state, env, shell)

    def _run_script(
        self, step: dict, name: str, context: dict, state: dict, env: dict[str, str], shell: str | None
    ) -> StepResult:
        files = {}
        for var in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY"):
            files[var] = Path(state["env"]["RUNNER_TEMP"]) / f"{var.lower()}_{uuid.uuid4().hex}"
            files[var].write_text("")
            env[var] = str(files[var])
        script = Path(state["env"]["RUNNER_TEMP"]) / f"{uuid.uuid4()}.sh"
        script.write_text(step["run"])
        template = SHELLS.get(step.get("shell", shell), step.get("shell", shell))
        argv = [str(script) if part == "{0}" else part for part in template.split()]
        cwd = self.workspace / evaluate(step.get("working-directory", ""), context)
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        outputs = read_file_commands(files["GITHUB_OUTPUT"])
        state["env"].update(read_file_commands(files["GITHUB_ENV"]))
        state["path"] += [line for line in files["GITHUB_PATH"].read_text().splitlines() if line.strip()]
        state["summary"].append(files["GITHUB_STEP_SUMMARY"].read_text())
        outcome = "success" if proc.returncode == 0 else "failure"
        return StepResult(name, outcome, "success", outputs, proc.stdout + proc.stderr + f"[exit {proc.returncode}]")

    def _composite(
        self, action_dir: Path, with_: dict[str, str], outer: dict, state: dict
    ) -> tuple[list[StepResult], dict[str, str]]:
        action = load_yaml(action_dir / "action.yml")
        assert action["runs"]["using"] == "composite"
        inputs = {name: as_string(spec.get("default", "")) for name, spec in (action.get("inputs") or {}).items()}
        unknown = set(with_) - set(inputs)
        assert not unknown, f"not inputs of {action_dir}/action.yml: {unknown}"
        inputs.update(with_)
        github = dict(outer["github"], action_path=str(action_dir))
        context = dict(outer, inputs=inputs, steps={}, github=github)
        steps = action["runs"]["steps"]
        for step in steps:
            assert "run" not in step or step.get("shell"), f"composite run steps need a shell: {step.get('name')}"
        results = self._run_steps(steps, context, state, None, action_path=action_dir)
        outputs = {k: as_string(evaluate(spec["value"], context)) for k, spec in (action.get("outputs") or {}).items()}
        return results, outputs


def venv_of_this_interpreter(variable: str, below: str = ""):
    """A replacement for an install step that leaves a venv with perfguard in it (at $variable, or
    $variable/below): here, a venv whose python is the test run's own interpreter."""
    import sys

    def replace(runner: Runner, env: dict) -> tuple[bool, dict, str]:
        venv = Path(env[variable]) / below
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        if not (venv / "bin" / "python").exists():
            (venv / "bin" / "python").symlink_to(sys.executable)
        return True, {}, f"venv {venv} -> {sys.executable}"

    return replace


# -- stand-ins for the actions that cannot run here -----------------------------------------------


def _checkout(runner: Runner, with_: dict, env: dict) -> tuple[bool, dict, str]:
    """actions/checkout leaves the repository at GITHUB_WORKSPACE (the test made it there, with
    the history its fetch-depth asks for); persist-credentials false leaves no token behind."""
    ok = (runner.workspace / ".git").exists()
    return ok, {}, f"checkout of {runner.workspace} (fetch-depth {with_.get('fetch-depth', '1')})"


def _cache_version(paths: str) -> str:
    # The cache version: a hash of the paths (as written) and the compression method.
    lines = [p.strip() for p in paths.splitlines() if p.strip()]
    return hashlib.sha256(("|".join(lines) + "|zstd").encode()).hexdigest()[:16]


def in_workspace(env: dict, path: str) -> Path:
    """Actions resolve a relative path against GITHUB_WORKSPACE (and ~ against HOME)."""
    return Path(env["GITHUB_WORKSPACE"]) / Path(path.replace("~", env["HOME"], 1) if path.startswith("~") else path)


def _cache_paths(with_: dict, env: dict) -> list[Path]:
    return [in_workspace(env, p.strip()) for p in with_["path"].splitlines() if p.strip()]


def _cache_restore(runner: Runner, with_: dict, env: dict) -> tuple[bool, dict, str]:
    store = runner.store / "caches" / _cache_version(with_["path"])
    keys = [with_["key"]] + [k.strip() for k in with_.get("restore-keys", "").splitlines() if k.strip()]
    entries = sorted(store.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True) if store.is_dir() else []
    match = next((e for e in entries if e.name == keys[0]), None) or next(
        (e for k in keys[1:] for e in entries if e.name.startswith(k)), None
    )
    outputs = {"cache-primary-key": with_["key"], "cache-hit": "false", "cache-matched-key": ""}
    if match is None:
        return True, outputs, f"Cache not found for input keys: {', '.join(keys)}"
    for index, target in enumerate(_cache_paths(with_, env)):
        saved = match / str(index)
        if saved.exists():  # extracted over what is there, as tar does
            target.mkdir(parents=True, exist_ok=True)
            subprocess.run(f'tar -C "{saved}" -cf - . | tar -C "{target}" -xf -', shell=True, check=True)
    outputs.update({"cache-hit": "true" if match.name == keys[0] else "false", "cache-matched-key": match.name})
    return True, outputs, f"Cache restored from key: {match.name}"


def _cache_save(runner: Runner, with_: dict, env: dict) -> tuple[bool, dict, str]:
    entry = runner.store / "caches" / _cache_version(with_["path"]) / with_["key"]
    if entry.exists():
        return True, {}, f"Warning: cache entry {with_['key']} exists already: not saved"
    paths = _cache_paths(with_, env)
    if not any(p.exists() for p in paths):
        return True, {}, "Warning: Path Validation Error: path(s) do not exist: no cache saved"
    tmp = entry.with_name(entry.name + ".partial")
    for index, source in enumerate(paths):
        if source.exists():
            shutil.copytree(source, tmp / str(index), symlinks=True)
    tmp.rename(entry)
    return True, {}, f"Cache saved with key: {with_['key']}"


def _upload_artifact(runner: Runner, with_: dict, env: dict) -> tuple[bool, dict, str]:
    name = with_.get("name") or "artifact"
    found = [
        in_workspace(env, p.strip())
        for p in with_["path"].splitlines()
        if p.strip() and in_workspace(env, p.strip()).exists()
    ]
    if not found:
        mode = with_.get("if-no-files-found", "warn")
        return mode != "error", {}, f"No files were found with the provided path: {with_['path']} ({mode})"
    target = runner.store / "artifacts" / name
    if target.exists():
        return False, {}, f"an artifact named {name} exists already"
    for source in found:
        dest = target if len(found) == 1 else target / source.name
        if source.is_dir():
            shutil.copytree(source, dest)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / source.name)
    return True, {"artifact-id": name}, f"uploaded {name}"


def _download_artifact(runner: Runner, with_: dict, env: dict) -> tuple[bool, dict, str]:
    store = runner.store / "artifacts"
    path = in_workspace(env, with_.get("path") or ".")
    if with_.get("name"):
        source = store / with_["name"]
        if not source.is_dir():
            return False, {}, f"Error: Unable to download artifact(s): Artifact not found for name: {with_['name']}"
        shutil.copytree(source, path, dirs_exist_ok=True)
        return True, {"download-path": str(path)}, f"downloaded {with_['name']}"
    merge = with_.get("merge-multiple", "false") == "true"
    for source in sorted(store.iterdir()):
        if fnmatch.fnmatch(source.name, with_.get("pattern", "*")):
            shutil.copytree(source, path if merge else path / source.name, dirs_exist_ok=True)
    return True, {"download-path": str(path)}, "downloaded by pattern"


def _setup_python(runner: Runner, with_: dict, env: dict) -> tuple[bool, dict, str]:
    return True, {"python-version": with_.get("python-version", "")}, "the test's interpreter stands in"


STAND_INS: dict[str, Callable[[Runner, dict, dict], tuple[bool, dict, str]]] = {
    "actions/checkout": _checkout,
    "actions/cache/restore": _cache_restore,
    "actions/cache/save": _cache_save,
    "actions/upload-artifact": _upload_artifact,
    "actions/download-artifact": _download_artifact,
    "actions/setup-python": _setup_python,
}
