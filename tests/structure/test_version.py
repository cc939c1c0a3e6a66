"""The version is written once (perfguard.__version__), follows the scheme of docs/development.md
("Versions and releases") and is the newest release of CHANGELOG.md, which the docs site shows."""

from __future__ import annotations

import re
import tomllib

import yaml

import perfguard
from tests.conftest import REPO

RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", re.M)


def test_one_source_of_the_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "perfguard.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", perfguard.__version__)


def test_the_changelog_names_this_version_and_what_to_do():
    text = (REPO / "CHANGELOG.md").read_text()
    releases = RELEASE.findall(text)
    assert releases and releases[0][0] == perfguard.__version__, "release step: docs/development.md"
    assert text.index("## Unreleased") < text.index(f"## {releases[0][0]} (")
    versions = [tuple(map(int, v.split("."))) for v, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    newest = text.split(f"## {perfguard.__version__} (", 1)[1].split("\n## ", 1)[0]
    assert "### Upgrading" in newest and "exits 4, not 3" in newest and "schema 4" in newest


def test_the_changelog_is_in_the_docs_site():
    assert (REPO / "docs" / "changelog.md").read_text().strip().endswith('--8<-- "CHANGELOG.md"')
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    pages = [p for entry in nav for value in entry.values() for p in (value if isinstance(value, list) else [value])]
    assert any(isinstance(p, dict) and "changelog.md" in p.values() for p in pages)
