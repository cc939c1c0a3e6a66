"""The HTML report: reports/index.html and reports/kernels/<kernel>.html, from the typed report.

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
from perfguard.document import model_labels
from perfguard.document.report import STATISTICS, Report, TargetSummary, worst_first
from perfguard.document.result import ROOF_FRACTION, Metrics, Result
from perfguard.document.verdicts import UNCHANGED, VERDICTS
from perfguard.report import charts, disassembly, failures, flame, model_view, numbers, text, where

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
    for name in (
        "pct",
        "seconds",
        "signed_seconds",
        "count",
        "signed_count",
        "share",
        "nbytes",
        "number",
        "joules",
        "threshold",
    ):
        env.filters[name] = getattr(numbers, name)
    for name in ("bound", "block_side"):
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
    """A chart of perfguard.report.charts: trusted markup (its templates escape every text they draw)."""
    return Markup(markup)


def _current(r: Result) -> Metrics | None:
    return r.analysis.current if r.analysis else None


def _row(r: Result) -> dict[str, Any]:
    """A result as the summary table shows it."""
    cur = _current(r)
    return {
        **vars(r),
        "href": _kernel_href(r.kernel, r.target),
        "bound": cur.bound if cur else None,
        "peak_pct": cur.peak_pct if cur else None,
        "model": text.model_kind(r),
        "machine_tag": text.machine_tag(r),
        "machine_text": text.machine_line(r),
        "interval_text": text.interval(r),
        "verdict_text": text.verdict_detail(r),
        "what": model_labels.label(r.params) if model_view.is_model_kernel(r) else "",  # a model's kernel: its layer
        "why": ""
        if r.orphaned
        else "; ".join(
            filter(
                None,
                [
                    text.limit_note(r),
                    r.note or "",
                    text.interval_note(r),
                    text.what_changed_most(r) if r.delta_pct else "",
                ],
            )
        ),
    }


def _overview_charts(report: Report, results: list[Result]) -> tuple[list[dict[str, Any]], Markup | None]:
    """Per target, a roofline of every kernel's current point; and the delta bars."""
    rooflines = []
    # one number per kernel on every target's roofline (the caption of each lists its own)
    drawn = [r for r in results if r.target in report.targets and (cur := _current(r)) and cur.gflops]
    number = {kernel: n for n, kernel in enumerate(dict.fromkeys(r.kernel for r in drawn), start=1)}
    numbered = len(number) <= _LABELLED_POINTS
    for t_index, (name, target) in enumerate(sorted(report.targets.items())):
        rows = [r for r in drawn if r.target == name]
        if not rows:
            continue
        series: dict[Any, dict[str, Any]] = OrderedDict()
        for r in rows:
            cur = _current(r)
            assert cur is not None  # drawn: each has one
            s = series.setdefault(
                cur.bound, {"name": text.bound(cur.bound), "colour": charts.BOUND_COLOURS.get(cur.bound), "points": []}
            )
            s["points"].append(
                {"label": str(number[r.kernel]) if numbered else None, "intensity": cur.intensity, "gflops": cur.gflops}
            )
        svg = charts.roofline(target, list(series.values()), f"ov-roof-{t_index}", f"{name}: current run")
        rooflines.append(
            {
                "target": name,
                "svg": _svg(svg),
                "numbered": numbered,
                "rows": [{**_row(r), "number": number[r.kernel]} for r in sorted(rows, key=lambda r: number[r.kernel])],
            }
        )
    moved = sorted((r for r in results if r.delta_pct), key=lambda r: -abs(r.delta_pct or 0.0))
    deltas = None
    if moved:
        title = "change in predicted time" + (f" (the {_OVERVIEW_BARS} largest)" if len(moved) > _OVERVIEW_BARS else "")
        deltas = _svg(
            charts.deltas(
                [
                    {
                        "label": f"{r.kernel} [{r.target}]",
                        "delta_pct": r.delta_pct,
                        "threshold_pct": r.threshold_pct,
                        "verdict": r.verdict,
                        "low_pct": r.interval.low_pct if r.interval else None,
                        "high_pct": r.interval.high_pct if r.interval else None,
                    }
                    for r in moved[:_OVERVIEW_BARS]
                ],
                "ov-deltas",
                title,
            )
        )
    return rooflines, deltas


