"""Whole models ([[model]]): real TVM extraction, stable names, real builds and simulations, the model total."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfguard.config import load_config
from perfguard.errors import InputError
from perfguard.kernels import models as extraction
from perfguard.kernels.models import model_kernels, model_specs, operator_name
from perfguard.shells.cli import main
from tests.conftest import REPO

# A chain of Linear + ReLU layers, then `repeat` equal 8x8 ones (one kernel, called `repeat` times).
NET = """
from tvm.relax.frontend import nn


class Net(nn.Module):
    def __init__(self, widths, repeat):
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths, widths[1:])])
        self.more = nn.ModuleList([nn.Linear(widths[-1], widths[-1]) for _ in range(repeat)])

    def forward(self, x):
        for layer in self.layers:
            x = nn.relu(layer(x))
        for layer in self.more:
            x = nn.relu(layer(x))
        return x


def net(widths=(16, 32, 8), repeat=2, batch=2):
    spec = {"forward": {"x": nn.spec.Tensor((batch, widths[0]), "float32")}}
    return Net(list(widths), repeat).export_tvm(spec=spec)
"""

TOML = """
[perfguard]
targets = ["x86_64"]
threshold = 2.0

[[model]]
name = "m"
source = "mymodels:net"
params = {{ widths = {widths}, repeat = {repeat} }}
threshold = 1.0
"""


def _sig(*shapes: str) -> str:
    *ins, out = shapes
    return ",".join(f"float32[{s}]" for s in ins) + f"->float32[{out}]"


def test_operator_names_drop_tvm_digits():
    assert operator_name("fused_matmul1_add1") == "matmul_add"
    assert operator_name("fused_conv2d3_add2_relu1") == "conv2d_add_relu"
    assert operator_name("conv2d") == "conv2d"
    assert operator_name("softmax") == "softmax"
    assert operator_name("reshape1") == "reshape"


def _kernels(project, widths, repeat, target="x86_64"):
    path = project(TOML.format(widths=list(widths), repeat=repeat), {"mymodels.py": NET})
    config = load_config(path)
    return config, model_kernels(config, config.models[0], target)


def test_extraction_names_calls_and_stability(project):
    _, kernels = _kernels(project, (16, 32, 8), 2)
    assert [(k.op, k.calls, k.signature, k.outputs) for k in sorted(kernels, key=lambda k: k.signature)] == [
        ("matmul_add_relu", 1, _sig("2,16", "16,32", "32", "2,32"), 1),
        ("matmul_add_relu", 1, _sig("2,32", "32,8", "8", "2,8"), 1),
        ("matmul_add_relu", 2, _sig("2,8", "8,8", "8", "2,8"), 1),  # two equal layers: one kernel, 2 calls
    ]
    names = {k.signature: k.name for k in kernels}
    assert len(set(names.values())) == 3 and all(n.startswith("m.matmul_add_relu.") for n in names.values())

    # an unrelated change (one more 8x8 layer) renames nothing; a kernel whose shapes change is renamed
    _, more = _kernels(project, (16, 32, 8), 3)
    assert {k.signature: k.name for k in more} == names
    assert {k.signature: k.calls for k in more}[_sig("2,8", "8,8", "8", "2,8")] == 3
    _, wider = _kernels(project, (16, 24, 8), 2)
    renamed = {k.signature: k.name for k in wider}
    eight = _sig("2,8", "8,8", "8", "2,8")
    assert renamed[eight] == names[eight]
    changed = [name for sig, name in renamed.items() if sig != eight]
    assert len(changed) == 2 and not set(changed) & set(names.values())


def test_onnx_example_extraction_and_specs():
    config = load_config(REPO / "perfguard.toml")
    spec = next(m for m in config.models if m.name == "tiny_cnn")
    kernels = model_kernels(config, spec, "aarch64")
    # conv+bias+ReLU fused, the global average pool (mean), the dense layer, softmax; the reshape between
    # the pool and the dense layer is a view in TVM's CPU pipeline and no kernel
    assert sorted((k.op, k.calls) for k in kernels) == [
        ("conv2d_add_relu", 1),
        ("matmul_add", 1),
        ("mean", 1),
        ("softmax", 1),
    ]
    conv = next(k for k in kernels if k.op == "conv2d_add_relu")
    assert conv.signature == "float32[1,4,12,12],float32[8,4,3,3],float32[1,8,1,1]->float32[1,8,12,12]"
    specs = model_specs(config, spec, ["x86_64", "aarch64"])
    # one spec per kernel and code: a kernel whose scheduled code differs between targets (vector widths) gets two
    pairs = sorted((s.name, t) for s in specs for t in s.targets)
    assert pairs == sorted((k.name, t) for k in kernels for t in ("x86_64", "aarch64"))
    assert all(s.model == "tiny_cnn" and s.params["schedule"] == "default" for s in specs)
    assert {s.name for s in specs} == {k.name for k in kernels}


def test_extraction_is_cached_by_content(project, monkeypatch):
    config, first = _kernels(project, (16, 32, 8), 2)
    assert list((config.storage.cache_dir / "models").rglob("*.json"))

    def refuse(*args, **kwargs):
        raise AssertionError("extracted again")

    monkeypatch.setattr(extraction, "extract_model", refuse)
    assert model_kernels(config, config.models[0], "x86_64") == first  # same content: from the cache
    with pytest.raises(AssertionError, match="extracted again"):  # other content: another key
        _kernels(project, (16, 32, 4), 2)


def _check(path: Path, *args: str) -> tuple[int, dict]:
    code = main(["check", "--config", str(path), "-j", "1", *args])
    return code, json.loads((path.parent / "reports" / "perfguard.json").read_text())


def _set(path: Path, widths, repeat) -> None:
    path.write_text(
        TOML.format(widths=list(widths), repeat=repeat).replace(
            "[perfguard]\n", f'[perfguard]\ncache_dir = "{load_config(path).storage.cache_dir}"\n', 1
        )
    )


@pytest.mark.slow
def test_model_total_new_removed_renamed_end_to_end(project, capsys):
    path = project(TOML.format(widths=[16, 32, 8], repeat=2), {"mymodels.py": NET})
    assert main(["baseline", "update", "--config", str(path), "-j", "1"]) == 0
    files = sorted(p.stem for p in (path.parent / "baselines" / "x86_64").glob("*.json"))
    assert len(files) == 3 and all(f.startswith("m.matmul_add_relu.") for f in files)

    code, report = _check(path)
    assert code == 0
    (view,) = report["models"]
    assert (view["model"], view["target"], view["verdict"], view["threshold_pct"]) == ("m", "x86_64", "unchanged", 1.0)
    times = {r["kernel"]: r["current_time_s"] for r in report["results"]}
    calls = {r["kernel"]: r["params"]["calls"] for r in report["results"]}
    assert sorted(calls.values()) == [1, 1, 2]
    assert view["current_total_s"] == pytest.approx(sum(times[k] * calls[k] for k in times), rel=1e-12)
    assert view["baseline_total_s"] == pytest.approx(view["current_total_s"], rel=1e-12)
    shares = [k["share_pct"] for k in view["kernels"]]
    assert shares == sorted(shares, reverse=True) and sum(shares) == pytest.approx(100.0)
    import jsonschema

    jsonschema.validate(report, json.loads((REPO / "docs" / "report.schema.json").read_text()))
    summary = (path.parent / "reports" / "summary.md").read_text()
    assert "**model m \\[x86\\_64\\]: unchanged" in summary[summary.index("<details>") :]  # unchanged: folded last
    index = (path.parent / "reports" / "index.html").read_text()
    assert 'id="m-m-x86_64"' in index[index.index('<details id="unchanged">') :]

    # a third 8x8 layer: no kernel changed, the model did (one more call of one kernel)
    _set(path, [16, 32, 8], 3)
    code, report = _check(path)
    (view,) = report["models"]
    assert {r["verdict"] for r in report["results"]} == {"unchanged"}
    assert view["verdict"] == "regression" and code == 1
    eight = next(k for k in view["kernels"] if k["calls"] == 3)
    assert view["current_total_s"] - view["baseline_total_s"] == pytest.approx(eight["current_time_s"], rel=1e-9)
    (line,) = [line for line in view["changes"] if line.startswith("calls 2 -> 3: +more.2: ")]
    assert f"({eight['kernel']})" in line  # the new layer named from the graph, the kernel by its key
    assert "1 model total(s) regressed" in capsys.readouterr().out

    # 16 -> 8 in one layer: the two kernels of 16x32 and 32x8 become one of 16x8: one renamed, one removed
    _set(path, [16, 8], 2)
    code, report = _check(path)
    (view,) = report["models"]
    verdicts = sorted((k["verdict"], k["kernel"] in files) for k in view["kernels"])
    assert verdicts == [("new", False), ("removed", True), ("removed", True), ("unchanged", True)]
    # the 16 -> 8 layer is the 16 -> 32 one (first in the model, same operator, same input): changed;
    # the 32 -> 8 layer is gone
    (changed,) = [line for line in view["changes"] if line.startswith("changed: ")]
    assert changed.startswith("changed: layers.0 matmul 2x16 -> 2x8 (m.matmul_add_relu.")
    assert ": narrowed 32 -> 8 output features (was m.matmul_add_relu." in changed
    (removed,) = [line for line in view["changes"] if line.startswith("removed: ")]
    assert removed.startswith("removed: layers.1 matmul 2x32 -> 2x8 (m.matmul_add_relu.")
    assert report["summary"]["changed"] == 1 and report["summary"]["removed"] == 1 and report["summary"]["new"] == 0
    baseline_rows = [k for k in view["kernels"] if k["baseline_total_s"] is not None]
    assert view["baseline_total_s"] == pytest.approx(sum(k["baseline_total_s"] for k in baseline_rows), rel=1e-12)
    assert len(baseline_rows) == 3  # the removed kernels still count on the baseline's side

    # re-baselining drops the baselines of kernels the model no longer has, and rewrites the model's call order
    assert main(["baseline", "update", "--config", str(path), "-j", "1"]) == 0
    now = sorted(p.stem for p in (path.parent / "baselines" / "x86_64").glob("*.json"))
    assert len(now) == 2 and len(set(now) & set(files)) == 1
    graph = json.loads((path.parent / "baselines" / "x86_64" / "graphs" / "m.json").read_text())
    assert [node for _, node in graph["calls"]] == ["layers.0", "more.0", "more.1"]
    code, report = _check(path)
    assert code == 0 and report["models"][0]["verdict"] == "unchanged" and not report["models"][0]["changes"]


def test_kernels_option_selects_a_model_or_one_kernel(project):
    path = project(TOML.format(widths=[16, 32, 8], repeat=2), {"mymodels.py": NET})
    config = load_config(path)
    from perfguard.runs.check import select

    whole = select(config, ["m"], None)
    assert len(whole) == 3 and all(spec.model == "m" for spec, _ in whole)
    one = select(config, [whole[0][0].name], None)
    assert [s.name for s, _ in one] == [whole[0][0].name] and one[0][0].model is None  # no partial total
    with pytest.raises(InputError, match=r"unknown kernel 'm.nope' \(model 'm' has m\.matmul_add_relu\."):
        select(config, ["m.nope"], None)
    with pytest.raises(InputError, match=r"unknown kernel 'nope' \(configured in .*: kernels none; models m\)"):
        select(config, ["nope"], None)


def test_repository_examples_are_configured():
    config = load_config(REPO / "perfguard.toml")
    assert [(m.name, m.is_file) for m in config.models] == [("mlp", False), ("conv_block", False), ("tiny_cnn", True)]
    onnx_file = REPO / "examples" / "tiny_cnn.onnx"
    assert onnx_file.stat().st_size < 4096
    from examples.make_onnx import build  # the checked-in file is what its script writes, byte for byte

    assert build().SerializeToString() == onnx_file.read_bytes()


def _database(folder: Path, ir: str, target: dict) -> str:
    """A MetaSchedule JSON database with one record: the kernel's matmul loop unrolled."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.script.from_source(ir)
    sch = tvm.s_tir.Schedule(mod)
    sch.unroll(sch.get_loops(sch.get_sblock("matmul"))[-1])
    folder.mkdir()
    db = ms.database.JSONDatabase(str(folder / "database_workload.json"), str(folder / "database_tuning_record.json"))
    db.commit_tuning_record(
        ms.database.TuningRecord(
            sch.trace,
            db.commit_workload(mod),
            [1e-3],
            tvm.target.Target({**target, "num-cores": 1}),
            ms.arg_info.ArgInfo.from_prim_func(mod["main"]),
        )
    )
    return sch.mod.script()


