"""Model edits as a reviewer reads them: kernels matched by graph position, operator and shapes.

A small ResNet (examples/make_resnet.py: three stages of two basic blocks, 8-16-32 channels,
32x32 input) as real TVM extracts it before and after each edit (captured in tests/captured/ by
tests/captured/regenerate.py; tests/runs/test_captured.py extracts the base model again and
compares); the model view is computed from its kernels as `check` computes it (the base's kernels
as baselines with their call order, the edited model's as results; each call costs its flop count
in nanoseconds, so totals move with the work). Nothing is built or simulated: the matching is what
is tested.
"""

from __future__ import annotations

import re

from perfguard.baselines.store import Baseline
from perfguard.document.model_labels import label
from perfguard.judge.model_changes import Side, describe_change, pair
from perfguard.judge.model_totals import ModelKernelResult, kernel_rows, total
from perfguard.sim.stats import Stats
from tests.captured.resnet import specs as extract


def _time(spec) -> float:
    return int(spec.flops) * 1e-9  # 1 GFLOP/s


def _view(base_specs, head_specs):
    """The model view of `head_specs` judged against baselines recorded from `base_specs`."""
    baselines = {
        s.name: Baseline(
            s.name, "x86_64", None, dict(s.params), "qemu", "", Stats(insts=1), _time(s), "analytical", None, ""
        )
        for s in base_specs
    }
    order = {s.name: list(s.positions) for s in base_specs}
    results = [
        ModelKernelResult(
            s.name,
            s.params["op"],
            s.params["calls"],
            "unchanged" if s.name in baselines else "new",
            _time(s),
            baselines[s.name].predicted_time_s if s.name in baselines else None,
            baselines.get(s.name),
            dict(s.params),
            tuple(s.positions),
        )
        for s in head_specs
    ]
    leftover = [b for name, b in sorted(baselines.items()) if name not in {s.name for s in head_specs}]
    return total("r", "x86_64", 1.0, kernel_rows(results, leftover, lambda b: b.predicted_time_s, order))


def _lines(view, kind: str) -> list[str]:
    return [line for line in view.changes if line.startswith(kind)]


def test_kernels_carry_their_graph_nodes_layers_and_call_order():
    specs = {s.params["nodes"][0][0][0]: s for s in extract("base")}
    conv = specs["layer3.0.conv1"]
    assert label(conv.params) == "layer3.0.conv1 conv2d 1x16x4x4 -> 1x32x2x2 3x3/2"
    assert conv.params["nodes"] == [[["layer3.0.conv1", "Conv"], ["layer3.0.relu1", "Relu"]]]
    twice = specs["layer3.0.conv2"]  # conv + bias + residual add + ReLU, in both blocks of the stage
    assert twice.params["calls"] == 2 and [site[0][0] for site in twice.params["nodes"]] == [
        "layer3.0.conv2",
        "layer3.1.conv2",
    ]
    assert [n for n, _ in twice.params["nodes"][0]] == ["layer3.0.conv2", "layer3.0.add", "layer3.0.relu2"]
    calls = sorted(p for s in extract("base") for p in s.positions)
    assert calls == list(range(len(calls)))  # every call once, in model order
    assert specs["conv1"].positions == (0,) and specs["maxpool"].positions == (1,)
    assert label(specs["fc"].params) == "fc matmul 1x32 -> 1x10"


def test_widening_a_stage_pairs_each_layer_with_itself():
    view = _view(extract("base"), extract("widened"))
    changed = _lines(view, "changed: ")
    assert not _lines(view, "new: ") and not _lines(view, "removed: ")
    said = {re.split(r" (?:conv2d|matmul|mean) ", line.removeprefix("changed: "))[0]: line for line in changed}
    assert "widened 32 -> 40 output channels" in said["layer3.0.conv1"]
    assert "widened 32 -> 40 output channels" in said["layer3.0.downsample"]
    assert "widened 32 -> 40 channels" in said["layer3.0.conv2, layer3.1.conv2"]
    assert "widened 32 -> 40 channels" in said["layer3.1.conv1"]
    assert "widened 32 -> 40 input features" in said["fc"]
    assert "widened 32 -> 40 channels" in said["avgpool"]
    assert len(changed) == 6 and view.verdict == "regression"
    rows = {r.kernel: r for r in view.kernels}
    for r in rows.values():  # each pair: the same operator, window and stride
        if r.renamed_from:
            old = rows[r.renamed_from]
            assert (old.op, old.baseline_layer["window"] if "window" in old.baseline_layer else None) == (
                r.op,
                r.layer["window"] if "window" in r.layer else None,
            )
            assert old.baseline_calls == r.calls


