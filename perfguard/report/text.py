"""Verdict wording shared by every renderer (terminal, HTML, Markdown): headlines, notes, findings.

Each function takes the typed report's parts (document.report) and returns plain text: renderers
escape it for their medium.
"""

from __future__ import annotations

from perfguard.document.report import Summary, ToolchainSummary
from perfguard.document.result import BlockChange, BlockSide, Driver, Result
from perfguard.report import where
from perfguard.report.numbers import (
    nbytes,
    number,
    pct,
    pct_range,
    seconds,
    share,
    signed_count,
    signed_seconds,
    threshold,
)


def headline(summary: Summary, toolchain: bool = True) -> str:
    """One line: what could not be measured (no statistics) or checked (measured, but no verdict:
    an unreadable baseline or model, a refused comparison), then the regressions."""
    parts = []
    if summary.wrong_result:
        parts.append(f"{summary.wrong_result} wrong result(s): output differs from the reference")
    errors = summary.error
    unmeasured = summary.not_measured
    if errors and unmeasured is not None and 0 <= unmeasured <= errors:
        if unmeasured:
            parts.append(f"{unmeasured} kernel(s) could not be measured")
        if errors - unmeasured:
            parts.append(f"{errors - unmeasured} {'' if unmeasured else 'kernel(s) '}could not be checked")
    elif errors:  # a report that does not say which: "checked" covers both
        parts.append(f"{errors} kernel(s) could not be checked")
    if summary.regression:
        parts.append(f"{summary.regression} regression(s) found")
    if summary.model_regressions:
        parts.append(f"{summary.model_regressions} model total(s) regressed")
    if summary.orphaned:
        parts.append(f"{summary.orphaned} baseline(s) without a configured kernel (perfguard baseline prune or rename)")
    line = ", ".join(parts) or (
        "no regressions among the judged kernels" if toolchain and summary.toolchain else "no regressions"
    )
    if summary.interrupted:
        line = f"interrupted: {line}"
    if toolchain and summary.toolchain_changed:
        said = toolchain_headline(summary.toolchain_changed, summary.toolchain, summary.remeasured, summary.error)
        line = f"{line}; {said}"
    return line


def _short(value: object, width: int = 60) -> str:
    value = "?" if value is None else " ".join(str(value).split())
    return value if len(value) <= width else value[: width - 3] + "..."


def _difference(baseline: object, current: object, tool: str = "") -> str:
    """`baseline → current`; of values made of parts separated by '; ' (the simulator's
    fingerprint) or ', ' (the harness), only the parts that differ. Named `tool` unless the value
    names itself (`harness 3, ... → harness 4, ...`)."""
    sep = "; " if "; " in str(baseline) else ", "
    before, after = str(baseline).split(sep), str(current).split(sep)
    if baseline is not None and current is not None and len(before) > 1 and len(after) > 1:
        before, after = [p for p in before if p not in after], [p for p in after if p not in before]
        baseline, current = sep.join(before) or "-", sep.join(after) or "-"
    label = f"{tool} " if tool and not str(baseline).startswith(f"{tool} ") else ""
    return f"{label}{_short(baseline)} \u2192 {_short(current)}"


def toolchain_differences(toolchain: ToolchainSummary) -> str:
    """`toolchain differs from the baselines' (tool a → b; ...)`; `perfguard 0.1.0 → 0.2.0 and its
    toolchain differ ...` when perfguard's version changed beside the tools. A change seen the same
    on several targets (the plugin's hash) is said once."""
    parts = []
    for tool, pairs in sorted(toolchain.tools.items()):
        if tool == "perfguard":
            continue
        said = list(dict.fromkeys(_difference(p.baseline, p.current, tool) for p in pairs))
        parts.append(f"{tool}: {len(said)} different versions" if len(said) > 2 else ", ".join(said))
    versions = toolchain.tools.get("perfguard")
    if versions:
        return (
            f"{', '.join(_difference(p.baseline, p.current, 'perfguard') for p in versions)} and its toolchain "
            f"differ from the baselines' ({'; '.join(parts)})"
        )
    return f"toolchain differs from the baselines' ({'; '.join(parts)})"


