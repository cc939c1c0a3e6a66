"""Several reports (shards, pytest workers) -> one report and one verdict.

Each input is read strictly (document.report.read_report); the merged report has every result
once, the summary counted again from the results, and the exit code a single check over all of
them would have had: a wrong result (4) beats an infrastructure failure (3), which beats a usage
error (2), which beats a regression (1).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.document.report import (
    ModelKernel,
    ModelPart,
    ModelTotal,
    Report,
    Summary,
    TargetSummary,
    ToolchainSummary,
)
from perfguard.document.result import Result
from perfguard.document.verdicts import VERDICTS, summary_key
from perfguard.errors import EXIT_INFRA, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_WRONG_RESULT, InputError
from perfguard.judge.model_totals import count_kernels, total
from perfguard.judge.verdicts import toolchain_summary

_SEVERITY = (EXIT_WRONG_RESULT, EXIT_INFRA, EXIT_USAGE, EXIT_REGRESSION)


def combined_exit_code(codes: Iterable[int]) -> int:
    codes = set(codes)
    for code in _SEVERITY:
        if code in codes:
            return code
    return EXIT_OK


def summarize(results: list[Result], exit_code: int) -> Summary:
    counts: dict[str, Any] = {summary_key(name): 0 for name in VERDICTS}
    for r in results:
        counts[summary_key(r.verdict)] += 1
    changed = toolchain_summary(
        (r.target, {k: {"baseline": d.baseline, "current": d.current} for k, d in r.toolchain_changed.items()})
        for r in results
    )
    summary = Summary(
        exit_code=exit_code,
        **counts,
        toolchain_changed=ToolchainSummary.of(changed),
        orphaned=sum(r.orphaned for r in results),
        remeasured=sum(1 for r in results if r.base_remeasured),
    )
    if all(r.measured is not None for r in results):  # which errors had no statistics at all (the headline says)
        summary.not_measured = sum(1 for r in results if r.verdict == "error" and r.measured is False)
    return summary


def sort_results(results: list[Result]) -> list[Result]:
    order = {name: i for i, name in enumerate(VERDICTS)}
    return sorted(results, key=lambda r: (order[r.verdict], r.kernel, r.target))


def assemble(
    results: list[Result],
    exit_code: int,
    created: str,
    config: str | None = None,
    targets: dict[str, TargetSummary] | None = None,
    **extra: Any,
) -> Report:
    """A report from results (as runs.report_build makes them)."""
    results = sort_results(results)
    return Report(
        summary=summarize(results, exit_code),
        results=results,
        perfguard_version=__version__,
        created=created,
        config=config,
        targets=targets or {},
        **extra,
    )


def _check_shards(reports: list[tuple[Path, Report]]) -> None:
    """Shard reports must be i/n for one n, each once, all present: a lost shard is not a pass."""
    shards = [(path, report.shard) for path, report in reports]
    if all(s is None for _, s in shards):
        return
    counts = {s.count for _, s in shards if s is not None}
    unsharded = [path for path, s in shards if s is None]
    if unsharded or len(counts) != 1:
        raise InputError(
            f"{unsharded[0] if unsharded else reports[0][0]}: cannot merge shards of different "
            f"splits (or sharded with unsharded reports)"
        )
    count = counts.pop()
    seen: dict[int, Path] = {}
    for path, s in shards:
        assert s is not None  # unsharded reports were refused above
        if s.index in seen:
            raise InputError(f"{path}: shard {s.index}/{count} is also in {seen[s.index]}")
        seen[s.index] = path
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        raise InputError(f"shard {missing[0]}/{count} is missing ({len(seen)} of {count} reports given)")


def _same(values: list[Any]) -> Any:
    """The one value every report agrees on, else None."""
    return values[0] if all(v == values[0] for v in values) else None


def merge_reports(reports: list[tuple[Path, Report]], created: str) -> Report:
    if not reports:
        raise InputError("nothing to merge: give at least one perfguard.json")
    _check_shards(reports)
    owner: dict[tuple[str, str], Path] = {}
    results: list[Result] = []
    for path, report in reports:
        for r in report.results:
            key = (r.kernel, r.target)
            if key in owner:
                raise InputError(f"{path}: {r.label} is also in {owner[key]}")
            owner[key] = path
            results.append(r)
    configs = {report.config for _, report in reports}
    targets: dict[str, TargetSummary] = {}
    for _, report in reports:
        targets.update(report.targets)
    models = _models(reports) + _totals(reports)
    code = combined_exit_code(
        [
            *(report.summary.exit_code for _, report in reports),
            *(EXIT_REGRESSION for m in models if m.verdict == "regression"),
        ]
    )
    merged = assemble(
        results,
        code,
        created,
        configs.pop() if len(configs) == 1 else None,
        targets,
        merged_from=[str(path) for path, _ in reports],
        base=_same([report.base for _, report in reports]),
        commit=_same([report.commit for _, report in reports]),
        models=models,
    )
    merged.summary.model_regressions = sum(m.verdict == "regression" for m in models)
    count_kernels(merged.summary, results, models)
    flags = [report.summary for _, report in reports]
    merged.summary.interrupted = any(f.interrupted for f in flags)  # a shard cut short: the merged run was too
    merged.summary.errors_allowed = all(f.errors_allowed for f in flags)
    return merged


def _models(reports: list[tuple[Path, Report]]) -> list[ModelTotal]:
    """Unsharded reports' model totals, each model x target once."""
    owner: dict[tuple[str, str], Path] = {}
    out = []
    for path, report in reports:
        for m in report.models:
            if (m.model, m.target) in owner:
                raise InputError(f"{path}: model {m.model}[{m.target}] is also in {owner[(m.model, m.target)]}")
            owner[(m.model, m.target)] = path
            out.append(m)
    return out


def _totals(reports: list[tuple[Path, Report]]) -> list[ModelTotal]:
    """The shards' parts of each model x target summed into its total (judge.model_totals.total). Every
    part must agree on the model's kernels and threshold, and every kernel have its row once (a
    removed kernel's row, in every shard, is the same row)."""
    parts: dict[tuple[str, str], list[tuple[Path, ModelPart]]] = {}
    for path, report in reports:
        for part in report.model_parts:
            parts.setdefault((part.model, part.target), []).append((path, part))
    out = []
    for (model, target), found in parts.items():
        label = f"model {model}[{target}]"
        first_path, first = found[0]
        rows: dict[str, tuple[Path, ModelKernel]] = {}
        for path, part in found:
            if part.kernels != first.kernels or part.threshold_pct != first.threshold_pct:
                raise InputError(
                    f"{path}: {label}: its kernels or threshold differ from {first_path}'s (shards of different runs?)"
                )
            for row in part.rows:
                seen = rows.get(row.kernel)
                if seen is not None and (row.verdict != "removed" or seen[1] != row):
                    raise InputError(f"{path}: {label}: kernel {row.kernel} is also in {seen[0]}")
                rows[row.kernel] = (path, row)
        missing = sorted(set(first.kernels) - set(rows))
        if missing:
            raise InputError(f"{label}: kernel {missing[0]} is in no shard's report ({len(missing)} missing)")
        out.append(
            total(model, target, first.threshold_pct, [row for _, row in rows.values()], first.database, first.skipped)
        )
    return out
