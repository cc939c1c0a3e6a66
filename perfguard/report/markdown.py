"""reports/summary.md: a pull-request comment and a GitHub job summary, from the typed report.

A verdict line, a table of regressions, errors and improvements, everything else folded in
<details>. The text is always shorter than LIMIT characters (GitHub refuses comments over
65,536): rows that do not fit are left out and counted. The first line is MARKER, so a CI step
can find its earlier comment and edit it in place instead of adding another.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from perfguard.atomic import atomic_write_text
from perfguard.document import model_labels
from perfguard.document.report import Metrics, Report, Result
from perfguard.report import model_view, numbers, text, where

MARKER = "<!-- perfguard-report -->"
LIMIT = 60_000
_ERROR_CHARS = 300
_ICON = {"wrong result": "\U0001f6ab", "regression": "\u274c", "error": "\u26a0\ufe0f", "toolchain": "\U0001f527", "improvement": "\u2705",
         "new": "\U0001f195", "removed": "\U0001f5d1\ufe0f", "unchanged": "\u2796"}
_CHANGED = ("wrong result", "regression", "error", "improvement")
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(value: Any) -> str:
    """Untrusted text made inert for a Markdown table cell: no HTML, no formatting, no mention."""
    s = " ".join(str(value).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _SPECIAL.sub(r"\\\1", s)
    return s.replace("@", "@\u200b")


def _cells(values: list[str]) -> str:
    return "| " + " | ".join(values) + " |"


_CHANGED_HEAD = [_cells(["", "kernel", "target", "delta", "threshold", "predicted", "baseline", "bound",
                         "what changed most"]),
                 "|---|---|---|--:|--:|--:|--:|---|---|"]
_REST_HEAD = [_cells(["", "kernel", "target", "delta", "predicted", "bound", "of peak GFLOP/s", "model"]),
              "|---|---|---|--:|--:|---|--:|---|"]


def _current(r: Result) -> Metrics | None:
    return r.analysis.current if r.analysis else None


def _changed_row(r: Result) -> str:
    why = "; ".join(filter(None, [text.limit_note(r), text.interval_note(r), text.what_changed_most(r)]))
    if r.error or r.orphaned:
        message = r.error or r.note
        why = message if len(message) <= _ERROR_CHARS else message[:_ERROR_CHARS] + "..."
    current = _current(r)
    return _cells([f"{_ICON[r.verdict]} {r.verdict}", _kernel(r), md(r.target),
                   md(text.delta_with_interval(r)), md(numbers.threshold(r.threshold_pct)),
                   md(numbers.seconds(r.current_time_s)), md(numbers.seconds(r.baseline_time_s)),
                   md(text.bound(current.bound if current else None)), md(why)])


def _rest_row(r: Result) -> str:
    current = _current(r)
    return _cells([_ICON[r.verdict], _kernel(r), md(r.target), md(text.delta_with_interval(r)),
                   md(numbers.seconds(r.current_time_s)), md(text.bound(current.bound if current else None)),
                   md(numbers.share(current.peak_pct if current else None)), md(text.model_kind(r))])


def _verdict_line(report: Report, results: list[Result]) -> list[str]:
    summary = report.summary
    icon = (_ICON["wrong result"] if summary.wrong_result else _ICON["error"] if summary.error or summary.orphaned
            else _ICON["regression"] if summary.regression or summary.model_regressions
            else _ICON["toolchain"] if summary.toolchain_changed else _ICON["improvement"])
    counts = " \u00b7 ".join(f"**{summary.count(name)}** {name}" for name in _ICON)
    if summary.changed:  # [[model]] kernels whose shapes changed (one new kernel paired with a removed one)
        counts += f" \u00b7 **{summary.changed}** changed"
    models = sorted({text.model_kind(r) for r in results if r.model_id})
    simulators = sorted({r.simulator for r in results if r.simulator})
    context = [f"{len(results)} kernel \u00d7 target results"]
    if models:
        context.append(md(" and ".join(models)) + " model")
    if simulators:
        context.append(md(", ".join(simulators)))
    sides = report.compared()
    if sides:
        base, head = sides["base"], sides["head"]  # `perfguard compare`: both revisions were measured
        context.append(f"{md(head['ref'])} `{md(head['commit'][:10])}` against "
                       f"{md(base['ref'])} `{md(base['commit'][:10])}`")
    elif report.commit:
        context.append(f"commit `{md(report.commit[:10])}`")
    out = [MARKER, f"### {icon} perfguard: {md(text.headline(summary))}", "", f"{counts} ({', '.join(context)})"]
    out += model_view.markdown_lines(report.models, md)  # the models first, where the run has them
    note = text.self_consistency_note(results)
    if note:
        out += ["", f"\u26a0\ufe0f {md(note)}"]
    noted = [r for r in results if r.note and not r.orphaned]
    if noted:
        out += ["", f"\u26a0\ufe0f {len(noted)} result{'s' if len(noted) != 1 else ''}: {md(noted[0].note)}"]
    return out


def _kernel(r: Result) -> str:
    if model_view.is_model_kernel(r):  # what it is in its model beside its key; the model view says the rest
        what = model_labels.label(r.params)
        return md(r.kernel) + (f" ({md(what)})" if what else "")
    return md(r.kernel) + (f" ({text.SELF_CONSISTENCY})" if r.reference == "self" else "")


TOP_BLOCKS = 3  # per changed result in the comment; the kernel page lists them all


def _block_section(r: Result) -> list[str]:
    """Where the cycles moved (the top places of the differential view, adding up to 100 % of
    the change), then the changed blocks with their disassembly side by side, folded."""
    changes = (r.blocks or [])[:TOP_BLOCKS]
    if not changes and r.attribution is None:
        return []
    out = ["", f"**{md(r.kernel)} [{md(r.target)}]** {md(numbers.pct(r.delta_pct))}: where the cycles moved", ""]
    if r.attribution is not None:
        lines, rest = where.top_lines(r.attribution)
        out += [f"{i}. {md(line)}" for i, line in enumerate(lines, 1)]
        out += ["", md(rest)] if rest else []
        out += ["", f"<sub>{md(where.ledger(r.attribution))}</sub>"]
    else:
        out += [f"{i}. {md(text.block_line(c))}" for i, c in enumerate(changes, 1)]
    for c in changes:
        before = c.baseline.asm if c.baseline else []
        after = c.current.asm if c.current else []
        rows = [_cells([f"`{md(a)}`" if a else "", f"`{md(b)}`" if b else ""])
                for a, b in zip(before + [""] * (len(after) - len(before)), after + [""] * (len(before) - len(after)))]
        out += ["", f"<details><summary>{md(text.block_line(c))}</summary>", "",
                _cells(["baseline", "current"]), "|---|---|", *rows[:40], "", "</details>"]
    return out


def render_markdown(report: Report, limit: int = LIMIT) -> str:
    """summary.md; always shorter than `limit` characters."""
    results = report.worst_first()
    in_models = model_view.covered(report)  # listed in their model's table, first; changed ones again below
    changed = [r for r in results if r.verdict in _CHANGED or r.orphaned]
    rest = [r for r in results if not (r.verdict in _CHANGED or r.orphaned) and (r.kernel, r.target) not in in_models]
    footer = ["", f"<sub>perfguard {md(report.perfguard_version)} \u00b7 per-kernel pages, roofline, "
                  "history and statistics: <code>index.html</code> in the report folder</sub>", ""]
    head = _verdict_line(report, results)
    budget = limit - sum(len(line) + 1 for line in head + footer) - 600  # 600: headings and omission notes
    blocks: list[list[str]] = []
    for rows, heading, make, fold in (
        (changed, ["", "#### Regressions, errors and improvements", ""], _changed_row, False),
        (rest, None, _rest_row, True),
    ):
        if not rows:
            continue
        table_head = _CHANGED_HEAD if make is _changed_row else _REST_HEAD
        lines, shown = [], 0
        for r in rows:
            line = make(r)
            cost = len(line) + 1 + (sum(len(h) + 1 for h in table_head) if shown == 0 else 0)
            if cost > budget:
                break
            budget -= cost
            lines.append(line)
            shown += 1
        body = (table_head + lines) if lines else []
        if shown < len(rows):
            body.append("")
            body.append(f"_{len(rows) - shown} more row{'s' if len(rows) - shown != 1 else ''} not shown: "
                        "see perfguard.json or the HTML report._")
        if fold:
            names = sorted({r.verdict for r in rows}, key=list(_ICON).index)
            label = ", ".join(f"{sum(1 for r in rows if r.verdict == n)} {n}" for n in names)
            blocks.append(["", f"<details><summary>{label}</summary>", "", *body, "", "</details>"])
        else:
            blocks.append([*(heading or []), *body])
            for r in rows[:shown]:
                section = _block_section(r)
                cost = sum(len(line) + 1 for line in section)
                if section and cost <= budget:
                    budget -= cost
                    blocks.append(section)
    out = "\n".join(head + [line for block in blocks for line in block] + footer)
    if len(out) >= limit:  # only a pathological header gets here
        out = out[: limit - 200] + "\n\n_(cut: the summary was too long)_\n"
    return out


def write_markdown(report: Report, report_dir: Path) -> Path:
    path = Path(report_dir) / "summary.md"
    atomic_write_text(path, render_markdown(report))
    return path
