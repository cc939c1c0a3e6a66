"""The registries of simulators, predictors, kernel families and executors (perfguard.registry):
one message per unknown name, listing the known ones, and nothing imported before it is asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from perfguard.errors import InputError
from perfguard.executors import make_executor
from perfguard.kernels import get_family
from perfguard.predict.registry import PREDICTORS, predictor_class
from perfguard.registry import Registry
from perfguard.sim.base import get_simulator
from tests.conftest import REPO


def test_unknown_names_are_input_errors_listing_the_known_ones(tmp_path):
    cases = [
        (lambda: get_simulator("spike", tmp_path), "unknown simulator 'spike' (one of qemu, gem5, cachegrind)"),
        (lambda: predictor_class("svm"), "unknown predictor 'svm' (one of mlr, dnn, gp, xgboost)"),
        (
            lambda: get_family("fft"),
            "unknown kernel family 'fft' (built-in: gemm, gemv, conv2d, depthwise_conv2d, dense_relu, qgemm, qconv2d)",
        ),
        (lambda: make_executor("ray"), "unknown executor 'ray' (one of local, dask)"),
    ]
    for call, message in cases:
        with pytest.raises(InputError) as info:
            call()
        assert info.value.message == message
    with pytest.raises(KeyError):
        PREDICTORS["svm"]


def test_known_names_load_their_part(tmp_path):
    assert get_family("gemv").name == "gemv"
    assert get_simulator("cachegrind", tmp_path).name == "cachegrind"
    assert PREDICTORS["mlr"].__name__ == "MultipleLinearRegression" and predictor_class("mlr") is PREDICTORS["mlr"]
    assert type(make_executor("local", 1)).__name__ == "LocalExecutor"
    with pytest.raises(InputError, match="--scheduler needs --executor dask"):
        make_executor("local", 1, "tcp://127.0.0.1:9")


def test_names_and_membership_import_nothing():
    code = (
        "import sys\n"
        "from perfguard.predict.registry import PREDICTORS\n"
        "from perfguard.sim.base import SIMULATORS\n"
        "assert 'mlr' in PREDICTORS and 'svm' not in PREDICTORS and list(PREDICTORS)[0] == 'mlr'\n"
        "assert 'gem5' in SIMULATORS and len(SIMULATORS) == 3\n"
        "print(sorted(m for m in sys.modules if m in ('sklearn', 'xgboost', 'perfguard.predict.mlr', "
        "'perfguard.sim.gem5')))\n"
        "PREDICTORS['mlr']\n"
        "print('perfguard.predict.mlr' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["[]", "True"]


def test_a_missing_part_and_a_missing_dependency_are_told_apart(tmp_path, monkeypatch):
    (tmp_path / "part_needing_more.py").write_text("import dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("widget", {"gone": "part_not_shipped:Widget", "needy": "part_needing_more:Widget"})
    with pytest.raises(InputError) as info:
        registry.load("gone")
    assert info.value.message == "widget 'gone' is not available in this perfguard version"
    with pytest.raises(ModuleNotFoundError, match="dependency_nobody_installed"):
        registry.load("needy")


def test_the_simulator_registry_feeds_the_commands_and_the_model_choice():
    import argparse

    from perfguard.shells.commands import bisect, check, compare
    from perfguard.sim.base import SIMULATORS, block_profile_simulators, profile_tools
    from perfguard.targets import BUILTIN

    for command in (check, compare, bisect):
        parser = argparse.ArgumentParser()
        command.add_parser(parser.add_subparsers())
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        option = next(a for p in sub.choices.values() for a in p._actions if "--simulator" in a.option_strings)
        assert tuple(option.choices) == SIMULATORS.names == ("qemu", "gem5", "cachegrind"), command.__name__
    assert block_profile_simulators() == ("qemu",)
    x86, rv = BUILTIN["x86_64"], BUILTIN["riscv64"]
    assert profile_tools([x86, rv], "qemu") == [x86.cc, x86.qemu, rv.cc, rv.qemu]
    assert profile_tools([x86], "cachegrind") == [x86.cc, "valgrind"] and profile_tools([x86], "gem5") == [x86.cc]
