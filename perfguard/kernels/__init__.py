"""Built-in kernel families, looked up by the `family` name in perfguard.toml."""

from __future__ import annotations

from perfguard.kernels.base import Family
from perfguard.registry import Registry

FAMILIES = Registry(
    "kernel family",
    {
        "gemm": "perfguard.kernels.gemm:FAMILY",
        "gemv": "perfguard.kernels.gemv:FAMILY",
        "conv2d": "perfguard.kernels.conv2d:FAMILY",
        "depthwise_conv2d": "perfguard.kernels.depthwise:FAMILY",
        "dense_relu": "perfguard.kernels.dense_relu:FAMILY",
        "qgemm": "perfguard.kernels.qgemm:FAMILY",
        "qconv2d": "perfguard.kernels.qconv2d:FAMILY",
    },
    listing="built-in:",
)

FAMILY_NAMES = FAMILIES.names


def get_family(name: str) -> Family:
    return FAMILIES.load(name)