def _common(report: Report, results: list[Result]) -> dict[str, Any]:
    summary = report.summary
    status = (
        "fail"
        if summary.wrong_result
        else "error"
        if summary.error or summary.orphaned
        else "fail"
        if summary.regression or summary.model_regressions
        else "ok"
    )
    return {
        "headline": text.headline(summary),
        "title": text.headline(summary, toolchain=False),  # the page says the toolchain sentence once, below
        "status": status,
        "counts": {name: summary.count(name) for name in VERDICTS},
        "changed": summary.changed,  # [[model]] kernels whose shapes changed (judge.model_changes)
        "verdict_names": VERDICTS,
        "version": report.perfguard_version,
        "created": report.created,
        "commit": report.commit,
        "compared": report.compared(),
        "simulators": sorted({r.simulator for r in results if r.simulator}),
        "models": sorted({text.model_kind(r) for r in results if r.model_id}),
        "machine_lines": text.machine_lines(results),
        "roof_fraction_pct": round(ROOF_FRACTION * 100),
        "self_consistency_note": text.self_consistency_note(results),
        # a [[model]]'s kernels carry TVM's flop estimate; one without it has no [[kernel]] table to add it to
        "no_flops": sum(1 for r in results if r.measured and r.flops is None and not model_view.is_model_kernel(r)),
        "flops_hint": text.FLOPS_HINT,
    }


def _kernel_href(kernel: str, target: str) -> str:
    """The link from index.html to a kernel's section for `target` on its page."""
    return _href(kernel_file(kernel)) + "#" + anchor(target)


def _failure(f: failures.Failure) -> dict[str, Any]:
    """A failing result's line as index.html shows it, linked to its page (a model total: its table)."""
    href = "#" + model_view.anchor(f.model) if f.model is not None else _kernel_href(f.kernel, f.target)
    return {**vars(f), "href": href}


def _chip_link(verdict: str, count: int, failing: list[dict[str, Any]], shown: dict[str, bool]) -> str:
    """Where a verdict's count chip leads: the section listing those results ("" when none does)."""
    if not count:
        return ""
    if any(f["verdict"] == verdict for f in failing):
        return "#failing"
    if verdict == UNCHANGED:
        return "#unchanged" if shown["unchanged"] else ""
    return "#results" if shown["results"] else "#models" if shown["models"] else ""


def render_index(report: Report) -> str:
    """The failing results first (one line each), the overview chart, the models and the results
    that changed; the unchanged ones folded last; the rooflines and definitions after."""
    results = report.worst_first()
    rooflines, deltas = _overview_charts(report, results)
    in_models = model_view.covered(report)  # a model's kernels are listed in its view
    moved, still = model_view.split(report.models)
    rows = [r for r in results if (r.kernel, r.target) not in in_models]
    failing = [_failure(f) for f in failures.failures(report)]
    changed = [_row(r) for r in rows if r.verdict != UNCHANGED]
    unchanged = [_row(r) for r in rows if r.verdict == UNCHANGED]
    common = _common(report, results)
    shown = {
        "failing": bool(failing),
        "models": bool(moved),
        "unchanged": bool(unchanged or still),
        "results": bool(changed) or not (moved or unchanged or still),
    }  # the sections the page has
    return (
        _env()
        .get_template("index.html.j2")
        .render(
            **common,
            root="",
            failing=failing,
            results=changed,
            unchanged=unchanged,
            chip_links={name: _chip_link(name, common["counts"][name], failing, shown) for name in VERDICTS},
            in_models=len([r for r in results if (r.kernel, r.target) in in_models]),
            unchanged_in_models=sum(len(m.kernels) for m in still),
            still_models=len(still),
            rooflines=rooflines,
            deltas=deltas,
            model_view=Markup(model_view.html(moved, _kernel_href)),  # escaped by model_view.html
            still_view=Markup(model_view.html(still, _kernel_href, heading="")),
            gate_rule=text.gate_rule(results),
        )
    )


