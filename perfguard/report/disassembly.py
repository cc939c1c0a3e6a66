"""A changed block's two sides of disassembly, aligned instruction by instruction for one table.

The baseline's and the current instructions are matched as the longest common runs of the same
mnemonics (difflib's matcher over each line's first word: a register or an offset renamed by the
allocator does not break a run); a matched pair whose text differs is a changed line, what lies
between two runs is a changed stretch, shown side by side, or code only one side has. A renderer draws one row per
pair, so both sides scroll together and a changed line is marked where it is; beside each
instruction, llvm-mca's cycles for it where the block side has them (document BlockSide.insn_cycles:
latency / reciprocal throughput on the pipeline model's CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from perfguard.document.result import InsnCycles

SAME, CHANGED, ONLY_BASELINE, ONLY_CURRENT = "same", "changed", "only-baseline", "only-current"


@dataclass(frozen=True)
class Row:
    kind: str  # same | changed | only-baseline | only-current
    baseline: str  # "" where the baseline has no line here
    current: str
    baseline_cycles: str = ""  # llvm-mca's `latency/rthroughput` of the baseline's instruction ("": none)
    current_cycles: str = ""
    baseline_title: str = ""  # the same in words, for a tooltip
    current_title: str = ""


def cycles_text(c: InsnCycles | None) -> tuple[str, str]:
    """`4/0.5` and `latency 4 cycles, reciprocal throughput 0.5 cycles, 1 micro-op` ("" without)."""
    if c is None:
        return "", ""
    return (
        f"{c.latency}/{c.rthroughput:g}",
        f"latency {c.latency} cycles, reciprocal throughput {c.rthroughput:g} cycles, "
        f"{c.uops} micro-op{'' if c.uops == 1 else 's'}",
    )


def _key(line: str) -> str:
    """The mnemonic: what the instruction does, not where its operands are."""
    words = line.split()
    return words[0] if words else ""


def _same(a: str, b: str) -> bool:
    return a.split() == b.split()


def aligned(
    baseline: list[str],
    current: list[str],
    baseline_cycles: Sequence[InsnCycles] = (),
    current_cycles: Sequence[InsnCycles] = (),
) -> list[Row]:
    """One row per instruction pair, in order; every line of each side appears once, with its
    cycles where the side has one entry per line (else none on that side)."""
    bc = list(baseline_cycles) if len(baseline_cycles) == len(baseline) else [None] * len(baseline)
    cc = list(current_cycles) if len(current_cycles) == len(current) else [None] * len(current)

    def row(kind: str, b: int | None, c: int | None) -> Row:
        (b_text, b_title), (c_text, c_title) = (
            cycles_text(bc[b] if b is not None else None),
            cycles_text(cc[c] if c is not None else None),
        )
        return Row(
            kind,
            baseline[b] if b is not None else "",
            current[c] if c is not None else "",
            b_text,
            c_text,
            b_title,
            c_title,
        )

    rows: list[Row] = []
    matcher = SequenceMatcher(None, [_key(x) for x in baseline], [_key(x) for x in current], autojunk=False)
    for op, b0, b1, c0, c1 in matcher.get_opcodes():
        if op == "equal":
            rows += [
                row(SAME if _same(baseline[b], current[c]) else CHANGED, b, c)
                for b, c in zip(range(b0, b1), range(c0, c1))
            ]
            continue
        for i in range(max(b1 - b0, c1 - c0)):
            b = b0 + i if b0 + i < b1 else None
            c = c0 + i if c0 + i < c1 else None
            kind = CHANGED if b is not None and c is not None else ONLY_BASELINE if b is not None else ONLY_CURRENT
            rows.append(row(kind, b, c))
    return rows
