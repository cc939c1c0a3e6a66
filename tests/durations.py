"""Writes tests/durations.json from the `--durations=0` table of a full run: the seconds each test
took (setup, call and teardown; those of 0.5 s or more) and, apart, the set-ups of 0.5 s or more.
tests/conftest.py hands the longest work to xdist first with it and leaves the slow tests out of
the quick pass (`-m "not slow"`); a test missing from it (new, renamed, short) counts as short.

    python -m pytest -n 2 -q --durations=0 | tee /tmp/run.txt; python -m tests.durations /tmp/run.txt
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

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


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 2
    found = durations(Path(argv[0]).read_text())
    if not found["seconds"]:
        sys.stderr.write(f"{argv[0]}: no --durations=0 table\n")
        return 2
    (HERE / "durations.json").write_text(json.dumps(found, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
