"""The HTML report: reports/index.html and reports/kernels/<kernel>.html, from perfguard.json.

jinja2 with autoescaping (kernel names, parameters, errors and commit messages are untrusted
text), CSS inline, charts inline SVG (perfguard.report.charts), no script, and a Content
Security Policy that forbids every load: the pages work offline, as a CI artifact.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from perfguard.atomic import atomic_write_text
from perfguard.guard.compare import VERDICTS
from perfguard.report import model_view, text
from perfguard.report.analysis import ROOF_FRACTION
from perfguard.report.results import normalise
from perfguard.sim.stats import STAT_FIELDS

KERNEL_DIR = "kernels"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,100}$")
_OVERVIEW_BARS = 40  # the delta chart of the summary shows the largest changes only
_LABELLED_POINTS = 30  # a summary roofline numbers its points up to this many


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("perfguard.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    for name in ("pct", "seconds", "signed_seconds", "count", "signed_count", "share", "nbytes", "number",
                 "joules", "bound", "model_kind", "threshold", "reference_kind", "block_side"):
        env.filters[name] = getattr(text, name)
    return env


def kernel_file(kernel: str) -> str:
    """The page of a kernel, relative to the report folder. Config-valid names map to themselves;
    anything else (a hand-edited JSON) to a hash, so no name can escape the folder."""
    name = kernel if _SAFE_NAME.fullmatch(kernel) else "k-" + hashlib.sha256(kernel.encode()).hexdigest()[:16]
    return f"{KERNEL_DIR}/{name}.html"


def _href(path: str) -> str:
    return quote(path, safe="/")


def anchor(target: str) -> str:
    """The id of a target's section on a kernel page."""
    return "t-" + re.sub(r"[^A-Za-z0-9_.-]", "_", target)


def _svg(markup: str) -> Markup:
    """matplotlib's SVG output: trusted markup (it escapes every text it draws)."""
    return Markup(markup)


def _current(r: dict[str, Any]) -> dict[str, Any]:
    return ((r.get("analysis") or {}).get("current")) or {}


def _row(r: dict[str, Any]) -> dict[str, Any]:
    """A result as the summary table shows it."""
    cur = _current(r)
    return {
        **r,
        "href": _href(kernel_file(r["kernel"])) + "#" + anchor(r["target"]),
        "bound": cur.get("bound"),
        "peak_pct": cur.get("peak_pct"),
        "why": "; ".join(filter(None, [text.limit_note(r), r.get("note") or "",
                                       (text.block_line(text.top_block(r)) if r.get("blocks") else _top_driver(r))
                                       if r.get("delta_pct") else ""])),
    }


def _top_driver(r: dict[str, Any]) -> str:
    moved = [d for d in ((r.get("analysis") or {}).get("drivers") or []) if d.get("time_s")]
    return text.driver(moved[0]) if moved else ""


def _overview_charts(data: dict[str, Any]) -> tuple[list[dict[str, Any]], Markup | None]:
    """Per target, a roofline of every kernel's current point; and the delta bars."""
    from perfguard.report import charts  # matplotlib: imported when a page is drawn, not with the CLI

    targets = data.get("targets") or {}
    rooflines = []
    for t_index, (name, target) in enumerate(sorted(targets.items())):
        rows = [r for r in data["results"] if r["target"] == name and _current(r).get("gflops")]
        if not rows:
            continue
        numbered = len(rows) <= _LABELLED_POINTS
        series: dict[Any, dict[str, Any]] = OrderedDict()
        for n, r in enumerate(rows, start=1):
            cur = _current(r)
            s = series.setdefault(cur.get("bound"), {"name": text.bound(cur.get("bound")),
                                                     "colour": charts.BOUND_COLOURS.get(cur.get("bound")),
                                                     "points": []})
            s["points"].append({"label": str(n) if numbered else None, "intensity": cur.get("intensity"),
                                "gflops": cur["gflops"]})
        svg = charts.roofline(target, list(series.values()), f"ov-roof-{t_index}", f"{name}: current run")
        rooflines.append({"target": name, "svg": _svg(svg), "numbered": numbered,
                          "rows": [_row(r) for r in rows]})
    moved = sorted((r for r in data["results"] if r.get("delta_pct")), key=lambda r: -abs(r["delta_pct"]))
    deltas = None
    if moved:
        title = "change in predicted time" + (f" (the {_OVERVIEW_BARS} largest)" if len(moved) > _OVERVIEW_BARS else "")
        deltas = _svg(charts.deltas(
            [{"label": f"{r['kernel']} [{r['target']}]", "delta_pct": r["delta_pct"],
              "threshold_pct": r.get("threshold_pct"), "verdict": r["verdict"]} for r in moved[:_OVERVIEW_BARS]],
            "ov-deltas", title))
    return rooflines, deltas


