"""The documentation: generated reference parts up to date, every link resolving, the site building
with `mkdocs build --strict`, and a README that keeps its two set-up commands and points into it."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard import config as config_module
from tests.conftest import REPO

DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_parts_are_up_to_date():
    stale = [page.name for page, (text, wanted) in _reference().pages().items() if text != wanted]
    assert not stale, f"stale generated parts in {stale}: python scripts/docs_reference.py"


def test_every_config_key_is_documented_and_every_documented_key_exists():
    # [[kernel]] and [[model]] accept exactly KEY_DOCS' keys (config.py reads them from it); the
    # top table's keys are gathered from the sections, so they are compared here
    assert set(config_module.KEY_DOCS["perfguard"]) == config_module._TOP_KEYS


def _slug(heading: str) -> str:
    """Python-Markdown's (and GitHub's, for these headings) anchor of a heading."""
    text = re.sub(r"[`*_\[\]]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return re.sub(r"[\s]+", "-", text.strip())


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", [REPO / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_link_resolves(page):
    bad = []
    for match in LINK.finditer(page.read_text()):
        target = match.group(1) or match.group(2)
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(target)
        elif (
            anchor
            and file.suffix == ".md"
            and file.parent == DOCS
            and anchor not in _anchors(file)
            and not (file.name == "results.md")
        ):  # results.md includes benchmarks/RESULTS.md when built
            bad.append(target)
    assert not bad, f"{page.name}: links to nothing: {bad}"


def test_readme_keeps_its_two_commands_and_links_every_page():
    readme = (REPO / "README.md").read_text()
    assert "bash scripts/setup.sh && perfguard check" in readme and "bash scripts/test.sh" in readme
    linked = {Path(m.group(1).partition("#")[0]).name for m in LINK.finditer(readme) if m.group(1)}
    missing = {p.name for p in PAGES} - linked - {"gem5.md"}
    assert not missing, f"README does not link {sorted(missing)}"


def test_the_site_builds_strictly(tmp_path):
    mkdocs = shutil.which("mkdocs") or shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]'; scripts/test.sh does)")
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (tmp_path / "site" / "getting-started" / "index.html").read_text()
    assert "perfguard init" in page and "perfguard baseline update" in page
    families = (tmp_path / "site" / "families" / "index.html").read_text()
    assert "tile_m" in families and "qgemm" in families
    # the site works offline: no page loads a font, a script, a style or an image from elsewhere
    loads = re.compile(r'<(?:link|script|img|source)\b[^>]*\b(?:href|src)="((?:https?:)?//[^"]+)"')
    outside = {url for page in (tmp_path / "site").rglob("*.html") for url in loads.findall(page.read_text())}
    assert not outside, sorted(outside)
    css = "".join(p.read_text() for p in (tmp_path / "site").rglob("*.css"))
    assert "fonts.googleapis" not in css and "fonts.gstatic" not in css


def test_a_dead_link_fails_the_strict_build():
    """mkdocs reports a link to nothing at INFO unless told otherwise, and --strict fails on warnings only."""
    import yaml

    links = yaml.safe_load((REPO / "mkdocs.yml").read_text())["validation"]["links"]
    assert links == {"not_found": "warn", "anchors": "warn", "unrecognized_links": "warn"}


def test_the_report_screenshots_show_this_perfguards_pages():
    """docs/report-*.png are pictures of the golden failing check's pages as this perfguard renders them:
    a renderer or golden report changed since they were taken makes them stale."""
    spec = importlib.util.spec_from_file_location("docs_screenshots", REPO / "scripts" / "docs_screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sorted(module.recorded()) == sorted(module.PICTURES) and all((DOCS / n).is_file() for n in module.PICTURES)
    stale = sorted(k for k, v in module.current_digests().items() if module.recorded().get(k) != v)
    assert not stale, f"docs/{', docs/'.join(stale)} stale: python scripts/docs_screenshots.py"
    reports = (DOCS / "reports.md").read_text()
    assert all(f"({name})" in reports for name in module.PICTURES)
