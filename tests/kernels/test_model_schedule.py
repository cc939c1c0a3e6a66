"""The default schedule of a model kernel: TVM's CPU rules with fixed decisions, deterministic, tiled
and vectorised, one core's code."""

from __future__ import annotations

import pytest

from perfguard.kernels.model_schedule import _largest_divisor, _tiles, default_schedule
from perfguard.targets import BUILTIN


def _conv_ir() -> str:
    """A 3x3 convolution + bias + ReLU as TVM legalises one (NCHW, 16 -> 32 channels, 8x8)."""
    import tvm
    from tvm import te, topi

    data = te.placeholder((1, 16, 8, 8), "float32", name="data")
    weight = te.placeholder((32, 16, 3, 3), "float32", name="weight")
    bias = te.placeholder((1, 32, 1, 1), "float32", name="bias")
    out = topi.nn.relu(topi.add(topi.nn.conv2d_nchw(data, weight, 1, 1, 1), bias))
    return tvm.IRModule({"main": te.create_prim_func([data, weight, bias, out])}).script()


@pytest.fixture(scope="module")
def conv():
    return _conv_ir()


def test_the_default_tiles_and_vectorises_the_same_way_every_time(conv):
    target = BUILTIN["x86_64"].tvm_target
    first, second = default_schedule(conv, target), default_schedule(conv, target)
    assert first is not None and first == second  # deterministic: the same code every time
    assert "T.vectorized" not in conv and "T.vectorized" in first
    assert "T.parallel" not in first  # one core: the simulator's
    assert 'pragma_auto_unroll_max_step": 16' in first
    neon = default_schedule(conv, BUILTIN["aarch64"].tvm_target)
    assert neon is not None and neon != first  # 8-element tiles on NEON, 32 on x86_64


def test_tile_decisions_follow_the_rules():
    class Inst:  # what _tiles reads of a SamplePerfectTile instruction: its kind and its level count
        def __init__(self, levels):
            self.kind, self.attrs = type("K", (), {"name": "SamplePerfectTile"})(), [levels]

    # n, f, oh, ow (spatial, 4 levels), rc, ry, rx (reductions, 2 levels): the conv above
    insts = [Inst(4), Inst(4), Inst(4), Inst(4), Inst(2), Inst(2), Inst(2)]
    extents = {0: 1, 1: 32, 2: 8, 3: 8, 4: 16, 5: 3, 6: 3}
    tiles = _tiles(insts, extents, lanes=16)  # two vectors: 32 elements, ow (8) whole, then 4 of oh
    assert tiles == {
        0: [1, 1, 1, 1],
        1: [8, 1, 4, 1],
        2: [2, 1, 1, 4],
        3: [1, 1, 1, 8],
        4: [1, 16],
        5: [1, 3],
        6: [1, 3],
    }
    assert _largest_divisor(12, 8) == 6 and _largest_divisor(7, 4) == 1
