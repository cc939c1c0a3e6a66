"""What a model's kernel is in the model's terms, from the params a report entry carries (its
graph nodes per call, its anchor layer): `layer3.0.conv1 conv2d 1x256x8x8 -> 1x320x4x4 3x3/2`.
The renderers label model kernels with it; perfguard.judge.model_changes words changes with it."""

from __future__ import annotations

from typing import Any

MAX_NAMED_CALLS = 2  # a label names this many calls' nodes, then "+N more"


def dims(shape: Any) -> str:
    return "x".join(str(d) for d in shape) if isinstance(shape, list) and shape else "?"


def layer_text(layer: dict[str, Any] | None) -> str:
    """`conv2d 1x256x8x8 -> 1x320x4x4 3x3/2` (window/stride where the operator has them)."""
    if not isinstance(layer, dict) or not layer.get("op"):
        return ""
    text = f"{layer['op']} {dims(layer.get('in'))} -> {dims(layer.get('out'))}"
    window, stride = layer.get("window"), layer.get("stride")
    if isinstance(window, list) and window:
        text += " " + "x".join(map(str, window))
        if isinstance(stride, list) and stride and any(s != 1 for s in stride):
            text += "/" + ("x".join(map(str, stride)) if len(set(stride)) > 1 else str(stride[0]))
    groups = layer.get("groups")
    if isinstance(groups, int) and groups > 1:
        text += f" groups {groups}"
    return text


def anchor_names(nodes: Any) -> list[str]:
    """The anchor node of each call (a kernel's `nodes` param: per call, [[name, op], ...])."""
    out = []
    for site in nodes if isinstance(nodes, list) else []:
        if isinstance(site, list) and site and isinstance(site[0], list) and site[0]:
            out.append(str(site[0][0]))
    return out


def names_text(names: list[str]) -> str:
    if len(names) <= MAX_NAMED_CALLS:
        return ", ".join(names)
    return f"{', '.join(names[:MAX_NAMED_CALLS])} +{len(names) - MAX_NAMED_CALLS} more"


def label(params: dict[str, Any] | None) -> str:
    """What a model kernel is in the model's terms: `layer3.0.conv1 conv2d 1x256x8x8 -> 1x320x4x4 3x3/2`
    ('' for a kernel that is not a model's, or a baseline recorded before kernels knew their layer)."""
    if not isinstance(params, dict):
        return ""
    names = names_text(anchor_names(params.get("nodes")))
    layer = layer_text(params.get("layer"))
    return " ".join(part for part in (names, layer) if part)
