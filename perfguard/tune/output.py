"""A tuning result as text that goes back into perfguard.toml: one [[kernel]] table."""

from __future__ import annotations

import json
from typing import Any

from perfguard.config import KernelSpec


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are valid there
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def kernel_snippet(spec: KernelSpec, result) -> str:
    """The tuned kernel as a [[kernel]] table, with a comment saying where it came from."""
    gain = "" if result.speedup is None else f" ({result.speedup:.3f}x the configured schedule)"
    lines = [
        f"# perfguard tune {result.kernel} --target {result.target} --strategy {result.strategy} "
        f"--trials {result.budget}",
        f"# {result.measure} / {result.model}: configured {fmt_time(result.configured.predicted_s)}, "
        f"tuned {fmt_time(result.tuned.predicted_s if result.tuned else None)}{gain}",
    ]
    if result.strategy == "knobs":
        lines.append(
            f"# Add this kernel, or put its params into kernel '{result.kernel}' (they were tuned for {result.target})."
        )
    else:
        lines.append(
            "# Add this kernel and commit the schedule file it names; "
            "'perfguard baseline update' then records its baseline."
        )
    lines += [
        "[[kernel]]",
        f"name = {toml_value(spec.name)}",
        f"entry = {toml_value(spec.entry)}",
        f"family = {toml_value(spec.family)}",
    ]
    if spec.reference:
        lines.append(f"reference = {toml_value(spec.reference)}")
    lines.append(f"params = {toml_value(spec.params)}")
    lines.append(f"targets = {toml_value(list(spec.targets or ()))}")
    for key in ("threshold", "outputs", "rtol", "atol", "flops"):
        if getattr(spec, key) is not None:
            lines.append(f"{key} = {toml_value(getattr(spec, key))}")
    return "\n".join(lines) + "\n"


def dump_record(record: dict[str, Any]) -> str:
    """A schedule file as JSON that reads well in a diff: one trace instruction a line."""
    head = json.dumps({k: v for k, v in record.items() if k != "trace"}, indent=1)
    instructions, *rest = record["trace"]
    body = ",\n  ".join(json.dumps(inst) for inst in instructions)
    tail = "".join(",\n " + json.dumps(part) for part in rest)
    return f'{head[:-2]},\n "trace": [\n [\n  {body}\n ]{tail}\n ]\n}}\n'
