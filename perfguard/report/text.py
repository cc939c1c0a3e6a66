"""Number and verdict wording shared by every renderer (terminal, HTML, Markdown)."""

from __future__ import annotations


def pct(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f} %"


def _in_units(value: float | None, units: tuple[tuple[str, float], ...], fmt: str, last: str) -> str:
    """`value` in the first of `units` (largest first) it reaches, else the last one (format `last`)."""
    if value is None:
        return "-"
    for unit, scale in units[:-1]:
        if abs(value) >= scale:
            return f"{value / scale:{fmt}} {unit}"
    unit, scale = units[-1]
    return f"{value / scale:{last}} {unit}"


def seconds(value: float | None) -> str:
    return _in_units(value, (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)), ".3f", ".1f")


def headline(summary: dict, toolchain: bool = True) -> str:
    """One line: what could not be measured (no statistics) or checked (measured, but no verdict:
    an unreadable baseline or model, a refused comparison), then the regressions."""
    parts = []
    errors = summary.get("error") or 0
    unmeasured = summary.get("not_measured")
    if errors and isinstance(unmeasured, int) and 0 <= unmeasured <= errors:
        if unmeasured:
            parts.append(f"{unmeasured} kernel(s) could not be measured")
        if errors - unmeasured:
            parts.append(f"{errors - unmeasured} {'' if unmeasured else 'kernel(s) '}could not be checked")
    elif errors:  # a report that does not say which: "checked" covers both
        parts.append(f"{errors} kernel(s) could not be checked")
    if summary.get("regression"):
        parts.append(f"{summary['regression']} regression(s) found")
    if summary.get("model_regressions"):
        parts.append(f"{summary['model_regressions']} model total(s) regressed")
    line = ", ".join(parts) or "no regressions"
    if summary.get("interrupted"):
        line = f"interrupted: {line}"
    changed = summary.get("toolchain_changed")
    if toolchain and isinstance(changed, dict) and changed:
        line = f"{line}; {toolchain_headline(changed, summary.get('toolchain') or 0)}"
    return line


def _short(value: object, width: int = 60) -> str:
    value = "?" if value is None else " ".join(str(value).split())
    return value if len(value) <= width else value[: width - 3] + "..."


def _difference(baseline: object, current: object) -> str:
    """`baseline → current`; of values made of '; '-separated parts (the simulator's fingerprint),
    only the parts that differ."""
    before, after = str(baseline).split("; "), str(current).split("; ")
    if baseline is not None and current is not None and len(before) > 1 and len(after) > 1:
        before, after = [p for p in before if p not in after], [p for p in after if p not in before]
        baseline, current = "; ".join(before) or "-", "; ".join(after) or "-"
    return f"{_short(baseline)} \u2192 {_short(current)}"


def toolchain_differences(toolchain: dict) -> str:
    """`toolchain differs from the baselines' (tool a → b; ...)` from a summary's toolchain_changed."""
    parts = []
    for tool, pairs in sorted((toolchain.get("tools") or {}).items()):
        pairs = [p for p in pairs if isinstance(p, dict)] if isinstance(pairs, list) else []
        if len(pairs) > 2:
            parts.append(f"{tool}: {len(pairs)} different versions")
        else:
            parts.append(f"{tool} " + ", ".join(_difference(p.get("baseline"), p.get("current")) for p in pairs))
    return f"toolchain differs from the baselines' ({'; '.join(parts)})"


def toolchain_headline(toolchain: dict, not_judged: int) -> str:
    """The run's one sentence about a toolchain that differs from its baselines': what differs,
    what it means for the verdicts, and the one command that re-baselines."""
    judged = (f"{not_judged} kernel(s) moved but are not judged (a toolchain change is not a change of the code)"
              if not_judged else "no kernel moved beyond its threshold")
    command = toolchain.get("rebaseline") or "perfguard baseline update"
    return f"{toolchain_differences(toolchain)}: {judged}; re-baseline with: {command}"


def toolchain_note(result: dict) -> str:
    """On a kernel's own page: why a result was not judged (the run's headline says it once for
    every table; rows do not repeat it)."""
    changed = result.get("toolchain_changed") or {}
    if result.get("verdict") != "toolchain" or not isinstance(changed, dict) or not changed:
        return ""
    parts = [f"{tool} {_difference(d.get('baseline'), d.get('current'))}" for tool, d in sorted(changed.items())
             if isinstance(d, dict)]
    return "not judged: measured with another toolchain than its baseline (" + "; ".join(parts) + ")"


SELF_CONSISTENCY = "self-consistency only"
FLOPS_HINT = 'flops = "2 * M * N * K"'


def reference_kind(result: dict) -> str:
    """What checked the outputs, as every report says it."""
    return {"numpy": "numpy reference", "family": "family's numpy reference",
            "self": SELF_CONSISTENCY}.get(result.get("reference") or "", "")


def self_consistency_note(results: list[dict]) -> str:
    """One line for the results whose outputs only met the same kernel built for the host."""
    names = [f"{r['kernel']}[{r['target']}]" for r in results if r.get("reference") == "self"]
    if not names:
        return ""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return (f"{len(names)} result(s) {SELF_CONSISTENCY} ({shown}): no numpy reference, so the outputs were "
            "compared with the same kernel built for the host; a wrong kernel passes that. "
            'Add reference = "module:function" to check against numpy')