@pytest.mark.slow
def test_tuned_schedules_from_a_database_apply(project):
    config, kernels = _kernels(project, (16, 32, 8), 2)  # the default schedule
    assert {k.schedule for k in kernels} == {"default"}
    config.path.write_text(config.path.read_text().replace("threshold = 1.0\n", 'threshold = 1.0\nschedule = "none"\n'))
    unscheduled = load_config(config.path)
    plain = model_kernels(unscheduled, unscheduled.models[0], "x86_64")  # TVM's loops: the workloads
    assert {k.schedule for k in plain} == {"none"} and [k.name for k in plain] == [k.name for k in kernels]
    tuned = _database(config.root / "db", plain[0].ir, config.profile("x86_64").tvm_target)
    config.path.write_text(config.path.read_text().replace('schedule = "none"\n', 'database = "db"\n'))
    config = load_config(config.path)
    with_db = model_kernels(config, config.models[0], "x86_64")
    assert [k.name for k in with_db] == [k.name for k in kernels]  # a schedule renames nothing
    assert with_db[0].ir == tuned and with_db[0].schedule == "database" and "T.unroll" in with_db[0].ir
    assert [k.ir for k in with_db[1:]] == [k.ir for k in kernels[1:]]  # no record: the default schedule
    assert {k.schedule for k in with_db[1:]} == {"default"}
    (config.root / "db" / "database_tuning_record.json").unlink()
    with pytest.raises(
        InputError, match="database 'db': expected database_workload.json and database_tuning_record.json"
    ):
        model_kernels(load_config(config.path), config.models[0], "aarch64")


