"""Calibrated models a machine profile carries: named by sha256 in the profile, refused when edited,
used for a family the project has no model of its own for, and the project's own model first."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfguard import machines
from perfguard.errors import InputError
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.select import predictor_for
from perfguard.targets import BUILTIN

REPO = Path(__file__).resolve().parents[2]
X86 = BUILTIN["x86_64"]
PROFILES = REPO / "benchmarks" / "profiles"


def _profile_with(folder: Path, name: str, models: dict[str, Path]) -> machines.MachineProfile:
    """A copy of intel-6-167 in `folder` carrying `models` (family -> model file) on x86_64."""
    base = machines.load("intel-6-167")
    entries = {}
    for family, source in models.items():
        copy = folder / name / "x86_64" / f"{family}.json"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
        entries[family] = machines.model_entry(folder, copy, json.loads(source.read_text())["model_id"])
    section = base.isas["x86_64"]
    isas = {"x86_64": machines.IsaCalibration("x86_64", section.pairs, section.entries, section.source, entries)}
    machines.save(folder / f"{name}.json", machines.to_json(base.cpu, base.date, base.level, base.scale, isas))
    return machines.load(name, folder)


def test_the_committed_xeon_profile_carries_the_models_that_won_on_its_pairs():
    intel, amd = machines.load("intel-6-167"), machines.load("amd-23-1")
    # benchmarks/verdicts.py --models-root: the depthwise and gemm (200 variants per shape) models
    # beat the pipeline model on their families' pairs timed on the Xeon; Zen 1's gemm and conv2d
    # models did not on Zen 1's
    assert sorted(intel.isas["x86_64"].models) == ["depthwise_conv2d", "gemm"]
    assert amd.isas["x86_64"].models == {}
    path = intel.model_file("x86_64", "depthwise_conv2d")
    assert path == machines.MACHINES_DIR / "intel-6-167" / "x86_64" / "depthwise_conv2d.json"
    trained = PROFILES / "intel-6-167" / "models" / "x86_64" / "depthwise_conv2d.json"
    assert path.read_bytes() == trained.read_bytes()  # the very model `calibrate train --root` wrote
    assert intel.model_file("x86_64", "gemv") is None and intel.model_file("aarch64", "depthwise_conv2d") is None
    # the profile's digest (in every result record's key) covers its models: it names their sha256
    assert (
        json.loads(machines.path_of("intel-6-167").read_text())["isas"]["x86_64"]["models"]["depthwise_conv2d"][
            "sha256"
        ]
        == hashlib.sha256(path.read_bytes()).hexdigest()
    )


def test_an_edited_or_missing_model_file_is_refused_naming_it(tmp_path):
    gemm = PROFILES / "intel-6-167" / "models" / "x86_64" / "gemm.json"
    profile = _profile_with(tmp_path, "cpu-1-2", {"gemm": gemm})
    model = profile.model_file("x86_64", "gemm")
    assert model == tmp_path / "cpu-1-2" / "x86_64" / "gemm.json" and model.is_file()
    model.write_text(model.read_text() + " ")  # one byte more: another sha256
    (tmp_path / "cpu-1-2.json").touch()  # a new mtime: loaded again, not from the cache
    with pytest.raises(InputError, match=rf"^{model}: model file does not match the sha256 its machine profile names"):
        machines.load("cpu-1-2", tmp_path)
    model.unlink()
    with pytest.raises(InputError, match=rf"^{model}: model file of the machine profile is missing$"):
        machines.load("cpu-1-2", tmp_path)


def test_a_schema_1_profile_still_reads_with_no_models(tmp_path):
    data = json.loads(machines.path_of("amd-23-1").read_text())
    data["schema"] = 1
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert machines.load("old", tmp_path).isas["x86_64"].models == {}
    data["schema"] = 3
    (tmp_path / "new.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="machine profile schema"):
        machines.load("new", tmp_path)


def test_a_profile_is_named_by_its_cpu():
    assert machines.profile_name(machines.CpuIdentity("GenuineIntel", 6, 167, "Xeon")) == "intel-6-167"
    assert machines.profile_name(machines.CpuIdentity("AuthenticAMD", 25, 17, "EPYC")) == "amd-25-17"
    assert machines.profile_name(machines.CpuIdentity("Hygon Genuine", 24, 0, "C86")) == "hygongenuine-24-0"


def test_the_machine_model_scores_a_family_the_project_has_no_model_for(tmp_path):
    xeon_gemm = PROFILES / "intel-6-167" / "models" / "x86_64" / "gemm.json"
    machine = _profile_with(tmp_path / "profiles", "cpu-1-2", {"gemm": xeon_gemm})
    empty = tmp_path / "project"
    cache = tmp_path / "cache"
    f32 = {"dtype": "float32"}
    scored = predictor_for(X86, "gemm", "qemu", empty, None, cache, "auto", f32, machine)
    assert scored.calibrated and scored.model_id == json.loads(xeon_gemm.read_text())["model_id"]
    # without the machine, or for a family it carries nothing for: the pipeline model
    assert isinstance(predictor_for(X86, "gemm", "qemu", empty, None, cache, "auto", f32), PipelineModel)
    assert isinstance(predictor_for(X86, "gemv", "qemu", empty, None, cache, "auto", {}, machine), PipelineModel)
    # a dtype the machine's model was not trained on is not scored with it either
    fp16 = predictor_for(X86, "gemm", "qemu", empty, None, cache, "auto", {"dtype": "bfloat16"}, machine)
    assert isinstance(fp16, PipelineModel)
    # `model = "pipeline"` names the yardstick: no machine model behind its back
    assert isinstance(predictor_for(X86, "gemm", "qemu", empty, None, cache, "pipeline", f32, machine), PipelineModel)
    # the project's own model (Zen 1's gemm, as if the project had trained it) comes first
    zen = PROFILES / "amd-23-1"
    own = predictor_for(X86, "gemm", "qemu", zen, None, cache, "auto", f32, machine)
    assert own.model_id == json.loads((zen / "models" / "x86_64" / "gemm.json").read_text())["model_id"]
    assert own.model_id != scored.model_id


@pytest.mark.slow
def test_calibrate_reads_and_writes_under_root(tmp_path):
    """`perfguard calibrate evaluate --root DIR` reads DIR/datasets; a root without them is refused."""
    out = tmp_path / "eval.json"
    env_cache = {"PERFGUARD_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "perfguard.shells.cli", "calibrate", "evaluate", "--target", "x86_64"]
    root = PROFILES / "intel-6-167"
    done = subprocess.run(
        [*cmd, "--family", "qconv2d", "--root", str(root), "--predictors", "mlr", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **env_cache},
    )
    assert done.returncode == 0, done.stderr
    table = json.loads(out.read_text())
    dataset = json.loads((root / "datasets" / "x86_64" / "qconv2d.json").read_text())
    assert table["family"] == "qconv2d" and table["rows"] == len(dataset["rows"]) == 120
    assert table["dataset_hash"] and sum(g["n"] for g in table["groups"]["mlr"]) == 120
    train = [sys.executable, "-m", "perfguard.shells.cli", "calibrate", "train", "--target", "x86_64"]
    bad = subprocess.run([*train, "--root", str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"perfguard: error: {tmp_path}/datasets/x86_64: no datasets for target x86_64"
