"""Golden reports captured from real checks (see regenerate.py), for the tests of the layers that
read a report: report/ renders them, judge/ and runs/ rebuild their analysis from their statistics."""

from __future__ import annotations

import copy
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny" / "perfguard.json"  # gemm_16 regressed, gemv_16 unchanged (x86_64, analytical model)
TINY_BASELINES = HERE / "tiny" / "baselines"
REPOSITORY = (
    HERE / "repo" / "perfguard.json"
)  # this repository's perfguard.toml, gemm_256's tile_k 4 -> 1 (a regression)
REGENERATE = "PERFGUARD_CACHE_DIR=/tmp/golden-cache python -m tests.report.golden.regenerate"

_CACHE: dict[Path, dict] = {}


def load(path: Path) -> dict:
    """A fresh copy of a golden report's JSON (tests may edit it)."""
    if path not in _CACHE:
        _CACHE[path] = json.loads(path.read_text())
    return copy.deepcopy(_CACHE[path])
