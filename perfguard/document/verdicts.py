"""The verdict vocabulary of a report: what a judged result can be, worst first, and the summary
field that counts each. perfguard.judge.verdicts decides which one a result gets."""

from __future__ import annotations

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NEW = "new"
# A baseline without a kernel: `compare`, the kernel exists in the base revision only; `check`, a
# committed baseline no configured kernel has (runs.orphans: it fails the check until pruned or renamed)
REMOVED = "removed"
ERROR = "error"
TOOLCHAIN = "toolchain"  # moved beyond the threshold, but measured with another toolchain: not judged
WRONG_RESULT = "wrong result"  # the kernel's output differs from its reference (verify): exit 4, never a score
VERDICTS = (WRONG_RESULT, REGRESSION, ERROR, TOOLCHAIN, IMPROVEMENT, NEW, REMOVED, UNCHANGED)  # worst first


def summary_key(verdict: str) -> str:
    """The report summary's count field of a verdict ("wrong result" -> wrong_result)."""
    return verdict.replace(" ", "_")