def toolchain_headline(toolchain: ToolchainSummary, not_judged: int, remeasured: int = 0, errors: int = 0) -> str:
    """The run's one sentence about a toolchain that differs from its baselines': what differs,
    what it means for the verdicts (`errors`: results the run could not check, a base that could
    not be measured again among them), and the one command that re-baselines."""
    said = (
        [f"{remeasured} kernel(s) judged against their base revision measured again with this toolchain"]
        if remeasured
        else []
    )
    if not_judged:
        said.append(
            f"{not_judged} kernel(s) moved but are not judged (measured with another toolchain than their "
            f"baselines': an edit of them is not guarded until you re-baseline)"
        )
    judged = "; ".join(said) or (
        "the errors say which kernels could not be judged" if errors else "no kernel moved beyond its threshold"
    )
    command = toolchain.rebaseline or "perfguard baseline update"
    return f"{toolchain_differences(toolchain)}: {judged}; re-baseline with: {command}"


def toolchain_note(result: Result) -> str:
    """On a kernel's own page: why a result was not judged (the run's headline says it once for
    every table; rows do not repeat it)."""
    if result.verdict != "toolchain" or not result.toolchain_changed:
        return ""
    parts = [_difference(d.baseline, d.current, tool) for tool, d in sorted(result.toolchain_changed.items())]
    return "not judged: measured with another toolchain than its baseline (" + "; ".join(parts) + ")"


SELF_CONSISTENCY = "self-consistency only"
FLOPS_HINT = 'flops = "2 * M * N * K"'


def bytes_moved(result: Result) -> str:
    """A kernel without floating-point work (`flops = "0"`: a gather, a copy, a transpose), measured
    by what it moves: its tensors' size (an upper bound of what it reads and writes) and the DRAM
    traffic its cache misses make, as a bandwidth at the predicted time; '' for any other kernel."""
    if result.flops != 0 or not result.tensor_bytes:
        return ""
    said = f'no floating-point work (flops = "0"), measured by the bytes it moves: {nbytes(result.tensor_bytes)} of tensors'
    after = result.analysis.current if result.analysis else None
    if after is not None and after.dram_bytes is not None and after.bandwidth_gbs is not None:
        said += f", DRAM traffic {nbytes(after.dram_bytes)} per call, {number(after.bandwidth_gbs)} GB/s"
        if after.bandwidth_pct is not None:
            said += f" ({share(after.bandwidth_pct)} of the target's peak bandwidth)"
    return said


def reference_kind(result: Result) -> str:
    """What checked the outputs, as every report says it."""
    return {"numpy": "numpy reference", "family": "family's numpy reference", "self": SELF_CONSISTENCY}.get(
        result.reference or "", ""
    )


def self_consistency_note(results: list[Result]) -> str:
    """One line for the results whose outputs only met the same kernel built for the host. A
    [[model]]'s kernels are said apart, without the hint: a model has no numpy reference per kernel."""

    def is_model(r: Result) -> bool:
        return isinstance(r.params, dict) and "model" in r.params and "shapes" in r.params

    names = [r.label for r in results if r.reference == "self" and not is_model(r)]
    in_models = sum(1 for r in results if r.reference == "self" and is_model(r))
    parts = []
    if names:
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        parts.append(
            f"{len(names)} result(s) {SELF_CONSISTENCY} ({shown}): no numpy reference, so the outputs were "
            "compared with the same kernel built for the host; a wrong kernel passes that. "
            'Add reference = "module:function" to check against numpy'
        )
    if in_models:
        parts.append(
            f"{in_models} [[model]] kernel result(s) checked against the same kernel built for the host "
            f"({SELF_CONSISTENCY}: a model gives no numpy reference per kernel)"
        )
    return "; ".join(parts)


def limit_note(result: Result) -> str:
    """The per-metric limits a result went over: `limit breached: l1d_misses +6.20 % (limit 5 %)`."""
    if not result.limit_breaches:
        return ""
    parts = []
    for metric, b in sorted(result.limit_breaches.items()):
        change = signed_count(b.delta) + (f" ({pct(b.delta_pct)})" if b.delta_pct is not None else "")
        parts.append(f"{metric} {change} over the limit {b.limit}")
    return "limit breached: " + "; ".join(parts)


def interval(result: Result) -> str:
    """`+1.2 .. +10.4 %`, or "-" without a calibrated interval."""
    i = result.interval
    return "-" if i is None else pct_range(i.low_pct, i.high_pct)


def delta_with_interval(result: Result) -> str:
    """`+5.70 % (90 %: +1.2 .. +10.4 %)`: the predicted change and its calibrated interval."""
    i = result.interval
    if i is None or result.delta_pct is None:
        return pct(result.delta_pct)
    return f"{pct(result.delta_pct)} ({100 * i.level:.0f} %: {pct_range(i.low_pct, i.high_pct)})"


