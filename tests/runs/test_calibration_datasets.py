"""The dataset logic of `perfguard calibrate` at its own level (runs/calibration.py): which families a
command works on, the groups file, merging ingested timings, what a drift check samples."""

from __future__ import annotations

import json

import pytest

from perfguard.errors import InputError
from perfguard.predict.dataset import Dataset, Row, dataset_path, load_dataset
from perfguard.runs import calibration, calibration_models
from perfguard.sim.stats import Stats

CPU_A, CPU_B = "GenuineIntel cpu family 6 model 85 stepping 7", "AuthenticAMD cpu family 25 model 17 stepping 1"


def row(group: str, tile: int, native_s: float, cpu: str = CPU_A) -> Row:
    return Row(
        group,
        {"M": 64, "tile_m": tile},
        Stats(insts=1000 * tile, loads=10),
        native_s,
        {"min_s": native_s, "cv": 0.01, "samples": 5, "attempts": 1, "steady": True},
        {"cpu": "a cpu", "cpu_id": cpu},
    )


def test_stored_families_the_named_one_else_every_file_else_an_error_naming_the_folder(tmp_path):
    assert calibration.stored_families(tmp_path, "x86_64", "gemm", "models") == ["gemm"]
    with pytest.raises(InputError, match=rf"^{tmp_path}/datasets/x86_64: no datasets for target x86_64$"):
        calibration.stored_families(tmp_path, "x86_64", None, "datasets")
    folder = tmp_path / "datasets" / "x86_64"
    folder.mkdir(parents=True)
    for name in ("gemv.json", "conv2d.json", "notes.txt"):
        (folder / name).write_text("{}")
    assert calibration.stored_families(tmp_path, "x86_64", None, "datasets") == ["conv2d", "gemv"]


def test_read_groups_takes_a_list_of_shapes_and_names_the_file_otherwise(tmp_path):
    path = tmp_path / "groups.json"
    path.write_text('[{"M": 64, "N": 32, "K": 16}]')
    assert calibration.read_groups(path) == [{"M": 64, "N": 32, "K": 16}]
    path.write_text('{"M": 64}')
    with pytest.raises(InputError, match=r"groups.json: must be a JSON list of objects \(one shape each\)$"):
        calibration.read_groups(path)
    path.write_text("[{")
    with pytest.raises(InputError, match=r"groups.json: cannot read groups \(JSONDecodeError\)$"):
        calibration.read_groups(path)
    with pytest.raises(InputError, match=r"missing.json: cannot read groups \(FileNotFoundError\)$"):
        calibration.read_groups(tmp_path / "missing.json")


def test_merge_ingested_keeps_the_newest_timing_of_a_variant_and_refuses_what_does_not_mix(tmp_path):
    path = tmp_path / "gemm.json"
    source = tmp_path / "bench.json"
    first = calibration.merge_ingested(
        path, [row("M=64", 8, 1e-6), row("M=64", 16, 2e-6)], "qemu", "fp", "x86_64", "gemm", source
    )
    assert (first.target, first.family, first.simulator) == ("x86_64", "gemm", "qemu")
    assert first.simulator_fingerprint == "fp"
    first.save(path)
    merged = calibration.merge_ingested(path, [row("M=64", 16, 3e-6)], "qemu", "fp", "x86_64", "gemm", source)
    # the variant timed again replaces its row (appended after the kept one); the other row stays
    assert [(r.params["tile_m"], r.native_s) for r in merged.rows] == [(8, 1e-6), (16, 3e-6)]
    assert load_dataset(path).rows[1].native_s == 2e-6  # nothing written: the caller saves

    with pytest.raises(InputError, match=r"gemm.json: dataset holds qemu statistics, the benchmarks gem5$"):
        calibration.merge_ingested(path, [row("M=64", 16, 3e-6)], "gem5", "fp", "x86_64", "gemm", source)
    with pytest.raises(InputError) as error:
        calibration.merge_ingested(path, [row("M=64", 16, 3e-6, CPU_B)], "qemu", "fp", "x86_64", "gemm", source)
    assert error.value.message == (
        f"{path}: dataset was timed on {CPU_A}, {source} on {CPU_B}: times from "
        f"different CPUs do not mix (use --output for another dataset)"
    )


def test_drift_sample_leaves_out_the_seen_variants_of_the_trained_shapes(tmp_path):
    known, shapes = calibration_models.drift_sample(tmp_path, "x86_64", "gemv")  # no dataset: the default shapes
    assert known == set() and shapes == calibration.DEFAULT_GROUPS["gemv"]
    dataset = Dataset("x86_64", "gemv", "qemu", "fp", [row("K=256,M=1024", 8, 1e-6), row("K=512,M=512", 4, 1e-6)])
    dataset.save(dataset_path(tmp_path, "x86_64", "gemv"))
    known, shapes = calibration_models.drift_sample(tmp_path, "x86_64", "gemv")
    assert known == {json.dumps({"M": 64, "tile_m": t}, sort_keys=True) for t in (8, 4)}
    assert shapes == [{"K": 256, "M": 1024}, {"K": 512, "M": 512}]
