"""Tensor descriptions and the input generator shared by the C harness and the host.

The harness fills input i of tensor t with uniform(i, seed_t) computed by a counter-based
hash; `generate` computes the very same values with numpy, so the host reference sees the
inputs the simulated kernel saw without any data crossing between them.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from perfguard.errors import InputError, did_you_mean
from perfguard.sections import number

# dtype -> (C type, DLPack type code, bits)
_DTYPES = {
    "float32": ("float", 2, 32),
    "float64": ("double", 2, 64),
    "float16": ("_Float16", 2, 16),  # needs a C compiler with _Float16 (GCC 12 has it on x86_64 and aarch64)
    "int64": ("int64_t", 0, 64),  # what ArgMax and other index-valued operators give
    "int32": ("int32_t", 0, 32),
    "int16": ("int16_t", 0, 16),
    "int8": ("int8_t", 0, 8),
    "uint64": ("uint64_t", 1, 64),
    "uint32": ("uint32_t", 1, 32),
    "uint16": ("uint16_t", 1, 16),
    "uint8": ("uint8_t", 1, 8),
}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    output: bool
    index: int
    # An input's configured values (the kernel's `inputs` key), or None for the default fill:
    # (low, high, seed) draws uniformly from [low, high) (integers: low..high-1); seed None keeps
    # the stream of the parameter's position.
    fill: tuple | None = None
    # An input's values given whole (`inputs = { name = { file = "x.npy" } }`): its bytes in C order,
    # little-endian, as the harness holds them, and the file as configured (for messages)
    values: bytes | None = field(default=None, repr=False)
    values_file: str | None = None

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def ctype(self) -> str:
        return _DTYPES[self.dtype][0]

    @property
    def dl_code(self) -> int:
        return _DTYPES[self.dtype][1]

    @property
    def bits(self) -> int:
        return _DTYPES[self.dtype][2]

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith("float")

    @property
    def seed(self) -> int:
        # Distinct, fixed streams per parameter position, or the configured seed's.
        if self.fill is not None and self.fill[2] is not None:
            return (0x51ED270B * (int(self.fill[2]) + 1) + 0x2545F491) & 0xFFFFFFFF
        return (0x51ED270B * (self.index + 1)) & 0xFFFFFFFF

    @property
    def default_integers(self) -> bool:
        """An integer input drawn from the default [-8, 7]: no range configured."""
        return (
            not self.output
            and not self.is_float
            and self.values is None
            and (self.fill is None or self.fill[0] is None)
        )

    @property
    def values_digest(self) -> str | None:
        """sha256 of the given values' bytes: what a build, simulation and output check are keyed on."""
        return None if self.values is None else hashlib.sha256(self.values).hexdigest()

    def configured(self) -> list | None:
        """The configured values as keys hold them: [low, high, seed], ["values", sha256], or None
        for the default fill."""
        if self.values is not None:
            return ["values", self.values_digest]
        return None if self.fill is None else list(self.fill)

    def recorded(self) -> dict | None:
        """The configured values as a baseline records them (and a report's parameter diff names):
        {low, high[, seed]}, {seed} or {file, sha256}; None for the default fill."""
        if self.output:
            return None
        if self.values is not None:
            return {"file": self.values_file, "sha256": self.values_digest}
        if self.fill is None:
            return None
        low, high, seed = self.fill
        return {
            **({"low": low, "high": high} if low is not None else {}),
            **({"seed": seed} if seed is not None else {}),
        }

    @property
    def nbytes(self) -> int:
        return self.numel * self.bits // 8


def check_dtype(dtype: str, where: str) -> None:
    if dtype not in _DTYPES:
        raise InputError(f"{where}: dtype '{dtype}' is not supported (one of {', '.join(_DTYPES)})")