def _compared(sides: Any) -> dict[str, dict[str, str]] | None:
    """`perfguard compare`'s two revisions, as strings (a hand-edited report may hold anything)."""
    if not isinstance(sides, dict) or not all(isinstance(sides.get(k), dict) for k in ("base", "head")):
        return None
    return {k: {"ref": str(sides[k].get("ref")), "commit": str(sides[k].get("commit"))} for k in ("base", "head")}


def _common(data: dict[str, Any]) -> dict[str, Any]:
    results = data["results"]
    summary = data["summary"]
    status = "error" if summary.get("error") else "fail" if summary.get("regression") else "ok"
    return {
        "headline": text.headline(summary),
        "title": text.headline(summary, toolchain=False),  # the page says the toolchain sentence once, below
        "status": status,
        "summary": summary,
        "verdict_names": VERDICTS,
        "version": data.get("perfguard_version", "?"),
        "created": data.get("created", ""),
        "commit": data.get("commit"),
        "compared": _compared(data.get("compare")),
        "simulators": sorted({r["simulator"] for r in results if r.get("simulator")}),
        "models": sorted({text.model_kind(r) for r in results if r.get("model_id")}),
        "roof_fraction_pct": round(ROOF_FRACTION * 100),
        "self_consistency_note": text.self_consistency_note(results),
        "no_flops": sum(1 for r in results if r.get("measured") and not r.get("flops")),
        "flops_hint": text.FLOPS_HINT,
    }


def render_index(data: dict[str, Any]) -> str:
    data = normalise(data)
    rooflines, deltas = _overview_charts(data)
    return _env().get_template("index.html.j2").render(
        **_common(data),
        root="",
        results=[_row(r) for r in data["results"]],
        rooflines=rooflines,
        deltas=deltas,
        model_view=Markup(model_view.html(model_view.models_of(data))),  # escaped by model_view.html
    )


def _metric_rows(before: dict[str, Any] | None, after: dict[str, Any], target: dict[str, Any] | None):
    """(label, baseline, current, change) rows of the derived metrics table."""
    b = before or {}

    def row(label, key, fmt, change=True):
        old, new = b.get(key), after.get(key)
        diff = None
        if change and old is not None and new is not None and old != new:
            diff = text.pct(100.0 * (new - old) / old) if old else None
        return {"label": label, "baseline": fmt(old) if before else "", "current": fmt(new), "change": diff or ""}

    energy_b, energy_c = b.get("energy") or {}, after.get("energy") or {}
    peak = f" ({text.number(target['peak_gflops'])} GFLOP/s)" if target else ""
    bw = f" ({text.number(target['peak_bandwidth_gbs'])} GB/s)" if target else ""
    rows = [
        row("predicted time", "time_s", text.seconds),
        row("compute phase (analytical)", "compute_s", text.seconds),
        row("memory phase (analytical)", "memory_s", text.seconds),
        row("GFLOP/s", "gflops", text.number),
        row(f"share of peak{peak}", "peak_pct", text.share, change=False),
        row("DRAM traffic", "dram_bytes", text.nbytes),
        row("DRAM bandwidth (GB/s)", "bandwidth_gbs", text.number),
        row(f"share of peak bandwidth{bw}", "bandwidth_pct", text.share, change=False),
        row("arithmetic intensity (flop/B)", "intensity", text.number),
        row("share of the roof reached", "roof_pct", text.share, change=False),
        row("vector share of FP instructions", "vector_fp_share_pct", text.share, change=False),
        row("flops per FP instruction", "flops_per_fp_inst", text.number),
        {"label": "bound class", "baseline": text.bound(b.get("bound")) if before else "",
         "current": text.bound(after.get("bound")), "change": ""},
        {"label": "energy, estimate", "baseline": text.joules(energy_b.get("total_j")) if before else "",
         "current": text.joules(energy_c.get("total_j")),
         "change": text.pct(100.0 * (energy_c["total_j"] - energy_b["total_j"]) / energy_b["total_j"])
         if energy_b.get("total_j") and energy_c.get("total_j") and energy_b["total_j"] != energy_c["total_j"]
         else ""},
    ]
    return rows


def _stat_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    impact = {d["stat"]: d for d in ((r.get("analysis") or {}).get("drivers") or [])}
    deltas = r.get("stat_deltas") or {}
    stats = r.get("stats") or {}
    rows = []
    for name in STAT_FIELDS:
        d = deltas.get(name)
        if d is None and stats.get(name) is None:
            continue
        b = d["baseline"] if d else None
        c = d["current"] if d else stats.get(name)
        i = impact.get(name, {})
        moved = bool(i.get("time_s"))  # a counter the model does not price moved no time
        rows.append({"stat": name, "baseline": b, "current": c,
                     "delta": None if b is None or c is None else c - b,
                     "delta_pct": d.get("delta_pct") if d else None,
                     "time_s": i.get("time_s") if moved else None,
                     "share_pct": i.get("share_pct") if moved and abs(i.get("share_pct") or 0) >= 0.5 else None,
                     "changed": bool(d and b != c)})
    return rows


