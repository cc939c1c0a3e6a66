"""The differential view rendered (report.where, report.flame): the where line, the top places whose
shares add up to 100 %, and the icicle, from a hand-made Attribution; the icicle also in headless
Chromium."""

from __future__ import annotations

import re

import pytest

from perfguard.document.codec import from_json, to_json
from perfguard.document.result import Attribution, BlockLoop, DiffNode, LoopStep
from perfguard.report import flame, where

J = BlockLoop(
    "j",
    [LoopStep("i", 64, "serial"), LoopStep("j", 64, "serial")],
    448,
    per_execution=8,
    peeled=1,
    unrolled=["d"],
    nest_name="scores",
    nest_index=1,
)
D = BlockLoop(
    "d",
    [LoopStep("i", 64, "serial"), LoopStep("d", 32, "serial")],
    960,
    per_execution=2,
    nest_name="scores",
    nest_index=1,
)


def node(kind, name, before, after, delta=None, children=(), **more) -> DiffNode:
    return DiffNode(
        kind, name, before, after, after - before if delta is None else delta, children=list(children), **more
    )


def view() -> Attribution:
    """attention on x86_64, the scores nest reordered: loop j new (+22,758), loop d gone (-8,976), expf moved."""
    j = node("loop", "j", 0, 22758, loop=J, children=[node("block", "0x402d70", 0, 22758, block=0)])
    d = node("loop", "d", 8976, 0, loop=D, children=[node("block", "0x402c80", 8976, 0, block=1)])
    i = node("loop", "i", 1145, 5715)
    scores = node("nest", "scores", 10121, 28473, children=[j, d, i])
    other = node("unplaced", "loop not decided", 27939, 27604)
    kernel = node("function", "main_compute_", 38060, 56077, children=[scores, other])
    expf = node(
        "function",
        "__expf_fma",
        68198,
        68189,
        0.0,
        unchanged=True,
        children=[node("block", "0x404369", 68198, 68189, 0.0, unchanged=True)],
    )
    a = Attribution(
        "pipeline",
        "pipeline-v2-x",
        3.0e9,
        106258 + 1000,
        124266 + 1012,
        code_cycles=18017,
        stall_cycles=12,
        moved_cycles=-9,
        unchanged_blocks=154,
        nodes=[expf, kernel],
    )
    for n in _walk(a.nodes):
        n.share_pct = a.share(n.delta_cycles)
    return a


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n.children)


def test_the_view_adds_up_and_round_trips_through_the_report_json():
    a = view()
    assert a.code_cycles + a.stall_cycles + a.moved_cycles == a.change_cycles == 18020
    again = from_json(Attribution, to_json(a), "r.json")
    assert again == a and again.nodes[1].children[0].children[0].loop == J


def test_the_where_line_names_the_loop_with_the_largest_change_and_what_offset_it():
    line = where.where_line(view())
    assert line == (
        "loop j of nest scores in main_compute_ [i[64] > j[64]; 8 iterations per execution: unrolled "
        "or vectorised by LLVM; 1 iteration peeled off by LLVM; d unrolled or vectorised into it by "
        "LLVM]: +22,758 cycles = 126 % of the change, offset by -8,976 in loop d of nest scores in "
        "main_compute_ (pipeline model: +18,020 cycles per call)"
    )
    # an improvement names the place that got cheaper
    a = view()
    a.current_cycles = a.baseline_cycles - 1000.0
    assert where.where_line(a).startswith("loop d of nest scores in main_compute_")


def test_cache_miss_stalls_lead_when_they_moved_most_then_the_codes_largest_change():
    a = view()
    a.stall_cycles, a.current_cycles = -40000.0, a.current_cycles - 40012.0  # misses fell, the code got slower
    line = where.where_line(a)
    assert line.startswith("cache-miss stalls: -40,000 cycles = ") and "(misses are counted per run" in line
    assert "; in the code: loop j of nest scores in main_compute_ " in line  # +22,758: the largest, against it


def test_the_top_places_and_the_rest_add_up_to_the_whole_change():
    a = view()
    lines, rest = where.top_lines(a)
    assert [line.split(" [")[0].split(":")[0] for line in lines] == [
        "loop j of nest scores in main_compute_",
        "loop d of nest scores in main_compute_",
        "loop i of nest scores in main_compute_",
    ]
    shares = [float(re.search(r"\((-?\d+) %\)$", line).group(1)) for line in lines]
    assert shares == [126, -50, 25]
    assert rest == "other changed code -335 (-2 %); cache-miss stalls +12 (0 %); code that only moved -9 (0 %)"
    exact = [a.share(n.delta_cycles) for n in a.nodes[1].children[0].children] + [
        a.share(-335),
        a.share(12),
        a.share(-9),
    ]
    assert sum(exact) == pytest.approx(100.0)
    assert where.ledger(a) == (
        "pipeline model: +18,020 cycles per call = changed code +18,017 + cache-miss stalls "
        "+12 + code that only moved -9 (154 blocks are the same code as the baseline's)"
    )


