"""The HTML report in a real browser (Debian's headless Chromium), offline, from file://.

Chromium runs with every host name unresolvable and a net log; the test fails if the page asked
for anything outside the file system, if a chart has no data points, or if the screenshot is
one colour. Screenshots stay in the test's tmp folder for a look.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from perfguard.report.html import kernel_file
from tests.report.test_report import real_run  # noqa: F401  (the session fixture: one real check)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: PERFGUARD_EXTRAS=test bash scripts/setup.sh installs it")
    pytest.skip("chromium is not installed (PERFGUARD_EXTRAS=test bash scripts/setup.sh installs it)")


def browse(page: Path, work: Path, *mode: str) -> tuple[str, list[str]]:
    """Run headless Chromium on `page` offline; returns (stdout, URLs the page requested)."""
    work.mkdir(parents=True, exist_ok=True)
    netlog = work / "netlog.json"
    cmd = [chromium(), "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={work / 'profile'}",
           "--host-resolver-rules=MAP * ~NOTFOUND", f"--log-net-log={netlog}", "--window-size=1400,1800",
           *mode, page.as_uri()]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, page_requests(netlog)


def page_requests(netlog: Path) -> list[str]:
    """URLs requested on behalf of a file:// page (Chromium's own background requests have
    another network isolation key and are not the page's doing)."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] == start and "file://" in str(params.get("network_isolation_key", "")):
            urls.append(params.get("url", ""))
    return [u for u in urls if not u.startswith(("file:", "data:"))]


def chart_points(dom: str) -> dict[str, int]:
    """Per chart (svg id), how many data marks (bars, points) its data groups hold."""
    counts: dict[str, int] = {}
    for match in re.finditer(r'<svg class="chart" id="([^"]+)"(.*?)</svg>', dom, re.S):
        chart, body = match.groups()
        counts[chart] = sum(len(re.findall(r'class="mark\b', group))
                            for group in re.findall(r'<g class="points" id="' + re.escape(chart) + r'-points[^"]*"'
                                                    r'[^>]*>(.*?)</g>', body, re.S))
    return counts


def check_page(page: Path, work: Path, expect_charts: int) -> Path:
    dom, requests = browse(page, work / "dom", "--dump-dom")
    assert requests == []
    assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', dom), "a link or source off the page"
    assert "<script" not in dom
    points = chart_points(dom)
    assert len(points) == expect_charts, points
    assert all(n > 0 for n in points.values()), points  # every chart drew its data
    shot = work / "screenshot.png"
    _, requests = browse(page, work / "shot", f"--screenshot={shot}")
    assert requests == []
    with Image.open(shot) as img:
        img = img.convert("RGB")
        assert img.size == (1400, 1800)
        colours = img.getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50  # text, charts, colours: not a blank page
        assert img.getextrema() != ((255, 255), (255, 255), (255, 255))
    return shot


@pytest.mark.slow
def test_summary_and_kernel_pages_in_headless_chromium(real_run, tmp_path):  # noqa: F811
    reports = real_run["reports"]
    index_shot = check_page(reports / "index.html", tmp_path / "index", expect_charts=2)
    kernel_shot = check_page(reports / kernel_file("gemm_16"), tmp_path / "gemm_16", expect_charts=3)
    assert index_shot.stat().st_size > 20_000 and kernel_shot.stat().st_size > 20_000


@pytest.mark.slow
def test_the_request_check_catches_a_page_that_loads_from_the_network(tmp_path):
    """Proof that the check above can fail: a page with a CDN script and image is caught."""
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><img src="https://cdn.example.org/x.png">'
                    '<script src="http://scripts.example.com/a.js"></script><p>leak</p>')
    _, requests = browse(page, tmp_path / "leaky", "--dump-dom")
    assert sorted(requests) == ["http://scripts.example.com/a.js", "https://cdn.example.org/x.png"]
