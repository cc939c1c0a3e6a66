"""Shared fixtures: temporary perfguard projects with real kernels, a private cache."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy  # noqa: F401  imported before any test: pytester's sys.modules snapshot would otherwise
import pytest  # drop numpy after a pytester test that first imported it, and numpy cannot load twice

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One build/simulation cache per test session (per xdist worker)."""
    path = os.environ.get("PERFGUARD_CACHE_DIR")
    return Path(path) if path else tmp_path_factory.mktemp("perfguard-cache")


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
            toml = toml.replace("[perfguard]\n", f"[perfguard]\ncache_dir = \"{cache_dir}\"\n", 1)
        return write_project(tmp_path / name, toml, files)

    return make
