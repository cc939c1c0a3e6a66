"""A changed block's two sides of disassembly, aligned instruction by instruction for one table.

The baseline's and the current instructions are matched as the longest common runs of the same
mnemonics (difflib's matcher over each line's first word: a register or an offset renamed by the
allocator does not break a run); a matched pair whose text differs is a changed line, what lies
between two runs is a changed stretch, shown side by side, or code only one side has. A renderer draws one row per
pair, so both sides scroll together and a changed line is marked where it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

SAME, CHANGED, ONLY_BASELINE, ONLY_CURRENT = "same", "changed", "only-baseline", "only-current"


@dataclass(frozen=True)
class Row:
    kind: str  # same | changed | only-baseline | only-current
    baseline: str  # "" where the baseline has no line here
    current: str


def _key(line: str) -> str:
    """The mnemonic: what the instruction does, not where its operands are."""
    words = line.split()
    return words[0] if words else ""


def _same(a: str, b: str) -> bool:
    return a.split() == b.split()


def aligned(baseline: list[str], current: list[str]) -> list[Row]:
    """One row per instruction pair, in order; every line of each side appears once."""
    rows: list[Row] = []
    matcher = SequenceMatcher(None, [_key(x) for x in baseline], [_key(x) for x in current], autojunk=False)
    for op, b0, b1, c0, c1 in matcher.get_opcodes():
        if op == "equal":
            rows += [Row(SAME if _same(baseline[b], current[c]) else CHANGED, baseline[b], current[c])
                     for b, c in zip(range(b0, b1), range(c0, c1))]
            continue
        before, after = baseline[b0:b1], current[c0:c1]
        for i in range(max(len(before), len(after))):
            left = before[i] if i < len(before) else ""
            right = after[i] if i < len(after) else ""
            kind = CHANGED if i < len(before) and i < len(after) else ONLY_BASELINE if i < len(before) else ONLY_CURRENT
            rows.append(Row(kind, left, right))
    return rows