def _metric_rows(before: Metrics | None, after: Metrics, target: TargetSummary | None):
    """(label, baseline, current, change) rows of the derived metrics table."""

    def row(label, key, fmt, change=True):
        old, new = getattr(before, key) if before else None, getattr(after, key)
        diff = None
        if change and old is not None and new is not None and old != new:
            diff = numbers.pct(100.0 * (new - old) / old) if old else None
        return {"label": label, "baseline": fmt(old) if before else "", "current": fmt(new), "change": diff or ""}

    energy_b = before.energy.total_j if before and before.energy else None
    energy_c = after.energy.total_j if after.energy else None
    peak = f" ({numbers.number(target.peak_gflops)} GFLOP/s)" if target else ""
    bw = f" ({numbers.number(target.peak_bandwidth_gbs)} GB/s)" if target else ""
    rows = [
        row("predicted time", "time_s", numbers.seconds),
        row("compute phase (analytical)", "compute_s", numbers.seconds),
        row("memory phase (analytical)", "memory_s", numbers.seconds),
        row("GFLOP/s", "gflops", numbers.number),
        row(f"share of peak{peak}", "peak_pct", numbers.share, change=False),
        row("DRAM traffic", "dram_bytes", numbers.nbytes),
        row("DRAM bandwidth (GB/s)", "bandwidth_gbs", numbers.number),
        row(f"share of peak bandwidth{bw}", "bandwidth_pct", numbers.share, change=False),
        row("arithmetic intensity (flop/B)", "intensity", numbers.number),
        row("share of the roof reached", "roof_pct", numbers.share, change=False),
        row("vector share of FP instructions", "vector_fp_share_pct", numbers.share, change=False),
        row("flops per FP instruction", "flops_per_fp_inst", numbers.number),
        {
            "label": "bound class",
            "baseline": text.bound(before.bound) if before else "",
            "current": text.bound(after.bound),
            "change": "",
        },
        {
            "label": "energy, estimate",
            "baseline": numbers.joules(energy_b) if before else "",
            "current": numbers.joules(energy_c),
            "change": numbers.pct(100.0 * (energy_c - energy_b) / energy_b)
            if energy_b and energy_c and energy_b != energy_c
            else "",
        },
    ]
    return rows


def phase_note(after: Metrics) -> str:
    """Whether the phase split adds up to the predicted time, and why not when it does not: the split
    is the analytical model's, the predicted time may be another model's (pipeline, calibrated)."""
    split = after.compute_s + after.memory_s
    if after.time_s is None or not split:
        return ""
    if abs(split - after.time_s) <= 1e-3 * after.time_s:
        return f"The phases add up to the predicted time ({numbers.seconds(after.time_s)})."
    return (
        f"The phases add up to {numbers.seconds(split)}, the analytical model's time; the predicted time "
        f"({numbers.seconds(after.time_s)}) is the scoring model's, which counts the same instructions with "
        f"another cost (the pipeline model schedules each block, a calibrated model weighs the counters): "
        f"read the split as shares, {100 * after.compute_s / split:.0f} % compute and "
        f"{100 * after.memory_s / split:.0f} % memory."
    )


def _stat_rows(r: Result) -> list[dict[str, Any]]:
    impact = {d.stat: d for d in (r.analysis.drivers if r.analysis else [])}
    stats = r.stats or {}
    rows = []
    for name in STATISTICS:
        d = r.stat_deltas.get(name)
        if d is None and stats.get(name) is None:
            continue
        b = d.baseline if d else None
        c = d.current if d else stats.get(name)
        i = impact.get(name)
        moved = bool(i and i.time_s)  # a counter the model does not price moved no time
        rows.append(
            {
                "stat": name,
                "baseline": b,
                "current": c,
                "delta": None if b is None or c is None else c - b,
                "delta_pct": d.delta_pct if d else None,
                "time_s": i.time_s if i and moved else None,
                "share_pct": i.share_pct if i and moved and abs(i.share_pct or 0) >= 0.5 else None,
                "changed": bool(d and b != c),
            }
        )
    return rows


