"""perfguard init at its own level: the files it writes, --force, .gitignore, the workflow linted.
The real init -> baseline update -> check -> regression flow is tests/end_to_end/test_getting_started.py;
its refusals are rows of the bad-input catalogue."""

from __future__ import annotations

import subprocess
import tomllib

import pytest

from perfguard.config import load_config
from perfguard.shells.cli import main
from tests.shells.test_action import run_tool, tool


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", "-b", "trunk"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("build/")  # no newline at the end: init's lines go after one
    return tmp_path


def test_init_writes_a_project_perfguard_can_load(repo, capsys):
    assert main(["init", "--dir", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "next:\n  perfguard baseline update\n  git add perfguard.toml perfguard_kernels baselines" in out
    config = load_config(repo / "perfguard.toml")
    assert [k.name for k in config.kernels] == ["matmul"] and list(config.targets) == ["x86_64", "aarch64", "riscv64"]
    kernel = config.kernels[0]
    assert (kernel.entry, kernel.reference, kernel.flops) == (
        "perfguard_kernels.matmul:matmul",
        "perfguard_kernels.matmul:reference",
        "2 * M * N * K",
    )
    assert (repo / ".gitignore").read_text() == (
        "build/\n# perfguard: the last check's reports, and the cache when "
        "cache_dir is set to it\nreports/\n.perfguard-cache/\n"
    )
    source = (repo / "perfguard_kernels" / "matmul.py").read_text()
    assert "tvm.s_tir.Schedule(mod)" in source and 'sch.get_sblock("C")' in source
    compile(source, "matmul.py", "exec")
    workflow = (repo / ".github" / "workflows" / "perfguard.yml").read_text()
    assert "branches: [trunk]" in workflow and "uses: OWNER/perfguard@SHA" in workflow
    proc = run_tool(tool("actionlint"), "-color=false", str(repo / ".github" / "workflows" / "perfguard.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_force_overwrites_and_gitignore_lines_are_added_once(repo):
    assert main(["init", "--dir", str(repo), "--action", "me/perfguard@0123456789abcdef0123456789abcdef01234567"]) == 0
    (repo / "perfguard.toml").write_text("# mine\n")
    assert main(["init", "--dir", str(repo)]) == 2
    assert (repo / "perfguard.toml").read_text() == "# mine\n"
    assert main(["init", "--dir", str(repo), "--force"]) == 0
    assert tomllib.loads((repo / "perfguard.toml").read_text())["kernel"][0]["name"] == "matmul"
    assert (repo / ".gitignore").read_text().count("reports/") == 1
