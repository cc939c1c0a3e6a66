"""The house style, at zero: `ruff check .` (lint rules in pyproject.toml's [tool.ruff]), `ruff format
--check .` (the tree as the formatter writes it) and `mypy`
([tool.mypy]: perfguard/, check_untyped_defs) report nothing, and vulture finds no unused code in
perfguard/ beyond its whitelist (docs/development.md, "Lint, format and types"). Each test prints
what the tool found.

mypy keeps its cache in the checkout's .mypy_cache (pyproject.toml's cache_dir): a fresh clone's
first run checks every module (about 10 s on the reference machine), later runs only what changed
(about 1 s)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: install the test extra (PERFGUARD_EXTRAS=test bash scripts/setup.sh)")
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_finds_nothing():
    done = _run("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert done.returncode == 0, f"ruff check . found:\n{done.stdout}{done.stderr}"


def test_the_tree_is_formatted():
    done = _run("ruff", "format", "--no-cache", "--check", ".")
    assert done.returncode == 0, f"ruff format --check . (run `ruff format .`):\n{done.stdout}{done.stderr}"


@pytest.mark.slow
def test_mypy_finds_nothing():
    done = _run("mypy")
    assert done.returncode == 0, f"mypy found:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout


@pytest.mark.slow
def test_vulture_finds_no_unused_code():
    """A name the package defines and nothing uses is removed; one used from outside its Python
    (a registry's string, pytest, a template, JSON by field name) is in vulture_whitelist.py."""
    done = _run("vulture", "perfguard", "tests/structure/vulture_whitelist.py")
    assert done.returncode == 0, (
        f"vulture found unused code (remove it, or whitelist it with the reason):\n{done.stdout}{done.stderr}"
    )
