"""The model view: a [[model]]'s total per target, its own verdict, and which kernel changed.

total = sum over the model's kernels of (predicted time per call x calls per inference), on each
side: the current total over the kernels extracted now, the baseline total over the kernels that
have baselines (those extracted now, and those whose baselines remain but which the model no
longer has). A kernel that is new, removed or changed (a new and a removed kernel matched as one
layer whose shapes changed, judge.model_changes) is said so and counted on its side, never dropped
from a total. A kernel that could not be measured makes the model's verdict `error`: its total
would be incomplete. Calls the model's `skip` leaves out are in neither total, and said so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from perfguard.baselines.store import Baseline
from perfguard.document import model_labels
from perfguard.document.report import ModelKernel, ModelTotal, Summary
from perfguard.document.result import Result
from perfguard.document.verdicts import ERROR, IMPROVEMENT, NEW, REGRESSION, REMOVED, TOOLCHAIN, UNCHANGED
from perfguard.judge import model_changes
from perfguard.judge.verdicts import change_pct, classify

CHANGED = "changed"  # a model kernel whose shapes changed: the count of such pairs in the summary


def kernel_row(
    kernel: str,
    op: str | None,
    verdict: str,
    calls: int | None,
    baseline_calls: int | None,
    current_time_s: float | None,
    baseline_time_s: float | None,
    params: dict | None = None,
    baseline_params: dict | None = None,
    positions: Iterable[int] = (),
    baseline_positions: Iterable[int] = (),
) -> ModelKernel:
    """One kernel's row with its per-inference totals (time per call x calls) and what it is on each side."""
    params, baseline_params = params or {}, baseline_params or {}
    return ModelKernel(
        kernel,
        op,
        verdict,
        calls,
        baseline_calls,
        current_time_s,
        baseline_time_s,
        current_total_s=None if current_time_s is None or calls is None else current_time_s * calls,
        baseline_total_s=None
        if baseline_time_s is None or baseline_calls is None
        else baseline_time_s * baseline_calls,
        label=model_labels.label(params),
        baseline_label=model_labels.label(baseline_params),
        layer=params.get("layer") or None,
        baseline_layer=baseline_params.get("layer") or None,
        nodes=model_labels.anchor_names(params.get("nodes")),
        baseline_nodes=model_labels.anchor_names(baseline_params.get("nodes")),
        positions=sorted(positions),
        baseline_positions=sorted(baseline_positions),
        schedule=str(params.get("schedule") or ""),
    )


@dataclass(frozen=True)
class ModelKernelResult:
    """What the summary needs of one measured (or failed) kernel of a model on a target."""

    kernel: str
    op: str | None
    calls: int
    verdict: str
    current_time_s: float | None
    baseline_time_s: float | None
    baseline: Baseline | None
    params: dict = field(default_factory=dict)  # the kernel's params now (layer, nodes: kernels.models)
    positions: tuple[int, ...] = ()  # its calls in the model's call order now


def kernel_rows(
    results: Iterable[ModelKernelResult],
    leftover: Iterable[Baseline],
    score: Callable[[Baseline], float],
    baseline_positions: dict[str, list[int]] | None = None,
) -> list[ModelKernel]:
    """The model's rows on one target: one per measured kernel, one per `leftover` baseline (a
    kernel the model no longer has: removed, or changed; `score` re-scores it with the run's model).
    `baseline_positions`: each baseline kernel's calls in the baseline's call order (its model graph)."""
    where = baseline_positions or {}
    rows: list[ModelKernel] = []
    for r in results:
        b = r.baseline
        rows.append(
            kernel_row(
                r.kernel,
                r.op,
                r.verdict,
                r.calls,
                _calls(b) if b is not None else None,
                r.current_time_s,
                r.baseline_time_s if b is not None else None,
                r.params,
                b.params if b is not None else None,
                r.positions,
                where.get(r.kernel, ()) if b is not None else (),
            )
        )
    for b in leftover:
        if b.stats is None:  # `compare`: the base revision could not measure it, so its total is incomplete
            rows.append(
                kernel_row(
                    b.kernel,
                    b.params.get("op"),
                    ERROR,
                    None,
                    _calls(b),
                    None,
                    None,
                    baseline_params=b.params,
                    baseline_positions=where.get(b.kernel, ()),
                )
            )
        else:
            rows.append(
                kernel_row(
                    b.kernel,
                    b.params.get("op"),
                    REMOVED,
                    None,
                    _calls(b),
                    None,
                    score(b),
                    baseline_params=b.params,
                    baseline_positions=where.get(b.kernel, ()),
                )
            )
    return rows