def could_flip(result: Result) -> bool:
    """The interval reaches across the threshold that decided a regression or an improvement: the
    native change may be on the other side of it. An unchanged result gated on the estimate passes
    whatever its interval (its row shows it); gated on the interval's lower end, one whose interval
    reaches over the threshold passed on that end alone. A verdict decided by a per-metric limit
    does not hang on the interval."""
    i, limit = result.interval, result.threshold_pct
    if i is None or limit is None or result.delta_pct is None:
        return False
    if result.verdict == "regression" and not (result.limit_breaches and result.delta_pct <= limit):
        return i.low_pct <= limit
    if result.verdict == "improvement":
        return i.high_pct >= -limit
    if result.verdict == "unchanged" and result.gate == "lower":  # passed only because the low end is under it
        return i.high_pct > limit
    return False


def verdict_detail(result: Result) -> str:
    """Why a regression or an improvement is one, where its interval or a limit says more than
    its name: `estimate over the threshold; the interval reaches below it`, `the whole interval over
    the threshold`, `the interval's lower end over the threshold`; "" for other verdicts."""
    i = result.interval
    if (
        result.verdict == "regression"
        and result.limit_breaches
        and (result.delta_pct or 0.0) <= (result.threshold_pct or 0.0)
    ):
        return "a per-metric limit breached"
    if i is None or result.verdict not in ("regression", "improvement") or result.delta_pct is None:
        return ""
    over, below = ("over", "below") if result.verdict == "regression" else ("under", "above")
    if result.verdict == "regression" and result.gate != "estimate":
        return f"the interval's {result.gate} end {over} the threshold"
    if could_flip(result):
        return f"estimate {over} the threshold; the interval reaches {below} it"
    return f"the whole interval {over} the threshold"


def verdict_text(result: Result) -> str:
    """The verdict with what decided it: `regression (estimate over the threshold; the interval
    reaches below it)`."""
    detail = verdict_detail(result)
    return f"{result.verdict} ({detail})" if detail else result.verdict


GATE_RULES = {
    "estimate": 'gate = "estimate": a result is a regression when its predicted change is over its threshold, '
    "whatever its interval; the interval says where the native change may lie",
    "lower": 'gate = "lower": a result is a regression only when its whole interval is over its threshold',
    "upper": 'gate = "upper": a result is a regression when its interval reaches over its threshold',
}


def gate_rule(results: list[Result]) -> str:
    """The rule that turned the run's changes into verdicts, for the page's header ("" without intervals)."""
    gates = sorted({r.gate for r in results if r.interval is not None})
    return "; ".join(GATE_RULES.get(g, f"gate = {g!r}") for g in gates)


def interval_note(result: Result) -> str:
    """What a result's interval says beyond its numbers: that it holds the threshold that decided
    the verdict (the verdict could flip), which end gated, and when it was calibrated for another model."""
    i = result.interval
    if i is None or result.delta_pct is None:
        return ""
    parts = []
    if could_flip(result):
        parts.append(
            f"the {100 * i.level:.0f} % interval {pct_range(i.low_pct, i.high_pct)} straddles the "
            f"{threshold(result.threshold_pct)} threshold: the native change may be on either side of it"
        )
    if result.gate != "estimate":
        parts.append(f"gated on the interval's {result.gate} end")
    if parts and not i.exact:
        parts.append(f"interval calibrated for {i.basis}")
    return "; ".join(parts)


def _param(value: object) -> str:
    return _short(value, 40)


def param_diff(result: Result) -> str:
    """The change named as the kernel's recorded params against the baseline's: `tile_k 4 -> 1,
    vector 8 -> 1` ("" when the baseline recorded none or they are equal). A [[model]] kernel's
    params (its graph nodes, calls) are said by the model view instead."""
    before, after = result.baseline_params, result.params
    if not before or not isinstance(after, dict) or not isinstance(before, dict):
        return ", ".join(input_diff(result))
    parts = []
    for key in sorted(set(before) | set(after)):
        if key in ("nodes", "positions"):
            continue
        if key not in after:
            parts.append(f"{key} {_param(before[key])} -> (none)")
        elif key not in before:
            parts.append(f"{key} (none) -> {_param(after[key])}")
        elif before[key] != after[key]:
            parts.append(f"{key} {_param(before[key])} -> {_param(after[key])}")
    return ", ".join(parts + input_diff(result))


