"""The HTML report in a real browser (Debian's headless Chromium), offline, from file://.

The pages are rendered from the golden reports of real checks (tests/report/golden/). Chromium runs
with every host name unresolvable and a net log; the test fails if a page asked for anything
outside the file system, if a chart has no data marks, or if the screenshot is one colour.

Then the charts are read the way a person reads them: a copy of each page (its Content Security
Policy removed, a measuring script added) reports where Chromium laid out every tick label, bar
and point; each axis is calibrated from its tick labels' text and positions, and every bar length
and point position read back through it must give the report's numbers. Labels must stay inside
their chart and not run into each other. Screenshots stay in the test's tmp folder for a look.
"""

from __future__ import annotations

import copy
import html
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from perfguard.document.report import Report
from perfguard.report.charts import VERDICT_COLOURS
from perfguard.report.html import kernel_file, write_html
from tests.report import golden


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
    cmd = [
        chromium(),
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--hide-scrollbars",
        f"--user-data-dir={work / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--log-net-log={netlog}",
        "--window-size=1400,1800",
        *mode,
        page.as_uri(),
    ]
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


def chart_marks(dom: str) -> dict[str, int]:
    """Per chart (svg id), how many data marks (bars, points) its data groups hold."""
    counts: dict[str, int] = {}
    for match in re.finditer(r'<svg class="chart" id="([^"]+)"(.*?)</svg>', dom, re.S):
        chart, body = match.groups()
        counts[chart] = sum(
            len(re.findall(r'class="mark\b', group))
            for group in re.findall(
                r'<g class="points" id="' + re.escape(chart) + r'-points[^"]*"'
                r"[^>]*>(.*?)</g>",
                body,
                re.S,
            )
        )
    return counts


def check_page(page: Path, work: Path, expect_charts: int) -> Path:
    shot = work / "screenshot.png"
    dom, requests = browse(page, work / "page", "--dump-dom", f"--screenshot={shot}")  # one launch: both
    assert requests == []
    assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', dom), "a link or source off the page"
    assert "<script" not in dom
    marks = chart_marks(dom)
    assert len(marks) == expect_charts, marks
    assert all(n > 0 for n in marks.values()), marks  # every chart drew its data
    with Image.open(shot) as img:
        img = img.convert("RGB")
        assert img.size == (1400, 1800)
        colours = img.getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 50  # text, charts, colours: not a blank page
        assert img.getextrema() != ((255, 255), (255, 255), (255, 255))
    return shot


# -- reading the charts as laid out --------------------------------------------------------------

MEASURE = """<script>
(() => {
  const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const charts = [...document.querySelectorAll("svg.chart")].map(svg => ({
    id: svg.id, box: box(svg),
    title: box(svg.querySelector("text.title")),
    texts: [...svg.querySelectorAll("text")].map(t => ({text: t.textContent, box: box(t),
      where: t.closest("g.tick") ? "tick" : t.closest("g.legend") ? "legend" : (t.getAttribute("class") || "")})),
    axes: Object.fromEntries(["x", "y"].map(a => {
      const g = svg.querySelector("g.axis." + a);
      return [a, {kind: ["linear", "log", "band"].find(k => g.classList.contains(k)),
                  ticks: [...g.querySelectorAll("g.tick")].map(t => ({text: t.querySelector("text").textContent,
                    label: box(t.querySelector("text")),
                    line: t.querySelector("line") ? box(t.querySelector("line")) : null}))}];
    })),
    marks: [...svg.querySelectorAll("g.points .mark")].map(m => ({group: m.closest("g.points").id,
      kind: m.getAttribute("class"), box: box(m), fill: getComputedStyle(m).fill})),
    zero: svg.querySelector("line.zero") ? box(svg.querySelector("line.zero")) : null,
  }));
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify(charts);
  document.body.appendChild(out);
})();
</script>"""


def measure(page: Path, work: Path) -> dict[str, dict]:
    """Every chart of `page` as Chromium laid it out, by chart id (CSS pixels). Without its Content
    Security Policy the page could load anything it names: it must ask for nothing all the same."""
    copy_ = page.with_name(page.stem + ".measured.html")
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    copy_.write_text(text.replace("</body>", MEASURE + "</body>"))
    dom, requests = browse(copy_, work, "--dump-dom")
    assert requests == []
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    charts = {c["id"]: c for c in json.loads(html.unescape(found.group(1)))}
    assert all(c["marks"] for c in charts.values()), {k: len(c["marks"]) for k, c in charts.items()}
    return charts


UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
SUFFIX = {"k": 1e3, "M": 1e6, "G": 1e9}


def tick_value(text: str) -> float:
    """What a tick label says: '2.5 ms', '+10 %', '0', '1k', '0.01'."""
    text = text.strip()
    if m := re.fullmatch(r"([-+]?[\d.]+) (s|ms|us|ns)", text):
        return float(m.group(1)) * UNITS[m.group(2)]
    if m := re.fullmatch(r"([-+]?[\d.]+) %", text):
        return float(m.group(1))
    if m := re.fullmatch(r"([-+]?[\d.]+)([kMG])", text):
        return float(m.group(1)) * SUFFIX[m.group(2)]
    return float(text)


def centre(box: list[float], axis: str) -> float:
    return (box[0] + box[2]) / 2 if axis == "x" else (box[1] + box[3]) / 2


class Reader:
    """An axis calibrated from its tick labels: pixel -> value, as a reader of the chart would."""

    def __init__(self, chart: dict, axis: str):
        spec = chart["axes"][axis]
        self.log = spec["kind"] == "log"
        ticks = [(centre(t["line"], axis), tick_value(t["text"])) for t in spec["ticks"]]
        assert len(ticks) >= 2, f"{chart['id']}: {axis} axis has {len(ticks)} tick(s)"
        (p0, v0), (p1, v1) = ticks[0], ticks[-1]
        self.f = (lambda v: math.log10(v)) if self.log else (lambda v: v)
        self.p0, self.v0, self.scale = p0, self.f(v0), (self.f(v1) - self.f(v0)) / (p1 - p0)
        for p, v in ticks:  # evenly spaced labels: the axis is what it claims (linear or log)
            assert self.read(p) == pytest.approx(v, rel=1e-3, abs=1e-12 + 1e-3 * abs(v1 - v0)), (chart["id"], ticks)
        self.span = abs(v1 - v0)

    def read(self, pixel: float) -> float:
        value = self.v0 + (pixel - self.p0) * self.scale
        return 10.0**value if self.log else value


def same(read: float, expected: float, axis: Reader, slack: float = 0.01) -> bool:
    """Equal to what a chart can show: within `slack` of the axis span (linear), or of a decade (log)."""
    if axis.log:
        return abs(math.log10(read) - math.log10(expected)) <= slack * 3
    return abs(read - expected) <= slack * axis.span


