"""The terminal table and the progress bar (rich; plain text when not on a terminal)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from perfguard.document import model_labels
from perfguard.document.report import Report
from perfguard.document.result import Result
from perfguard.document.verdicts import UNCHANGED
from perfguard.report import model_view
from perfguard.report.failures import failures
from perfguard.report.numbers import pct, seconds, threshold
from perfguard.report.text import (
    SELF_CONSISTENCY,
    gate_rule,
    headline,
    interval,
    interval_note,
    limit_note,
    machine_lines,
    machine_tag,
    model_kind,
    same_code_line,
    self_consistency_note,
    verdict_text,
    what_changed_most,
)
from perfguard.timings import JOB_STAGES, STAGES

_STYLE = {
    "regression": "bold red",
    "error": "bold yellow",
    "toolchain": "bold magenta",
    "improvement": "bold green",
    "new": "cyan",
    "removed": "magenta",
    "unchanged": "dim",
    "wrong result": "bold red",
}


def console(stderr: bool = False) -> Console:
    out = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not out.is_terminal:
        out.width = max(out.width, 160)  # CI logs: keep a result on one line
    return out


@contextmanager
def progress(total: int, out: Console) -> Iterator[Any]:
    bar = Progress(
        TextColumn("[bold]perfguard[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=out,
        transient=True,
        disable=not out.is_terminal,
    )
    with bar:
        task = bar.add_task("", total=total)

        def advance(label: str) -> None:
            bar.update(task, advance=1, description=escape(label))

        yield advance


def print_table(report: Report, out: Console) -> None:
    """The headline and one line per failing result first (report.failures); then the models that
    changed, a table of the other results that changed (a model's kernels are in its view), their
    notes; the unchanged results and models last, folded into one line each; the headline again
    (without the toolchain sentence, said once on the first line)."""
    out.print(f"[bold]{escape(headline(report.summary))}[/]")
    for f in failures(report):
        out.print(f"[{_STYLE.get(f.verdict, 'bold red')}]FAIL[/] {escape(f.line())}")
    moved, still = model_view.split(report.models)
    for line in model_view.terminal_lines(moved) + model_view.parts_lines(report.model_parts):
        out.print(escape(line))
    in_models = model_view.covered(report)
    rows = [r for r in report.results if (r.kernel, r.target) not in in_models]
    changed = [r for r in rows if r.verdict != UNCHANGED]
    if changed or not (report.models or rows):
        _print_results(changed, out)
    for r in report.results:  # the details of each line above, and the notes of the rest
        if r.error:
            out.print(f"[{_STYLE.get(r.verdict, 'bold yellow')}]{r.verdict}[/] {escape(r.error)}")
        else:
            label = r.label + ": "
            if note := limit_note(r):
                out.print(f"[bold]note[/] {escape(label + note)}")
            if r.note:
                out.print(
                    f"[{_STYLE['removed'] if r.orphaned else 'bold'}]{'removed' if r.orphaned else 'note'}[/] "
                    f"{escape(label + r.note)}"
                )
            if note := interval_note(r):
                out.print(f"[bold]note[/] {escape(label + note)}")
            if r.verdict in ("regression", "improvement") and (r.attribution is not None or r.blocks):
                out.print(f"[bold]where[/] {escape(label + what_changed_most(r))}")
    note = self_consistency_note(report.results)
    if note:
        out.print(f"[bold]note[/] {escape(note)}")
    if rule := gate_rule(report.results):
        out.print(f"[dim]{escape(rule)}[/]")
    for line in machine_lines(report.results):  # what every time above stands for, once per target
        out.print(f"[dim]{escape(line)}[/]")
    unchanged = [r for r in rows if r.verdict == UNCHANGED]
    if unchanged:
        out.print(f"[{_STYLE[UNCHANGED]}]{escape(unchanged_line(unchanged))}[/]")
    if same := same_code_line(rows):
        out.print(f"[bold]note[/] {escape(same)}")
    if still:
        out.print(f"[{_STYLE[UNCHANGED]}]{escape(model_view.unchanged_line(still))}[/]")
    # again, last in a log; the toolchain sentence once (on the first line)
    out.print(f"[bold]{escape(headline(report.summary, toolchain=False))}[/]")


def unchanged_line(results: list[Result]) -> str:
    """`unchanged: 29 kernel x target results: conv2d_1x1_14 [aarch64, riscv64, x86_64], ...`."""
    targets: dict[str, list[str]] = {}
    for r in results:
        targets.setdefault(r.kernel, []).append(r.target)
    names = ", ".join(f"{k} [{', '.join(sorted(t))}]" for k, t in targets.items())
    return f"unchanged: {len(results)} kernel x target result{'' if len(results) == 1 else 's'}: {names}"


def _print_results(results, out: Console) -> None:
    table = Table(show_edge=False, pad_edge=False)
    level = next((r.interval.level for r in results if r.interval is not None), None)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("kernel", "left"),
        ("target", "left"),
        ("verdict", "left"),
        ("delta", "right"),
        (f"{100 * level:.0f} % interval" if level else "interval", "right"),
        ("threshold", "right"),
        ("predicted", "right"),
        ("baseline", "right"),
        ("model", "left"),
        ("machine", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for r in results:
        what = model_labels.label(r.params) if model_view.is_model_kernel(r) else ""
        table.add_row(
            escape(r.kernel) + (f" [dim]{escape(what)}[/]" if what else ""),
            escape(r.target),
            f"[{_STYLE[r.verdict]}]{escape(verdict_text(r))}[/]"
            + (f" ({SELF_CONSISTENCY})" if r.reference == "self" else ""),
            pct(r.delta_pct),
            interval(r),
            threshold(r.threshold_pct),
            seconds(r.current_time_s),
            seconds(r.baseline_time_s),
            "" if not r.model_id else model_kind(r),
            escape(machine_tag(r)),
        )
    out.print(table)


def print_timings(report: Report, out: Console, slowest: int = 5) -> None:
    """`check --timings`: wall and CPU seconds per stage, then the jobs that cost the most CPU."""
    timings = report.timings
    if timings is None:
        out.print("no timings in this report")
        return

    what = dict(STAGES)
    table = Table(show_edge=False, pad_edge=False, title="where the time went", title_justify="left")
    stage_columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("stage", "left"),
        ("wall s", "right"),
        ("CPU s", "right"),
        ("what", "left"),
    )
    for name, justify in stage_columns:
        table.add_column(name, justify=justify)
    for name, span in timings.stages.items():
        wall = "-" if name == "workers" else f"{span.wall_s:.2f}"
        label = f"  {name}" if name in JOB_STAGES or name == "workers" else name
        table.add_row(label, wall, f"{span.cpu_s:.2f}", escape(what.get(name, "")))
    table.add_row(
        "[bold]total[/]",
        f"[bold]{timings.total.wall_s:.2f}[/]",
        f"[bold]{timings.total.cpu_s:.2f}[/]",
        "the whole command",
    )
    out.print(table)
    reused = sum(j.reused for j in timings.jobs)
    if timings.reused:
        out.print(
            f"the whole check was reused from its record: nothing it depends on changed ({len(report.results)} results)"
        )
    else:
        out.print(
            f"{len(timings.jobs)} jobs: {len(timings.jobs) - reused} ran, {reused} reused from their records; "
            f"{timings.workers} pool worker{'' if timings.workers == 1 else 's'}"
        )
    if timings.cluster:
        used = sum(w.cpu_s for w in timings.cluster)
        out.print(
            f"on Dask workers: {used:.2f} CPU s beside this process's {timings.total.cpu_s:.2f} ("
            + ", ".join(
                escape(f"{w.worker} {w.jobs} job{'' if w.jobs == 1 else 's'} {w.cpu_s:.2f} s") for w in timings.cluster
            )
            + ")"
        )
    for line in timings.reruns:
        out.print(escape(f"run again: {line}"))
    ran = sorted((j for j in timings.jobs if not j.reused), key=lambda j: -j.total.cpu_s)[:slowest]
    if ran:
        out.print("most CPU: " + ", ".join(escape(f"{j.kernel}[{j.target}] {j.total.cpu_s:.2f} s") for j in ran))
