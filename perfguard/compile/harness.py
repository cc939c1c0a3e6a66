"""Generates the C harness that calls a TVM kernel through the tvm-ffi safe-call ABI."""

from __future__ import annotations

import hashlib
from functools import lru_cache

import jinja2

from perfguard.compile.inputs import TensorSpec

# Bump when the generated C changes; the template's own digest is in the build key too.
HARNESS_VERSION = 4


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("perfguard.compile", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env.get_template("harness.c.j2")


def template_digest() -> str:
    """sha256 of the harness template: any edit to it invalidates cached builds."""
    source = _template().filename
    return hashlib.sha256(open(source, "rb").read()).hexdigest() if source else str(HARNESS_VERSION)


def render_harness(symbol: str, tensors: list[TensorSpec]) -> str:
    if not symbol.replace("_", "").isalnum():
        raise ValueError(f"kernel symbol '{symbol}' is not a C identifier")
    return _template().render(symbol=symbol, tensors=tensors, harness_version=HARNESS_VERSION)
