"""The layers hold: scripts/import_edges.py gives every package of perfguard a place in its order
and finds no import against it, no cycle between modules, no private name used outside its
module and no unexplained import inside a function; and it does find each of those when a tree
has one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "import_edges.py"
CHECKS = (
    "packages not in the order",
    "edges against the order",
    "edges the layers deny",
    "cycles between modules",
    "private names used outside their module",
    "imports inside functions without a reason",
)


def _script():
    spec = importlib.util.spec_from_file_location("import_edges", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_package_keeps_its_layers():
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for check in CHECKS:
        assert f"\n{check}: 0\n" in proc.stdout + "\n", proc.stdout
    assert "order: errors -> " in proc.stdout and " -> runs -> tune -> shells\n" in proc.stdout
    assert "sim -> judge" not in proc.stdout


def _tree(tmp_path, files: dict[str, str]):
    root = tmp_path / "perfguard"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _run(script, monkeypatch, capsys, root) -> dict[str, list[str]]:
    monkeypatch.setattr(script, "ROOT", root)
    code = script.main([])
    out = capsys.readouterr().out
    found, current = {}, None
    for line in out.splitlines():
        title, _, count = line.partition(": ")
        if title in CHECKS:
            current = found[title] = []
            assert int(count) >= 0
        elif current is not None and line.startswith("  "):
            current.append(line.strip())
    assert code == (1 if any(found.values()) else 0)
    return found, out


def test_the_script_finds_each_kind_of_break(tmp_path, monkeypatch, capsys):
    script = _script()
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "def _hidden():\n    pass\n",
            "sim/__init__.py": "",
            "sim/run.py": (
                "from perfguard.errors import _hidden\nimport perfguard.sim.loop\n\n"
                "def f():\n    from perfguard.judge import verdicts\n"
            ),
            "sim/loop.py": "import perfguard.sim.run\n",
            "judge/__init__.py": "",
            "judge/verdicts.py": (
                "import perfguard.sim.run\n\ndef g():\n    import tvm\n"
                "    # lazy: explained\n    import json\n    import csv\n"
            ),
            "newcomer.py": "",
            "report/__init__.py": "",
            "report/html.py": "from perfguard.sim.run import f\n",  # the renderers read the document only
        },
    )
    found, out = _run(script, monkeypatch, capsys, root)
    assert found["packages not in the order"] == ["newcomer"]
    assert found["edges against the order"] == ["sim -> judge (1)"]
    assert "judge -> sim (1 import)" in out
    assert found["edges the layers deny"] == ["report -> sim (1)"]
    # one group: sim.run <-> sim.loop, and sim.run -> judge.verdicts (lazily: it still counts) -> sim.run
    assert found["cycles between modules"] == ["perfguard.judge.verdicts -> perfguard.sim.loop -> perfguard.sim.run"]
    assert found["private names used outside their module"] == ["perfguard.sim.run imports perfguard.errors._hidden"]
    # tvm is a listed heavy dependency and json/csv are explained; the judge import in sim is not
    assert found["imports inside functions without a reason"] == [
        "perfguard.sim.run:5 imports perfguard.judge inside a function"
    ]


def test_a_clean_tree_passes(tmp_path, monkeypatch, capsys):
    script = _script()
    root = _tree(
        tmp_path,
        {
            "errors.py": "",
            "sim/__init__.py": "",
            "sim/run.py": "from perfguard.errors import InputError\n",
            "judge/__init__.py": "",
            "judge/verdicts.py": "from perfguard.sim import run\n\ndef g():\n    run._x = 1\n",
        },
    )
    monkeypatch.setattr(script, "ORDER", ("errors", "sim", "judge"))
    monkeypatch.setattr(script, "LEVEL", {"errors": 0, "sim": 1, "judge": 2})
    found, _ = _run(script, monkeypatch, capsys, root)
    assert found["private names used outside their module"] == ["perfguard.judge.verdicts uses perfguard.sim.run._x"]
    assert not any(v for k, v in found.items() if k != "private names used outside their module")


def test_a_private_member_read_off_an_object_of_another_module_is_found(tmp_path, monkeypatch, capsys):
    script = _script()
    root = _tree(
        tmp_path,
        {
            "errors.py": "",
            "sim/__init__.py": "",
            "sim/run.py": (
                "class History:\n    def _prefix(self):\n        return self._cut\n\n"
                "    def __init__(self):\n        self._cut = 1\n\n\nclass Base:\n    def _finish(self):\n"
                "        return self\n"
            ),
            "judge/__init__.py": "",
            # reads another module's private method and attribute off objects it was handed
            "judge/verdicts.py": "def g(history, other):\n    return history._prefix(), other._cut\n",
            # a subclass using what its base keeps for subclasses, and a private name of its own class
            "judge/models.py": (
                "from perfguard.sim.run import Base\n\n\nclass Model(Base):\n    _own = 1\n\n"
                "    @classmethod\n    def load(cls, m):\n        return m._finish(), m._own\n"
            ),
        },
    )
    monkeypatch.setattr(script, "ORDER", ("errors", "sim", "judge"))
    monkeypatch.setattr(script, "LEVEL", {"errors": 0, "sim": 1, "judge": 2})
    found, _ = _run(script, monkeypatch, capsys, root)
    assert found["private names used outside their module"] == [
        "perfguard.judge.verdicts:2 reads ._cut of perfguard.sim.run",
        "perfguard.judge.verdicts:2 reads ._prefix of perfguard.sim.run",
    ]