def _input_value(key: str, value: object) -> str:
    return str(value)[:12] if key == "sha256" and isinstance(value, str) else _param(value)


def input_diff(result: Result) -> list[str]:
    """The configured inputs' change against the baseline's, one part per key: `inputs.idx.high 16 ->
    4096`, `inputs.idx.sha256 3f2a... -> 9e8d...` (another .npy content); [] when the baseline did
    not record them (before baseline schema 5) or they are equal."""
    before, after = result.baseline_inputs, result.inputs or {}
    if before is None or not isinstance(after, dict) or before == after:
        return []
    parts = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name) or {}, after.get(name) or {}
        if not old or not new:  # configured on one side only: the other drew the defaults

            def show(item: dict) -> str:
                return (
                    "{" + ", ".join(f"{k} {_input_value(k, v)}" for k, v in item.items()) + "}" if item else "(default)"
                )

            parts.append(f"inputs.{name} {show(old)} -> {show(new)}")
            continue
        known = ("low", "high", "seed", "file", "sha256")
        for key in [k for k in known if k in old or k in new] + sorted((set(old) | set(new)) - set(known)):
            if old.get(key) != new.get(key):
                parts.append(
                    f"inputs.{name}.{key} {_input_value(key, old.get(key, '(none)'))} -> "
                    f"{_input_value(key, new.get(key, '(none)'))}"
                )
    return parts


_SHORT_SOURCE = 60  # characters of a changed source line said on a failure line


def source_change(result: Result) -> str:
    """The entry function's change in a phrase: its changed lines when there are at most two short
    ones (`entry - sch.vectorize(ji)`), else their count; '' when there is no source diff."""
    removed = [line[1:].strip() for line in result.source_diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in result.source_diff if line.startswith("+") and not line.startswith("+++")]
    removed, added = [x for x in removed if x], [x for x in added if x]
    if not removed and not added:
        return ""
    if len(removed) + len(added) <= 2 and all(len(x) <= _SHORT_SOURCE for x in removed + added):
        return "entry " + " ".join([f"- {x}" for x in removed] + [f"+ {x}" for x in added])
    return (
        f"entry source: {len(removed)} line{'' if len(removed) == 1 else 's'} removed, {len(added)} "
        f"added (the diff is on the kernel's page)"
    )


def same_code(result: Result) -> bool:
    """The current build has the baseline's build key: the same lowered IR, target and toolchain,
    so the same machine code."""
    return result.same_code or (bool(result.content_hash) and result.content_hash == result.baseline_content_hash)


def same_code_line(results: list[Result]) -> str:
    """`same machine code as the baseline: gather [aarch64, x86_64] (another build: ...)`, for the
    results whose kernel changed (another build key) but whose machine code did not: the edit was
    picked up, and LLVM made the very code of the baseline; '' when there is none."""
    targets: dict[str, list[str]] = {}
    for r in results:
        if r.same_code:
            targets.setdefault(r.kernel, []).append(r.target)
    if not targets:
        return ""
    names = ", ".join(f"{k} [{', '.join(sorted(t))}]" for k, t in targets.items())
    return (
        f"same machine code as the baseline: {names} (rebuilt from a changed kernel; every block it ran is "
        f"the baseline's, byte for byte)"
    )


def change_text(result: Result) -> str:
    """What changed in the kernel against its baseline, in one phrase: the params' diff, and
    `rebuilt, same machine code as the baseline` when the build key is the baseline's."""
    diff = ", ".join(filter(None, [param_diff(result), source_change(result)]))
    same = same_code(result)
    if diff and same:
        return f"{diff}; rebuilt, same machine code as the baseline"
    if diff:
        return diff
    # inputs the baseline did not record (before schema 5) may be what changed: said among the causes
    causes = (
        "kernel source, inputs, TVM or toolchain"
        if result.inputs and result.baseline_inputs is None
        else "kernel source, TVM or toolchain"
    )
    if same and result.content_hash != result.baseline_content_hash:
        return f"same params as the baseline, another build ({causes}), same machine code"
    if same:
        return "rebuilt, same machine code as the baseline" if result.rebuilt else "same machine code as the baseline"
    if result.baseline_params is not None and result.baseline_content_hash and result.content_hash:
        return f"same params as the baseline, another build ({causes})"
    return ""


def bound(value: str | None) -> str:
    return "-" if value is None else f"{value}-bound"


