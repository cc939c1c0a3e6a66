"""Tuned schedules as guarded kernels, and tuning candidates as kernels.

A MetaSchedule result is a schedule file (tuned/<kernel>-<target>.json): the family, the
problem shape and the trace of schedule primitives that MetaSchedule chose. `tuned` is an
ordinary kernel entry that rebuilds the family's unscheduled computation and replays the
trace on it, so a tuned kernel is guarded like any other:

    [[kernel]]
    name = "gemm_256-tuned-aarch64"
    entry = "perfguard.tune.apply:tuned"
    family = "gemm"                              # the calibrated model that scores it
    reference = "perfguard.tune.apply:reference" # the family's numpy reference
    params = { schedule = "tuned/gemm_256-aarch64.json" }
    targets = ["aarch64"]

`candidate` is the entry of the modules MetaSchedule proposes while tuning: the module
travels as TVM JSON inside the job, so a candidate runs through the same pipeline, cache
and executors as every other kernel.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from perfguard.errors import InputError
from perfguard.kernels import get_family

FORMAT = "perfguard-tuned-schedule/1"
_RECORD_KEYS = ("format", "kernel", "target", "family", "shape", "workload", "trace")


def compute_module(family_name: str, shape: dict[str, Any]):
    """The family's unscheduled computation for one problem shape."""
    family = get_family(family_name)
    compute = family.extra.get("compute")
    if compute is None:
        raise InputError(
            f"family '{family_name}' has no unscheduled compute() to tune with MetaSchedule (use --strategy knobs)"
        )
    return compute(**shape)


def workload_digest(mod) -> str:
    """What a trace was recorded on: sha256 of the module's TVMScript."""
    return hashlib.sha256(mod.script().encode()).hexdigest()


def plain(value: Any) -> Any:
    """A trace's JSON form (TVM containers and immediates) as plain Python values."""
    import tvm

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return int(value.value)
    if isinstance(value, tvm.tirx.FloatImm):
        return float(value.value)
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__"):
        return [plain(v) for v in value]
    return str(value)


def apply_trace(mod, trace: list, where: str):
    """Replay a trace's JSON on a fresh schedule of `mod`; the scheduled module."""
    import tvm.s_tir

    sch = tvm.s_tir.Schedule(mod)
    try:
        tvm.s_tir.Trace.apply_json_to_schedule(trace, sch)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise InputError(f"{where}: the trace does not apply: {first}") from None
    return sch.mod


def find_schedule_file(name: str) -> Path:
    """A schedule path as written in perfguard.toml: absolute, or relative to the current folder
    or to the config's folder (which perfguard puts on sys.path before calling an entry)."""
    path = Path(name)
    if path.is_absolute():
        candidates = [path]
    else:
        candidates = [Path.cwd() / path] + [Path(p) / path for p in sys.path if p and Path(p).is_dir()]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise InputError(f"schedule file '{name}' not found (relative paths start at the config's folder)")


def load_record(name: str) -> dict[str, Any]:
    path = find_schedule_file(name)
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable schedule file ({type(exc).__name__})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise InputError(f"{path}: not a perfguard schedule file (expected format '{FORMAT}')")
    missing = [key for key in _RECORD_KEYS if key not in record]
    if missing:
        raise InputError(f"{path}: missing key '{missing[0]}'")
    record["path"] = str(path)
    return record


def tuned(schedule: str):
    """Kernel entry: the family's computation with the tuned trace replayed on it."""
    record = load_record(schedule)
    mod = compute_module(record["family"], record["shape"])
    if workload_digest(mod) != record["workload"]:
        raise InputError(
            f"{record['path']}: the schedule was tuned on a different computation (the family's "
            f"compute() or TVM changed since); tune again with 'perfguard tune {record['kernel']} "
            f"--target {record['target']}'"
        )
    return apply_trace(mod, record["trace"], record["path"])


def candidate(ir: str, family: str, shape: dict[str, Any]):
    """Kernel entry of a tuning candidate: the scheduled module, from its TVM JSON."""
    import tvm

    return tvm.ir.load_json(ir)


def reference(inputs, **params):
    """The family's numpy reference for a tuned kernel (`schedule`) or a candidate (`family`, `shape`)."""
    if "schedule" in params:
        record = load_record(params["schedule"])
        family, shape = record["family"], record["shape"]
    else:
        family, shape = params["family"], params["shape"]
    return get_family(family).reference(inputs, **shape)