def test_deepening_a_stage_adds_calls_and_names_the_new_nodes():
    view = _view(extract("base"), extract("deepened"))
    assert not _lines(view, "changed: ") and not _lines(view, "new: ") and not _lines(view, "removed: ")
    calls = _lines(view, "calls ")
    assert any(
        line.startswith("calls 1 -> 2: +layer2.2.conv1: layer2.1.conv1, layer2.2.conv1 conv2d") for line in calls
    )
    assert any(
        line.startswith("calls 2 -> 3: +layer2.2.conv2: layer2.0.conv2, layer2.1.conv2 +1 more conv2d")
        for line in calls
    )
    assert len(calls) == 2 and view.verdict == "regression"


def test_a_3x3_swapped_for_two_1x1_is_new_in_place_of_it_never_the_same_layer():
    view = _view(extract("base"), extract("split"))
    assert not _lines(view, "changed: ")  # 1x1 and 3x3: other layers, whatever their channels
    (new,) = _lines(view, "new: ")
    assert new.startswith("new: layer2.1.conv1a, layer2.1.conv1b conv2d 1x16x4x4 -> 1x16x4x4 1x1 (r.conv2d_add_relu.")
    assert "in place of layer2.1.conv1 conv2d 1x16x4x4 -> 1x16x4x4 3x3 (r.conv2d_add_relu." in new
    (removed,) = _lines(view, "removed: ")
    assert removed.startswith("removed: layer2.1.conv1 conv2d 1x16x4x4 -> 1x16x4x4 3x3")
    rows = {r.kernel: r for r in view.kernels}
    (fresh,) = [r for r in rows.values() if r.verdict == "new"]
    assert fresh.replaces == [r.kernel for r in rows.values() if r.verdict == "removed"]


def test_removing_a_block_removes_its_kernels_and_calls():
    view = _view(extract("base"), extract("block removed"))
    assert not _lines(view, "changed: ") and not _lines(view, "new: ")
    (removed,) = _lines(view, "removed: ")
    assert removed.startswith("removed: layer2.1.conv1 conv2d 1x16x4x4 -> 1x16x4x4 3x3")
    (calls,) = _lines(view, "calls ")
    assert calls.startswith("calls 2 -> 1: -layer2.1.conv2: layer2.0.conv2 conv2d")
    assert view.verdict == "improvement"


def test_unnamed_nodes_are_named_after_their_weights_or_operator():
    names = {s.params["nodes"][0][0][0] for s in extract("unnamed")}
    assert {"layer3.0.conv1", "conv1", "fc", "MaxPool_0", "GlobalAveragePool_0"} <= names


def test_without_positions_only_operator_and_shapes_pair():
    conv = {
        "op": "conv2d",
        "in": [1, 16, 8, 8],
        "out": [1, 16, 8, 8],
        "weight": [16, 16, 3, 3],
        "window": [3, 3],
        "stride": [1, 1],
        "groups": 1,
    }
    wider = {**conv, "in": [1, 24, 8, 8], "out": [1, 24, 8, 8], "weight": [24, 24, 3, 3]}
    pointwise = {**wider, "weight": [24, 24, 1, 1], "window": [1, 1]}
    old = [Side("m.c.1", "conv2d_add", conv, [])]
    assert pair([Side("m.c.2", "conv2d_add", wider, [])], old, [], []).changed == {"m.c.2": "m.c.1"}
    assert pair([Side("m.c.3", "conv2d_add", pointwise, [])], old, [], []).changed == {}
    assert pair([Side("m.c.4", "conv2d_add_relu", wider, [])], old, [], []).changed == {}  # another fused operator
    assert describe_change(conv, wider) == "widened 16 -> 24 channels"
    assert describe_change(conv, {**conv, "in": [1, 16, 16, 16], "out": [1, 16, 16, 16]}) == "input 8x8 -> 16x16"


def test_far_apart_kernels_are_not_one_layer():
    """Two convolutions of one kind at opposite ends of the model: new and removed, not changed."""
    conv = {"op": "conv2d", "in": [1, 16, 8, 8], "out": [1, 16, 8, 8], "window": [3, 3], "stride": [1, 1]}
    wider = {**conv, "in": [1, 24, 8, 8], "out": [1, 24, 8, 8]}
    kept = [Side(f"m.k.{i}", "add", {"op": "add"}, [i + 1]) for i in range(6)]
    old = Side("m.c.1", "conv2d", conv, [0])
    new = Side("m.c.2", "conv2d", wider, [7])
    found = pair([new], [old], kept + [old], kept + [new])
    assert found.changed == {} and found.replaces == {}
