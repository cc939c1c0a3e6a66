"""Determinism across processes: a fresh perfguard process and this test's own process, each on an
empty cache, build, simulate, record baselines and check against them, and write byte-identical
files, but for the time of day, the wall-clock seconds a result took and the check's stage timings
(masked below, and nothing else).

One tiny kernel on one target keeps it to one TVM build and one QEMU run per side; the two
sides run at the same time. This process has imported TVM long before and run other tests: any
state a warm process carries that changed a result would show here as a difference.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from perfguard.shells.cli import main
from tests.conftest import REPO, write_project

TOML = """\
[perfguard]
targets = ["aarch64"]

[[kernel]]
name = "v"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = { M = 16, K = 16 }
"""
# One process: record the baselines, then check against them (every stage from an empty cache).
SCRIPT = (
    "import sys; from perfguard.shells.cli import main; "
    "sys.exit(main(['baseline', 'update', '-j', '1']) or main(['check', '-j', '1']))"
)

# What may differ between two runs: when they ran, how long a result and each stage took.
VARYING = [
    (re.compile(r'"(wall_s|cpu_s)": [0-9.e-]+'), r'"\1": <seconds>'),
    (re.compile(r'"created": "[0-9T:+-]+"'), '"created": "<time>"'),
    (re.compile(r'"seconds": [0-9.e-]+'), '"seconds": <wall>'),
    (re.compile(r"perfguard ([0-9.]+) &middot; [0-9T:+-]+"), r"perfguard \1 &middot; <time>"),
]


def outputs(root: Path) -> dict[str, str]:
    files = {}
    for path in sorted([*(root / "baselines").rglob("*"), *(root / "reports").rglob("*")]):
        if path.is_file():
            text = path.read_text().replace(str(root), "<project>")
            for pattern, mask in VARYING:
                text = pattern.sub(mask, text)
            files[str(path.relative_to(root))] = text
    return files


def test_a_cold_process_and_this_one_write_byte_identical_baselines_and_reports(tmp_path, monkeypatch, capsys):
    roots = [write_project(tmp_path / side, TOML).parent for side in ("a", "b")]
    caches = [root.parent / f"{root.name}-cache" for root in roots]
    env = {
        **os.environ,
        "PERFGUARD_CACHE_DIR": str(caches[0]),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        cwd=roots[0],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    # meanwhile the same, as the script does it, in this process (a second cold process would only import TVM again)
    monkeypatch.setenv("PERFGUARD_CACHE_DIR", str(caches[1]))
    monkeypatch.chdir(roots[1])
    codes = [main(["baseline", "update", "-j", "1"]), main(["check", "-j", "1"])]
    assert codes == [0, 0], capsys.readouterr().out
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert sorted(p.name for p in caches[1].iterdir()) == sorted(p.name for p in caches[0].iterdir())  # both built
    a, b = (outputs(root) for root in roots)
    assert sorted(a) == [
        "baselines/aarch64/v.json",
        "reports/index.html",
        "reports/kernels/v.html",
        "reports/perfguard.json",
        "reports/summary.md",
    ]
    for name in a:
        assert a[name] == b[name], name
    # what was masked is the only difference: the files are whole, with real numbers in them
    assert a["reports/perfguard.json"].count('"seconds": <wall>') == 1
    assert '"timings"' in a["reports/perfguard.json"]
    assert '"verdict": "unchanged"' in a["reports/perfguard.json"]
    assert re.search(r'"insts": [1-9][0-9]+', a["baselines/aarch64/v.json"])
