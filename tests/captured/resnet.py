"""The kernels real TVM extracts from a small ResNet before and after each edit the model-change
tests make (examples/make_resnet.py: three stages of two basic blocks, 8-16-32 channels, 32x32
input; schedule "none": the matching needs no code), captured in resnet.json by regenerate.py."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

from perfguard.config import KernelSpec

HERE = Path(__file__).resolve().parent
CAPTURE = HERE / "resnet.json"

SMALL = dict(widths=(8, 16, 32), depths=(2, 2, 2), size=32, classes=10, stem=8)
TOML = """
[perfguard]
targets = ["x86_64"]
cache_dir = "{cache}"

[[model]]
name = "r"
source = "r.onnx"
inputs = {{ input = [1, 3, 32, 32] }}
schedule = "none"
"""
# edit name -> make_resnet's arguments over SMALL
EDITS = {
    "base": {},
    "widened": dict(widths=(8, 16, 40)),
    "deepened": dict(depths=(2, 3, 2)),
    "split": dict(split=("layer2.1.conv1",)),
    "block removed": dict(depths=(2, 1, 2)),
    "unnamed": dict(named=False),
}


def extract(edit: dict, cache_dir: Path) -> list[dict]:
    """The model's kernels on x86_64 as real TVM extracts them: name, params, call positions, flops."""
    from examples.make_resnet import write as write_resnet
    from perfguard.config import load_config
    from perfguard.kernels.models import model_specs

    with tempfile.TemporaryDirectory(prefix="resnet-") as tmp:
        root = Path(tmp)
        write_resnet(root / "r.onnx", **{**SMALL, **edit})
        (root / "perfguard.toml").write_text(TOML.format(cache=cache_dir))
        config = load_config(root / "perfguard.toml")
        specs = model_specs(config, config.models[0], ["x86_64"])
    return [{"name": s.name, "params": s.params, "positions": list(s.positions), "flops": s.flops} for s in specs]


def text(kernels: dict[str, list[dict]]) -> str:
    return json.dumps(kernels, indent=1, sort_keys=True) + "\n"


@cache
def kernels() -> dict[str, list[dict]]:
    """Every captured edit's kernels, as extract() gave them."""
    return json.loads(CAPTURE.read_text())


def specs(edit: str) -> list[KernelSpec]:
    """The captured kernels of an edit (a name of EDITS), as the KernelSpecs model_specs gave."""
    return [
        KernelSpec(k["name"], "", None, k["params"], model="r", positions=tuple(k["positions"]), flops=k["flops"])
        for k in kernels()[edit]
    ]
