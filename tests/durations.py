"""Writes tests/durations.json from the `--durations=0` tables of runs: the seconds each test
took (setup, call and teardown; those of 0.5 s or more) and, apart, the set-ups of 0.5 s or more,
each the longest any of the given runs saw. tests/conftest.py hands the longest work to xdist
first with it and leaves the slow tests out of the quick pass (`-m "not slow"`); a test missing
from it (new, renamed, short) counts as short.

Give it a full run and a quick pass, both on a cold cache: in the full run a test may find its
kernel built by a slow test before it, which the quick pass leaves out, so that the same test
costs seconds there; the quick pass's own table classes it by what it costs in the quick pass.

    PERFGUARD_CACHE_DIR=$(mktemp -d) python -m pytest -n 2 -q --durations=0 | tee /tmp/full.txt
    PERFGUARD_CACHE_DIR=$(mktemp -d) python -m pytest -n 2 -q -m "not slow" --durations=0 | tee /tmp/quick.txt
    python -m tests.durations /tmp/full.txt /tmp/quick.txt
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from perfguard.atomic import atomic_write_text

HERE = Path(__file__).resolve().parent
FLOOR = 0.5
ROW = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(tests/\S.*?)\s*$")


def durations(table: str) -> dict[str, dict[str, float]]:
    seconds: dict[str, float] = {}
    setup: dict[str, float] = {}
    for line in table.splitlines():
        if match := ROW.match(line):
            took, phase, nodeid = float(match.group(1)), match.group(2), match.group(3).split("@tests/")[0]
            seconds[nodeid] = seconds.get(nodeid, 0.0) + took
            if phase == "setup":
                setup[nodeid] = took

    def kept(found: dict[str, float]) -> dict[str, float]:
        return {k: round(v, 1) for k, v in sorted(found.items()) if v >= FLOOR}

    return {"seconds": kept(seconds), "setup": kept(setup)}


def longest(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per test, the most any run measured."""
    out: dict[str, dict[str, float]] = {"seconds": {}, "setup": {}}
    for run in runs:
        for kind, found in run.items():
            for nodeid, took in found.items():
                out[kind][nodeid] = max(took, out[kind].get(nodeid, 0.0))
    return {kind: dict(sorted(found.items())) for kind, found in out.items()}


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    runs = []
    for path in argv:
        runs.append(durations(Path(path).read_text()))
        if not runs[-1]["seconds"]:
            sys.stderr.write(f"{path}: no --durations=0 table\n")
            return 2
    found = longest(runs)
    atomic_write_text(HERE / "durations.json", json.dumps(found, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
