"""TVM lowering: a kernel's IRModule -> its tensor signature, a content hash, an object file."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfguard.atomic import atomic_write_text
from perfguard.compile.inputs import TensorSpec, check_dtype, dtype_range, load_values
from perfguard.errors import InfraError, InputError

LOWERED_RECIPE = 1  # part of the key of the record of a kernel's TVMScript (inspect_text)


class LoweredKernel:
    """A kernel's module with what a build and its harness need of it: the exported symbol, the
    tensors and a hash of its TVMScript. `mod` may be made on first use (`load`): a kernel whose
    build, loop nest and output check are all cached never needs it (inspect_text)."""

    def __init__(
        self, mod: Any, symbol: str, tensors: list[TensorSpec], ir_hash: str, load: Callable[[], object] | None = None
    ):
        self._mod, self._load = mod, load
        self.symbol = symbol  # the exported safe-call symbol, e.g. __tvm_ffi_main
        self.tensors = tensors
        self.ir_hash = ir_hash  # sha256 of the scheduled module's TVMScript text
        self.source: str | None = None  # a user kernel's entry function (pipeline.entry_source), for reports

    @property
    def mod(self) -> Any:  # a tvm IRModule (TVM has no type information)
        """The tvm.IRModule, scheduled."""
        if self._mod is None and self._load is not None:
            self._mod = self._load()
        return self._mod


def inspect_module(mod: Any, num_outputs: int, where: str) -> LoweredKernel:
    """Check that `mod` is an IRModule with one PrimFunc of tensor parameters."""
    import tvm

    if not isinstance(mod, tvm.IRModule):
        if isinstance(mod, tvm.tirx.PrimFunc):
            mod = tvm.IRModule({"main": mod})
        else:
            raise InputError(f"{where}: entry returned {type(mod).__name__}, expected a tvm IRModule")
    funcs = [(gv, f) for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    if len(funcs) != 1:
        raise InputError(f"{where}: the IRModule must hold exactly one PrimFunc, found {len(funcs)}")
    gvar, func = funcs[0]
    name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else gvar.name_hint
    tensors = []
    params = list(func.params)
    if num_outputs < 1 or num_outputs > len(params):
        raise InputError(f"{where}: outputs = {num_outputs} but the kernel has {len(params)} parameters")
    for index, param in enumerate(params):
        # TVM 0.27 PrimFunc parameters are buffers themselves; older releases map vars to buffers.
        buffer_map = getattr(func, "buffer_map", None)
        buf = buffer_map[param] if buffer_map is not None and param in buffer_map else param
        if not hasattr(buf, "shape") or len(buf.shape) == 0:
            raise InputError(f"{where}: parameter '{param}' is not a tensor (scalars are not supported)")
        shape = []
        for dim in buf.shape:
            if not isinstance(dim, tvm.tirx.IntImm):
                raise InputError(f"{where}: tensor '{buf.name}' has a symbolic shape ({dim}); shapes must be static")
            shape.append(int(dim))
        dtype = str(buf.dtype)
        check_dtype(dtype, f"{where}: tensor '{buf.name}'")
        tensors.append(TensorSpec(buf.name, tuple(shape), dtype, index >= len(params) - num_outputs, index))
    text = mod.script()
    return LoweredKernel(mod, f"__tvm_ffi_{name}", tensors, hashlib.sha256(text.encode()).hexdigest())


def with_inputs(
    lowered: LoweredKernel, inputs: dict[str, dict[str, Any]] | None, where: str, root: Path | None = None
) -> LoweredKernel:
    """The kernel with its configured inputs (a [[kernel]]'s `inputs`): each name one of its
    inputs, an integer input's range whole numbers its dtype holds. The harness fills them and the
    host's reference gets them alike (compile.inputs.generate)."""
    if not inputs:
        return lowered
    names = [t.name for t in lowered.tensors if not t.output]
    for name in inputs:
        if name not in names:
            outputs = [t.name for t in lowered.tensors if t.output]
            what = "an output" if name in outputs else "not an input of the kernel"
            raise InputError(f"{where}: inputs: '{name}' is {what} (its inputs: {', '.join(names)})")
    tensors = []
    for t in lowered.tensors:
        item = inputs.get(t.name)
        if item is not None and item.get("file") is not None:
            values = load_values(Path(root or ".") / item["file"], t, item["file"], where)
            t = replace(t, values=values, values_file=item["file"])
        elif item is not None:
            low, high = item["low"], item["high"]
            if low is not None and not t.is_float:
                if not (float(low).is_integer() and float(high).is_integer()):
                    raise InputError(
                        f"{where}: inputs: {t.name}: {t.dtype} takes whole numbers, got low = {low!r}, high = {high!r}"
                    )
                low, high = int(low), int(high)
                smallest, largest = dtype_range(t.dtype)
                if low < smallest or high - 1 > largest or high - low > 1 << 24:
                    raise InputError(
                        f"{where}: inputs: {t.name}: [{low}, {high}) does not fit {t.dtype} "
                        f"([{smallest}, {largest + 1}), at most 2^24 values)"
                    )
            elif low is not None:
                low, high = float(low), float(high)
            t = replace(t, fill=(low, high, item["seed"]))
        tensors.append(t)
    return LoweredKernel(lowered._mod, lowered.symbol, tensors, lowered.ir_hash, load=lowered._load)


def inspect_text(
    text: str, num_outputs: int, where: str, parse: Callable[[str], object], cache_dir: Path | None = None
) -> LoweredKernel:
    """inspect_module of a kernel given as TVMScript (a [[model]]'s), parsed once per text: its
    symbol, tensors and hash are recorded under the text's digest in `cache_dir`, and the module
    itself is parsed (`parse`) only when something needs it (a build, a loop nest, a host
    reference). Parsing a large kernel's TVMScript costs about a second; a warm check skips it."""
    import tvm

    if cache_dir is None:
        return inspect_module(parse(text), num_outputs, where)
    key = hashlib.sha256(f"{LOWERED_RECIPE}\0{tvm.__version__}\0{num_outputs}\0{text}".encode()).hexdigest()
    path = Path(cache_dir) / "lowered" / key[:2] / f"{key}.json"
    try:
        record = json.loads(path.read_text())
        tensors = [
            TensorSpec(name, tuple(shape), dtype, output, index)
            for name, shape, dtype, output, index in record["tensors"]
        ]
        for t in tensors:
            check_dtype(t.dtype, f"{where}: tensor '{t.name}'")
        return LoweredKernel(None, record["symbol"], tensors, record["ir_hash"], load=lambda: parse(text))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or damaged: parse it
    lowered = inspect_module(parse(text), num_outputs, where)
    record = {
        "symbol": lowered.symbol,
        "ir_hash": lowered.ir_hash,
        "tensors": [[t.name, list(t.shape), t.dtype, t.output, t.index] for t in lowered.tensors],
    }
    try:
        atomic_write_text(path, json.dumps(record, sort_keys=True))
    except (InfraError, OSError):
        pass  # a cache that cannot be written costs only the next parse
    return lowered


# TVM's LLVM back end writes the object itself and, on a write error, ends the process with
# "LLVM ERROR: IO failure on output stream" and exit status 1 (which reads as "a regression").
# Object files of kernels are well under 1 MiB: this much free space means the write succeeds.
MIN_FREE_BYTES = 16 << 20


def build_object(kernel: LoweredKernel, tvm_target: dict, out: Path, where: str) -> None:
    """Compile for the target with TVM's LLVM back end and write a relocatable object."""
    import tvm

    free = shutil.disk_usage(out.parent).free
    if free < MIN_FREE_BYTES:  # LLVM ends the whole process when a write fails (a full disk): ask first
        raise InfraError(
            f"{where}: {out.parent}: only {free // 1024} KiB free, the build needs "
            f"{MIN_FREE_BYTES >> 20} MiB (No space left on device)"
        )
    try:
        lib = tvm.tirx.build(kernel.mod, target=tvm.target.Target(tvm_target))
        lib.write_to_file(str(out))
    except Exception as exc:  # TVM raises many types; all mean the build failed
        first = str(exc).strip().splitlines()
        raise InfraError(f"{where}: TVM build failed: {first[-1] if first else type(exc).__name__}") from None


def build_host(kernel: LoweredKernel, where: str):
    """The kernel built for this machine and loaded through TVM's runtime (user references)."""
    import tvm

    try:
        return tvm.tirx.build(kernel.mod, target=tvm.target.Target({"kind": "llvm"}))
    except Exception as exc:
        first = str(exc).strip().splitlines()
        raise InfraError(f"{where}: TVM host build failed: {first[-1] if first else type(exc).__name__}") from None