def _section(r: Result, index: int, targets: dict[str, TargetSummary]) -> dict[str, Any]:
    """Everything one kernel x target section of a kernel page shows."""
    before = r.analysis.baseline if r.analysis else None
    after = r.analysis.current if r.analysis else None
    target = targets.get(r.target)
    out: dict[str, Any] = {
        **vars(r),
        "anchor": anchor(r.target),
        "findings": text.findings(r, most=5),
        "model": text.model_kind(r),
        "reference_text": text.reference_kind(r),
        "interval_note": text.interval_note(r),
        "interval_text": text.interval(r),
        "verdict_detail": text.verdict_detail(r),
        "machine_text": text.machine_line(r),
        "change": text.change_text(r),
        "gate_rule": text.gate_rule([r]),
        "in_model": model_view.is_model_kernel(r),
        "story": "",
        "metrics": None,
        "stat_rows": (stat_rows := _stat_rows(r)),
        "stat_effects": any(row["time_s"] is not None for row in stat_rows),
        "roofline": None,
        "phases": None,
        "phase_note": "",
        "history": None,
        "calibration": None,
        "energy": None,
        "target_info": target,
        "bytes_moved": text.bytes_moved(r),
    }
    out.update(_where(r, index))
    if after:
        out["metrics"] = _metric_rows(before, after, target)
        out["energy"] = after.energy
        rows = ([{"label": "baseline", **vars(before)}] if before else []) + [{"label": "current", **vars(after)}]
        out["phases"] = _svg(charts.phases(rows, f"s{index}-phases", "predicted time split (analytical model)"))
        out["phase_note"] = phase_note(after)
        if target and after.gflops:
            series = []
            if before and before.gflops:
                series.append(
                    {
                        "name": "baseline",
                        "colour": charts.BASELINE_COLOUR,
                        "hollow": True,
                        "points": [{"intensity": before.intensity, "gflops": before.gflops}],
                    }
                )
            series.append(
                {
                    "name": f"current ({text.bound(after.bound)})",
                    "colour": charts.VERDICT_COLOURS.get(r.verdict, "#212121"),
                    "points": [{"intensity": after.intensity, "gflops": after.gflops}],
                }
            )
            out["roofline"] = _svg(
                charts.roofline(target, series, f"s{index}-roof", f"roofline: {r.target}", arrow=True)
            )
    history = r.history
    if history and history.points:
        marks = {c.index: c for c in history.change_points}
        out["history"] = {
            "omitted": history.omitted,
            "min_step_pct": history.min_step_pct,
            "points": history.points,
            "change_points": list(marks.values()),
            "svg": _svg(
                charts.history(
                    history.points,
                    history.change_points,
                    r.current_time_s,
                    f"s{index}-history",
                    f"predicted time over baseline commits: {r.target}",
                )
            ),
            "rows": [{**vars(p), "change": marks.get(i)} for i, p in reversed(list(enumerate(history.points)))],
        }
    cal = r.calibration
    if cal:
        points = cal.points or []
        out["calibration"] = {
            "metrics": cal.metrics,
            "count": len(points),
            "points_label": cal.points_label or "the family's hold-out kernels",
            "svg": _svg(charts.calibration(points, f"s{index}-cal", f"{r.family or r.kernel} on {r.target}: hold-out"))
            if points
            else None,
        }
    return out


OPEN_BLOCKS = 3  # changed blocks shown open on a kernel page; the rest are folded


def block_anchor(index: int, block: int) -> str:
    """The id of a changed block's disassembly in section `index` of a kernel page."""
    return f"s{index}-b{block}"


