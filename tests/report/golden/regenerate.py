"""Regenerate the golden reports that the report/, judge/ and runs/ tests read, from real checks.

    cd <repository root>
    PERFGUARD_CACHE_DIR=/tmp/golden-cache python -m tests.report.golden.regenerate [--only tiny|repo|captured] [-j 2]

The report tests render pages from these files instead of running TVM, the cross compilers and
QEMU themselves; tests/end_to_end/test_report_pages.py runs the tiny check for real once. Run
this script when tests/report/test_golden.py says the files are stale (a report field was added,
renamed or removed) or when what a check measures changed (a simulator or model fix), then
review the diff and commit it. It writes, next to itself:

- tiny/: a two-kernel project (gemm_16 and gemv_16 on x86_64, analytical model) whose baselines
  are committed to git, then checked after gemm_16's schedule went scalar: perfguard.json (one
  regression, one unchanged, a history of one commit) and baselines/ (the statistics
  tests/runs/test_report_build.py rebuilds the report's analysis and history from; the project's
  perfguard.toml is TINY below).
- repo/perfguard.json: this repository's own perfguard.toml, checked in a clone of HEAD after
  gemm_256's tile_k went from 4 to 1 (a failing check: gemm_256 regressed), with Zen 1's gemm model
  (benchmarks/profiles/amd-23-1) as the project's own baselines/models/x86_64/gemm.json, so a
  regression is judged by a calibrated model beside the depthwise model the x86_64 machine profile
  carries: every chart a report has (calibration scatters, histories over the baselines' commits,
  [[model]] totals, pipeline-model blocks) on real data, and the report benchmarks/report_time.py
  renders.

With no --only it also writes tests/captured/ (tests/captured/regenerate.py: the statistics of
real runs that the judge and calibration tests read).

The config path each report records is written relative ("perfguard.toml"): it would otherwise
name a temporary folder. Nothing else is edited.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

# The analytical model by name: the tests check its phase split and its driver attribution, which
# add up exactly (the pipeline model's block attribution is tested in tests/predict).
TINY = """\
[perfguard]
targets = ["x86_64"]
cache_dir = "{cache}"
model = "analytical"

[[kernel]]
name = "gemm_16"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = 16, N = 16, K = 16, tile_m = 8, tile_n = 16, tile_k = 8, vector = 8 }}

[[kernel]]
name = "gemv_16"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = {{ M = 16, K = 32 }}

# its intervals: the verdict pairs timed on an Intel Xeon 6/167 (perfguard/machine_profiles)
[target.x86_64]
machine = "intel-6-167"
"""
SLOWER = ("tile_k = 8, vector = 8", "tile_k = 1, vector = 1")  # scalar, and a loop per k: a real regression
BASELINE_COMMIT = "baselines for the tiny kernels"
# gemm_256's tile_k 4 -> 1 (its params line ends with unroll = 4, its threshold follows): a loop per k,
# a regression, the failing check a pull request meets (issue 38)
REPO_EDIT = (
    "tile_k = 4, vector = 8, unroll = 4 }\nthreshold = 1.0",
    "tile_k = 1, vector = 8, unroll = 4 }\nthreshold = 1.0",
)


def tiny_toml(cache: Path) -> str:
    return TINY.format(cache=cache)


def commit_all(root: Path, message: str, *paths: str) -> None:
    import git

    repo = git.Repo(root) if (root / ".git").exists() else git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "perfguard tests")
        cw.set_value("user", "email", "tests@perfguard.invalid")
    repo.index.add(list(paths))
    repo.index.commit(message)


def run_tiny(root: Path, cache: Path) -> int:
    """The tiny project in `root`: baselines committed, gemm_16 made scalar, checked. Returns the
    check's exit code (1: the regression); the reports are in root/reports."""
    from perfguard.shells.cli import main

    root.mkdir(parents=True, exist_ok=True)
    config = root / "perfguard.toml"
    config.write_text(tiny_toml(cache))
    if main(["baseline", "update", "--config", str(config), "-j", "1"]) != 0:
        raise SystemExit("baseline update failed")
    commit_all(root, BASELINE_COMMIT, "perfguard.toml", "baselines")
    config.write_text(config.read_text().replace(*SLOWER))
    return main(["check", "--config", str(config), "-j", "1"])


def _relative_config(report: Path, out: Path) -> None:
    data = json.loads(report.read_text())
    data["config"] = "perfguard.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")


def tiny(cache: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="golden-tiny-") as tmp:
        root = Path(tmp) / "project"
        code = run_tiny(root, cache)
        if code != 1:
            raise SystemExit(f"the tiny check exited {code}, not 1 (a regression)")
        out = HERE / "tiny"
        shutil.rmtree(out, ignore_errors=True)
        _relative_config(root / "reports" / "perfguard.json", out / "perfguard.json")
        shutil.copytree(root / "baselines", out / "baselines")
    print(f"wrote {out}")


def repo(cache: Path, jobs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="golden-repo-") as tmp:
        clone = Path(tmp) / "perfguard"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        config = clone / "perfguard.toml"
        text = config.read_text()
        if REPO_EDIT[0] not in text:
            raise SystemExit(f"{config}: gemm_256's schedule is not as this script expects; update REPO_EDIT")
        config.write_text(text.replace(*REPO_EDIT, 1))
        own = clone / "baselines" / "models" / "x86_64" / "gemm.json"
        own.parent.mkdir(parents=True)
        shutil.copyfile(clone / "benchmarks" / "profiles" / "amd-23-1" / "models" / "x86_64" / "gemm.json", own)
        check = [sys.executable, "-m", "perfguard.shells.cli", "check", "--config", str(config), "-j", str(jobs)]
        proc = subprocess.run(check, cwd=clone, env={**_env(), "PERFGUARD_CACHE_DIR": str(cache)})
        if proc.returncode not in (0, 1):
            raise SystemExit(f"the repository's check exited {proc.returncode}")
        _relative_config(clone / "reports" / "perfguard.json", HERE / "repo" / "perfguard.json")
    print(f"wrote {HERE / 'repo'}")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("tiny", "repo", "captured"))
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    cache = Path(os.environ.get("PERFGUARD_CACHE_DIR") or tempfile.mkdtemp(prefix="golden-cache-"))
    if args.only in (None, "tiny"):
        tiny(cache)
    if args.only in (None, "repo"):
        repo(cache, args.jobs)
    if args.only in (None, "captured"):
        from tests.captured import regenerate as captured

        captured.main(cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
