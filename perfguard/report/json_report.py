"""reports/perfguard.json: every result with its stats, predicted time, delta and verdict.

This file is the single source the HTML and Markdown renderers read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfguard import __version__
from perfguard.atomic import atomic_write_text
from perfguard.config import Config
from perfguard.jsonfile import now_iso
from perfguard.guard.check import CheckRun
from perfguard.guard.compare import VERDICTS
from perfguard.report.enrich import enrich

REPORT_SCHEMA = 1  # "note" and "blocks" are optional additions within schema 1


def report_data(run: CheckRun, config_path: Path | None = None, config: Config | None = None) -> dict[str, Any]:
    """With `config`, also target summaries, per-result analysis and baseline history (report.enrich)."""
    results = []
    for o in run.outcomes:
        r, v = o.result, o.verdict
        results.append({
            "kernel": r.kernel,
            "target": r.target,
            "family": r.family,
            "params": r.params,
            "simulator": r.simulator,
            "verdict": v.verdict,
            "delta_pct": v.delta_pct,
            "threshold_pct": v.threshold_pct,
            "current_time_s": v.current_time_s,
            "baseline_time_s": v.baseline_time_s,
            "baseline_commit": o.baseline_commit,
            "model_id": o.model_id,
            "calibrated": o.calibrated,
            "stats": None if r.stats is None else r.stats.to_dict(),
            "stat_deltas": v.stat_deltas,
            "error": o.error,
            "measured": r.ok,  # False: no statistics (build, simulation or output check failed, or interrupted)
            "toolchain_changed": v.toolchain_changed,
            "limit_breaches": v.limit_breaches,
            "note": o.note,
            "blocks": o.blocks,
            "flops": r.flops,
            "reference": r.reference,  # what checked the outputs: numpy | family | self (self-consistency only)
            "max_error": r.max_error,
            "tensor_bytes": r.tensor_bytes,
            "content_hash": r.content_hash,
            "toolchain": r.toolchain,
            "rebuilt": r.rebuilt,
            "resimulated": r.resimulated,
            "seconds": round(r.seconds, 3),
        })
    order = {name: i for i, name in enumerate(VERDICTS)}
    results.sort(key=lambda x: (order[x["verdict"]], x["kernel"], x["target"]))
    data = {
        "schema": REPORT_SCHEMA,
        "perfguard_version": __version__,
        "created": now_iso(),
        "config": None if config_path is None else str(config_path),
        "summary": {"exit_code": run.exit_code(), **{name: run.count(name) for name in VERDICTS},
                    **({"model_regressions": sum(m.verdict == "regression" for m in run.model_summaries)}
                       if run.model_summaries else {}),
                    "not_measured": run.not_measured(), "toolchain_changed": run.toolchain_summary(),
                    **({"interrupted": True} if run.interrupted else {}),
                    **({"errors_allowed": True} if run.allow_errors else {})},
        "results": results,
        # [[model]] entries: each model's total per target, its verdict and kernels by share (guard.models)
        **({"models": [m.to_dict() for m in run.model_summaries]} if run.model_summaries else {}),
    }
    return data if config is None else enrich(data, config, run.models)


def write_json(data: dict[str, Any], path: Path) -> Path:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return path