def dtype_range(dtype: str) -> tuple[int, int]:
    """An integer dtype's smallest and largest value."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _hash(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def generate(spec: TensorSpec) -> np.ndarray:
    """The values the harness writes into an input tensor, bit for bit."""
    if spec.values is not None:
        return (
            np.frombuffer(spec.values, dtype=np.dtype(spec.dtype).newbyteorder("<"))
            .astype(spec.dtype)
            .reshape(spec.shape)
        )
    index = np.arange(spec.numel, dtype=np.uint32)
    with np.errstate(over="ignore"):
        h = _hash(index * np.uint32(0x9E3779B1) + np.uint32(spec.seed))
    if spec.fill is not None and spec.fill[0] is not None:
        # [low, high): the harness's `low + u * (high - low)` with u in [0, 1), in double, the same
        # operations in the same order; integers take its floor (truncation: u * width >= 0)
        low, high = spec.fill[0], spec.fill[1]
        unit = (h >> np.uint32(8)).astype(np.float64) * (1.0 / 16777216.0)
        if spec.is_float:
            values = (np.float64(low) + unit * (np.float64(high) - np.float64(low))).astype(spec.dtype)
        else:
            values = (np.int64(low) + np.trunc(unit * float(int(high) - int(low))).astype(np.int64)).astype(spec.dtype)
        return values.reshape(spec.shape)
    uniform = (h >> np.uint32(8)).astype(np.float64) * (2.0 / 16777216.0) - 1.0
    if spec.is_float:
        values = uniform.astype(spec.dtype)
    else:  # integers in [-8, 7]; through int64 as C converts: uint8 gets them modulo 256 (0..7, 248..255)
        values = np.trunc(uniform * 8.0).astype(np.int64).astype(spec.dtype)
    return values.reshape(spec.shape)


def recorded_inputs(tensors: list[TensorSpec]) -> dict[str, dict]:
    """{input: its configured values (TensorSpec.recorded)} for the inputs that have them."""
    return {t.name: r for t in tensors if (r := t.recorded()) is not None}


def load_values(path, spec: TensorSpec, shown: str, where: str) -> bytes:
    """An input's values from a `.npy` file: its bytes as the harness holds them. The file must
    hold exactly the input's shape and dtype (byte order aside): a one-line input error naming the
    file, the input and both shapes and dtypes otherwise."""
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{where}: inputs: {spec.name}: file '{shown}' does not exist") from None
    except (OSError, ValueError, EOFError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{where}: inputs: {spec.name}: '{shown}' is not a readable .npy file ({first})") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"{where}: inputs: {spec.name}: '{shown}' is not a .npy file (an .npz archive?)")
    if tuple(array.shape) != tuple(spec.shape) or array.dtype.newbyteorder("=") != np.dtype(spec.dtype):
        raise InputError(
            f"{where}: inputs: {spec.name}: '{shown}' holds {array.dtype.name}{list(array.shape)}, the "
            f"kernel's input '{spec.name}' is {spec.dtype}{list(spec.shape)}"
        )
    return np.ascontiguousarray(array, dtype=np.dtype(spec.dtype).newbyteorder("<")).tobytes()


def decode_outputs(raw: bytes, specs: list[TensorSpec]) -> list[np.ndarray]:
    """Split the harness's stdout into output arrays; a size mismatch is garbage output."""
    outputs = [s for s in specs if s.output]
    expected = sum(s.nbytes for s in outputs)
    if len(raw) != expected:
        raise ValueError(f"expected {expected} bytes of kernel output, got {len(raw)}")
    arrays, offset = [], 0
    for spec in outputs:
        arrays.append(np.frombuffer(raw, dtype=spec.dtype, count=spec.numel, offset=offset).reshape(spec.shape))
        offset += spec.nbytes
    return arrays


# The keys of a [[kernel]]'s `inputs` entry (docs/kernels.md)
_INPUT_KEYS = ("low", "high", "seed", "file")


def parse_inputs(table: Any, where: str) -> dict[str, dict[str, Any]] | None:
    """A kernel's `inputs`: input name -> { low, high, seed } or { file }, each checked (one line
    naming the key and value); None for an empty table. A file is read, and its shape and dtype
    checked against the input, when the module is made. Whether the names are the kernel's inputs, and the
    range fits the dtype, is known only once the module is made (compile.lower.with_inputs)."""
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table of input name -> {{ low, high, seed }}, got {table!r}")
    parsed = {}
    for name, entry in table.items():
        at = f"{where}: {name}"
        if not isinstance(entry, dict):
            raise InputError(f"{at}: must be a table {{ low = ..., high = ..., seed = ... }}, got {entry!r}")
        unknown = sorted(set(entry) - set(_INPUT_KEYS))
        if unknown:
            raise InputError(
                f"{at}: unknown key '{unknown[0]}'{did_you_mean(unknown[0], _INPUT_KEYS)} "
                f"(known: {', '.join(_INPUT_KEYS)})"
            )
        if not entry:
            raise InputError(f"{at}: empty table (give low and high, or seed, or file)")
        if "file" in entry:
            others = sorted(set(entry) - {"file"})
            if others:
                raise InputError(f"{at}: file gives the values whole: no {others[0]} beside it")
            value = entry["file"]
            if not isinstance(value, str) or not value.endswith(".npy"):
                raise InputError(
                    f"{at}: file must be the path of a .npy file (from the config's folder), got {value!r}"
                )
            if os.path.isabs(value) or os.path.normpath(value).split(os.sep)[0] == "..":
                # a check's records are reused while the project's files are as they were: the values must be one
                raise InputError(f"{at}: file '{value}' leads outside the config's folder (give a path inside it)")
            parsed[name] = {"low": None, "high": None, "seed": None, "file": value}
            continue
        if ("low" in entry) != ("high" in entry):
            raise InputError(
                f"{at}: low and high go together (uniform in [low, high)), got only "
                f"{'low' if 'low' in entry else 'high'}"
            )
        item: dict[str, Any] = {"low": None, "high": None, "seed": None}
        if "low" in entry:
            for key in ("low", "high"):
                value = entry[key]
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or value != value
                    or value in (float("inf"), float("-inf"))
                ):
                    raise InputError(f"{at}: {key} must be a finite number, got {value!r}")
                item[key] = value
            if not item["low"] < item["high"]:
                raise InputError(
                    f"{at}: low must be below high (values in [low, high)), got low = {item['low']!r}, "
                    f"high = {item['high']!r}"
                )
        if "seed" in entry:
            item["seed"] = number(entry["seed"], f"{at}: seed", 0, integer=True)
        parsed[name] = item
    return parsed or None