def _where(r: Result, index: int) -> dict[str, Any]:
    """The differential icicle, the top places of the change and the changed blocks (those whose
    cycles moved by at least one: a change that rounds to nothing is not listed), their two sides
    of disassembly aligned."""
    shown = [i for i, c in enumerate(r.blocks or []) if round(c.delta_cycles)]
    rows = [
        {
            "change": c,
            "line": text.block_line(c),
            "anchor": block_anchor(index, i),
            "open": n < OPEN_BLOCKS,
            "asm": disassembly.aligned(
                c.baseline.asm if c.baseline else [],
                c.current.asm if c.current else [],
                c.baseline.insn_cycles if c.baseline else [],
                c.current.insn_cycles if c.current else [],
            ),
            "cycles": bool((c.baseline and c.baseline.insn_cycles) or (c.current and c.current.insn_cycles)),
        }
        for n, (i, c) in enumerate((i, (r.blocks or [])[i]) for i in shown)
    ]
    out: dict[str, Any] = {
        "flame": None,
        "where_lines": [],
        "where_rest": "",
        "ledger": "",
        "open_blocks": OPEN_BLOCKS,
        "block_rows": rows,
        "flame_legend": Markup(flame.legend()),
    }
    if r.attribution is not None:
        linked = set(shown)
        out["flame"] = Markup(
            flame.icicle(  # escaped by flame.icicle
                r.attribution,
                f"s{index}-flame",
                lambda i: block_anchor(index, i) if i in linked else None,
                verdict=text.verdict_model_change(r, r.attribution.model),
            )
        )
        out["where_lines"], out["where_rest"] = where.top_lines(r.attribution)
        out["ledger"] = where.ledger(r.attribution)
    return out


def render_kernel(report: Report, kernel: str, results: list[Result] | None = None) -> str:
    """The page of one kernel: its results in `report`, or `results` (one per target) when given."""
    shown = report.worst_first() if results is None else worst_first(results)
    results = [r for r in shown if r.kernel == kernel]
    sections = [_section(r, i, report.targets) for i, r in enumerate(results)]
    for section in sections:
        section["story"] = model_view.kernel_story(report, kernel, section["target"])
    head = results[0]
    in_model = model_view.is_model_kernel(head)
    return (
        _env()
        .get_template("kernel.html.j2")
        .render(
            **_common(report, shown),
            root="../",
            kernel=kernel,
            family=head.family,
            # a model's kernel: what it is in the model (its layer, nodes, calls) instead of its raw params
            params=[] if in_model else sorted(head.params.items()),
            model_params=_model_params(head.params) if in_model else [],
            sections=sections,
        )
    )


def _model_params(params: dict[str, Any]) -> list[tuple[str, str]]:
    """A model kernel's header: model, what it is, calls per inference, schedule (plain text pairs)."""
    names = model_labels.anchor_names(params.get("nodes"))
    return [
        (key, value)
        for key, value in (
            ("model", str(params.get("model", ""))),
            ("layer", model_labels.layer_text(params.get("layer"))),
            ("graph nodes", ", ".join(names)),
            ("calls per inference", str(params.get("calls", ""))),
            ("shapes", str(params.get("shapes", ""))),
            ("schedule", str(params.get("schedule", ""))),
        )
        if value
    ]


def by_kernel(results: list[Result]) -> OrderedDict[str, list[Result]]:
    """Results grouped per kernel, in report order (worst verdict first)."""
    groups: OrderedDict[str, list[Result]] = OrderedDict()
    for r in results:
        groups.setdefault(r.kernel, []).append(r)
    return groups


def write_html(report: Report, report_dir: Path) -> Path:
    """index.html plus one page per kernel; pages of kernels no longer in the report are removed."""
    report_dir = Path(report_dir)
    written = set()
    for kernel, results in by_kernel(report.worst_first()).items():
        path = report_dir / kernel_file(kernel)
        atomic_write_text(path, render_kernel(report, kernel, results))
        written.add(path.name)
    pages = report_dir / KERNEL_DIR
    if pages.is_dir():
        for old in pages.glob("*.html"):
            if old.name not in written:
                old.unlink()
    path = report_dir / "index.html"
    atomic_write_text(path, render_index(report))
    return path
