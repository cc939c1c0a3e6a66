"""The model view in every format: each [[model]]'s total per target, its verdict, what built its
kernels, its kernels by share of the total with what each is in the model (graph nodes, layer,
shapes) beside its key, and which kernel changed (changed shapes, new, removed, calls, slower,
faster). Where a report has models, every format shows this view first.

Input is the report's typed `models` (document.report.ModelTotal); one small renderer per format,
nothing else.
"""

from __future__ import annotations

from html import escape

from perfguard.document.report import ModelKernel, ModelPart, ModelTotal, Report
from perfguard.document.result import Result
from perfguard.report.numbers import pct, seconds

TOP_KERNELS = 8  # rows per model in the terminal and the Markdown beyond every changed one; JSON and HTML keep all


def covered(report: Report) -> set[tuple[str, str]]:
    """(kernel, target) of every result a model view shows: the results tables leave them to it."""
    return kernels_of(report.models)


def kernels_of(models: list[ModelTotal]) -> set[tuple[str, str]]:
    """(kernel, target) of every kernel row of `models`."""
    return {(k.kernel, m.target) for m in models for k in m.kernels}


def is_model_kernel(result: Result) -> bool:
    """A kernel extracted from a [[model]] (its params say which model)."""
    return isinstance(result.params, dict) and "model" in result.params and "shapes" in result.params


def changed(m: ModelTotal) -> bool:
    """A model whose total or any of whose kernels moved (a verdict, calls, a new or removed kernel)."""
    return m.verdict != "unchanged" or bool(m.changes) or any(verdict(k) != "unchanged" for k in m.kernels)


def split(models: list[ModelTotal]) -> tuple[list[ModelTotal], list[ModelTotal]]:
    """(models that changed, models that did not): every format shows the first in full, the
    second folded last."""
    return [m for m in models if changed(m)], [m for m in models if not changed(m)]


def unchanged_line(models: list[ModelTotal]) -> str:
    """`unchanged models: mlp [aarch64, riscv64, x86_64], resnet [x86_64] (27 kernel x target results)`."""
    targets: dict[str, list[str]] = {}
    for m in models:
        targets.setdefault(m.model, []).append(m.target)
    kernels = sum(len(m.kernels) for m in models)
    names = ", ".join(f"{name} [{', '.join(sorted(t))}]" for name, t in targets.items())
    return f"unchanged models: {names} ({kernels} kernel x target result{'' if kernels == 1 else 's'})"


def anchor(m: ModelTotal) -> str:
    """The id of a model's table on the index page."""
    return "m-" + "".join(c if c.isalnum() or c in "_.-" else "_" for c in f"{m.model}-{m.target}")


def _numbers(m: ModelTotal) -> str:
    delta = "" if m.delta_pct is None else f" {pct(m.delta_pct)}"
    return (
        f"{delta}, total {seconds(m.current_total_s)} per inference (baseline {seconds(m.baseline_total_s)}, "
        f"threshold {m.threshold_pct:.2f} %)"
    )


def _title(m: ModelTotal) -> str:
    return f"model {m.model} [{m.target}]: {m.verdict}{_numbers(m)}"


def verdict(k: ModelKernel) -> str:
    """A row's verdict as a reviewer reads it: a new kernel matched with a removed one is `changed`."""
    if k.renamed_from:
        return "changed"
    if k.renamed_to:
        return "changed (was)"
    return k.verdict


def what(k: ModelKernel) -> str:
    """What the kernel is in the model (its baseline's description for a removed one), and its change."""
    text = k.label or k.baseline_label
    if k.change and k.renamed_from:
        text = f"{text}: {k.change}" if text else k.change
    return text


def calls(k: ModelKernel) -> str:
    if k.calls is None:
        return "" if k.baseline_calls is None else f"(x{k.baseline_calls})"
    if k.baseline_calls is not None and k.baseline_calls != k.calls:
        return f"x{k.calls} (was x{k.baseline_calls})"
    return f"x{k.calls}"


def shown(m: ModelTotal) -> list[ModelKernel]:
    """The rows a short format lists: the largest TOP_KERNELS, then every other one that changed."""
    top = m.kernels[:TOP_KERNELS]
    rest = [k for k in m.kernels[TOP_KERNELS:] if verdict(k) != "unchanged" or calls(k).endswith(")")]
    return top + rest


def _cells(k: ModelKernel) -> list[str]:
    share = "" if k.share_pct is None else f"{k.share_pct:.1f} %"
    return [k.kernel, what(k), verdict(k), share, calls(k), seconds(k.current_total_s), seconds(k.baseline_total_s)]


def _notes(m: ModelTotal) -> list[str]:
    out = []
    if m.schedule:
        out.append(f"kernels built as they would ship: {m.schedule}")
    if m.breakdown:
        out.append(m.breakdown)
    return out + list(m.skipped)