def limit_note(result: dict) -> str:
    """The per-metric limits a result went over: `limit breached: l1d_misses +6.20 % (limit 5 %)`."""
    breaches = result.get("limit_breaches") or {}
    if not isinstance(breaches, dict) or not breaches:
        return ""
    parts = []
    for metric, b in sorted(breaches.items()):
        if not isinstance(b, dict):
            continue
        change = signed_count(b.get("delta")) + (f" ({pct(b['delta_pct'])})" if b.get("delta_pct") is not None else "")
        parts.append(f"{metric} {change} over the limit {b.get('limit')}")
    return "limit breached: " + "; ".join(parts)


def count(value: int | float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def signed_count(value: int | float | None) -> str:
    return "-" if value is None else ("+" if value > 0 else "") + count(value)


def share(value: float | None) -> str:
    """An unsigned percentage: shares of a peak, of a total."""
    if value is None:
        return "-"
    return f"{value:.2f} %" if abs(value) < 10 else f"{value:.1f} %"


def signed_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return ("+" if value > 0 else "-" if value < 0 else "") + seconds(abs(value))


def nbytes(value: float | None) -> str:
    return _in_units(value, (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1)), ".2f", ".0f")


def number(value: float | None, unit: str = "") -> str:
    """Three significant digits, thousands separated: 0.0123, 4.56, 1,230."""
    if value is None:
        return "-"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{text} {unit}".rstrip()


def joules(value: float | None) -> str:
    return _in_units(value, (("J", 1.0), ("mJ", 1e-3), ("uJ", 1e-6), ("nJ", 1e-9)), ".3g", ".3g")


def bound(value: str | None) -> str:
    return "-" if value is None else f"{value}-bound"


def model_kind(result: dict) -> str:
    if not result.get("model_id"):
        return "-"
    if result.get("calibrated"):
        return "calibrated"
    return "pipeline" if result["model_id"].startswith("pipeline-") else "analytical"


def driver(d: dict) -> str:
    """One counter's part in a change: `l1d_misses +12,345 (+56.0 %) → +0.81 ms`."""
    change = signed_count(d["current"] - d["baseline"])
    rel = f" ({pct(d['delta_pct'])})" if d.get("delta_pct") is not None else ""
    return f"{d['stat']} {change}{rel} → {signed_seconds(d['time_s'])}"


LANE_LOSS = 1.5  # flops per FP instruction falling by this factor (or more): lost vectorisation


def findings(result: dict, most: int = 3) -> list[str]:
    """Sentences that explain a result's change, most telling first (plain text: escape to render)."""
    analysis = result.get("analysis") or {}
    before, after = analysis.get("baseline"), analysis.get("current")
    out = [limit_note(result)] if result.get("limit_breaches") else []
    out += [note] if (note := toolchain_note(result)) else []
    if before and after and result.get("delta_pct"):
        phases = [f"{name} phase {signed_seconds(after[key] - before[key]) if after[key] != before[key] else 'unchanged'}"
                  for name, key in (("compute", "compute_s"), ("memory", "memory_s"))]
        out.append(", ".join(phases))
    moved = [d for d in analysis.get("drivers") or [] if d.get("time_s")]
    out.extend(driver(d) for d in moved[:most])
    if before and after:
        lb, la = before.get("flops_per_fp_inst"), after.get("flops_per_fp_inst")
        if lb and la and lb >= LANE_LOSS * la:
            out.append(f"vectorisation lost: flops per FP instruction {number(lb)} → {number(la)}")
        elif lb and la and la >= LANE_LOSS * lb:
            out.append(f"wider vectors: flops per FP instruction {number(lb)} → {number(la)}")
        if before.get("bound") and after.get("bound") and before["bound"] != after["bound"]:
            out.append(f"bound class {bound(before['bound'])} → {bound(after['bound'])}")
    return out


def threshold(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} %"


def block_side(side: dict | None) -> str:
    """One side of a changed block: `main_compute_ 0x402e00-0x402e9c, 44 insns x 3,584, 38.7 cyc (latency)`."""
    if side is None:
        return "not executed"
    where = f"{side['symbol']} " if side.get("symbol") else ""
    return (f"{where}0x{side['start']:x}-0x{side['end']:x}, {side['insns']} insns x {side['executions']:,}, "
            f"{side['cycles_per_execution']:.1f} cyc/exec ({side['bound']})")


def top_block(result: dict) -> dict | None:
    """The changed block that moved the way the result did (most cycles first): on an
    improvement, the block that got cheapest, not one that appeared in its place."""
    blocks = result.get("blocks") or []
    sign = 1 if (result.get("delta_pct") or 0) >= 0 else -1
    return next((b for b in blocks if b["delta_cycles"] * sign > 0), blocks[0] if blocks else None)


def block_line(change: dict) -> str:
    """The block whose cycles changed most, in one line: baseline → current, and its share."""
    # a share only when it reads as one: blocks moving both ways can exceed the net change
    share_pct = change.get("share_pct")
    share = f", {share_pct:.0f} % of the change in block cycles" if share_pct is not None and 0 < share_pct <= 100 else ""
    return (f"{change['delta_cycles']:+,.0f} cycles{share}: {block_side(change['baseline'])} → "
            f"{block_side(change['current'])}")
