"""perfguard.json results as the renderers read them: every optional field present.

A report written by an older perfguard, merged from shards or edited by hand may lack the
optional fields (analysis, history, calibration, ...); the renderers then show less, never fail.
"""

from __future__ import annotations

from typing import Any

from perfguard.errors import InputError
from perfguard.guard.compare import VERDICTS

RESULT_DEFAULTS: dict[str, Any] = {
    "family": None, "params": {}, "simulator": "", "delta_pct": None, "threshold_pct": None,
    "current_time_s": None, "baseline_time_s": None, "baseline_commit": None, "model_id": None,
    "calibrated": False, "stats": None, "stat_deltas": {}, "error": None, "flops": None,
    "analysis": None, "history": None, "calibration": None, "toolchain_changed": {}, "measured": None,
    "reference": None,
    "limit_breaches": {},
    "note": None, "blocks": None,
}
_NUMBERS = ("delta_pct", "threshold_pct", "current_time_s", "baseline_time_s", "flops")
_STRINGS = ("family", "simulator", "baseline_commit", "model_id", "error", "reference", "note")
_OBJECTS = ("params", "stats", "stat_deltas", "analysis", "history", "calibration", "toolchain_changed",
            "limit_breaches")


def normalise(data: dict[str, Any], source: str = "report") -> dict[str, Any]:
    """A shallow copy of `data` whose results carry every field, worst first (by verdict, then by the
    size of the change); a wrongly typed field is an input error."""
    results = []
    for i, r in enumerate(data.get("results") or []):
        r = {**RESULT_DEFAULTS, **r}
        where = f"{source}: results[{i}]"
        for key in ("kernel", "target", "verdict"):
            if not isinstance(r.get(key), str):
                raise InputError(f"{where}.{key}: must be a string")
        for key in _NUMBERS:
            if r[key] is not None and (isinstance(r[key], bool) or not isinstance(r[key], (int, float))):
                raise InputError(f"{where}.{key}: must be a number or null, got {r[key]!r}")
        for key in _STRINGS:
            if r[key] is not None and not isinstance(r[key], str):
                raise InputError(f"{where}.{key}: must be a string or null, got {r[key]!r}")
        for key in _OBJECTS:
            if r[key] is not None and not isinstance(r[key], dict):
                raise InputError(f"{where}.{key}: must be an object or null")
        if r["blocks"] is not None and not (isinstance(r["blocks"], list) and all(isinstance(b, dict) for b in r["blocks"])):
            raise InputError(f"{where}.blocks: must be a list of objects or null")
        results.append(r)
    order = {name: i for i, name in enumerate(VERDICTS)}
    results.sort(key=lambda r: (order.get(r["verdict"], len(order)), -abs(r["delta_pct"] or 0.0)))  # stable
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    summary = {**{v: sum(1 for r in results if r["verdict"] == v) for v in VERDICTS}, **summary}  # counts if missing
    return {**data, "results": results, "summary": summary, "targets": data.get("targets") or {}}
