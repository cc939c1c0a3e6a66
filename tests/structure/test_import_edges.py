"""The layers hold: scripts/import_edges.py finds no import from a lower layer of the data flow
(kernels, the compile step, sim, predict, guard, report: scripts/import_edges.py FLOW) to a higher one,
and that it does find one when a tree has it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "import_edges.py"


def test_no_import_runs_against_the_data_flow():
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "against the data flow (kernels -> " in proc.stdout
    assert proc.stdout.rstrip().endswith(": 0"), proc.stdout
    assert "sim -> guard" not in proc.stdout


def test_the_script_reports_an_upward_edge(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("import_edges", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    root = tmp_path / "perfguard"
    for name, text in {
        "sim/__init__.py": "",
        "sim/run.py": "from perfguard.errors import InputError\n\ndef f():\n    from perfguard.guard import check\n",
        "guard/__init__.py": "",
        "guard/check.py": "import perfguard.sim.run\n",
        "errors.py": "",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.setattr(script, "ROOT", root)
    assert script.main([]) == 1
    out = capsys.readouterr().out
    flow = " -> ".join(layer if isinstance(layer, str) else " | ".join(layer) for layer in script.FLOW)
    assert f"against the data flow ({flow}): 1\n  sim -> guard (1)" in out
    assert "guard -> sim (1 import)" in out
