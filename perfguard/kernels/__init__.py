"""Built-in kernel families, looked up by the `family` name in perfguard.toml."""

from __future__ import annotations

import importlib

from perfguard.errors import InputError
from perfguard.kernels.base import Family

_FAMILY_MODULES = {
    "gemm": "perfguard.kernels.gemm",
    "gemv": "perfguard.kernels.gemv",
    "conv2d": "perfguard.kernels.conv2d",
    "depthwise_conv2d": "perfguard.kernels.depthwise",
    "dense_relu": "perfguard.kernels.dense_relu",
    "qgemm": "perfguard.kernels.qgemm",
    "qconv2d": "perfguard.kernels.qconv2d",
}

FAMILY_NAMES = tuple(_FAMILY_MODULES)


def get_family(name: str) -> Family:
    if name not in _FAMILY_MODULES:
        raise InputError(f"unknown kernel family '{name}' (built-in: {', '.join(FAMILY_NAMES)})")
    return importlib.import_module(_FAMILY_MODULES[name]).FAMILY
