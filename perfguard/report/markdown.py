"""reports/summary.md: a pull-request comment and a GitHub job summary, from the typed report.

A verdict line, then one row per failing result (report.failures: the same lines every output opens
with), the other changes, the models that changed and where the failing results' cycles moved;
the unchanged results and models folded last in <details>. The text is always shorter than LIMIT
characters (GitHub refuses comments over 65,536): rows that do not fit are left out and counted,
the unchanged ones first, a failing row last. The first line is MARKER, so a CI step
can find its earlier comment and edit it in place instead of adding another.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perfguard.atomic import atomic_write_text
from perfguard.document import model_labels
from perfguard.document.report import Report
from perfguard.document.result import Metrics, Result
from perfguard.document.verdicts import UNCHANGED
from perfguard.report import failures, model_view, numbers, text, where
from perfguard.report.html import anchor, kernel_file

MARKER = "<!-- perfguard-report -->"
LIMIT = 60_000
_ERROR_CHARS = 300
_ICON = {
    "wrong result": "\U0001f6ab",
    "regression": "\u274c",
    "error": "\u26a0\ufe0f",
    "toolchain": "\U0001f527",
    "improvement": "\u2705",
    "new": "\U0001f195",
    "removed": "\U0001f5d1\ufe0f",
    "unchanged": "\u2796",
}
_CHANGED = ("wrong result", "regression", "error", "improvement")
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(value: Any) -> str:
    """Untrusted text made inert for a Markdown table cell: no HTML, no formatting, no mention."""
    s = " ".join(str(value).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _SPECIAL.sub(r"\\\1", s)
    return s.replace("@", "@\u200b")


def _inline_html(value: Any) -> str:
    """Untrusted text made inert inside an HTML element of the comment (a <summary>: GitHub renders no
    Markdown there, so a Markdown escape would show its backslashes): no HTML, no mention."""
    s = " ".join(str(value).split())
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("@", "@\u200b")


def _cells(values: list[str]) -> str:
    return "| " + " | ".join(values) + " |"


_CHANGED_HEAD = [
    _cells(
        ["", "kernel", "target", "delta", "threshold", "predicted", "baseline", "bound", "what changed most", "machine"]
    ),
    "|---|---|---|--:|--:|--:|--:|---|---|---|",
]
_REST_HEAD = [
    _cells(["", "kernel", "target", "delta", "predicted", "bound", "of peak GFLOP/s", "model"]),
    "|---|---|---|--:|--:|---|--:|---|",
]


def _current(r: Result) -> Metrics | None:
    return r.analysis.current if r.analysis else None


def _changed_row(r: Result) -> str:
    why = "; ".join(filter(None, [text.limit_note(r), text.interval_note(r), text.what_changed_most(r)]))
    if r.error or r.orphaned:
        message = r.error or r.note or ""
        why = message if len(message) <= _ERROR_CHARS else message[:_ERROR_CHARS] + "..."
    current = _current(r)
    return _cells(
        [
            f"{_ICON[r.verdict]} {md(text.verdict_text(r))}",
            _kernel(r),
            md(r.target),
            md(text.delta_with_interval(r)),
            md(numbers.threshold(r.threshold_pct)),
            md(numbers.seconds(r.current_time_s)),
            md(numbers.seconds(r.baseline_time_s)),
            md(text.bound(current.bound if current else None)),
            md(why),
            md(text.machine_tag(r)),
        ]
    )


def _rest_row(r: Result) -> str:
    current = _current(r)
    return _cells(
        [
            _ICON[r.verdict],
            _kernel(r),
            md(r.target),
            md(text.delta_with_interval(r)),
            md(numbers.seconds(r.current_time_s)),
            md(text.bound(current.bound if current else None)),
            md(numbers.share(current.peak_pct if current else None)),
            md(text.model_kind(r) + (f" ({text.machine_tag(r)})" if r.machine else "")),
        ]
    )


def _verdict_line(report: Report, results: list[Result]) -> list[str]:
    summary = report.summary
    icon = (
        _ICON["wrong result"]
        if summary.wrong_result
        else _ICON["error"]
        if summary.error or summary.orphaned
        else _ICON["regression"]
        if summary.regression or summary.model_regressions
        else _ICON["toolchain"]
        if summary.toolchain_changed
        else _ICON["improvement"]
    )
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
        context.append(
            f"{md(head['ref'])} `{md(head['commit'][:10])}` against {md(base['ref'])} `{md(base['commit'][:10])}`"
        )
    elif report.commit:
        context.append(f"commit `{md(report.commit[:10])}`")
    return [MARKER, f"### {icon} perfguard: {md(text.headline(summary))}", "", f"{counts} ({', '.join(context)})"]


def _notes(results: list[Result]) -> list[str]:
    """The run's notes, after its failing rows: the verdict rule, self-consistency, a result's note."""
    out = []
    if rule := text.gate_rule(results):
        out += ["", f"<sub>Verdicts: {md(rule)}.</sub>"]
    if lines := text.machine_lines(results):  # what every time stands for, once per target
        out += ["", "<sub>" + "<br>".join(md(line[0].upper() + line[1:]) for line in lines) + "</sub>"]
    note = text.self_consistency_note(results)
    if note:
        out += ["", f"\u26a0\ufe0f {md(note)}"]
    if same := text.same_code_line(results):
        out += ["", f"<sub>{md(same[0].upper() + same[1:])}.</sub>"]
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
        rows = [
            _cells([f"`{md(a)}`" if a else "", f"`{md(b)}`" if b else ""])
            for a, b in zip(before + [""] * (len(after) - len(before)), after + [""] * (len(before) - len(after)))
        ]
        out += [
            "",
            f"<details><summary>{_inline_html(text.block_line(c))}</summary>",
            "",
            _cells(["baseline", "current"]),
            "|---|---|",
            *rows[:40],
            "",
            "</details>",
        ]
    return out


def _failing_line(n: int, f: failures.Failure) -> str:
    """One failing result (or model total) on one line of a numbered list, its kernel linked to its
    page in the report folder: what failed, by how much, what changed, where."""
    href = (
        "index.html#" + model_view.anchor(f.model)
        if f.model is not None
        else kernel_file(f.kernel) + "#" + anchor(f.target)
    )
    r = f.result
    name = _kernel(r) if r is not None else md(f.kernel)
    limit = r.threshold_pct if r is not None else f.model.threshold_pct if f.model is not None else None
    parts = [
        f"{n}. {_ICON.get(f.verdict, _ICON['regression'])} **[{name}]({quote(href, safe='/#')})** "
        f"\\[{md(f.target)}\\] {md(f.label)}"
        + (f": **{md(f.delta)}**" if f.delta != "-" else "")
        + (f", threshold {md(numbers.threshold(limit))}" if limit is not None and f.delta != "-" else "")
    ]
    if f.change:
        parts.append(f"change: {md(f.change)}")
    if f.where:
        parts.append(f"where: {md(f.where)}" if r is None or not (r.error or r.orphaned) else md(f.where))
    if f.machine:
        parts.append(f"machine: {md(f.machine)}")
    return " \u00b7 ".join(parts)


class _Budget:
    """Characters left for the comment; each part takes what fits, in the order of its priority."""

    def __init__(self, chars: int):
        self.chars = chars

    def take(self, lines: list[str]) -> bool:
        cost = sum(len(line) + 1 for line in lines)
        if cost > self.chars:
            return False
        self.chars -= cost
        return True

    def rows(self, head: list[str], rows: list[str], what: str) -> list[str]:
        """The table's rows that fit (none: no table), and a line counting the rest."""
        shown: list[str] = []
        for row in rows:
            if not self.take((head if not shown else []) + [row]):
                break
            shown.append(row)
        out = head + shown if shown else []
        if len(shown) < len(rows):
            more = len(rows) - len(shown)
            out += [
                "",
                f"_{more} more {what}{'s' if more != 1 else ''} not shown: see perfguard.json or the HTML report._",
            ]
        return out


