"""perfguard tune: the knob search, MetaSchedule with the simulator builder/runner, the output."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from perfguard.config import load_config
from perfguard.errors import InputError
from perfguard.executors import LocalExecutor
from perfguard.shells.cli import main
from perfguard.tune import apply
from perfguard.tune.measure import Measurer

SHAPE = {"M": 32, "N": 32, "K": 32}
TOML = f"""
[perfguard]
targets = ["aarch64"]

[[kernel]]
name = "gemm_small"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = {SHAPE["M"]}, N = {SHAPE["N"]}, K = {SHAPE["K"]}, tile_m = 32, tile_n = 8, tile_k = 32, vector = 1, unroll = 0 }}

[[kernel]]
name = "user_kernel"
entry = "mykernels:scale"
params = {{}}
"""
USER = """
import tvm
from tvm import te

def scale():
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})
"""


def _gemm(kind: str):
    """Modules with the gemm signature: a wrong product, or one that cannot link."""
    import tvm
    from tvm import te

    A = te.placeholder((32, 32), "float32", name="A")
    B = te.placeholder((32, 32), "float32", name="B")
    k = te.reduce_axis((0, 32), name="k")
    if kind == "wrong":
        C = te.compute((32, 32), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")  # B transposed
    else:
        C = te.compute(
            (32, 32), lambda i, j: tvm.tirx.call_extern("float32", "perfguard_no_such_fn", A[i, j]), name="C"
        )
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})


def _run(config: Path, *args: str) -> int:
    return main(["tune", "--config", str(config), *args])


@pytest.mark.slow
def test_knob_search_finds_no_worse_schedule_and_guards_it(project, capsys):
    config = project(TOML, {"mykernels.py": USER})
    # in this process (--parallel 1): which executor scores the knob sets does not change the search
    # (test_executors compares two); the MetaSchedule test below runs its candidates in a pool
    assert (
        _run(config, "gemm_small", "--target", "aarch64", "--strategy", "knobs", "--trials", "2", "--parallel", "1")
        == 0
    )  # the configured schedule and one other
    out = capsys.readouterr().out
    assert "2 candidates" in out and "0 errors" in out
    log = json.loads((config.parent / "reports" / "tune-gemm_small-aarch64.json").read_text())
    assert log["trials"][0]["params"] == log["configured"]["params"]  # the configured schedule is trial 0
    assert log["tuned"]["predicted_s"] <= log["configured"]["predicted_s"]
    assert log["tuned"]["stats"] == log["best"]["stats"]
    assert log["tuned"]["content_hash"] == log["best"]["content_hash"]  # `check` reuses the tuned binary
    snippet = (config.parent / "tuned" / "gemm_small-aarch64.toml").read_text()
    table = tomllib.loads(snippet)["kernel"][0]
    assert table["params"] == log["best"]["params"] and table["targets"] == ["aarch64"]
    # the snippet goes back into perfguard.toml and is guarded like any kernel
    config.write_text(config.read_text() + "\n" + snippet)
    assert main(["check", "--config", str(config), "--kernels", "gemm_small-tuned-aarch64"]) == 0
    report = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    assert report["results"][0]["verdict"] == "new"


@pytest.mark.slow
def test_metaschedule_tunes_and_its_schedule_becomes_a_guarded_kernel(project, capsys):
    config = project(TOML, {"mykernels.py": USER})
    # two candidates, one per pool worker: the best is the smaller of two scores
    assert (
        _run(
            config,
            "gemm_small",
            "--target",
            "aarch64",
            "--strategy",
            "evolutionary",
            "--trials",
            "2",
            "--batch",
            "2",
            "--parallel",
            "2",
        )
        == 0
    )
    log = json.loads((config.parent / "reports" / "tune-gemm_small-aarch64.json").read_text())
    assert log["strategy"] == "evolutionary" and len(log["trials"]) >= 1
    scored = [t["predicted_s"] for t in log["trials"] if t["ok"]]
    assert log["best"]["predicted_s"] == min(scored)
    # the schedule file replays to the measured best: same statistics, same binary
    assert log["tuned"]["stats"] == log["best"]["stats"]
    record = json.loads((config.parent / "tuned" / "gemm_small-aarch64.json").read_text())
    assert record["format"] == apply.FORMAT and record["shape"] == {**SHAPE, "dtype": "float32"}
    snippet = (config.parent / "tuned" / "gemm_small-aarch64.toml").read_text()
    assert tomllib.loads(snippet)["kernel"][0]["params"] == {"schedule": "tuned/gemm_small-aarch64.json"}
    config.write_text(config.read_text() + "\n" + snippet)
    assert main(["check", "--config", str(config), "--kernels", "gemm_small-tuned-aarch64"]) == 0
    # a schedule tuned on another computation is refused, naming the file
    record["workload"] = "0" * 64
    (config.parent / "tuned" / "gemm_small-aarch64.json").write_text(json.dumps(record))
    assert main(["check", "--config", str(config), "--kernels", "gemm_small-tuned-aarch64"]) == 2
    assert "tuned on a different computation" in capsys.readouterr().out


@pytest.mark.slow
def test_failed_build_and_wrong_result_are_errors_not_scores(project, tmp_path):
    from tvm.s_tir.meta_schedule.builder import BuilderInput
    from tvm.s_tir.meta_schedule.runner import RunnerInput

    from perfguard.tune.metaschedule import CandidateSession, _classes, target_for

    config = load_config(project(TOML, {"mykernels.py": USER}))
    spec, profile = config.kernel("gemm_small"), config.profile("aarch64")
    _, SimBuilder, SimRunner = _classes()
    # in this process: how a failed candidate is told apart does not depend on the executor (the
    # MetaSchedule test above builds and runs candidates in a pool)
    with LocalExecutor(1) as executor:
        measurer = Measurer(config, profile, "gemm", executor)
        session = CandidateSession(measurer, spec, {**SHAPE, "dtype": "float32"}, tmp_path)
        target = target_for(profile)
        good = apply.compute_module("gemm", SHAPE)
        built = SimBuilder(session).build(
            [BuilderInput(m, target) for m in (good, _gemm("wrong"), _gemm("unlinkable"))]
        )
        assert built[0].error_msg is None and built[1].error_msg is None
        assert built[2].artifact_path is None and "linking the harness failed" in built[2].error_msg
        futures = SimRunner(session).run([RunnerInput(b.artifact_path, "cpu", []) for b in built[:2]])
        results = [f.result() for f in futures]
    assert len(results[0].run_secs) == 1 and float(results[0].run_secs[0]) > 0 and results[0].error_msg is None
    assert results[1].run_secs is None and "wrong result" in results[1].error_msg
    trials = {t.label: t for t in measurer.trials}
    assert len(trials) == 3 and sum(t.ok for t in trials.values()) == 1
    failed = sorted((t.stage, t.predicted_s) for t in trials.values() if not t.ok)
    assert failed == [("build", None), ("run", None)]


def test_tuning_refuses_kernels_it_cannot_tune(project, capsys):
    config = project(TOML, {"mykernels.py": USER})
    assert _run(config, "user_kernel", "--target", "aarch64", "--trials", "2") == 2
    assert "only kernels of a built-in family" in capsys.readouterr().err
    assert _run(config, "nope", "--target", "aarch64") == 2
    assert f"unknown kernel 'nope' (configured in {config}: gemm_small, user_kernel)" in capsys.readouterr().err
    assert _run(config, "gemm_small", "--target", "nope") == 2
    assert "--target: unknown target 'nope' (known: aarch64, " in capsys.readouterr().err
    assert _run(config, "gemm_small", "--target", "aarch64", "--trials", "0") == 2
    assert "--trials 0: must be at least 1" in capsys.readouterr().err


def test_schedule_file_errors_name_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="schedule file 'missing.json' not found"):
        apply.tuned(schedule="missing.json")
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(InputError, match="not a perfguard schedule file"):
        apply.tuned(schedule="bad.json")
