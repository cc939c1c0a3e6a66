"""The failures first: one line per failing result, which every output opens with.

A failing result is one that fails the check: a wrong result, a regression, an error, a committed
baseline no kernel is configured for (orphaned), and a [[model]] total that regressed. Each line
says the kernel and target, the verdict with what decided it, the delta with its interval, the top
"where" entry, what changed (the params' diff against the baseline's) and the machine the time
stands for (llvm-mca's CPU, the machine profile or "uncalibrated"). The terminal, index.html,
summary.md (the pull-request comment) and the pytest summary each render these lines, in the
order of the report (worst first), before anything else; a renderer that must cut cuts elsewhere.

Plain text: renderers escape it for their medium, and link `kernel` to its page.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfguard.document.report import ModelTotal, Report
from perfguard.document.result import Result
from perfguard.document.verdicts import ERROR, REGRESSION, WRONG_RESULT
from perfguard.report import text
from perfguard.report.numbers import pct

FAILING = (WRONG_RESULT, REGRESSION, ERROR)
_MESSAGE = 240  # characters of an error message on its line (the kernel's page has it all)


@dataclass(frozen=True)
class Failure:
    kernel: str  # a kernel, or "model <name>" for a model total
    target: str
    verdict: str  # the verdict's name (a CSS class, an icon)
    label: str  # the verdict with what decided it (text.verdict_text)
    delta: str  # the delta with its interval, or "-"
    where: str  # where the change happened, the error, or what changed in the model
    change: str  # the params' diff against the baseline's, or "" (text.change_text)
    machine: str = ""  # what the time stands for (text.machine_tag): "znver4, intel-6-167"
    result: Result | None = None  # None: a model total
    model: ModelTotal | None = None

    def line(self) -> str:
        """`gemm_256 [x86_64] regression (...) +38.68 % (90 %: -54.0 .. +317.9 %); where: ...; change: tile_k 4 -> 1`."""
        parts = [f"{self.kernel} [{self.target}] {self.label}" + (f" {self.delta}" if self.delta != "-" else "")]
        if self.where:
            parts.append(f"where: {self.where}" if self.result is None or not self.result.error else self.where)
        if self.change:
            parts.append(f"change: {self.change}")
        if self.machine:
            parts.append(f"machine: {self.machine}")
        return "; ".join(parts)


def failing(result: Result) -> bool:
    return result.verdict in FAILING or result.orphaned


def _message(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= _MESSAGE else value[: _MESSAGE - 3] + "..."


def of_result(r: Result) -> Failure:
    if r.error or r.orphaned:
        where = _message(r.error or r.note or "")
    elif r.mismatch is not None:
        m = r.mismatch
        where = (
            f"{m.elements_off} of {m.elements} elements of {m.output} off their reference; worst at "
            f"[{', '.join(map(str, m.index))}]: {m.nonfinite or m.value}, expected {m.expected}"
        )
    else:
        where = text.limit_note(r) if r.limit_breaches else ""
        top = text.what_changed_most(r) if r.delta_pct else ""
        where = "; ".join(filter(None, [where, top]))
    delta = text.delta_with_interval(r) if r.delta_pct is not None else "-"
    return Failure(
        r.kernel,
        r.target,
        r.verdict,
        text.verdict_text(r),
        delta,
        where,
        text.change_text(r),
        text.machine_tag(r),
        result=r,
    )


def of_model(m: ModelTotal) -> Failure:
    return Failure(
        f"model {m.model}", m.target, m.verdict, m.verdict, pct(m.delta_pct), "; ".join(m.changes[:2]), "", model=m
    )


def failures(report: Report) -> list[Failure]:
    """Every failing result (worst first, as every renderer lists results), then every model total
    that regressed."""
    return [of_result(r) for r in report.worst_first() if failing(r)] + [
        of_model(m) for m in report.models if m.verdict == REGRESSION
    ]
