"""Several perfguard.json reports (shards, pytest workers) -> one report and one verdict.

Each input is read strictly; the merged report has every result once, the summary counted
again from the results, and the exit code a single check over all of them would have had:
an infrastructure failure (3) beats a usage error (2), which beats a regression (1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from perfguard import __version__, jsonfile
from perfguard.errors import EXIT_INFRA, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, InputError
from perfguard.guard.compare import VERDICTS, toolchain_summary

REPORT_SCHEMA = 1  # the perfguard.json schema this module reads and writes
_SEVERITY = (EXIT_INFRA, EXIT_USAGE, EXIT_REGRESSION)


def combined_exit_code(codes: Iterable[int]) -> int:
    codes = set(codes)
    for code in _SEVERITY:
        if code in codes:
            return code
    return EXIT_OK


def summarize(results: list[dict[str, Any]], exit_code: int) -> dict[str, Any]:
    counts = {name: 0 for name in VERDICTS}
    for r in results:
        counts[r["verdict"]] += 1
    summary = {"exit_code": exit_code, **counts,
               "toolchain_changed": toolchain_summary((r["target"], r.get("toolchain_changed")) for r in results)}
    if all("measured" in r for r in results):  # which errors had no statistics at all (the headline says)
        summary["not_measured"] = sum(1 for r in results if r["verdict"] == "error" and r["measured"] is False)
    return summary


def sort_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {name: i for i, name in enumerate(VERDICTS)}
    return sorted(results, key=lambda r: (order[r["verdict"]], r["kernel"], r["target"]))


def assemble(results: list[dict[str, Any]], exit_code: int, created: str, config: str | None = None,
             **extra: Any) -> dict[str, Any]:
    """A perfguard.json document from result objects (as report_data writes them)."""
    results = sort_results(results)
    return {"schema": REPORT_SCHEMA, "perfguard_version": __version__, "created": created, "config": config,
            "summary": summarize(results, exit_code), "results": results, **extra}


def load_report(path: Path) -> dict[str, Any]:
    """A perfguard.json, checked enough to merge: an input error names the file and what is wrong."""
    path = Path(path)
    try:
        data = jsonfile.read(path, "not a perfguard report")
    except FileNotFoundError:
        raise InputError(f"{path}: report not found") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list) \
            or not isinstance(data.get("summary"), dict):
        raise InputError(f"{path}: not a perfguard report (no 'results' list and 'summary')")
    if type(data.get("schema")) is not int or data["schema"] != REPORT_SCHEMA:
        raise InputError(f"{path}: report schema {data.get('schema')!r} is not {REPORT_SCHEMA}")
    code = data["summary"].get("exit_code")
    if type(code) is not int or code not in (EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_INFRA):
        raise InputError(f"{path}: summary.exit_code {code!r} is not an exit code")
    for i, r in enumerate(data["results"]):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("kernel", "target", "verdict")):
            raise InputError(f"{path}: results[{i}] has no kernel, target and verdict")
        if r["verdict"] not in VERDICTS:
            raise InputError(f"{path}: results[{i}]: unknown verdict {r['verdict']!r}")
    return data


def _check_shards(reports: list[tuple[Path, dict[str, Any]]]) -> None:
    """Shard reports must be i/n for one n, each once, all present: a lost shard is not a pass."""
    shards = [(path, data.get("shard")) for path, data in reports]
    if all(s is None for _, s in shards):
        return
    counts = {s["count"] for _, s in shards if s is not None}
    unsharded = [path for path, s in shards if s is None]
    if unsharded or len(counts) != 1:
        raise InputError(f"{unsharded[0] if unsharded else reports[0][0]}: cannot merge shards of different "
                         f"splits (or sharded with unsharded reports)")
    count = counts.pop()
    seen: dict[int, Path] = {}
    for path, s in shards:
        if s["index"] in seen:
            raise InputError(f"{path}: shard {s['index']}/{count} is also in {seen[s['index']]}")
        seen[s["index"]] = path
    missing = [i for i in range(1, count + 1) if i not in seen]
    if missing:
        raise InputError(f"shard {missing[0]}/{count} is missing ({len(seen)} of {count} reports given)")


def merge_reports(reports: list[tuple[Path, dict[str, Any]]], created: str) -> dict[str, Any]:
    if not reports:
        raise InputError("nothing to merge: give at least one perfguard.json")
    _check_shards(reports)
    owner: dict[tuple[str, str], Path] = {}
    results: list[dict[str, Any]] = []
    for path, data in reports:
        for r in data["results"]:
            key = (r["kernel"], r["target"])
            if key in owner:
                raise InputError(f"{path}: {key[0]}[{key[1]}] is also in {owner[key]}")
            owner[key] = path
            results.append(r)
    configs = {data.get("config") for _, data in reports}
    extra: dict[str, Any] = {"merged_from": [str(path) for path, _ in reports]}
    for key in ("base", "commit"):
        values = {json.dumps(data.get(key), sort_keys=True) for _, data in reports}
        if len(values) == 1 and reports[0][1].get(key) is not None:
            extra[key] = reports[0][1][key]
    targets: dict[str, Any] = {}
    for _, data in reports:
        if isinstance(data.get("targets"), dict):
            targets.update(data["targets"])
    if targets:
        extra["targets"] = targets
    code = combined_exit_code(data["summary"]["exit_code"] for _, data in reports)
    merged = assemble(results, code, created, configs.pop() if len(configs) == 1 else None, **extra)
    flags = [data["summary"] for _, data in reports]
    if any(f.get("interrupted") is True for f in flags):  # a shard cut short: the merged run was too
        merged["summary"]["interrupted"] = True
    if all(f.get("errors_allowed") is True for f in flags):
        merged["summary"]["errors_allowed"] = True
    return merged
