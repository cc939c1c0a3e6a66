"""Writes examples/tiny_cnn.onnx, the ONNX model this repository's perfguard.toml guards.

    python3 examples/make_onnx.py

A conv 3x3 (4 -> 8 channels, 12x12) + bias + ReLU, global average pooling, a dense layer to 5
classes and a softmax, built with onnx.helper; the weights are fixed by a seeded generator, so the
file is the same on every run (its bytes are the model's content digest).
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).with_name("tiny_cnn.onnx")


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(15)
    weights = {
        "conv_w": rng.standard_normal((8, 4, 3, 3)).astype(np.float32) * 0.1,
        "conv_b": rng.standard_normal(8).astype(np.float32) * 0.1,
        "fc_w": rng.standard_normal((8, 5)).astype(np.float32) * 0.1,
        "fc_b": rng.standard_normal(5).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"]),
        helper.make_node("Softmax", ["g"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        # batch is left symbolic on purpose: perfguard.toml gives it (inputs = { x = [...] })
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="perfguard")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    OUT.write_bytes(build().SerializeToString())
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