def colour(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def check_layout(chart: dict) -> None:
    """Every text inside the chart; tick labels of an axis, legend entries and the title apart."""
    left, top, right, bottom = chart["box"]
    for t in chart["texts"]:
        x0, y0, x1, y1 = t["box"]
        assert left - 1 <= x0 and x1 <= right + 1 and top - 1 <= y0 and y1 <= bottom + 1, (chart["id"], t)

    def apart(boxes, what):
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                overlap = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
                assert overlap[0] <= 0.5 or overlap[1] <= 0.5, (chart["id"], what, a, b)

    for axis in ("x", "y"):
        apart([t["label"] for t in chart["axes"][axis]["ticks"]], f"{axis} tick labels")
    apart([chart["title"]] + [t["box"] for t in chart["texts"] if t["where"] == "legend"], "title and legend")


def check_deltas(chart: dict, data: dict) -> None:
    """A bar per moved result (the 40 largest changes), on the row of its label, as long as its
    delta, in its verdict's colour."""
    moved = sorted((r for r in worst_first(data) if r["delta_pct"]), key=lambda r: -abs(r["delta_pct"]))[:40]
    x = Reader(chart, "x")
    assert same(x.read(centre(chart["zero"], "x")), 0.0, x)
    rows = {t["text"]: centre(t["label"], "y") for t in chart["axes"]["y"]["ticks"]}
    assert list(rows) == [f"{r['kernel']} [{r['target']}]" for r in moved]
    bars = chart["marks"]
    assert len(bars) == len(moved)
    for r in moved:
        bar = min(bars, key=lambda b: abs(centre(b["box"], "y") - rows[f"{r['kernel']} [{r['target']}]"]))
        assert abs(centre(bar["box"], "y") - rows[f"{r['kernel']} [{r['target']}]"]) < 1.0
        end = bar["box"][2] if r["delta_pct"] > 0 else bar["box"][0]
        assert same(x.read(end), r["delta_pct"], x), (r["kernel"], x.read(end), r["delta_pct"])
        assert bar["fill"] == colour(VERDICT_COLOURS[r["verdict"]])


def points(chart: dict, group: str | None = None) -> list[tuple[float, float]]:
    """(x value, y value) of each mark's centre, read through the axes."""
    x, y = Reader(chart, "x"), Reader(chart, "y")
    return [
        (x.read(centre(m["box"], "x")), y.read(centre(m["box"], "y")))
        for m in chart["marks"]
        if group is None or m["group"].endswith(group)
    ]


def check_roofline(chart: dict, sides: list[dict]) -> None:
    """One point per side (baseline hollow, then current) at its intensity and GFLOP/s."""
    x, y = Reader(chart, "x"), Reader(chart, "y")
    assert len(chart["marks"]) == len(sides)
    for k, (side, mark) in enumerate(zip(sides, chart["marks"])):
        assert mark["group"] == f"{chart['id']}-points-{k}"
        assert same(y.read(centre(mark["box"], "y")), side["gflops"], y)
        if side["intensity"]:  # none: no DRAM traffic, drawn at the right edge
            assert same(x.read(centre(mark["box"], "x")), side["intensity"], x)
    if len(sides) == 2:
        assert chart["marks"][0]["fill"] == "rgb(255, 255, 255)"  # the baseline is hollow


def check_overview_roofline(chart: dict, results: list[dict]) -> None:
    """Every result of the target with a flop count, at its current intensity and GFLOP/s."""
    x, y = Reader(chart, "x"), Reader(chart, "y")
    expected = [r["analysis"]["current"] for r in results if r["analysis"] and r["analysis"]["current"]["gflops"]]
    read = points(chart)
    assert len(read) == len(expected)
    for side in expected:  # each drawn point matches one result (the order is by bound class)
        assert any(
            same(gy, side["gflops"], y) and (not side["intensity"] or same(gx, side["intensity"], x)) for gx, gy in read
        ), side


def check_phases(chart: dict, sides: list[tuple[str, dict]]) -> None:
    """Per row, the compute bar as long as the compute phase, the memory bar after it."""
    x = Reader(chart, "x")
    rows = {t["text"]: centre(t["label"], "y") for t in chart["axes"]["y"]["ticks"]}
    assert list(rows) == [label for label, _ in sides]
    for label, side in sides:
        on_row = [m for m in chart["marks"] if abs(centre(m["box"], "y") - rows[label]) < 1.0]
        compute, memory = (next(m for m in on_row if kind in m["kind"]) for kind in ("compute", "memory"))
        assert same(x.read(compute["box"][0]), 0.0, x) and same(x.read(compute["box"][2]), side["compute_s"], x)
        assert abs(memory["box"][0] - compute["box"][2]) < 0.5
        assert same(x.read(memory["box"][2]), side["compute_s"] + side["memory_s"], x)


def check_history(chart: dict, result: dict) -> None:
    """A point per baseline commit at its predicted time, oldest left, and the star at this run's."""
    history = result["history"]
    y = Reader(chart, "y")
    labels = [t["text"] for t in chart["axes"]["x"]["ticks"]]
    commits = [p["commit"][:7] for p in history["points"]] + ["this run"] * (result["current_time_s"] is not None)
    step = math.ceil(len(commits) / 12)
    assert labels == commits[::step]
    dots = [m for m in chart["marks"] if m["group"].endswith("-points")]
    assert len(dots) == len(history["points"])
    assert [centre(d["box"], "x") for d in dots] == sorted(centre(d["box"], "x") for d in dots)
    for dot, point in zip(dots, history["points"]):
        assert same(y.read(centre(dot["box"], "y")), point["time_s"], y)
    star = [m for m in chart["marks"] if m["group"].endswith("-points-current")]
    assert len(star) == 1 and same(y.read(centre(star[0]["box"], "y")), result["current_time_s"], y)


def check_calibration(chart: dict, result: dict) -> None:
    """A point per stored (predicted, native) pair at native time across, predicted time up."""
    pairs = [(p, n) for p, n in result["calibration"]["points"] if p > 0 and n > 0]
    x, y = Reader(chart, "x"), Reader(chart, "y")
    read = points(chart)
    assert len(read) == len(pairs)
    for (native, predicted), (p, n) in zip(read, pairs):
        assert same(native, n, x) and same(predicted, p, y)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Both golden reports rendered, with their JSON: {name: (folder, data)}."""
    out = {}
    for name, path in (("tiny", golden.TINY), ("repo", golden.REPOSITORY)):
        data = golden.load(path)
        folder = tmp_path_factory.mktemp(name)
        write_html(Report.from_json(copy.deepcopy(data)), folder)
        out[name] = (folder, data)
    return out


def worst_first(data: dict) -> list[dict]:
    """The results in the order every renderer lists them."""
    by_key = {(r["kernel"], r["target"]): r for r in data["results"]}
    return [by_key[r.kernel, r.target] for r in Report.from_json(copy.deepcopy(data)).worst_first()]


def sections(data: dict, kernel: str) -> list[dict]:
    """A kernel's results in the order of its page (worst verdict first)."""
    return [r for r in worst_first(data) if r["kernel"] == kernel]


def expected_charts(data: dict, kernel: str) -> int:
    return sum(
        1 + bool(r["analysis"]["current"]["gflops"]) + bool(r["history"]) + bool(r.get("calibration"))
        for r in sections(data, kernel)
    )


@pytest.mark.slow
def test_summary_and_kernel_pages_in_headless_chromium(pages, tmp_path):
    reports, data = pages["tiny"]
    index_shot = check_page(reports / "index.html", tmp_path / "index", expect_charts=2)
    kernel_shot = check_page(reports / kernel_file("gemm_16"), tmp_path / "gemm_16", expect_charts=3)
    assert index_shot.stat().st_size > 20_000 and kernel_shot.stat().st_size > 20_000


@pytest.mark.slow
@pytest.mark.parametrize("report, kernel", [("tiny", "gemm_16"), ("repo", "gemm_256")])
def test_charts_show_the_reports_numbers(pages, tmp_path, report, kernel):
    reports, data = pages[report]
    index = measure(reports / "index.html", tmp_path / "index")
    for chart in index.values():
        check_layout(chart)
    check_deltas(index["ov-deltas"], data)
    rooflines = sorted(k for k in index if k.startswith("ov-roof-"))
    targets = sorted({r["target"] for r in data["results"] if r["analysis"] and r["analysis"]["current"]["gflops"]})
    assert len(rooflines) == len(targets)
    for chart_id, target in zip(rooflines, targets):
        check_overview_roofline(index[chart_id], [r for r in data["results"] if r["target"] == target])
    assert set(index) == {"ov-deltas", *rooflines}

    page = measure(reports / kernel_file(kernel), tmp_path / kernel)
    assert len(page) == expected_charts(data, kernel)
    for chart in page.values():
        check_layout(chart)
    seen = set()
    for i, r in enumerate(sections(data, kernel)):
        current, baseline = r["analysis"]["current"], r["analysis"]["baseline"]
        check_phases(page[f"s{i}-phases"], [("baseline", baseline)] * bool(baseline) + [("current", current)])
        seen.add(f"s{i}-phases")
        if current["gflops"]:
            check_roofline(page[f"s{i}-roof"], [s for s in (baseline, current) if s and s["gflops"]])
            seen.add(f"s{i}-roof")
        if r["history"]:
            check_history(page[f"s{i}-history"], r)
            seen.add(f"s{i}-history")
        if r.get("calibration"):
            check_calibration(page[f"s{i}-cal"], r)
            seen.add(f"s{i}-cal")
    assert seen == set(page)  # every chart on the page was read


@pytest.mark.slow
def test_the_request_check_catches_a_page_that_loads_from_the_network(tmp_path):
    """Proof that the check above can fail: a page with a CDN script and image is caught."""
    page = tmp_path / "leaky.html"
    page.write_text(
        '<!doctype html><img src="https://cdn.example.org/x.png">'
        '<script src="http://scripts.example.com/a.js"></script><p>leak</p>'
    )
    _, requests = browse(page, tmp_path / "leaky", "--dump-dom")
    assert sorted(requests) == ["http://scripts.example.com/a.js", "https://cdn.example.org/x.png"]
