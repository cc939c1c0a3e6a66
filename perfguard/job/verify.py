"""The output check: a kernel's outputs against its reference, and the key that caches its answer.

A wrong kernel is a verdict of its own, `wrong result` (exit 4: the code under test failed), never
a score; the error names the worst element (the one furthest over its tolerance), its value, the
reference's and the tolerance there. The check's answer is cached
under a key that holds everything deciding it (the outputs through the simulation's key, the
reference's identity and source, the params it is called with, rtol, atol, outputs and
CHECK_VERSION), so a warm cache can never pass a check that an empty one would fail.

Default tolerances, per output dtype (a kernel's `rtol` / `atol` override them):

    |kernel - reference| <= rtol * |reference| + atol,  atol = DEFAULT_TOL * max|reference|

float32: DEFAULT_TOL = 1e-5 (84 float32 ulp). The references compute in float64; a float32 kernel
summing n products is off by rounding errors that grow about as sqrt(n) (a random walk). The
built-in families on x86_64, aarch64 and riscv64 needed at most 1.1e-6, for a 4096-long gemv
reduction (benchmarks/RESULTS.md, "Output tolerances"): 1e-5 is 9x that, enough for reductions
some 80x longer at sqrt(n) growth, and 600x below the 0.6 % error it must catch. atol scales with
the largest reference value, never with a floor of 1: an absolute 1e-4 let a 1 % error in a
softmax's small outputs (around 0.002) pass. float64: 1e-12. Integers: exact.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from perfguard import __version__
from perfguard.atomic import atomic_write_bytes
from perfguard.compile.inputs import generate
from perfguard.compile.lower import LoweredKernel, build_host
from perfguard.config import KernelSpec
from perfguard.errors import InfraError, InputError, WrongResult
from perfguard.fingerprints import code_digest, digest
from perfguard.user_code.imports import load_callable
from perfguard.user_code.reads import user_code

# Part of every check key: bump when the comparison itself changes.
CHECK_VERSION = 3

DEFAULT_TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-2}  # other dtypes (integers): exact

# What checked the outputs: the kernel's `reference`, a built-in family's numpy reference, or
# the same kernel built for the host (self-consistency only: a wrong kernel passes it).
REFERENCE_KINDS = ("numpy", "family", "self")


@dataclass(frozen=True)
class Reference:
    kind: str  # one of REFERENCE_KINDS
    func: Callable | None  # reference(inputs, **params); None for "self"
    identity: str  # a digest of what decides its answers


def _source_identity(func: Callable, named: str) -> str:
    """The function's name plus the bytes of its module file (and of the module it was imported into),
    else its source: an edit to the reference or to the helpers beside it changes the key."""
    parts = [named, getattr(func, "__module__", "") or "", getattr(func, "__qualname__", "") or ""]
    modules = {named.partition(":")[0], getattr(func, "__module__", None)}
    for name in sorted(m for m in modules if m):
        path = getattr(sys.modules.get(name), "__file__", None)
        try:
            parts.append(hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else "")
        except OSError:
            parts.append("")
    try:
        parts.append(inspect.getsource(func))
    except (OSError, TypeError):
        parts.append(repr(func))
    if any(m.startswith("perfguard.") for m in modules if m):  # a family's reference and the helpers it shares
        parts.append(_kernels_digest())
    return digest(*parts)


@lru_cache(maxsize=1)
def _kernels_digest() -> str:
    sources = sorted((Path(__file__).parents[1] / "kernels").glob("*.py"))  # perfguard/kernels/, beside job/
    assert sources, "perfguard/kernels/ not found beside perfguard/job/"  # else every family shares one digest
    return digest(__version__, *(hashlib.sha256(p.read_bytes()).hexdigest() for p in sources))


def resolve_reference(spec: KernelSpec, root: Path, lowered: LoweredKernel, family, where: str) -> Reference:
    if spec.reference:
        func = load_callable(spec.reference, root, where, "reference")
        return Reference("numpy", func, _source_identity(func, spec.reference))
    if family is not None:
        named = f"{family.reference.__module__}:{family.reference.__name__}"
        return Reference("family", family.reference, _source_identity(family.reference, named))
    import tvm

    return Reference("self", None, digest(lowered.ir_hash, tvm.__version__))


def check_key(sim_key: str, spec: KernelSpec, ref: Reference, num_outputs: int) -> str:
    """Everything that decides the check's answer."""
    params = json.dumps(spec.params, sort_keys=True, default=repr)
    return digest(
        sim_key, ref.kind, ref.identity, params, repr(spec.rtol), repr(spec.atol), str(num_outputs), str(CHECK_VERSION)
    )