def total(
    model: str,
    target: str,
    threshold_pct: float,
    rows: Iterable[ModelKernel],
    database: str | None = None,
    skipped: Iterable[str] = (),
) -> ModelTotal:
    """The model's total and verdict from its rows alone: `perfguard merge` calls it with the rows
    of every shard, and gets what one unsharded check gives (rows are summed in name order)."""
    rows = sorted(
        (replace(r, share_pct=None, renamed_from=None, renamed_to=None, change="", replaces=[]) for r in rows),
        key=lambda r: r.kernel,
    )
    _match(rows)
    failed = [r for r in rows if r.verdict == ERROR]
    present = [r for r in rows if r.verdict != REMOVED]
    current = None if failed or not present else sum(r.current_total_s or 0.0 for r in present)
    with_baseline = [r for r in rows if r.baseline_total_s is not None]
    baseline = sum(r.baseline_total_s or 0.0 for r in with_baseline) if with_baseline else None
    delta = change_pct(baseline, current) if current is not None and baseline else None
    changes, breakdown = [], ""
    if failed:
        verdict = ERROR
        breakdown = (
            f"no total: {len(failed)} kernel(s) could not be measured "
            f"({', '.join(r.kernel for r in failed)}); the rows show what was measured"
        )
        changes.append(
            f"{len(failed)} kernel(s) could not be measured ({', '.join(r.kernel for r in failed)}): "
            f"the model's total is incomplete and not judged"
        )
    elif not present:
        verdict = REMOVED  # `compare`: only the base revision has the model
    elif baseline is None:
        verdict = NEW
    elif delta is None:
        verdict = UNCHANGED
    else:
        verdict = classify(delta, threshold_pct)
        if verdict != UNCHANGED and any(r.verdict == TOOLCHAIN for r in rows):
            verdict = TOOLCHAIN
    for r in rows:
        if current and r.current_total_s is not None:
            r.share_pct = r.current_total_s / current * 100.0
    rows.sort(key=lambda r: (-(r.current_total_s or 0.0), -(r.baseline_total_s or 0.0), r.kernel))
    if verdict == NEW:  # nothing to compare with: one line, not one per kernel
        changes.append(f"no baseline for this model on {target} yet: perfguard baseline update")
    else:
        changes.extend(_kernel_changes(rows))
    schedule = schedule_text([r.schedule for r in present], database)
    return ModelTotal(
        model,
        target,
        verdict,
        threshold_pct,
        current,
        baseline,
        delta,
        rows,
        changes,
        schedule=schedule,
        skipped=list(skipped),
        breakdown=breakdown,
    )


def _calls(baseline: Baseline) -> int:
    calls = baseline.params.get("calls", 1)
    return calls if isinstance(calls, int) and not isinstance(calls, bool) and calls >= 0 else 1


def _side(r: ModelKernel, baseline: bool) -> model_changes.Side:
    if baseline:
        return model_changes.Side(r.kernel, r.op, r.baseline_layer, list(r.baseline_positions))
    return model_changes.Side(r.kernel, r.op, r.layer, list(r.positions))


def _match(rows: list[ModelKernel]) -> None:
    """Pair new kernels with removed ones (judge.model_changes) and note it on both rows."""
    new = [r for r in rows if r.verdict == NEW]
    removed = [r for r in rows if r.verdict == REMOVED]
    base = [_side(r, True) for r in rows if r.baseline_total_s is not None or r.verdict == REMOVED]
    head = [_side(r, False) for r in rows if r.verdict != REMOVED]
    pairs = model_changes.pair([_side(r, False) for r in new], [_side(r, True) for r in removed], base, head)
    by_name = {r.kernel: r for r in rows}
    for new_name, old_name in pairs.changed.items():
        n, o = by_name[new_name], by_name[old_name]
        n.renamed_from, o.renamed_to = o.kernel, n.kernel
        n.change = o.change = model_changes.describe_change(o.baseline_layer, n.layer)
    for new_name, olds in pairs.replaces.items():
        by_name[new_name].replaces = olds


def _named(label: str, kernel: str) -> str:
    """A kernel as the change lines name it: what it is in the model, then its key."""
    return f"{label} ({kernel})" if label else kernel


