"""What perfguard.json holds beyond the raw results: target summaries, analysis, history, calibration.

Computed once, when the check has the config at hand, so `perfguard report` re-renders from
the JSON alone. Every number comes from the model that scored the result (calibrated or
analytical), like its verdict.
"""

from __future__ import annotations

import math
from typing import Any

from perfguard.config import Config
from perfguard.errors import InfraError, InputError
from perfguard.guard.history import BaselineHistory, kernel_history
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.predict.select import predictor_for, stored_model
from perfguard.report.analysis import analyse, target_summary

MIN_STEP_FLOOR_PCT = 0.1  # a zero threshold still needs a step size for change points


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such a metric is written as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def calibration(config: Config, result: dict[str, Any], predictor: Predictor, models=None) -> dict[str, Any] | None:
    """Hold-out metrics and the predicted-vs-native points stored with a calibrated model."""
    if not predictor.calibrated:
        return None
    try:
        stored = stored_model(config.baseline_dir, result["target"], result["family"], models)
    except Exception:  # the check already loaded this model; a report never fails on it
        return None
    meta = stored.meta if stored is not None else {}
    summary = (meta.get("holdout") or {}).get("summary")
    if not isinstance(summary, dict):
        return None
    out: dict[str, Any] = {"metrics": {k: _finite(v) for k, v in summary.items()
                                       if v is None or isinstance(v, (int, float, str))}}
    points = meta.get("scatter")
    if isinstance(points, list):
        out["points"] = [[float(p), float(n)] for p, n in points if math.isfinite(p) and math.isfinite(n)]
        out["points_label"] = "the stored model on its training variants (in-sample)"
    return out


def enrich(data: dict[str, Any], config: Config, models=None) -> dict[str, Any]:
    """`models`: where the check read calibrated models (a git revision under --base), so the
    report's numbers come from the model that gave the verdicts."""
    history = BaselineHistory(config.baseline_dir)
    data["commit"] = history.head
    targets = data.setdefault("targets", {})
    for r in data["results"]:
        profile = config.profile(r["target"])
        target = targets.setdefault(r["target"], target_summary(profile))
        try:
            predictor = predictor_for(profile, r["family"], r["simulator"], config.baseline_dir, models,
                                      config.cache_dir, config.model)
            if (r.get("model_id") or "").startswith("analytical-") and predictor.needs_blocks:
                predictor = AnalyticalModel(profile)  # the check fell back to it (an old baseline): so does the report
        except (InputError, InfraError):  # the model file (or llvm-mca) is at fault: the result says so already
            r["analysis"], r["history"] = None, None
            continue
        r["analysis"] = analyse(r, profile, predictor, target)
        r["history"] = kernel_history(
            history, r["target"], r["kernel"], r["simulator"],
            score=lambda b, p=predictor: float(p.predict_stats([b.stats])[0]),
            usable=lambda b, p=predictor: b.stats.blocks is not None or not p.needs_blocks,
            min_step_pct=max(r["threshold_pct"], MIN_STEP_FLOOR_PCT),
        )
        cal = calibration(config, r, predictor, models)
        if cal is not None:
            r["calibration"] = cal
    return data
