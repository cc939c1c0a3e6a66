"""ResNet-like ONNX models, written on the fly (never checked in: ResNet-18 is 47 MB of weights).

    python3 examples/make_resnet.py out.onnx                    # ResNet-18 at 1x3x64x64
    python3 examples/make_resnet.py out.onnx --widths 64,128,320,512

The graph is what torch.onnx gives a torchvision ResNet with its batch norms folded into the
convolutions: a 7x7/2 stem and a 3x3/2 max pool, four stages of basic blocks (two 3x3
convolutions, a residual add, a 1x1/2 projection where the shape changes), a global average pool
and a dense layer. Nodes are named by their module path (`layer3.0.conv1`, `layer3.0.add`), as a
PyTorch export names them, unless `named` is false (then the file has no node names at all, like
many hand-written graphs). The weights come from a seeded generator: the same arguments give the
same bytes.

The edits benchmarks/model_edits.py and the tests make: `widths` (widen a stage), `depths`
(deepen one, or remove a block), `split` (a block's first 3x3 convolution swapped for two 1x1
ones: "layer2.1.conv1"), `head` ("argmax" ends in an ArgMax, an int64 output).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def resnet(widths=(64, 128, 256, 512), depths=(2, 2, 2, 2), size: int = 64, channels: int = 3, classes: int = 1000,
           stem: int = 64, split: tuple[str, ...] = (), head: str = "dense", named: bool = True, batch="batch",
           seed: int = 18):
    """The ONNX ModelProto (onnx.helper): input `input` [batch, channels, size, size] (batch symbolic
    unless an int is given), output `logits` [batch, classes] (head "dense") or `label` [batch] (head
    "argmax": the dense layer, then ArgMax over the classes)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, weights = [], []

    def weight(name, shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        weights.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name))
        return name

    def node(op, inputs, name, **attrs):
        out = f"{name}.out"
        nodes.append(helper.make_node(op, inputs, [out], name=name if named else "", **attrs))
        return out

    def conv(x, name, c_in, c_out, k, stride=1):
        w = weight(f"{name}.weight", (c_out, c_in, k, k))
        b = weight(f"{name}.bias", (c_out,))
        return node("Conv", [x, w, b], name, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)

    x = node("Relu", [conv("input", "conv1", channels, stem, 7, 2)], "relu")
    x = node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = stem
    for s, (width, depth) in enumerate(zip(widths, depths), start=1):
        for b in range(depth):
            name = f"layer{s}.{b}"
            stride = 2 if b == 0 and s > 1 else 1
            if f"{name}.conv1" in split:  # a 3x3 swapped for two 1x1 (the second one strided)
                y = node("Relu", [conv(x, f"{name}.conv1a", c_in, width, 1)], f"{name}.relu1a")
                y = conv(y, f"{name}.conv1b", width, width, 1, stride)
            else:
                y = conv(x, f"{name}.conv1", c_in, width, 3, stride)
            y = node("Relu", [y], f"{name}.relu1")
            y = conv(y, f"{name}.conv2", width, width, 3)
            shortcut = conv(x, f"{name}.downsample", c_in, width, 1, stride) if stride != 1 or c_in != width else x
            x = node("Relu", [node("Add", [y, shortcut], f"{name}.add")], f"{name}.relu2")
            c_in = width
    x = node("Flatten", [node("GlobalAveragePool", [x], "avgpool")], "flatten", axis=1)
    fc_w, fc_b = weight("fc.weight", (classes, c_in)), weight("fc.bias", (classes,))
    x = node("Gemm", [x, fc_w, fc_b], "fc", transB=1)
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])]
    if head == "argmax":
        x = node("ArgMax", [x], "argmax", axis=1, keepdims=0)
        outputs = [helper.make_tensor_value_info("label", TensorProto.INT64, [batch])]
    nodes.append(helper.make_node("Identity", [x], [outputs[0].name], name="output" if named else ""))
    graph = helper.make_graph(
        nodes, "resnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, channels, size, size])],
        outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="perfguard")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write(path: Path, **kwargs) -> Path:
    Path(path).write_bytes(resnet(**kwargs).SerializeToString())
    return Path(path)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--widths", type=_ints, default=(64, 128, 256, 512))
    parser.add_argument("--depths", type=_ints, default=(2, 2, 2, 2))
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--split", default="", help="comma-separated 3x3 convolutions to swap for two 1x1")
    parser.add_argument("--head", choices=("dense", "argmax"), default="dense")
    args = parser.parse_args()
    out = write(args.out, widths=args.widths, depths=args.depths, size=args.size,
                split=tuple(s for s in args.split.split(",") if s), head=args.head)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
