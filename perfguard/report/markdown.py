"""reports/summary.md: a pull-request comment and a GitHub job summary, from perfguard.json.

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
from perfguard.report import model_view, text
from perfguard.report.results import normalise

MARKER = "<!-- perfguard-report -->"
LIMIT = 60_000
_ERROR_CHARS = 300
_ICON = {"regression": "\u274c", "error": "\u26a0\ufe0f", "toolchain": "\U0001f527", "improvement": "\u2705",
         "new": "\U0001f195", "removed": "\U0001f5d1\ufe0f", "unchanged": "\u2796"}
_CHANGED = ("regression", "error", "improvement")
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


def _current(r: dict[str, Any]) -> dict[str, Any]:
    return ((r.get("analysis") or {}).get("current")) or {}


def _changed_row(r: dict[str, Any]) -> str:
    moved = [d for d in ((r.get("analysis") or {}).get("drivers") or []) if d.get("time_s")]
    top = text.block_line(text.top_block(r)) if r.get("blocks") else text.driver(moved[0]) if moved else ""
    why = "; ".join(filter(None, [text.limit_note(r), top]))
    if r.get("error"):
        message = r["error"]
        why = message if len(message) <= _ERROR_CHARS else message[:_ERROR_CHARS] + "..."
    return _cells([f"{_ICON[r['verdict']]} {r['verdict']}", _kernel(r), md(r["target"]),
                   md(text.pct(r.get("delta_pct"))), md(text.threshold(r["threshold_pct"])),
                   md(text.seconds(r.get("current_time_s"))), md(text.seconds(r.get("baseline_time_s"))),
                   md(text.bound(_current(r).get("bound"))), md(why)])


def _rest_row(r: dict[str, Any]) -> str:
    return _cells([_ICON[r["verdict"]], _kernel(r), md(r["target"]), md(text.pct(r.get("delta_pct"))),
                   md(text.seconds(r.get("current_time_s"))), md(text.bound(_current(r).get("bound"))),
                   md(text.share(_current(r).get("peak_pct"))), md(text.model_kind(r))])


def _verdict_line(data: dict[str, Any]) -> list[str]:
    summary, results = data["summary"], data["results"]
    icon = (_ICON["error"] if summary.get("error") else _ICON["regression"] if summary.get("regression")
            else _ICON["toolchain"] if summary.get("toolchain_changed") else _ICON["improvement"])
    counts = " \u00b7 ".join(f"**{summary.get(name, 0)}** {name}" for name in _ICON)
    models = sorted({text.model_kind(r) for r in results if r.get("model_id")})
    simulators = sorted({r["simulator"] for r in results if r.get("simulator")})
    context = [f"{len(results)} kernel \u00d7 target results"]
    if models:
        context.append(md(" and ".join(models)) + " model")
    if simulators:
        context.append(md(", ".join(simulators)))
    sides = data.get("compare")
    if isinstance(sides, dict) and all(isinstance(sides.get(k), dict) for k in ("base", "head")):
        base, head = sides["base"], sides["head"]  # `perfguard compare`: both revisions were measured
        context.append(f"{md(head.get('ref'))} `{md(str(head.get('commit'))[:10])}` against "
                       f"{md(base.get('ref'))} `{md(str(base.get('commit'))[:10])}`")
    elif data.get("commit"):
        context.append(f"commit `{md(data['commit'][:10])}`")
    out = [MARKER, f"### {icon} perfguard: {md(text.headline(summary))}", "", f"{counts} ({', '.join(context)})"]
    note = text.self_consistency_note(results)
    if note:
        out += ["", f"\u26a0\ufe0f {md(note)}"]
    noted = [r for r in results if r.get("note")]
    if noted:
        out += ["", f"\u26a0\ufe0f {len(noted)} result{'s' if len(noted) != 1 else ''}: {md(noted[0]['note'])}"]
    return out


def _kernel(r: dict[str, Any]) -> str:
    return md(r["kernel"]) + (f" ({text.SELF_CONSISTENCY})" if r.get("reference") == "self" else "")


TOP_BLOCKS = 3  # per changed result in the comment; the kernel page lists them all


def _block_section(r: dict[str, Any]) -> list[str]:
    """The blocks whose cycles moved most, with the top one's disassembly side by side."""
    changes = (r.get("blocks") or [])[:TOP_BLOCKS]
    if not changes:
        return []
    out = ["", f"**{md(r['kernel'])} [{md(r['target'])}]** {md(text.pct(r.get('delta_pct')))}: where the cycles moved", ""]
    out += [f"{i}. {md(text.block_line(c))}" for i, c in enumerate(changes, 1)]
    for c in changes:
        before = (c["baseline"] or {}).get("asm") or []
        after = (c["current"] or {}).get("asm") or []
        rows = [_cells([f"`{md(a)}`" if a else "", f"`{md(b)}`" if b else ""])
                for a, b in zip(before + [""] * (len(after) - len(before)), after + [""] * (len(before) - len(after)))]
        out += ["", f"<details><summary>0x{c['start']:x}: baseline | current</summary>", "",
                _cells(["baseline", "current"]), "|---|---|", *rows[:40], "", "</details>"]
    return out


def render_markdown(data: dict[str, Any], limit: int = LIMIT) -> str:
    """summary.md; always shorter than `limit` characters."""
    data = normalise(data)
    results = data["results"]
    changed = [r for r in results if r["verdict"] in _CHANGED]
    rest = [r for r in results if r["verdict"] not in _CHANGED]
    footer = ["", f"<sub>perfguard {md(data.get('perfguard_version', '?'))} \u00b7 per-kernel pages, roofline, "
                  "history and statistics: <code>index.html</code> in the report folder</sub>", ""]
    head = _verdict_line(data) + model_view.markdown_lines(model_view.models_of(data), md)
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
            names = sorted({r["verdict"] for r in rows}, key=list(_ICON).index)
            label = ", ".join(f"{sum(1 for r in rows if r['verdict'] == n)} {n}" for n in names)
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


def write_markdown(data: dict[str, Any], report_dir: Path) -> Path:
    path = Path(report_dir) / "summary.md"
    atomic_write_text(path, render_markdown(data))
    return path