def render_markdown(report: Report, limit: int = LIMIT) -> str:
    """summary.md; always shorter than `limit` characters. It opens with one row per failing result,
    then the other changes, the models that changed, where the failing results' cycles moved, and
    the unchanged results and models folded last. When it must be cut, the unchanged rows go first,
    then the details; a failing row goes only when the failing rows alone do not fit."""
    results = report.worst_first()
    moved_models, still_models = model_view.split(report.models)
    in_moved, in_still = model_view.kernels_of(moved_models), model_view.kernels_of(still_models)
    failing = failures.failures(report)
    others = [
        r
        for r in results
        if not failures.failing(r)
        and r.verdict != UNCHANGED
        and (r.verdict == "improvement" or (r.kernel, r.target) not in in_moved | in_still)
    ]
    unchanged = [r for r in results if r.verdict == UNCHANGED]
    listed = [r for r in unchanged if (r.kernel, r.target) not in in_moved | in_still]
    footer = [
        "",
        f"<sub>perfguard {md(report.perfguard_version)} \u00b7 per-kernel pages, roofline, "
        "history and statistics: <code>index.html</code> in the report folder (the links above open "
        "there)</sub>",
        "",
    ]
    head = _verdict_line(report, results)
    notes = _notes(results)
    budget = _Budget(
        limit - sum(len(line) + 1 for line in head + notes + footer) - 600
    )  # 600: headings and omission notes
    # by priority: the failing rows, the other changes, the changed models, where the cycles moved, the unchanged
    fail_part = budget.rows([], [_failing_line(n, f) for n, f in enumerate(failing, 1)], "failing result")
    other_part = budget.rows(_CHANGED_HEAD, [_changed_row(r) for r in others], "changed row")
    model_part: list[str] = []
    for i, m in enumerate(moved_models):
        lines = model_view.markdown_lines([m], md)[3:]  # without its heading
        if not budget.take(lines):
            model_part += ["", f"_{len(moved_models) - i} more changed model(s) not shown: see the HTML report._"]
            break
        model_part += lines
    block_part: list[str] = []
    for r in [f.result for f in failing if f.result is not None] + [r for r in others if r.verdict == "improvement"]:
        section = _block_section(r)
        if section and budget.take(section):
            block_part += section
    still_part: list[str] = []
    for m in still_models:
        lines = model_view.markdown_lines([m], md)[3:]
        if not budget.take(lines):
            break
        still_part += lines
    rest_part = budget.rows(_REST_HEAD, [_rest_row(r) for r in listed], "unchanged row")

    out = list(head)
    if fail_part:
        out += ["", f"#### Failing ({len(failing)})", "", *fail_part]
    out += notes
    if other_part:
        out += ["", "#### Other changes" if failing else "#### Changes", "", *other_part]
    if model_part:
        out += ["", "#### Models that changed", "", *model_part]
    out += block_part
    if unchanged or still_models:
        parts = []
        if in_still:
            parts.append(
                f"{sum((r.kernel, r.target) in in_still for r in unchanged)} in the tables of "
                f"{len(still_models)} unchanged model total{'s' if len(still_models) != 1 else ''}"
            )
        if in_moved and (n := sum((r.kernel, r.target) in in_moved for r in unchanged)):
            parts.append(f"{n} in the models above")
        if parts:
            parts.append(f"{len(listed)} in the table")
        label = f"{len(unchanged)} unchanged" + (f" ({', '.join(parts)})" if parts else "")
        if len(still_part) < sum(len(model_view.markdown_lines([m], md)[3:]) for m in still_models):
            still_part += ["", "_unchanged models not shown: see the HTML report._"]
        out += [
            "",
            f"<details><summary>{label}</summary>",
            "",
            *still_part,
            *([""] if still_part else []),
            *rest_part,
            "",
            "</details>",
        ]
    text = "\n".join(out + footer)
    if len(text) >= limit:  # only a pathological header gets here
        text = text[: limit - 200] + "\n\n_(cut: the summary was too long)_\n"
    return text


def write_markdown(report: Report, report_dir: Path) -> Path:
    path = Path(report_dir) / "summary.md"
    atomic_write_text(path, render_markdown(report))
    return path
