"""Shared fixtures: temporary perfguard projects with real kernels, a private cache; and the order
xdist hands tests out in (the longest first, each module with module-scoped fixtures as one unit)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy  # noqa: F401  imported before any test: pytester's sys.modules snapshot would otherwise
import pytest  # drop numpy after a pytester test that first imported it, and numpy cannot load twice

from tests.projects import PullRequest, config_text, pull_request, with_cache

REPO = Path(__file__).resolve().parents[1]
DURATIONS = Path(__file__).resolve().parent / "durations.json"


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One build/simulation cache per test session, shared by its xdist workers (the entries are
    written atomically, so two workers may fill it at once): a kernel is built once per run."""
    path = os.environ.get("PERFGUARD_CACHE_DIR")
    if path:
        return Path(path)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.mktemp("perfguard-cache")
    shared = tmp_path_factory.getbasetemp().parent / "perfguard-cache"  # the workers' common basetemp
    shared.mkdir(exist_ok=True)
    return shared


def _unit(item: pytest.Item) -> str:
    """What must run on one worker in one stretch: a module whose tests share a fixture of a wider
    scope than the test that the module itself defines (a real cluster, a measured project) would
    otherwise set it up on each worker. (This file's cache_dir is meant for every worker.)"""
    defs = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    for name in item.fixturenames:
        for fixture in defs.name2fixturedefs.get(name, ()) if defs else ():
            if fixture.scope != "function" and (fixture.scope != "session" or fixture.baseid == module):
                return module
    return item.nodeid


QUICK = 0.5  # seconds: a test that took longer in the measured run is `slow` (not in the quick pass)
SHARED_SETUP = 2.0  # seconds: a module fixture that took longer to set up makes its module `slow`


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects and before xdist names the groups
def pytest_collection_modifyitems(config, items):
    """Tests measured at QUICK seconds or more (tests/durations.json: the seconds each took in a
    full run, written by `python -m tests.durations`) are `slow`, like those marked so by hand, and
    so are all the tests of a module whose module-scoped fixture took that long to set up:
    `-m "not slow"` is the quick pass. Under xdist, the longest work goes first, so that no long
    test starts last while the other worker idles, and a module whose tests share a module-scoped
    fixture is one `xdist_group` (`--dist loadgroup`) so that only one worker sets it up."""
    measured = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    known, setup = measured.get("seconds", {}), measured.get("setup", {})
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)
    for unit, members in units.items():
        shared = unit != members[0].nodeid and setup.get(members[0].nodeid, 0.0) >= SHARED_SETUP
        for item in members:
            if shared or known.get(item.nodeid, 0.0) >= QUICK:
                item.add_marker(pytest.mark.slow)
    if not hasattr(config, "workerinput"):
        return
    for unit, members in units.items():
        if unit != members[0].nodeid:
            for item in members:
                item.add_marker(pytest.mark.xdist_group(unit))
    unknown = 0.2  # a test not measured (new, renamed, or under the file's floor): a short one
    weight = {unit: sum(known.get(i.nodeid, unknown) for i in members) for unit, members in units.items()}
    items[:] = [i for unit in sorted(units, key=lambda u: -weight[u]) for i in units[unit]]


def write_project(root: Path, toml: str, files: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "perfguard.toml").write_text(textwrap.dedent(toml))
    for name, text in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "perfguard.toml"


@pytest.fixture
def project(tmp_path, cache_dir):
    """Factory: project(toml, files) -> config path, with the shared cache wired in."""

    def make(toml: str, files: dict[str, str] | None = None, name: str = "proj") -> Path:
        toml = textwrap.dedent(toml)
        if "cache_dir" not in toml:
            toml = toml.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache_dir}"\n', 1)
        return write_project(tmp_path / name, toml, files)

    return make


@pytest.fixture(scope="session")
def measured_pull_request(tmp_path_factory, cache_dir) -> PullRequest:
    """The pull request the Action, workflow and compare-worker tests run on, measured once per
    session: gemm_a and gemm_b on x86_64, main's baselines committed, branch faster-gemm regressing
    gemm_a (tests/projects.py). Read only: a test that changes it works on `.copy(tmp_path / ...)`."""
    root = tmp_path_factory.mktemp("pull-request") / "ws"
    root.mkdir()
    config = root / "perfguard.toml"
    config.write_text(with_cache(config_text(["x86_64"]), cache_dir))
    return pull_request(root, config)