def _kernel_changes(rows: list[ModelKernel]) -> list[str]:
    lines = []
    by_name = {r.kernel: r for r in rows}
    for r in rows:
        if r.verdict == NEW and r.renamed_from:
            old = by_name[r.renamed_from]
            calls = (
                f"; {model_changes.calls_change(old.baseline_nodes, r.nodes, old.baseline_calls, r.calls)}"
                if old.baseline_calls != r.calls
                else ""
            )
            lines.append(
                f"changed: {_named(r.label, r.kernel)}: {r.change}{calls} (was {old.kernel}; "
                f"{_time(old.baseline_total_s)} -> {_time(r.current_total_s)} per inference)"
            )
        elif r.verdict == NEW:
            instead = ""
            if r.replaces:
                olds = [by_name[k] for k in r.replaces if k in by_name]
                instead = "; in place of " + ", ".join(_named(o.baseline_label, o.kernel) for o in olds)
            lines.append(f"new: {_named(r.label, r.kernel)}, {_time(r.current_total_s)} per inference{instead}")
        elif r.verdict == REMOVED and not r.renamed_to:
            lines.append(
                f"removed: {_named(r.baseline_label, r.kernel)}, {_time(r.baseline_total_s)} per "
                f"inference in the baseline"
            )
        elif r.verdict in (REGRESSION, IMPROVEMENT):
            lines.append(
                f"{r.verdict}: {_named(r.label, r.kernel)} {_pct(r.current_time_s, r.baseline_time_s)} per call"
            )
        if (
            r.verdict not in (NEW, REMOVED)
            and r.calls is not None
            and r.baseline_calls is not None
            and r.calls != r.baseline_calls
        ):
            lines.append(
                f"{model_changes.calls_change(r.baseline_nodes, r.nodes, r.baseline_calls, r.calls)}: "
                f"{_named(r.label, r.kernel)} ({_time(r.baseline_total_s)} -> {_time(r.current_total_s)} "
                f"per inference)"
            )
    return lines


def schedule_text(schedules: Iterable[str], database: str | None) -> str:
    """What built the model's kernels, in words: `TVM's default CPU schedule rules (perfguard's default) for
    18 kernels` (kernels.models SCHEDULES; `database` the model's database folder)."""
    counts: dict[str, int] = {}
    for s in schedules:
        if s:  # a row from before kernels recorded their schedule says nothing
            counts[s] = counts.get(s, 0) + 1
    words = {
        "database": f"tuned schedules from the MetaSchedule database {database}",
        "default": "TVM's default CPU schedule rules with fixed decisions (perfguard's default)",
        "none": 'TVM\'s unscheduled loops (schedule = "none")',
        "unscheduled": "TVM's unscheduled loops (the default rules did not apply)",
    }
    parts = [
        f"{words.get(kind, kind)}: {n} kernel{'s' if n != 1 else ''}"
        for kind, n in sorted(
            counts.items(),
            key=lambda kv: (
                ("database", "default", "none").index(kv[0]) if kv[0] in ("database", "default", "none") else 9
            ),
        )
    ]
    return "; ".join(parts)


def skipped_line(entry: dict) -> str:
    """One `skip`ped kernel's calls: in no total, not built, not simulated."""
    names = model_labels.names_text([site[0][0] for site in entry.get("nodes", []) if site and site[0]])
    layer = model_labels.layer_text(entry.get("layer"))
    what = " ".join(p for p in (names, layer) if p)
    return f"skipped (skip = [...]): {_named(what, entry['kernel'])} x{entry['calls']}: not guarded, in no total"


def count_kernels(summary: Summary, results: list[Result], models: list[ModelTotal]) -> None:
    """The summary's counts with the models' kernels as a reviewer counts them: a kernel the model no
    longer has is `removed` (no result says so: its baseline is left over), and a new kernel matched with
    a removed one is one `changed` kernel, not one new and one removed."""
    have = {(r.kernel, r.target): r.verdict for r in results}
    for m in models:
        for row in m.kernels:
            if row.verdict == REMOVED and have.get((row.kernel, m.target)) != REMOVED:
                summary.removed += 1  # a leftover baseline; `compare` has a result for it already
            if row.verdict == NEW and row.renamed_from:
                summary.changed += 1
                summary.new -= 1
                summary.removed -= 1


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds * 1e9:.1f} ns"


def _pct(current: float | None, baseline: float | None) -> str:
    if current is None or not baseline:
        return ""
    return f"{(current - baseline) / baseline * 100.0:+.2f} %"
