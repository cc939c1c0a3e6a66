"""`baseline update` in a real git repository rewrites a baseline only when what it records changed:
a new commit alone (commit and date) is no change, for configured kernels and [[model]] kernels
alike; a model edit rewrites the model's call order and the kernels whose calls changed, no others."""

from __future__ import annotations

import pytest

from perfguard.shells.cli import main
from tests.end_to_end.test_models import NET
from tests.projects import commit_all, git, init_repo

TOML = """[perfguard]
targets = ["x86_64"]
cache_dir = "{cache}"

[[kernel]]
name = "g"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = {{ M = 16, K = {k} }}

[[model]]
name = "m"
source = "mymodels:net"
params = {{ widths = [16, 32, 8], repeat = {repeat} }}
"""


def _changed(root) -> list[str]:
    """The files git sees changed under baselines/ (modified or new)."""
    paths = [
        line.split(maxsplit=1)[1] for line in git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    ]
    return sorted(p for p in paths if p.startswith("baselines/"))


@pytest.mark.slow
def test_baselines_change_only_with_what_they_record(tmp_path, cache_dir, capsys):
    init_repo(tmp_path)
    (tmp_path / "mymodels.py").write_text(NET)
    (tmp_path / ".gitignore").write_text("reports/\n__pycache__/\n")
    config = tmp_path / "perfguard.toml"
    config.write_text(TOML.format(cache=cache_dir, k=16, repeat=2))
    update = ["baseline", "update", "--config", str(config), "-j", "1"]
    assert main(update) == 0
    first = _changed(tmp_path)
    assert "baselines/x86_64/g.json" in first and "baselines/x86_64/graphs/m.json" in first
    assert len([f for f in first if f.startswith("baselines/x86_64/m.")]) == 3
    commit_all(tmp_path, "baselines")

    # a commit that changes nothing perfguard measures: the update rewrites nothing (no diff at all)
    (tmp_path / "NOTES").write_text("unrelated\n")
    commit_all(tmp_path, "notes")
    capsys.readouterr()
    assert main(update) == 0
    assert _changed(tmp_path) == []
    assert "unchanged: 4 baseline(s)" in capsys.readouterr().out

    # one kernel changed: its file only
    config.write_text(TOML.format(cache=cache_dir, k=32, repeat=2))
    assert main(update) == 0
    assert _changed(tmp_path) == ["baselines/x86_64/g.json"]
    commit_all(tmp_path, "wider gemv")

    # a model edit (one more 8x8 layer): the model's call order and the kernel called once more, no other
    config.write_text(TOML.format(cache=cache_dir, k=32, repeat=3))
    assert main(update) == 0
    changed = _changed(tmp_path)
    assert "baselines/x86_64/graphs/m.json" in changed and len(changed) == 2
    (kernel,) = [f for f in changed if f.startswith("baselines/x86_64/m.")]
    assert '"calls": 3' in (tmp_path / kernel).read_text()
    diff = git(tmp_path, "diff", "--", "baselines/x86_64/graphs/m.json")
    added = [line for line in diff.splitlines() if line.startswith("+ ")]  # the new call (and a comma before it)
    assert added[-1] == f'+    ["{kernel.removeprefix("baselines/x86_64/").removesuffix(".json")}", "more.2"]'
    assert len(added) == 2 and added[0].endswith('"more.1"],')
