"""Generates the C harness that calls a TVM kernel through the tvm-ffi safe-call ABI."""

from __future__ import annotations

import hashlib
import re
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


# Configured inputs (`inputs = { name = { low, high } }`) are drawn by C added to the rendered
# template for the kernels that have them, so the template, and with it every other kernel's
# harness, build key and recorded toolchain, stay as they were. Its digest is in the build key of
# a kernel that uses it (fill_digest).
_FILL_FUNCTIONS = """\
/* In [0, 1): a configured input's draw (`inputs = { name = { low, high } }`). */
__attribute__((unused)) static double perfguard_unit(uint32_t index, uint32_t seed) {
  return (double)(perfguard_hash(index * 0x9e3779b1U + seed) >> 8) * (1.0 / 16777216.0);
}
/* low + u * (high - low), rounded as numpy rounds it: the product is stored before the sum, which
 * the compiler may not fuse into one FMA (-ffp-contract). */
__attribute__((unused)) static double perfguard_between(uint32_t index, uint32_t seed, double low, double high) {
  volatile double part = perfguard_unit(index, seed) * (high - low);
  return low + part;
}

"""
_FLOAT_FILL = "      data[i] = ({ctype})perfguard_between((uint32_t)i, {seed}U, {low}, {high});\n"
_INTEGER_FILL = (
    "      data[i] = ({ctype})((int64_t){low}LL + (int64_t)(perfguard_unit((uint32_t)i, {seed}U) * "
    "(double)({high}LL - ({low}LL))));\n"
)


# An input given whole (`inputs = { name = { file = "x.npy" } }`): its bytes are a constant array of
# the harness, copied into the tensor where the template draws values. Its digest, with the
# values' own, is in the build key of a kernel that has one.
_VALUES_ARRAY = "static const unsigned char perfguard_values_{position}[{size}] = {{\n{bytes}\n}};\n"
_VALUES_COPY = "    memcpy(data, perfguard_values_{position}, sizeof perfguard_values_{position});\n"
_DRAW_LOOP = re.compile(r"    for \(size_t i = 0; i < n; \+\+i\) \{\n.*?\n    \}\n", re.S)


def fill_digest() -> str:
    """sha256 of the C that draws configured inputs: in the build key of the kernels that have them."""
    return hashlib.sha256((_FILL_FUNCTIONS + _FLOAT_FILL + _INTEGER_FILL).encode()).hexdigest()


def values_digest() -> str:
    """sha256 of the C that copies inputs given whole: in the build key of the kernels that have them."""
    return hashlib.sha256((_VALUES_ARRAY + _VALUES_COPY + _DRAW_LOOP.pattern).encode()).hexdigest()


def _ranged(t: TensorSpec) -> bool:
    return not t.output and t.values is None and t.fill is not None and t.fill[0] is not None


def _given(t: TensorSpec) -> bool:
    return not t.output and t.values is not None


def _c_bytes(data: bytes) -> str:
    return "\n".join(",".join(str(b) for b in data[i : i + 32]) + "," for i in range(0, len(data), 32))


def render_harness(symbol: str, tensors: list[TensorSpec]) -> str:
    if not symbol.replace("_", "").isalnum():
        raise ValueError(f"kernel symbol '{symbol}' is not a C identifier")
    text = _template().render(symbol=symbol, tensors=tensors, harness_version=HARNESS_VERSION)
    if not any(_ranged(t) or _given(t) for t in tensors):
        return text
    # every input configured: the default generator is left unused (no warning for it)
    text = text.replace(
        "static double perfguard_uniform(", "__attribute__((unused)) static double perfguard_uniform(", 1
    )
    anchor = "static void *alloc_tensor("
    arrays = "".join(
        _VALUES_ARRAY.format(position=position, size=len(t.values), bytes=_c_bytes(t.values))
        for position, t in enumerate(tensors)
        if _given(t) and t.values is not None
    )
    text = text.replace(anchor, _FILL_FUNCTIONS + arrays + ("\n" if arrays else "") + anchor, 1)
    start = 0
    for position, t in enumerate(tensors):
        marker = f"    tensors[{position}].data = data;\n"
        end = text.index(marker, start)
        if _ranged(t) or _given(t):
            block = text[start:end]
            if _given(t):
                copy = _VALUES_COPY.format(position=position).replace("\\", "\\\\")  # literal, not a template
                block = _DRAW_LOOP.sub(copy, block, count=1)
            else:
                line = next(line for line in block.splitlines(keepends=True) if line.lstrip().startswith("data[i] = "))
                assert t.fill is not None  # _ranged(t)
                low, high = t.fill[0], t.fill[1]
                fill = (
                    _FLOAT_FILL.format(ctype=t.ctype, seed=t.seed, low=float(low), high=float(high))
                    if t.is_float
                    else _INTEGER_FILL.format(ctype=t.ctype, seed=t.seed, low=int(low), high=int(high))
                )
                block = block.replace(line, fill, 1)
            text = text[:start] + block + text[end:]
            end = start + len(block)
        start = end + len(marker)
    return text
