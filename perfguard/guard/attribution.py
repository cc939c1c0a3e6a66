"""What changed between two measurements of one kernel, beyond the counters: the hook for blocks.

`changed_blocks(before, after)` is where `perfguard bisect` and `perfguard compare` ask which basic
blocks changed most. It answers None while JobResult carries no block profile; once the pipeline
keeps one (a `blocks` attribute: per executed block its address, size, instruction count and
execution count), this is the one function to fill in, and both commands print what it returns.
"""

from __future__ import annotations

from typing import Any


def changed_blocks(before: Any, after: Any, most: int = 5) -> list[str] | None:
    """Lines describing the blocks whose share of the work changed most; None without a block profile."""
    if getattr(before, "blocks", None) is None or getattr(after, "blocks", None) is None:
        return None
    return None  # the block profile exists but its comparison is not connected yet (see the module doc)