def _section(r: dict[str, Any], index: int, targets: dict[str, Any]) -> dict[str, Any]:
    """Everything one kernel x target section of a kernel page shows."""
    from perfguard.report import charts

    analysis = r.get("analysis") or {}
    before, after = analysis.get("baseline"), analysis.get("current")
    target = targets.get(r["target"])
    out: dict[str, Any] = {**r, "anchor": anchor(r["target"]), "findings": text.findings(r, most=5),
                           "metrics": None, "stat_rows": _stat_rows(r), "roofline": None, "phases": None,
                           "history": None, "calibration": None, "energy": None, "target_info": target}
    if after:
        out["metrics"] = _metric_rows(before, after, target)
        out["energy"] = after.get("energy")
        rows = ([{"label": "baseline", **before}] if before else []) + [{"label": "current", **after}]
        out["phases"] = _svg(charts.phases(rows, f"s{index}-phases", "predicted time split (analytical model)"))
        if target and after.get("gflops"):
            series = []
            if before and before.get("gflops"):
                series.append({"name": "baseline", "colour": charts.BASELINE_COLOUR, "hollow": True,
                               "points": [{"intensity": before.get("intensity"), "gflops": before["gflops"]}]})
            series.append({"name": f"current ({text.bound(after.get('bound'))})",
                           "colour": charts.VERDICT_COLOURS.get(r["verdict"], "#212121"),
                           "points": [{"intensity": after.get("intensity"), "gflops": after["gflops"]}]})
            out["roofline"] = _svg(charts.roofline(target, series, f"s{index}-roof", f"roofline: {r['target']}",
                                                   arrow=True))
    history = r.get("history")
    if history and history.get("points"):
        marks = {c["index"]: c for c in history.get("change_points") or []}
        out["history"] = {
            "omitted": 0, "min_step_pct": None, **history, "change_points": list(marks.values()),
            "svg": _svg(charts.history(history["points"], history.get("change_points") or [],
                                       r.get("current_time_s"), f"s{index}-history",
                                       f"predicted time over baseline commits: {r['target']}")),
            "rows": [{**p, "change": marks.get(i)} for i, p in reversed(list(enumerate(history["points"])))],
        }
    cal = r.get("calibration")
    if cal:
        points = cal.get("points") or []
        out["calibration"] = {
            "metrics": cal.get("metrics") or {},
            "count": len(points),
            "points_label": cal.get("points_label") or "the family's hold-out kernels",
            "svg": _svg(charts.calibration(points, f"s{index}-cal",
                                           f"{r.get('family') or r['kernel']} on {r['target']}: hold-out"))
            if points else None,
        }
    return out


def render_kernel(data: dict[str, Any], kernel: str, results: list[dict[str, Any]] | None = None) -> str:
    """The page of one kernel: its results in `data`, or `results` (one per target) when given."""
    data = normalise(data if results is None else {**data, "results": results})
    results = [r for r in data["results"] if r["kernel"] == kernel]
    targets = data.get("targets") or {}
    sections = [_section(r, i, targets) for i, r in enumerate(results)]
    head = results[0]
    return _env().get_template("kernel.html.j2").render(
        **_common(data),
        root="../",
        kernel=kernel,
        family=head.get("family"),
        params=sorted((head.get("params") or {}).items()),
        sections=sections,
    )


def by_kernel(results: list[dict[str, Any]]) -> "OrderedDict[str, list[dict[str, Any]]]":
    """Results grouped per kernel, in report order (worst verdict first)."""
    groups: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    for r in results:
        groups.setdefault(r["kernel"], []).append(r)
    return groups


def write_html(data: dict[str, Any], report_dir: Path) -> Path:
    """index.html plus one page per kernel; pages of kernels no longer in the report are removed."""
    report_dir = Path(report_dir)
    data = normalise(data)
    written = set()
    for kernel, results in by_kernel(data["results"]).items():
        path = report_dir / kernel_file(kernel)
        atomic_write_text(path, render_kernel(data, kernel, results))
        written.add(path.name)
    pages = report_dir / KERNEL_DIR
    if pages.is_dir():
        for old in pages.glob("*.html"):
            if old.name not in written:
                old.unlink()
    path = report_dir / "index.html"
    atomic_write_text(path, render_index(data))
    return path
