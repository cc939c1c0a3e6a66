"""The statistics captured from real runs (tests/captured/, written by its regenerate.py) are
current: each job's build key is the one this tree would build it under (the kernel's lowered IR,
the target, the toolchain, the harness), its simulator the one this tree would run, and its file
reads and writes back byte for byte; each fitted model file loads and writes back byte for byte as
today's predictors save it; the calibration dataset was simulated by today's simulator;
the ResNet's base model still extracts to the captured kernels. A stale file fails here: regenerate."""

from __future__ import annotations

import json

import pytest

from perfguard import __version__
from perfguard.compile.build import build_key
from perfguard.job.run import resolve_kernel, run_toolchain
from perfguard.predict.dataset import load_dataset
from perfguard.predict.registry import PREDICTORS
from perfguard.predict.store import load_model, save_model
from perfguard.sim.qemu import QemuSimulator
from perfguard.targets import BUILTIN
from tests import captured
from tests.captured import resnet
from tests.conftest import REPO

STALE = f"is stale: regenerate it ({captured.REGENERATE}) and commit the diff"


@pytest.mark.slow  # TVM lowers each kernel
@pytest.mark.parametrize("name", sorted(captured.CAPTURES))
def test_captured_job_is_what_this_tree_builds_and_simulates(name, cache_dir):
    capture = captured.CAPTURES[name]
    profile = BUILTIN[capture.target]
    result = captured.job(name)
    assert captured.record(result) == capture.path.read_text(), f"{capture.path} {STALE}"
    assert (result.kernel, result.target, result.simulator) == (capture.spec.name, capture.target, "qemu")
    lowered, _, _ = resolve_kernel(capture.spec, REPO, name)
    toolchain = run_toolchain(profile, "qemu", cache_dir)
    assert build_key(lowered, profile, toolchain) == result.content_hash, f"{capture.path} {STALE}"
    assert toolchain["simulator"] == result.toolchain["simulator"], f"{capture.path} {STALE}"
    assert result.stats.blocks is not None and result.loops and result.loops["loops"]


def test_captured_dataset_is_current(cache_dir):
    dataset = load_dataset(captured.DATASET)
    text = captured.DATASET.read_text()
    # the file as this perfguard writes it, but for the version it records (the perfguard that collected it)
    collected = json.loads(text)["perfguard_version"]
    written = dataset.to_json().replace(
        f'"perfguard_version": "{__version__}"', f'"perfguard_version": "{collected}"', 1
    )
    assert written == text, f"{captured.DATASET} {STALE}"
    fingerprint = QemuSimulator(cache_dir).fingerprint(BUILTIN[dataset.target])
    assert (dataset.target, dataset.family, dataset.simulator) == ("x86_64", "gemm", "qemu")
    assert dataset.simulator_fingerprint == fingerprint, f"{captured.DATASET} {STALE}"
    assert all(r.binary and r.stats.blocks is not None and r.native_s > 0 for r in dataset.rows)


@pytest.mark.slow
def test_captured_resnet_is_what_tvm_extracts(cache_dir):
    assert set(resnet.EDITS) == set(resnet.kernels()), f"{resnet.CAPTURE} {STALE}"
    assert resnet.extract(resnet.EDITS["base"], cache_dir) == resnet.kernels()["base"], f"{resnet.CAPTURE} {STALE}"


@pytest.mark.parametrize("name", sorted(PREDICTORS))
def test_captured_model_reads_and_writes_back_as_saved(name, tmp_path):
    path = captured.model_file(name)
    stored = load_model(path)  # its model_id checked against its payload, and it scores statistics
    assert stored.predictor.name == name
    again = save_model(tmp_path / "m.json", stored.predictor, stored.meta)
    assert again.read_text() == path.read_text(), f"{path} {STALE}"
