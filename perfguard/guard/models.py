"""The model view: a [[model]]'s total per target, its own verdict, and which kernel changed.

total = sum over the model's kernels of (predicted time per call x calls per inference), on each
side: the current total over the kernels extracted now, the baseline total over the kernels that
have baselines (those extracted now, and those whose baselines remain but which the model no
longer has). A kernel that is new, removed or renamed (same operator, other shapes) is said so
and counted on its side, never dropped from a total. A kernel that could not be measured makes
the model's verdict `error`: its total would be incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from perfguard.guard.baselines import Baseline
from perfguard.guard.compare import (ERROR, IMPROVEMENT, NEW, REGRESSION, REMOVED, TOOLCHAIN, UNCHANGED,
                                     change_pct, classify)
from perfguard.guard.report import ModelKernel, ModelTotal

RENAMED = "renamed"


def _row(kernel: str, op: str | None, verdict: str, calls: int | None, baseline_calls: int | None,
         current_time_s: float | None, baseline_time_s: float | None) -> ModelKernel:
    """One kernel's row with its per-inference totals (time per call x calls)."""
    return ModelKernel(
        kernel, op, verdict, calls, baseline_calls, current_time_s, baseline_time_s,
        current_total_s=None if current_time_s is None or calls is None else current_time_s * calls,
        baseline_total_s=None if baseline_time_s is None or baseline_calls is None else baseline_time_s * baseline_calls)


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


def kernel_rows(results: Iterable[ModelKernelResult], leftover: Iterable[Baseline],
                score: Callable[[Baseline], float]) -> list[ModelKernel]:
    """The model's rows on one target: one per measured kernel, one per `leftover` baseline (a
    kernel the model no longer has: removed or renamed; `score` re-scores it with the run's model)."""
    rows: list[ModelKernel] = []
    for r in results:
        rows.append(_row(
            r.kernel, r.op, r.verdict, r.calls, _calls(r.baseline) if r.baseline is not None else None,
            r.current_time_s, r.baseline_time_s if r.baseline is not None else None))
    for b in leftover:
        if b.stats is None:  # `compare`: the base revision could not measure it, so its total is incomplete
            rows.append(_row(b.kernel, b.params.get("op"), ERROR, None, _calls(b), None, None))
        else:
            rows.append(_row(b.kernel, b.params.get("op"), REMOVED, None, _calls(b), None, score(b)))
    return rows


def summarise(model: str, target: str, threshold_pct: float, results: Iterable[ModelKernelResult],
              leftover: Iterable[Baseline], score: Callable[[Baseline], float]) -> ModelTotal:
    """One model on one target (see kernel_rows)."""
    return total(model, target, threshold_pct, kernel_rows(results, leftover, score))


def total(model: str, target: str, threshold_pct: float, rows: Iterable[ModelKernel]) -> ModelTotal:
    """The model's total and verdict from its rows alone: `perfguard merge` calls it with the rows
    of every shard, and gets what one unsharded check gets (rows are summed in name order)."""
    rows = sorted((replace(r, share_pct=None, renamed_from=None, renamed_to=None) for r in rows),
                  key=lambda r: r.kernel)
    changes = _pair_renames(rows)
    failed = [r for r in rows if r.verdict == ERROR]
    present = [r for r in rows if r.verdict != REMOVED]
    current = None if failed or not present else sum(r.current_total_s or 0.0 for r in present)
    with_baseline = [r for r in rows if r.baseline_total_s is not None]
    baseline = sum(r.baseline_total_s for r in with_baseline) if with_baseline else None
    delta = change_pct(baseline, current) if current is not None and baseline else None
    if failed:
        verdict = ERROR
        changes.insert(0, f"{len(failed)} kernel(s) could not be measured ({', '.join(r.kernel for r in failed)}): "
                          f"the model's total is incomplete and not judged")
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
    return ModelTotal(model, target, verdict, threshold_pct, current, baseline, delta, rows, changes)


def _calls(baseline: Baseline) -> int:
    calls = baseline.params.get("calls", 1)
    return calls if isinstance(calls, int) and not isinstance(calls, bool) and calls >= 0 else 1


def _pair_renames(rows: list[ModelKernel]) -> list[str]:
    """A new kernel and a removed one of the same operator: one kernel whose shapes changed."""
    lines = []
    removed = [r for r in rows if r.verdict == REMOVED]
    for new in sorted((r for r in rows if r.verdict == NEW), key=lambda r: r.kernel):
        old = next((r for r in sorted(removed, key=lambda r: r.kernel) if r.op == new.op and not r.renamed_to), None)
        if old is None:
            continue
        old.renamed_to, new.renamed_from = new.kernel, old.kernel
        lines.append(f"renamed: {old.kernel} -> {new.kernel} (same operator {new.op}, other shapes; "
                     f"{_time(old.baseline_total_s)} -> {_time(new.current_total_s)} per inference)")
    return lines


def _kernel_changes(rows: list[ModelKernel]) -> list[str]:
    lines = []
    for r in rows:
        if r.verdict == NEW and not r.renamed_from:
            lines.append(f"new kernel: {r.kernel} ({_time(r.current_total_s)} per inference, counted in the "
                         f"current total)")
        elif r.verdict == REMOVED and not r.renamed_to:
            lines.append(f"removed kernel: {r.kernel} ({_time(r.baseline_total_s)} per inference in the baseline, "
                         f"counted in the baseline total)")
        elif r.verdict in (REGRESSION, IMPROVEMENT):
            lines.append(f"{r.verdict}: {r.kernel} {_pct(r.current_time_s, r.baseline_time_s)} per call")
        if r.calls is not None and r.baseline_calls is not None and r.calls != r.baseline_calls:
            lines.append(f"calls per inference: {r.kernel} {r.baseline_calls} -> {r.calls}")
    return lines


def _time(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.3f} us"


def _pct(current: float | None, baseline: float | None) -> str:
    if current is None or not baseline:
        return ""
    return f"{(current - baseline) / baseline * 100.0:+.2f} %"