def terminal_lines(models: list[ModelTotal]) -> list[str]:
    """Plain text lines (the caller escapes them for rich)."""
    out = []
    for m in models:
        out.append(_title(m))
        out += [f"  {line}" for line in _notes(m)]
        rows = shown(m)
        for k in rows:
            name, described, judged, share, n, now, before = _cells(k)
            out.append(
                f"  {share:>7} {name} {n} {judged}: {now} (baseline {before})"
                + (f"\n            {described}" if described else "")
            )
        if len(m.kernels) > len(rows):
            out.append(f"  ... {len(m.kernels) - len(rows)} more unchanged kernel(s) in perfguard.json")
        out += [f"  {line}" for line in m.changes]
    return out


def parts_lines(parts: list[ModelPart]) -> list[str]:
    """A shard's report: its models' totals are judged where the shards are merged."""
    if not parts:
        return []
    names = ", ".join(f"{p.model} [{p.target}]" for p in parts)
    return [
        f"model totals ({names}): this shard holds part of them; 'perfguard merge' of every shard's report judges them"
    ]


def markdown_lines(models: list[ModelTotal], md) -> list[str]:
    """`md` makes untrusted text inert in a table cell (report.markdown.md)."""
    if not models:
        return []
    out = ["", "#### Models", ""]
    for m in models:
        out += [f"**{md(_title(m))}**", ""]
        out += [f"<sub>{md(line)}</sub>  " for line in _notes(m)]
        out += [
            "",
            "| kernel | in the model | verdict | share | calls | per inference | baseline |",
            "|---|---|---|--:|--:|--:|--:|",
        ]
        rows = shown(m)
        out += ["| " + " | ".join(md(c) for c in _cells(k)) + " |" for k in rows]
        if len(m.kernels) > len(rows):
            out.append(f"\n_{len(m.kernels) - len(rows)} more unchanged kernel(s) in perfguard.json_")
        out += [""] + [f"- {md(line)}" for line in m.changes] + [""]
    return out


def _heading(m: ModelTotal) -> str:
    """A model's title after its verdict's badge: `mlp [x86_64] +0.00 %, total ...` (the badge names the verdict)."""
    return f"{m.model} [{m.target}]{_numbers(m)}"


def html(models: list[ModelTotal], href=None, heading: str = "Models") -> str:
    """A self-contained <section> (escaped markup) for the index page; `href(kernel, target)` links a
    kernel's page (None: no links); heading "": the tables alone, no section."""
    if not models:
        return ""
    parts = [f'<section class="models"><h2>{escape(heading)}</h2>'] if heading else []
    for m in models:
        parts.append(
            f'<h3 class="verdict-{escape(m.verdict)}" id="{escape(anchor(m))}"><span class="verdict '
            f'{escape(m.verdict)}">{escape(m.verdict)}</span> {escape(_heading(m))}</h3>'
        )
        parts += [f'<p class="note">{escape(line)}</p>' for line in _notes(m)]
        parts.append(
            '<div class="scroll"><table class="results"><thead><tr><th>kernel</th><th>in the model</th>'
            '<th>verdict</th><th class="num">share</th><th class="num">calls</th>'
            '<th class="num">per inference</th><th class="num">baseline</th></tr></thead><tbody>'
        )
        for k in m.kernels:
            cells = [escape(c) for c in _cells(k)]
            if href is not None and k.verdict != "removed":
                cells[0] = f'<a href="{escape(href(k.kernel, m.target))}">{cells[0]}</a>'
            judged = verdict(k).split()[0]
            cells[2] = f'<span class="verdict {escape(judged)}">{cells[2]}</span>'
            parts.append(
                "<tr>" + "".join(f"<td{' class=num' if i >= 3 else ''}>{c}</td>" for i, c in enumerate(cells)) + "</tr>"
            )
        parts.append("</tbody></table></div>")
        if m.changes:
            parts.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in m.changes) + "</ul>")
    if heading:
        parts.append("</section>")
    return "\n".join(parts)


def kernel_story(report: Report, kernel: str, target: str) -> str:
    """What a model kernel's own page says of it on `target`: what it is in the model, and for a new
    kernel what it replaces (plain text)."""
    for m in report.models:
        if m.target != target:
            continue
        by_name = {k.kernel: k for k in m.kernels}
        k = by_name.get(kernel)
        if k is None:
            continue
        here = f"In model {m.model}: {k.label}" if k.label else f"In model {m.model}"
        here += f", {calls(k)} per inference" if calls(k) else ""
        if k.renamed_from:
            old = by_name.get(k.renamed_from)
            before = f" ({old.baseline_label})" if old is not None and old.baseline_label else ""
            cost = (
                (
                    f"; that kernel's baseline: {seconds(old.baseline_total_s)} per inference, this one "
                    f"{seconds(k.current_total_s)}"
                )
                if old is not None
                else ""
            )
            return f"{here}. Changed from {k.renamed_from}{before}: {k.change}{cost}."
        if k.verdict == "new" and k.replaces:
            olds = [by_name[o] for o in k.replaces if o in by_name]
            named = ", ".join(f"{o.kernel} ({o.baseline_label})" if o.baseline_label else o.kernel for o in olds)
            return f"{here}. New, in place of {named} (removed: another kind of layer at this place in the model)."
        if k.verdict == "new":
            return (
                f"{here}. New: no kernel of the baseline's model is at this place "
                f"(perfguard baseline update records one)."
            )
        return here + "."
    return ""