def model_kind(result: Result) -> str:
    if not result.model_id:
        return "-"
    if result.calibrated:
        return "calibrated"
    return "pipeline" if result.model_id.startswith("pipeline-") else "analytical"


def machine_tag(result: Result) -> str:
    """The machine a result's time stands for, short, for a table cell or a failing line:
    `znver4, intel-6-167`, `cortex-a72, uncalibrated`; a model without llvm-mca (the analytical
    one): its profile or `uncalibrated` ("" unscored)."""
    m = result.machine
    if m is None:
        return ""
    if not m.recorded:
        return "machine not recorded"
    calibration = m.profile or "uncalibrated"
    return f"{m.mca_cpu}, {calibration}" if m.mca_cpu else calibration


def machine_line(result: Result) -> str:
    """The machine a result's time stands for, in full: `llvm-mca -mcpu=znver4; interval from
    intel-6-167: Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167), 85 verdict pairs timed
    natively 2026-12-02`, or `llvm-mca -mcpu=cortex-a72 (the generic pipeline model); uncalibrated: no native
    runs on this ISA` ("" unscored)."""
    m = result.machine
    if m is None:
        return ""
    if not m.recorded:
        return f"{m.model} model; its machine was not recorded (a report older than schema 2)"
    core = f"llvm-mca -mcpu={m.mca_cpu}" if m.mca_cpu else f"the {m.model} model's cost table"
    if m.model == "calibrated":
        trained = f" (trained on {m.trained_on})" if m.trained_on else ""
        core = (
            f"a calibrated model{trained} on llvm-mca -mcpu={m.mca_cpu}'s cycles"
            if m.mca_cpu
            else f"a calibrated model{trained} on counts"
        )
    if m.profile:
        out = (
            f"{core}; interval from {m.profile}: {m.cpu}, {m.pairs} verdict pair{'s' if m.pairs != 1 else ''} "
            f"timed natively {m.date}"
        )
        return out + (f"; uncalibrated: {m.uncalibrated}" if m.uncalibrated else "")
    generic = " (the generic pipeline model)" if m.model == "pipeline" else ""
    return f"{core}{generic}; uncalibrated: {m.uncalibrated or 'no machine profile'}"


def machine_lines(results: list[Result]) -> list[str]:
    """One line per target and machine, for a page's or a log's header: `machine [x86_64]: ...`
    (results of one target scored by different models get one line each)."""
    seen: dict[str, list[str]] = {}
    for r in results:
        line = machine_line(r)
        if line:
            targets = seen.setdefault(line, [])
            if r.target not in targets:
                targets.append(r.target)
    return [
        f"machine [{', '.join(sorted(t))}]: {line}" for line, t in sorted(seen.items(), key=lambda kv: sorted(kv[1]))
    ]


def driver(d: Driver) -> str:
    """One counter's part in a change: `l1d_misses +12,345 (+56.0 %) → +0.81 ms`."""
    change = signed_count(d.current - d.baseline)
    rel = f" ({pct(d.delta_pct)})" if d.delta_pct is not None else ""
    return f"{d.stat} {change}{rel} → {signed_seconds(d.time_s)}"


def moved_drivers(result: Result) -> list[Driver]:
    """The counters whose change moved the predicted time, largest part first."""
    return [d for d in (result.analysis.drivers if result.analysis else []) if d.time_s]


def other_verdict_model(result: Result, model: str) -> str:
    """The kind of the model that gave the verdict ("calibrated"), when it is not `model` and the result
    has both times ("" otherwise)."""
    kind = model_kind(result)
    if kind in (model, "-") or result.current_time_s is None or result.baseline_time_s is None:
        return ""
    return kind


def _verdict_model(result: Result, model: str) -> str:
    """` (the verdict's calibrated model: +1.500 ms)` when another model than `model` gave the verdict."""
    kind = other_verdict_model(result, model)
    b, c = result.baseline_time_s, result.current_time_s
    return f" (the verdict's {kind} model: {signed_seconds(c - b)})" if kind and b is not None and c is not None else ""


def verdict_model_change(result: Result, model: str) -> str:
    """`the verdict's calibrated model: 419.191 us → 821.874 us (+402.684 us)` when another model than
    `model` gave the verdict ("" otherwise)."""
    kind = other_verdict_model(result, model)
    if not kind:
        return ""
    b, c = result.baseline_time_s, result.current_time_s
    if b is None or c is None:
        return ""
    return f"the verdict's {kind} model: {seconds(b)} \u2192 {seconds(c)} ({signed_seconds(c - b)})"


