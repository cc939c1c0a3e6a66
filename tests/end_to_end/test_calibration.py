"""Calibration end to end, at the smallest size that still trains a model: real builds, real
simulation and real native timing of gemm on x86_64 (three shapes of two variants, as few as the
auto decision's nested leave-one-group-out allows), then resimulate, train, check and drift.
Evaluation and training on a larger collected dataset are tested in tests/predict/test_predict.py."""

from __future__ import annotations

import json

import pytest

from perfguard.predict.dataset import dataset_path, load_dataset
from perfguard.predict.store import model_path
from perfguard.runs.calibration_models import drift_reasons
from perfguard.shells.cli import main
from tests.projects import ONE_GEMM as TOML


@pytest.mark.slow
def test_collect_resimulate_train_check_and_drift(project, tmp_path, capsys):
    # jobs = 1: every step's jobs in this process (a pool's workers each import TVM; pools: tests/executors)
    config = project(TOML.replace("[perfguard]\n", "[perfguard]\njobs = 1\n", 1))
    groups = tmp_path / "groups.json"
    groups.write_text(
        json.dumps([{"M": 32, "N": 32, "K": 32}, {"M": 64, "N": 32, "K": 32}, {"M": 32, "N": 64, "K": 64}])
    )
    base = ["--config", str(config), "--target", "x86_64", "--family", "gemm"]
    # the plumbing, not the timer: none rejected, one harness process per attempt (several interleaved, the
    # quiet rounds: tests/sim/test_native_timing.py)
    assert (
        main(
            [
                "calibrate",
                "collect",
                *base,
                "--variants",
                "2",
                "--groups",
                str(groups),
                "--processes",
                "1",
                "--max-cv",
                "100",
                "--max-neighbour-busy",
                "0",
            ]
        )
        == 0
    )
    dataset = load_dataset(dataset_path(config.parent / "baselines", "x86_64", "gemm"))
    assert len(dataset.groups()) == 3 and len(dataset.rows) == 3 * 2
    assert all(r.native_s > 0 and r.stats.insts > 0 and r.native["processes"] == 1 for r in dataset.rows)
    assert dataset.rows[0].machine["machine"] == "x86_64"
    assert all(r.binary and r.stats.blocks is not None for r in dataset.rows)  # hash and profile recorded
    assert main(["calibrate", "resimulate", *base]) == 0  # same binaries, same counters: every row kept
    again = load_dataset(dataset_path(config.parent / "baselines", "x86_64", "gemm"))
    assert [(r.params, r.native_s, r.binary, r.stats) for r in again.rows] == [
        (r.params, r.native_s, r.binary, r.stats) for r in dataset.rows
    ]
    assert main(["calibrate", "train", *base, "--predictors", "mlr"]) == 0
    # whether auto may use the model follows from this machine's timings, by the rule on its figures
    path = model_path(config.parent / "baselines", "x86_64", "gemm")
    data = json.loads(path.read_text())
    decision = data["auto"]["summary"]
    assert [g["group"] for g in data["auto"]["groups"]] == dataset.groups()  # every shape held out once
    assert data["auto"]["use"] is (
        decision["gain"] >= decision["margin"] and decision["worst_group_gain"] >= -decision["margin"]
    )
    data["auto"]["use"] = True  # as if it had won: the check below scores with the calibrated model
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["check", "--config", str(config)]) == 0
    result = json.loads((config.parent / "reports/perfguard.json").read_text())["results"][0]
    assert result["calibrated"] is True and result["model_id"] == data["model_id"]
    # one fresh variant per shape: a sample the model has not seen, as many rows as shapes (3: Spearman defined)
    code = main(
        [
            "calibrate",
            "drift",
            "--config",
            str(config),
            "--target",
            "x86_64",
            "--variants",
            "1",
            "--json",
            str(tmp_path / "drift.json"),
            "--max-cv",
            "100",
            "--max-neighbour-busy",
            "0",
        ]
    )
    drift = json.loads((tmp_path / "drift.json").read_text())["gemm"]
    # its numbers come from this machine's timings; the verdict must follow from them by the rule
    reasons = drift_reasons(drift["mape"], drift["spearman"], 15.0, 0.9)
    assert drift["reasons"][: len(reasons)] == reasons and drift["needs_retraining"] is bool(reasons)
    assert code == (1 if reasons else 0)
    assert drift["rows"] == 1 * 3  # a fresh variant of each of the three shapes


@pytest.mark.slow
def test_collect_that_keeps_nothing_fails_naming_why_and_writes_no_dataset(project, tmp_path, capsys):
    config = project(TOML.replace("[perfguard]\n", "[perfguard]\njobs = 1\n", 1))
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([{"M": 16, "N": 16, "K": 16}]))
    # a spread no real timing stays under: every attempt is rejected as unsteady
    code = main(
        [
            "calibrate",
            "collect",
            "--config",
            str(config),
            "--target",
            "x86_64",
            "--family",
            "gemm",
            "--variants",
            "2",
            "--groups",
            str(groups),
            "--processes",
            "1",
            "--max-cv",
            "1e-9",
            "--max-neighbour-busy",
            "0",
        ]
    )
    err = capsys.readouterr().err
    assert code == 3
    assert (
        "calibrate collect kept no variant for gemm on x86_64: 2 native timings rejected as unsteady "
        "(spread over --max-cv 1e-09 %" in err
    )
    assert not dataset_path(config.parent / "baselines", "x86_64", "gemm").exists()
