"""A user's pytest run in a project of theirs, two ways: `run` starts `python -m pytest` as the user
does (a subprocess: for what crosses a process boundary, such as xdist's workers or what a plain
run imports), `InProcess.run` is pytest in this process (pytester: for the plugin's own logic,
without another interpreter importing TVM). Both give the exit code, the output and the JUnit XML."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

_RUNS = itertools.count()


@dataclass
class Run:
    """One pytest run in a user's project: its exit code, output and JUnit XML."""

    ret: int
    out: str
    err: str
    junitxml: Path


def run(root: Path, *args: str) -> Run:
    """pytest in `root` as the user runs it (a subprocess, `root` importable, a HOME of its own,
    none of this session's pytest or xdist variables)."""
    junitxml = root / f"junit-{next(_RUNS)}.xml"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS" and not k.startswith("PYTEST_XDIST_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")])), HOME=str(root), PY_COLORS="0"
    )
    # Without hypothesis's plugin, which this environment has for its own tests: it costs each pytest
    # process (the xdist controller and every worker) about 1.6 CPU-s to load, for nothing here.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"--basetemp={root / f'basetemp-{next(_RUNS)}'}",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "-rA",
            f"--junitxml={junitxml}",
            *args,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, junitxml)


class InProcess:
    """pytest in this process, in pytester's folder (`root`: the user's project goes there), with
    `root` importable and HOME there, as `run` has them."""

    def __init__(self, pytester: pytest.Pytester):
        self.pytester = pytester
        self.root = pytester.path
        pytester.syspathinsert()  # the project's own modules (mykernels/), as PYTHONPATH in `run`

    def run(self, *args: str) -> Run:
        junitxml = self.root / f"junit-{next(_RUNS)}.xml"
        result = self.pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA", f"--junitxml={junitxml}", *args)
        return Run(int(result.ret), result.stdout.str(), result.stderr.str(), junitxml)


def outcomes(result: Run) -> dict[str, str]:
    """node id -> PASSED/FAILED/SKIPPED/ERROR, from the run's JUnit XML (the same with or without xdist)."""
    found = {}
    for case in ET.parse(result.junitxml).iter("testcase"):
        module = case.get("classname").replace(".", "/")
        nodeid = f"{module}::{case.get('name')}" if module == "perfguard" else f"{module}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        state = (
            "FAILED"
            if "failure" in kinds
            else "ERROR"
            if "error" in kinds
            else "SKIPPED"
            if "skipped" in kinds
            else "PASSED"
        )
        assert nodeid not in found, f"{nodeid} reported twice"
        found[nodeid] = state
    return found