def phase_split(result: Result) -> str:
    """How the change splits, said by the model that split it, adding up to that model's change:
    the pipeline model's changed code and cache-miss stalls (its change is the delta when it gave
    the verdict), else the analytical model's compute and memory phases, named as another
    model's when a calibrated one gave the verdict."""
    a = result.attribution
    if a is not None:
        clock = a.clock_hz
        parts = [
            f"changed code {signed_seconds(a.code_cycles / clock)}",
            f"cache-miss stalls {signed_seconds(a.stall_cycles / clock)}",
        ]
        if round(a.moved_cycles):
            parts.append(f"code that only moved {signed_seconds(a.moved_cycles / clock)}")
        return f"{a.model} model: {' + '.join(parts)} = {signed_seconds(a.change_cycles / clock)}" + _verdict_model(
            result, a.model
        )
    before = result.analysis.baseline if result.analysis else None
    after = result.analysis.current if result.analysis else None
    if before is None or after is None:
        return ""
    compute, memory = after.compute_s - before.compute_s, after.memory_s - before.memory_s
    text = (
        f"analytical model: compute phase {signed_seconds(compute)} + memory phase "
        f"{signed_seconds(memory)} = {signed_seconds(compute + memory)}"
    )
    return text + _verdict_model(result, "analytical")


LANE_LOSS = 1.5  # flops per FP instruction falling by this factor (or more): lost vectorisation


def findings(result: Result, most: int = 3) -> list[str]:
    """Sentences that explain a result's change, most telling first (plain text: escape to render)."""
    before = result.analysis.baseline if result.analysis else None
    after = result.analysis.current if result.analysis else None
    out = [limit_note(result)] if result.limit_breaches else []
    out += [note] if (note := toolchain_note(result)) else []
    if result.delta_pct and (split := phase_split(result)):
        out.append(split)
    out.extend(driver(d) for d in moved_drivers(result)[:most])
    if before and after:
        lb, la = before.flops_per_fp_inst, after.flops_per_fp_inst
        if lb and la and lb >= LANE_LOSS * la:
            out.append(f"vectorisation lost: flops per FP instruction {number(lb)} → {number(la)}")
        elif lb and la and la >= LANE_LOSS * lb:
            out.append(f"wider vectors: flops per FP instruction {number(lb)} → {number(la)}")
        if before.bound and after.bound and before.bound != after.bound:
            out.append(f"bound class {bound(before.bound)} → {bound(after.bound)}")
    return out


def block_side(side: BlockSide | None) -> str:
    """One side of a changed block: `main_compute_ 0x402e00-0x402e9c in loop k_1 (i_0[8] > k_1[64]),
    44 insns x 3,584, 38.7 cyc (latency)` (the loop where its build recorded the nest)."""
    if side is None:
        return "not run"
    where = f"{side.symbol} " if side.symbol else ""
    loop = f" in {side.loop_text}" if side.loop_text else ""
    return (
        f"{where}0x{side.start:x}-0x{side.end:x}{loop}, {side.insns} insns x {side.executions:,}, "
        f"{side.cycles_per_execution:.1f} cyc/exec ({side.bound})"
    )


def top_block(result: Result) -> BlockChange | None:
    """The changed block that moved the way the result did (most cycles first): on an
    improvement, the block that got cheapest, not one that appeared in its place."""
    blocks = result.blocks or []
    sign = 1 if (result.delta_pct or 0) >= 0 else -1
    return next((b for b in blocks if b.delta_cycles * sign > 0), blocks[0] if blocks else None)


def block_line(change: BlockChange) -> str:
    """The block whose cycles changed most, in one line: baseline → current, and its share."""
    # a share only when it reads as one: blocks moving both ways can exceed the net change
    share_pct = change.share_pct
    share = f", {share_pct:.0f} % of the change" if share_pct is not None and 0 < share_pct <= 100 else ""
    return f"{change.delta_cycles:+,.0f} cycles{share}: {block_side(change.baseline)} → {block_side(change.current)}"


def what_changed_most(result: Result) -> str:
    """The one thing a table row says about a change: where (the differential view of the
    pipeline model), else the top block of a report written before it, else the counter that
    moved the predicted time most."""
    if result.attribution is not None:
        return where.where_line(result.attribution) + _verdict_model(result, result.attribution.model)
    top = top_block(result) if result.blocks else None
    if top is not None:
        return block_line(top)
    moved = moved_drivers(result)
    return driver(moved[0]) if moved else ""
