"""The run steps of the GitHub Action (action.yml) and of the recalibration workflow, testable.

    python -m perfguard.shells.action keys          cache keys and folders (stdlib only: runs before install)
    python -m perfguard.shells.action run           check (or compare, or merge shard reports), then outputs, step
                                             summary, annotations and the comment artifact
    python -m perfguard.shells.action recalibrate --target T
                                             drift -> collect + train the families that drifted

Inputs arrive as INPUT_<NAME> environment variables (set by action.yml's `env:`, never
interpolated into a script), the GitHub context as the runner's usual variables
(GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, RUNNER_TEMP, ...).
Everything that comes from a pull request (kernel names, error text, the event payload) is
data: it is escaped where it lands and never executed.

Module-level imports are the standard library only, so `keys` works before perfguard and its
dependencies are installed (PYTHONPATH pointing at the action's folder is enough).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the module imports only the standard library at load (see above)
    from perfguard.document.report import Report

from perfguard.shells.runner import (  # stdlib only, as here
    PR_EVENTS,
    ActionError,
    action_input,
    annotation,
    append_summary,
    env,
    event_payload,
    flag_input,
    pull_request_number,
    set_outputs,
)

MAX_COMMENT_CHARS = 60000  # GitHub refuses comments above 65536 characters
MAX_ANNOTATIONS = 10  # GitHub shows at most 10 error annotations per step
EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_INFRA, EXIT_WRONG_RESULT = 0, 1, 2, 3, 4  # mirrors perfguard.errors
# (not importable yet in `keys`)


# -- keys -------------------------------------------------------------------------------------------


def action_root() -> Path:
    return Path(__file__).resolve().parents[2]  # perfguard/shells/action.py -> the repository


def setup_fingerprint(root: Path) -> str:
    """What the installed toolchain depends on: the setup script, the package's pins, the runner."""
    h = hashlib.sha256()
    for name in ("scripts/setup.sh", "scripts/toolchain.lock", "pyproject.toml"):
        path = root / name
        h.update(name.encode())
        h.update(path.read_bytes() if path.is_file() else b"-")
    for part in (env("ImageOS"), env("ImageVersion"), platform.machine(), platform.python_version()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def package_version(root: Path) -> str:
    match = re.search(r'^version\s*=\s*"([^"]+)"', (root / "pyproject.toml").read_text(), re.M)
    return match.group(1) if match else "unknown"


GEM5_BUILD_ISA = {"x86_64": "X86", "riscv64": "RISCV", "aarch64": "ARM"}


def _target_isa(name: str, tables: dict, depth: int = 0) -> str | None:
    """A target's ISA from its name or its [target.NAME] table (isa, or base's)."""
    found = tables.get(name)
    table: dict = found if isinstance(found, dict) else {}
    if isinstance(table.get("isa"), str):
        return table["isa"]
    base = table.get("base")
    if isinstance(base, str) and base != name and depth < 8:
        return _target_isa(base, tables, depth + 1)
    return next((isa for isa in GEM5_BUILD_ISA if name.startswith(isa)), None)


def gem5_build_isas() -> list[str]:
    """gem5 builds (X86, RISCV, ARM) a `simulator: gem5` run needs: the targets input, else the
    config's targets (standard library only: this runs before perfguard is installed)."""
    if action_input("simulator") != "gem5":
        return []
    path = Path(action_input("config") or "perfguard.toml")
    try:
        data = tomllib.loads(path.read_text()) if path.is_file() else {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        data = {}  # the run step names the broken file
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("perfguard", {}) if isinstance(data.get("tool"), dict) else {}
    top = data.get("perfguard", {}) if isinstance(data.get("perfguard"), dict) else {}
    tables = data.get("target", {}) if isinstance(data.get("target"), dict) else {}
    names = (
        [t.strip() for t in action_input("targets").split(",") if t.strip()]
        or top.get("targets")
        or list(GEM5_BUILD_ISA)
    )
    isas = {_target_isa(str(n), tables) for n in names}
    return sorted(GEM5_BUILD_ISA[isa] for isa in isas if isa in GEM5_BUILD_ISA)


def gem5_environment(environ: dict[str, str] | os._Environ) -> dict[str, str]:
    """PERFGUARD_GEM5_<ISA> for each build under PERFGUARD_GEM5_DIR (the action's gem5 cache),
    where the variable is not set already."""
    env = dict(environ)
    folder = env.get("PERFGUARD_GEM5_DIR", "")
    for build in GEM5_BUILD_ISA.values():
        binary = Path(folder) / build / "gem5.fast"
        if folder and not env.get(f"PERFGUARD_GEM5_{build}") and binary.is_file():
            env[f"PERFGUARD_GEM5_{build}"] = str(binary)
    return env


def os_release() -> str:
    """The distribution and release the toolchain comes from (debian12, ubuntu24.04): a build made
    in the pinned Debian 12 container is not one made on the runner's Ubuntu."""
    try:
        fields = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines() if "=" in line)
    except OSError:
        return platform.system().lower()
    return "".join(fields.get(k, "").strip().strip('"') for k in ("ID", "VERSION_ID")) or "unknown"


def cmd_keys(args: argparse.Namespace) -> int:
    root = action_root()
    version = package_version(root)
    temp = Path(env("RUNNER_TEMP") or "/tmp")
    system = f"{env('RUNNER_OS', platform.system())}-{env('RUNNER_ARCH', platform.machine())}-{os_release()}"
    slot = report_label()
    gem5_isas = gem5_build_isas()
    build_script = root / "scripts" / "build-gem5.sh"
    gem5_recipe = hashlib.sha256(build_script.read_bytes() if build_script.is_file() else b"-").hexdigest()[:16]
    outputs = {
        "gem5-isas": " ".join(gem5_isas),
        # One folder and one cache entry per ISA, keyed by the build recipe (the pinned release is
        # inside the build script) and the system that built it: the action and the scheduled
        # cross-check find each other's builds when they run in the same container.
        "gem5-dir": str(Path.home() / ".perfguard-gem5"),
        "setup-key": f"perfguard-setup-{system}-{version}-{setup_fingerprint(root)}",
        "venv": str(Path.home() / ".perfguard-venv"),
        "cache-dir": str(temp / "perfguard-cache"),
        # The build/simulation cache is content-addressed: any earlier entry is safe to restore,
        # and a pull request restores its base branch's (the prefix has no commit in it).
        "sim-key": f"perfguard-sim-{system}-{version}-{slot}-{env('GITHUB_SHA', 'local')}",
        "sim-restore": f"perfguard-sim-{system}-{version}-{slot}-",
    }
    for build in GEM5_BUILD_ISA.values():
        outputs[f"gem5-key-{build}"] = f"perfguard-gem5-{system}-{gem5_recipe}-{build}" if build in gem5_isas else ""
    set_outputs(outputs)
    return EXIT_OK


# -- run: check or merge, then report -------------------------------------------------------------


def report_label() -> str:
    """A name unique per matrix job: shard, or targets, or 'all' (artifact names must not collide)."""
    if action_input("merge"):
        return "merged"
    shard = action_input("shard")
    if shard:
        return "shard-" + shard.replace("/", "-of-")
    targets = re.sub(r"[^A-Za-z0-9_.+-]+", "-", action_input("targets")).strip("-")
    return f"targets-{targets}" if targets else "all"


def _git(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0 and "dubious ownership" in proc.stderr:
        raise ActionError(dubious_ownership(proc.stderr))
    return proc


def dubious_ownership(stderr: str) -> str:
    """git's refusal of a checkout owned by another user, with its cause and the one-line fix."""
    found = re.search(r"dubious ownership in repository at '([^']*)'", stderr)
    where = found.group(1) if found else (env("GITHUB_WORKSPACE") or str(Path.cwd()))
    return (
        f"git refuses the checkout at {where}: detected dubious ownership (the job runs as another user "
        "than the one who owns the checkout, e.g. in a container): add a step "
        '`git config --global --add safe.directory "$GITHUB_WORKSPACE"` after the checkout'
    )


def git_preflight() -> None:
    """A checkout git refuses to read fails here with git's cause, not later as an unknown revision."""
    _git("rev-parse", "--git-dir")


def _resolve(ref: str) -> str | None:
    proc = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return proc.stdout.strip() if proc.returncode == 0 else None


def resolve_base(ref: str) -> str:
    """The merge-base of HEAD and `ref` (fetching it, or unshallowing, when the checkout lacks it)."""
    if ref.startswith("-"):
        raise ActionError(f"base {ref!r}: not a git revision")
    sha = _resolve(ref) or _resolve(f"origin/{ref}")
    if sha is None and _git("fetch", "--no-tags", "origin", ref).returncode == 0:
        sha = _resolve("FETCH_HEAD")
    if sha is None:
        raise ActionError(f"base {ref!r}: unknown git revision (check out with fetch-depth: 0)")
    for attempt in range(2):
        proc = _git("merge-base", "HEAD", sha)
        if proc.returncode == 0:
            return proc.stdout.strip()
        if attempt == 0 and _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            _git("fetch", "--no-tags", "--unshallow", "origin")
    raise ActionError(f"base {ref!r}: no merge-base with HEAD (check out with fetch-depth: 0)")


def choose_base(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """(label, commit) of the baselines to compare with; (None, None) means the working tree."""
    base = action_input("base", "auto")
    if base.lower() in ("", "none", "false"):
        return None, None
    if base.lower() == "auto":
        pr = payload.get("pull_request") if env("GITHUB_EVENT_NAME") in PR_EVENTS else None
        if not isinstance(pr, dict) or not isinstance(pr.get("base"), dict):
            return None, None
        ref = str(pr["base"].get("sha") or pr["base"].get("ref") or "")
        if not ref:
            return None, None
        return str(pr["base"].get("ref") or ref), resolve_base(ref)
    return base, resolve_base(base)


def _options(*names: str) -> list[str]:
    out = []
    for name in names:
        value = action_input(name)
        if value:
            out += [f"--{name}", value]
    return out


def check_command(report_dir: Path, base_commit: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "perfguard.shells.cli", "check", "--report-dir", str(report_dir)]
    cmd += _options("config", "targets", "threshold", "simulator", "shard")
    if base_commit:
        cmd += ["--base", base_commit]
    return cmd


def mode() -> str:
    value = action_input("mode", "check").lower()
    if value not in ("check", "compare"):
        raise ActionError(f"input 'mode' must be check or compare, got {value!r}")
    if value == "compare" and action_input("shard"):
        raise ActionError("input 'shard' does not apply to mode compare")
    return value


def compare_base(payload: dict[str, Any]) -> tuple[str | None, str]:
    """(label, commit) of the revision `mode: compare` measures as the base."""
    label, commit = choose_base(payload)
    if commit:
        return label, commit
    before = str(payload.get("before") or "") if env("GITHUB_EVENT_NAME") == "push" else ""
    if action_input("base", "auto").lower() == "auto" and re.fullmatch(r"[0-9a-f]{40}", before) and before.strip("0"):
        sha = _resolve(before)
        if sha:
            return "the commit before the push", sha
    raise ActionError("mode compare needs a base revision: run it on a pull request or a push, or set base to a ref")


def compare_command(report_dir: Path, base_commit: str) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "perfguard.shells.cli",
        "compare",
        base_commit,
        "HEAD",
        "--report-dir",
        str(report_dir),
    ]
    return cmd + _options("config", "targets", "threshold", "simulator")


def merge_command(report_dir: Path) -> list[str]:
    """`merge` is a folder (every perfguard.json below it) or a glob of report files."""
    pattern = action_input("merge")
    if Path(pattern).is_dir():
        candidates = Path(pattern).rglob("perfguard.json")
    else:
        candidates = (Path(p) for p in glob.glob(pattern, recursive=True))
    found = sorted(p for p in candidates if p.is_file() and report_dir not in p.resolve().parents)
    if not found:
        raise ActionError(f"merge {pattern!r}: no perfguard.json found")
    return [sys.executable, "-m", "perfguard.shells.cli", "merge", *map(str, found), "--report-dir", str(report_dir)]


@dataclass
class ActionResult:
    """What the action reports as its outputs and exits with."""

    verdict: str  # pass | regression | wrong-result | error
    regressions: int
    exit_code: int


def action_result(report: Report | None, exit_code: int) -> ActionResult:
    if report is None:
        return ActionResult("error", 0, exit_code if exit_code in (EXIT_USAGE, EXIT_INFRA) else EXIT_INFRA)
    summary = report.summary
    if exit_code == EXIT_WRONG_RESULT or summary.wrong_result:  # the code under test failed: always fails the step
        return ActionResult("wrong-result", summary.regression, EXIT_WRONG_RESULT)
    if exit_code in (EXIT_USAGE, EXIT_INFRA) or summary.error:
        return ActionResult("error", summary.regression, exit_code if exit_code > 1 else EXIT_INFRA)
    regressions = summary.regression
    return ActionResult(
        "regression" if regressions else "pass", regressions, EXIT_REGRESSION if regressions else EXIT_OK
    )


def kernel_line(config_path: Path | None, kernel: str) -> int | None:
    """The line of `name = "<kernel>"` in the config, for an annotation users can click."""
    if config_path is None or not config_path.is_file():
        return None
    pattern = re.compile(r"""^\s*name\s*=\s*["']""" + re.escape(kernel) + r"""["']\s*(#.*)?$""")
    for number, line in enumerate(config_path.read_text(errors="replace").splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def _workspace_relative(path: Path | None) -> str | None:
    if path is None:
        return None
    workspace = Path(env("GITHUB_WORKSPACE") or Path.cwd()).resolve()
    try:
        return path.resolve().relative_to(workspace).as_posix()
    except ValueError:
        return None


def annotation_lines(report: Report) -> list[str]:
    # lazy: this module imports only the standard library at load (it runs before perfguard is installed)
    from perfguard.report.numbers import pct, seconds, threshold
    from perfguard.report.text import toolchain_headline

    config_path = Path(report.config) if report.config else None
    file = _workspace_relative(config_path)
    lines = []
    for r in report.results:
        label = r.label
        line = kernel_line(config_path, r.kernel)
        if r.verdict == "regression":
            message = (
                f"{label} is {pct(r.delta_pct)} slower than its baseline (threshold "
                f"{threshold(r.threshold_pct)}): predicted {seconds(r.current_time_s)}, baseline "
                f"{seconds(r.baseline_time_s)}"
            )
            lines.append(annotation("error", message, f"perfguard regression: {label}", file, line))
        elif r.verdict == "wrong result":
            lines.append(
                annotation(
                    "error", f"{label}: {r.error or 'wrong result'}", f"perfguard wrong result: {label}", file, line
                )
            )
        elif r.orphaned:
            lines.append(annotation("error", f"{label}: {r.note}", f"perfguard removed: {label}", file, line))
        elif r.verdict == "error":
            lines.append(
                annotation("error", f"{label}: {r.error or 'failed'}", f"perfguard error: {label}", file, line)
            )
        elif r.verdict == "improvement":
            lines.append(
                annotation(
                    "notice",
                    f"{label} is {pct(r.delta_pct)} faster than its baseline",
                    f"perfguard improvement: {label}",
                    file,
                    line,
                )
            )
    toolchain = report.summary.toolchain_changed
    if toolchain:  # once for the run, not per kernel
        said = toolchain_headline(toolchain, report.summary.toolchain, report.summary.remeasured, report.summary.error)
        lines.append(annotation("warning", said, "perfguard: toolchain differs from the baselines'"))
    errors = [a for a in lines if a.startswith("::error")]
    if len(errors) > MAX_ANNOTATIONS:
        lines = errors[:MAX_ANNOTATIONS] + [
            annotation(
                "error",
                f"{len(errors) - MAX_ANNOTATIONS} more regression(s) or error(s): see the job summary",
                "perfguard",
            )
        ]
    return lines


def markdown_for(report: Report, report_dir: Path) -> str:
    """The report's Markdown: reports/summary.md as `perfguard check`/`merge` wrote it, else
    rendered from the report by the same renderer."""
    written = report_dir / "summary.md"
    if written.is_file():
        return written.read_text()
    # lazy: this module imports only the standard library at load (it runs before perfguard is installed)
    from perfguard.report.markdown import render_markdown

    return render_markdown(report)


def run_link() -> str:
    server, repo, run = env("GITHUB_SERVER_URL", "https://github.com"), env("GITHUB_REPOSITORY"), env("GITHUB_RUN_ID")
    return f"{server}/{repo}/actions/runs/{run}" if repo and run else ""


# A link of summary.md into the report folder (`[gemm\_256](kernels/gemm_256.html#t-x86_64)`): it
# opens beside the pages, not in a pull request's comment or a job summary
_REPORT_LINK = re.compile(r"(?<!\\)\[((?:\\.|[^\]\[\\\n])*)\]\((?:kernels/|index\.html#)[^)\s]*\)")


def on_github(markdown: str) -> str:
    """summary.md as GitHub shows it (the comment, the job summary): its links into the report folder
    lead to the workflow run, whose artifact holds the pages (none without a run: plain text)."""
    link = run_link()
    return _REPORT_LINK.sub((lambda m: f"[{m.group(1)}]({link})") if link else (lambda m: m.group(1)), markdown)


def comment_body(markdown: str) -> str:
    link = run_link()
    footer = f"\n<sub>perfguard · [full report and logs]({link})</sub>\n" if link else ""
    room = MAX_COMMENT_CHARS - len(footer) - 80
    if len(markdown) > room:
        markdown = markdown[:room].rsplit("\n", 1)[0] + "\n\n_(truncated: see the full report)_\n"
    return f"{markdown.rstrip()}\n{footer}"


def write_comment(folder: Path, number: int, markdown: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comment.md").write_text(comment_body(markdown))
    (folder / "pr-number").write_text(f"{number}\n")
    return folder


def cmd_run(args: argparse.Namespace) -> int:
    payload = event_payload()
    fail_on_regression = flag_input("fail-on-regression", True)
    want_comment = flag_input("comment", True)
    label = report_label()
    report_dir = Path(env("RUNNER_TEMP") or ".").resolve() / "perfguard" / label
    report_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("perfguard.json", "summary.md", "index.html"):  # from an earlier run in this job
        (report_dir / stale).unlink(missing_ok=True)
    if action_input("merge"):
        cmd = merge_command(report_dir)
    else:
        git_preflight()
        base_label: str | None
        base_commit: str | None
        if mode() == "compare":
            base_label, base_commit = compare_base(payload)
            print(f"perfguard: building and simulating {base_label} at {base_commit} as the base", flush=True)
            cmd = compare_command(report_dir, base_commit)
        else:
            base_label, base_commit = choose_base(payload)
            if base_commit:
                print(
                    f"perfguard: comparing with the baselines of {base_label} at merge-base {base_commit}", flush=True
                )
            cmd = check_command(report_dir, base_commit)
    print("perfguard: " + " ".join(cmd[1:]), flush=True)
    code = subprocess.run(cmd, check=False, env=gem5_environment(os.environ)).returncode
    from perfguard.document.report import read_report  # after the inputs and git are checked: those fail fast

    report = report_dir / "perfguard.json"
    data = read_report(report) if report.is_file() and code in (0, 1, 2, 3, 4) else None
    if data is not None and code == EXIT_USAGE and not data.results:
        data = None  # stopped before checking anything (bad input): the error is in the log
    result = action_result(data, code)
    outputs = {
        "verdict": result.verdict,
        "regressions": str(result.regressions),
        "report": str(report_dir),
        "exit-code": str(code),
        "artifact-name": f"perfguard-report-{label}",
        "comment-dir": "",
    }
    if data is not None:
        for line in annotation_lines(data):
            print(line, flush=True)
        markdown = on_github(markdown_for(data, report_dir))
        append_summary(markdown)
        number = pull_request_number(payload)
        if want_comment and number is not None:
            outputs["comment-dir"] = str(write_comment(report_dir / "comment", number, markdown))
    else:
        append_summary(f"### :x: perfguard could not run (exit code {code}): see the job log\n")
    set_outputs(outputs)
    if result.verdict in ("error", "wrong-result"):
        return result.exit_code
    if result.verdict == "regression" and fail_on_regression:
        return EXIT_REGRESSION
    return EXIT_OK


# -- recalibrate ----------------------------------------------------------------------------------


def _perfguard(*args: str) -> int:
    print("perfguard: " + " ".join(args), flush=True)
    return subprocess.run([sys.executable, "-m", "perfguard.shells.cli", *args], check=False).returncode


def cmd_recalibrate(args: argparse.Namespace) -> int:
    """drift exit 1 -> collect every drifted family -> train; no model yet -> calibrate every family."""
    # lazy: this module imports only the standard library at load (it runs before perfguard is installed)
    from perfguard.config import load_config
    from perfguard.kernels import FAMILY_NAMES

    config = load_config(args.config)
    common = ["--target", args.target] + (["--config", str(args.config)] if args.config else [])
    timing = ["--max-cv", str(args.max_cv)]
    if args.max_neighbour_busy is not None:
        timing += ["--max-neighbour-busy", str(args.max_neighbour_busy)]
    models = config.storage.baseline_dir / "models" / args.target
    have = sorted(p.stem for p in models.glob("*.json")) if models.is_dir() else []
    if not have:
        print(f"perfguard: no model for {args.target} yet: calibrating every built-in family", flush=True)
        families = list(FAMILY_NAMES)
    else:
        verdicts = Path(env("RUNNER_TEMP") or ".") / f"perfguard-drift-{args.target}.json"
        code = _perfguard(
            "calibrate", "drift", *common, "--json", str(verdicts), "--variants", str(args.drift_variants), *timing
        )
        if code == EXIT_OK:
            set_outputs({"drifted": "false", "families": ""})
            return EXIT_OK
        if code != EXIT_REGRESSION:
            return code
        drift = json.loads(verdicts.read_text())
        families = [f for f, v in sorted(drift.items()) if v.get("needs_retraining")]
    for family in families:
        code = _perfguard("calibrate", "collect", *common, "--family", family, *timing)
        if code != EXIT_OK:
            return code
    for family in families:
        code = _perfguard("calibrate", "train", *common, "--family", family)
        if code != EXIT_OK:
            return code
    set_outputs({"drifted": "true", "families": ",".join(families)})
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfguard.shells.action")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("keys", help="cache keys and folders").set_defaults(run=cmd_keys)
    sub.add_parser("run", help="check or merge, then outputs, summary, annotations, comment").set_defaults(run=cmd_run)
    recal = sub.add_parser("recalibrate", help="drift, then collect and train what drifted")
    recal.add_argument("--target", required=True)
    recal.add_argument("--config", type=Path)
    recal.add_argument("--drift-variants", type=int, default=10, help="fresh variants per group in the drift check")
    recal.add_argument("--max-cv", type=float, default=3.0, metavar="PCT", help="passed to calibrate drift and collect")
    recal.add_argument(
        "--max-neighbour-busy",
        type=float,
        metavar="PCT",
        help="passed to calibrate drift and collect (default: theirs; 0, off, for a runner whose "
        "other CPUs run other jobs)",
    )
    recal.set_defaults(run=cmd_recalibrate)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ActionError as exc:
        message, code = str(exc), EXIT_USAGE
    except Exception as exc:  # a perfguard error (bad config, ...) from recalibrate: one line, its code
        if not hasattr(exc, "exit_code"):
            raise
        message, code = str(exc), exc.exit_code
    print(annotation("error", message, "perfguard action"), flush=True)
    sys.stderr.write(f"perfguard action: error: {message}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