def reference_outputs(
    spec: KernelSpec, ref: Reference, lowered: LoweredKernel, inputs, where, cache_dir: Path | None = None
) -> list[np.ndarray]:
    if ref.func is not None:
        try:
            with user_code():
                outputs = ref.func(inputs, **spec.params)
        except Exception as exc:
            name = spec.reference or "the family's reference"
            raise InputError(
                f"{where}: reference '{name}' raised {type(exc).__name__}: {exc}".splitlines()[0]
            ) from None
    else:
        outputs = _self_reference(ref, lowered, inputs, where, cache_dir)
    if isinstance(outputs, np.ndarray):
        outputs = [outputs]
    if not isinstance(outputs, (list, tuple)):
        raise InputError(f"{where}: reference returned {type(outputs).__name__}, expected a list of numpy arrays")
    return [np.asarray(o) for o in outputs]


def _self_reference(
    ref: Reference, lowered: LoweredKernel, inputs: list[np.ndarray], where: str, cache_dir: Path | None
) -> list[np.ndarray]:
    """The kernel built for the host, run on the inputs: remembered in the cache by the kernel's code
    and tensors, so that a kernel whose code is the same on several targets (a [[model]]'s, often)
    is built for the host once, not once per target."""
    if cache_dir is None:
        return _tvm_host_reference(lowered, inputs, where)

    layout = json.dumps(
        [
            [t.name, list(t.shape), t.dtype, t.output, *([t.configured()] if t.configured() is not None else [])]
            for t in lowered.tensors
        ]
    )  # the configured inputs too: other values, other outputs
    key = digest("self reference", ref.identity, layout, code_digest())  # code: how inputs are generated
    path = Path(cache_dir) / "references" / key[:2] / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as saved:
            found = [saved[f"out{i}"] for i in range(len(saved.files))]
        if [tuple(a.shape) for a in found] == [t.shape for t in lowered.tensors if t.output]:
            return found
    except (OSError, ValueError, KeyError):
        pass  # absent or damaged: build it
    outputs = _tvm_host_reference(lowered, inputs, where)
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {f"out{i}": o for i, o in enumerate(outputs)}
    np.savez(buffer, **arrays)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except (InfraError, OSError):
        pass  # a cache that cannot be written costs a host build next time
    return outputs


def _tvm_host_reference(lowered: LoweredKernel, inputs: list[np.ndarray], where: str) -> list[np.ndarray]:
    import tvm

    lib = build_host(lowered, where)
    args = [tvm.runtime.tensor(a) for a in inputs]
    outs = [tvm.runtime.empty(t.shape, t.dtype) for t in lowered.tensors if t.output]
    lib[lowered.symbol.removeprefix("__tvm_ffi_")](*args, *outs)
    return [o.numpy() for o in outs]


