"""Config loading: valid files become dataclasses; every bad input is one line and exit 2."""

from __future__ import annotations

import pytest

from perfguard.config import load_config
from perfguard.errors import InputError
from perfguard.shells.cli import main

GOOD = """
[perfguard]
targets = ["x86_64", "aarch64"]
threshold = 1.5

[[kernel]]
name = "g"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = { M = 64, N = 64, K = 64 }
threshold = 0.5

[target.aarch64]
l1d = { size = 65536 }
clock_hz = 2.0e9

[target.myrv]
base = "riscv64"
l2 = { size = 524288, assoc = 8 }
"""


def test_good_config_loads(project):
    path = project(GOOD)
    config = load_config(path)
    assert config.targets == ("x86_64", "aarch64")
    assert config.judging.threshold == 1.5
    assert config.kernel("g").params == {"M": 64, "N": 64, "K": 64}
    assert config.judging.threshold_for(config.kernel("g").threshold) == 0.5
    assert config.judging.threshold_for(config.kernel("g").threshold, 3.0) == 3.0
    assert config.profile("aarch64").l1d.size == 65536
    assert config.profile("aarch64").l1d.assoc == 2  # untouched fields keep the built-in value
    assert config.profile("aarch64").clock_hz == 2.0e9
    assert config.profile("myrv").isa == "riscv64"
    assert config.profile("myrv").l2.size == 524288 and config.profile("myrv").l2.assoc == 8
    assert config.storage.baseline_dir == path.parent / "baselines"


def test_pyproject_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.perfguard]\ntargets = ["riscv64"]\n\n'
        '[[tool.perfguard.kernel]]\nname = "k"\nentry = "m:f"\n'
    )
    config = load_config(cwd=tmp_path)
    assert config.targets == ("riscv64",)
    assert config.kernels[0].name == "k"


@pytest.mark.parametrize(
    "toml, needle",
    [
        ("[perfguard]\nthreshold = ", "TOML syntax error"),
        ("[perfguard]\nthreshhold = 2.0\n", "unknown key 'perfguard.threshhold'"),
        ('[perfguard]\ntargets = ["sparc"]\n', "unknown target 'sparc'"),
        ('[perfguard]\nthreshold = "two"\n', "perfguard.threshold: must be a number"),
        ('[perfguard]\nsimulator = "spike"\n', "unknown simulator 'spike'"),
        ('[perfguard]\n[[kernel]]\nname = "a"\nentry = "m:f"\ncolour = 1\n', "unknown key 'colour'"),
        (
            '[perfguard]\n[[kernel]]\nname = "a"\nentry = "m:f"\n[[kernel]]\nname = "a"\nentry = "m:f"\n',
            "duplicate kernel name 'a'",
        ),
        ('[perfguard]\n[[kernel]]\nname = "a/../b"\nentry = "m:f"\n', "name has characters"),
        ('[perfguard]\n[[kernel]]\nname = "a"\nentry = "nocolon"\n', "must be 'module:function'"),
        ("[perfguard]\n[target.x86_64]\nl1d = { size = 1000 }\n", "target.x86_64.l1d"),
        ("[perfguard]\n[target.new]\nclock_hz = 1e9\n", "needs 'base'"),
        ("[perfguard]\n[target.x86_64]\nvoltage = 1\n", "unknown key 'voltage'"),
    ],
)
def test_bad_config_is_one_line_exit_2(project, capsys, toml, needle):
    path = project(toml)
    code = main(["check", "--config", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and needle in err[0] and str(path) in err[0], err


def test_missing_config_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 2
    assert "no perfguard.toml found" in capsys.readouterr().err


def test_explicit_missing_config_names_file(tmp_path, capsys):
    assert main(["check", "--config", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: config file not found" in capsys.readouterr().err


def test_unknown_kernel_and_target_on_command_line(project, capsys):
    path = project(GOOD)
    assert main(["check", "--config", str(path), "--kernels", "nope"]) == 2
    assert "unknown kernel 'nope'" in capsys.readouterr().err
    assert main(["check", "--config", str(path), "--targets", "mips"]) == 2
    assert "unknown target 'mips'" in capsys.readouterr().err


def test_bad_cli_usage_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", "--shard", "3/2"])
    assert exc.value.code == 2
    assert (
        capsys.readouterr().err.splitlines()[-1] == "perfguard: error: argument --shard: --shard 3/2: need 1 <= i <= n"
    )


def test_load_config_raises_input_error(project):
    path = project("[perfguard]\njobs = 0\n")
    with pytest.raises(InputError) as info:
        load_config(path)
    assert info.value.message == f"{path}: perfguard.jobs: must be >= 1, got 0" and info.value.exit_code == 2
