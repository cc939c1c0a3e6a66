"""The model view in every format: each [[model]]'s total per target, its verdict, its kernels by
share of the total, and which kernel changed (new, removed, renamed, slower, faster).

Input is the report's typed `models` (guard.report.ModelTotal); one small renderer per format,
nothing else.
"""

from __future__ import annotations

from html import escape

from perfguard.guard.report import ModelKernel, ModelPart, ModelTotal
from perfguard.report.numbers import pct, seconds

TOP_KERNELS = 8  # rows per model in the terminal and the Markdown; the JSON and HTML keep them all


def _title(m: ModelTotal) -> str:
    delta = "" if m.delta_pct is None else f" {pct(m.delta_pct)}"
    return (f"model {m.model} [{m.target}]: {m.verdict}{delta}, total {seconds(m.current_total_s)} "
            f"per inference (baseline {seconds(m.baseline_total_s)}, threshold {m.threshold_pct:.2f} %)")


def _kernel_cells(k: ModelKernel) -> list[str]:
    share = "" if k.share_pct is None else f"{k.share_pct:.1f} %"
    calls = "" if k.calls is None else f"x{k.calls}"
    return [k.kernel, k.verdict, share, calls, seconds(k.current_total_s), seconds(k.baseline_total_s)]


def terminal_lines(models: list[ModelTotal]) -> list[str]:
    """Plain text lines (the caller escapes them for rich)."""
    out = []
    for m in models:
        out.append(_title(m))
        for k in m.kernels[:TOP_KERNELS]:
            name, verdict, share, calls, now, before = _kernel_cells(k)
            out.append(f"  {share:>7} {name} {calls} {verdict}: {now} (baseline {before})")
        if len(m.kernels) > TOP_KERNELS:
            out.append(f"  ... {len(m.kernels) - TOP_KERNELS} more kernel(s) in perfguard.json")
        out += [f"  {line}" for line in m.changes]
    return out


def parts_lines(parts: list[ModelPart]) -> list[str]:
    """A shard's report: its models' totals are judged where the shards are merged."""
    if not parts:
        return []
    names = ", ".join(f"{p.model} [{p.target}]" for p in parts)
    return [f"model totals ({names}): this shard holds part of them; 'perfguard merge' of every shard's "
            f"report judges them"]


def markdown_lines(models: list[ModelTotal], md) -> list[str]:
    """`md` makes untrusted text inert in a table cell (report.markdown.md)."""
    if not models:
        return []
    out = ["", "#### Models", ""]
    for m in models:
        out += [f"**{md(_title(m))}**", "", "| kernel | verdict | share | calls | per inference | baseline |",
                "|---|---|--:|--:|--:|--:|"]
        out += ["| " + " | ".join(md(c) for c in _kernel_cells(k)) + " |" for k in m.kernels[:TOP_KERNELS]]
        if len(m.kernels) > TOP_KERNELS:
            out.append(f"\n_{len(m.kernels) - TOP_KERNELS} more kernel(s) in perfguard.json_")
        out += [""] + [f"- {md(line)}" for line in m.changes] + [""]
    return out


def html(models: list[ModelTotal]) -> str:
    """A self-contained <section> (escaped markup) for the index page."""
    if not models:
        return ""
    parts = ['<h2>Models</h2>']
    for m in models:
        parts.append(f'<h3 class="verdict-{escape(m.verdict)}">{escape(_title(m))}</h3>')
        parts.append('<table class="results"><thead><tr><th>kernel</th><th>verdict</th><th>share</th>'
                     '<th>calls</th><th>per inference</th><th>baseline</th></tr></thead><tbody>')
        for k in m.kernels:
            parts.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in _kernel_cells(k)) + "</tr>")
        parts.append("</tbody></table>")
        if m.changes:
            parts.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in m.changes) + "</ul>")
    return "\n".join(parts)