def tolerances(spec: KernelSpec, dtype: str, want: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) for one output: the kernel's own, else the dtype's default."""
    default = DEFAULT_TOL.get(dtype, 0.0)
    largest = float(np.max(np.abs(want))) if want.size else 0.0
    rtol = spec.rtol if spec.rtol is not None else default
    atol = spec.atol if spec.atol is not None else default * (largest if largest > 0 else 1.0)
    return rtol, atol


def check_output(spec: KernelSpec, name: str, dtype: str, got: np.ndarray, want: np.ndarray, where: str) -> float:
    """One output against its reference: the worst difference; WrongResult for a wrong output,
    InputError for a reference of another shape or with a non-finite value."""
    if tuple(want.shape) != tuple(got.shape):
        raise InputError(f"{where}: reference output '{name}' has shape {want.shape}, kernel {got.shape}")
    want = want.astype(np.float64)
    got64 = got.astype(np.float64)
    if not np.all(np.isfinite(want)):  # NaN compares false, inf makes atol infinite: any output would pass
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(want))[0])
        raise InputError(
            f"{where}: reference output '{name}' has a non-finite value at [{', '.join(map(str, idx))}]: {want[idx]}"
        )
    rtol, atol = tolerances(spec, dtype, want)
    with np.errstate(invalid="ignore"):
        diff = np.abs(got64 - want)
        allowed = atol + rtol * np.abs(want)
        bad = ~(diff <= allowed)  # a NaN or infinite output is off whatever the tolerance
    if np.any(bad):
        raise mismatch_error(where, name, got64, want, diff, allowed, bad, rtol, atol)
    return float(diff.max()) if diff.size else 0.0


def check_outputs(
    spec: KernelSpec,
    ref: Reference,
    lowered: LoweredKernel,
    outputs: list[np.ndarray],
    where: str,
    cache_dir: Path | None = None,
    expected: list[np.ndarray] | None = None,
) -> float:
    """The worst difference; raises WrongResult for a wrong output, InputError for a broken reference.
    `expected`: the reference's outputs when they were computed elsewhere (a shipped job's)."""
    if expected is None:
        inputs = [generate(t) for t in lowered.tensors if not t.output]
        expected = reference_outputs(spec, ref, lowered, inputs, where, cache_dir)
    if len(expected) != len(outputs):
        raise InputError(f"{where}: reference returned {len(expected)} outputs, the kernel has {len(outputs)}")
    worst = 0.0
    for got, want, t in zip(outputs, expected, [t for t in lowered.tensors if t.output]):
        try:
            worst = max(worst, check_output(spec, t.name, t.dtype, got, want, where))
        except WrongResult as exc:
            raise _with_input_hint(exc, lowered) from None
    return worst


def _with_input_hint(exc: WrongResult, lowered: LoweredKernel) -> WrongResult:
    """A wrong result of a kernel with integer inputs drawn by default says so: an index or a
    count in [-8, 7] is rarely what the kernel was written for (a gather's negative indices)."""
    drawn = [t.name for t in lowered.tensors if t.default_integers]
    if not drawn:
        return exc
    example = drawn[0]
    hint = (
        f" (integer input{'s' if len(drawn) > 1 else ''} {', '.join(drawn)} drawn by default from [-8, 7]; "
        f"an index input takes its range from `inputs = {{ {example} = {{ low = 0, high = N }} }}`)"
    )
    return WrongResult(exc.message + hint, exc.mismatch)


def mismatch_error(
    where: str,
    output: str,
    got: np.ndarray,
    want: np.ndarray,
    diff: np.ndarray,
    allowed: np.ndarray,
    bad: np.ndarray,
    rtol: float,
    atol: float,
) -> WrongResult:
    """The error of a wrong output, at its worst element: the first non-finite one, else the one
    furthest over its tolerance (difference / tolerance)."""
    finite = np.isfinite(got)
    if not finite.all():
        flat = int(np.argmin(finite.reshape(-1)))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            over = np.where(bad, diff / np.maximum(allowed, np.finfo(np.float64).tiny), -np.inf)
        flat = int(np.argmax(over.reshape(-1)))
    idx = tuple(int(i) for i in np.unravel_index(flat, got.shape)) if got.ndim else ()
    value, expected, tolerance = float(got[idx]), float(want[idx]), float(allowed[idx])
    off, total = int(bad.sum()), int(bad.size)
    mismatch = {
        "output": output,
        "index": list(idx),
        "value": value if math.isfinite(value) else None,
        "expected": expected,
        "tolerance": tolerance,
        "rtol": rtol,
        "atol": atol,
        "elements_off": off,
        "elements": total,
    }
    at = f"'{output}'[{', '.join(map(str, idx))}]"
    if math.isfinite(value):
        difference = abs(value - expected)
        by = f"off by {difference:.3g}" + (
            f", {difference / tolerance:.3g}x the tolerance {tolerance:.3g}"
            if tolerance > 0
            else " (tolerance 0: exact)"
        )
    else:
        mismatch["nonfinite"] = repr(value)
        by = "not a finite number"
    return WrongResult(
        f"{where}: wrong result: output {at} = {value:.6g}, expected {expected:.6g}: {by} "
        f"({off} of {total} elements off; rtol {rtol:.3g}, atol {atol:.3g})",
        mismatch,
    )