def test_code_that_only_moved_is_never_a_place():
    a = view()
    assert all("__expf_fma" not in where.name(p) for p in where.places(a))
    # even when its cycles are the only ones that changed
    a.nodes[1] = node("function", "main_compute_", 38060, 38060)
    a.code_cycles, a.stall_cycles, a.moved_cycles = 0.0, 0.0, -9.0
    a.current_cycles = a.baseline_cycles - 9.0
    assert where.places(a) == [] and where.where_line(a).startswith("no changed code")


def test_the_icicle_nests_its_rows_colours_by_change_and_escapes_names():
    a = view()
    a.nodes[1].children[0].name = "<scores & co>"
    svg = flame.icicle(a, "s0-flame", lambda i: f"s0-b{i}")
    assert svg.startswith('<svg class="flame" id="s0-flame"') and "<script" not in svg
    assert "&lt;scores &amp; co&gt;" in svg and "<scores" not in svg
    rects = [
        (float(x), float(y), float(w), fill)
        for x, y, w, fill in re.findall(
            r'<rect x="([\d.]+)" y="(\d+)" width="([\d.]+)" height="\d+" fill="([^"]+)"', svg
        )
    ]
    rows: dict[float, list] = {}
    for r in rects:
        rows.setdefault(r[1], []).append(r)
    assert sorted(rows) == [0, 22, 44, 66, 88]  # all, function, nest, loop, block
    assert sum(r[2] for r in rows[22]) == pytest.approx(flame.WIDTH, abs=0.5)  # functions and stalls fill the row
    for upper, lower in zip(sorted(rows)[1:], sorted(rows)[2:]):  # every node lies within one of the row above
        for x, _, w, _ in rows[lower]:
            assert any(px - 0.1 <= x and x + w <= px + pw + 0.1 for px, _, pw, _ in rows[upper])
    fills = {title: fill for title, fill in re.findall(r"<title>([^<]*)</title><rect [^>]*fill=\"([^\"]+)\"", svg)}
    by_name = {t.split(":")[0]: f for t, f in fills.items()}
    # loop j is code only this build has, loop d code only the baseline had: their own stripes, not "faster"
    assert by_name["loop j"] == "url(#s0-flame-added)" and by_name["loop d"] == "url(#s0-flame-removed)"
    assert '<pattern id="s0-flame-added"' in svg and '<pattern id="s0-flame-removed"' in svg
    assert "code only the baseline had (removed)" in svg
    assert by_name["function __expf_fma"] == flame.UNCHANGED  # moved, the same code: grey
    # the depth of a colour is the share of the whole change (+18,020): main_compute_ (+18,017, all of it) is
    # the darkest red, loop i (+4,570, 25 %) paler, the code not placed in a loop (-335, 2 %) a faint blue
    light = {
        name: int(re.fullmatch(r"hsl\((\d+), 75%, (\d+)%\)", by_name[name]).group(2))
        for name in ("function main_compute_", "loop i", "kernel code, loop not decided")
    }
    assert light == {"function main_compute_": 42, "loop i": 76, "kernel code, loop not decided": 87}
    assert by_name["kernel code, loop not decided"].startswith("hsl(210,")
    assert "slower (deeper: a larger share of the whole change)" in flame.legend()
    assert '<a href="#s0-b0">' in svg and '<a href="#s0-b1">' in svg  # changed blocks link to their disassembly


@pytest.mark.slow
def test_the_icicle_draws_in_headless_chromium(tmp_path):
    from PIL import Image

    from tests.report.test_report_browser import browse

    page = tmp_path / "flame.html"
    page.write_text(
        '<!doctype html><meta charset="utf-8"><body style="margin:0;background:#fff">'
        + flame.icicle(view(), "f")
        + "</body>"
    )
    shot = tmp_path / "flame.png"
    dom, requests = browse(page, tmp_path / "page", "--dump-dom", f"--screenshot={shot}")  # one launch: both
    assert requests == [] and dom.count("<rect ") >= 12
    with Image.open(shot) as img:
        img = img.convert("RGB")
        strip = [img.getpixel((x, 22 * 3 + 11)) for x in range(flame.WIDTH)]  # the loop row
        functions = [img.getpixel((x, 22 + 11)) for x in range(0, flame.WIDTH, 2)]
    reds = [p for p in strip if p[0] - p[2] > 40]  # loop j (added, red stripes), and i, got slower
    removed = [p for p in strip if max(p) - min(p) < 6 and 140 < p[0] < 250]  # loop d: removed, grey stripes
    greys = [p for p in functions if abs(p[0] - 0xCF) < 8 and abs(p[2] - 0xDC) < 8]  # expf: the same code
    assert len(reds) > 40 and len(removed) > 10 and len(greys) > 100, (len(reds), len(removed), len(greys))