def _argmax_onnx(path: Path) -> None:
    """A dense layer and an ArgMax over its 10 classes: the label is an int64 tensor."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    weights = [
        numpy_helper.from_array(rng.standard_normal((16, 10)).astype(np.float32), "fc.weight"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["logits"], name="fc"),
        helper.make_node("ArgMax", ["logits"], ["label"], name="head.argmax", axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [1])],
        weights,
    )
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())


@pytest.mark.slow
def test_an_int64_argmax_head_is_measured_and_skip_leaves_it_out(project):
    path = project('[perfguard]\ntargets = ["x86_64"]\n\n[[model]]\nname = "a"\nsource = "a.onnx"\n')
    _argmax_onnx(path.parent / "a.onnx")
    code, report = _check(path)
    assert code == 0, report
    argmax = next(r for r in report["results"] if r["params"]["op"] == "argmax")
    assert argmax["verdict"] == "new" and argmax["max_error"] == 0.0 and argmax["reference"] == "self"
    assert argmax["params"]["nodes"] == [[["head.argmax", "ArgMax"]]]
    (view,) = report["models"]
    assert len(view["kernels"]) == 2 and not view.get("skipped")

    path.write_text(path.read_text() + 'skip = ["head.argmax"]\n')
    code, report = _check(path)
    assert code == 0 and [r["params"]["op"] for r in report["results"]] == ["matmul_add"]
    (view,) = report["models"]
    assert [k["kernel"] for k in view["kernels"]] == [r["kernel"] for r in report["results"]]
    (line,) = view["skipped"]
    assert line.startswith(f"skipped (skip = [...]): head.argmax argmax 1x10 -> 1 ({argmax['kernel']}) x1: ")
