"""TVM lowering: a kernel's IRModule -> its tensor signature, a content hash, an object file."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from perfguard.compile.inputs import TensorSpec, check_dtype
from perfguard.errors import InfraError, InputError


@dataclass(frozen=True)
class LoweredKernel:
    mod: object  # tvm.IRModule, scheduled
    symbol: str  # the exported safe-call symbol, e.g. __tvm_ffi_main
    tensors: list[TensorSpec]
    ir_hash: str  # sha256 of the scheduled module's TVMScript text


def inspect_module(mod: object, num_outputs: int, where: str) -> LoweredKernel:
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


# TVM's LLVM back end writes the object itself and, on a write error, ends the process with
# "LLVM ERROR: IO failure on output stream" and exit status 1 (which reads as "a regression").
# Object files of kernels are well under 1 MiB: this much free space means the write succeeds.
MIN_FREE_BYTES = 16 << 20


def build_object(kernel: LoweredKernel, tvm_target: dict, out: Path, where: str) -> None:
    """Compile for the target with TVM's LLVM back end and write a relocatable object."""
    import tvm

    free = shutil.disk_usage(out.parent).free
    if free < MIN_FREE_BYTES:  # LLVM ends the whole process when a write fails (a full disk): ask first
        raise InfraError(f"{where}: {out.parent}: only {free // 1024} KiB free, the build needs "
                         f"{MIN_FREE_BYTES >> 20} MiB (No space left on device)")
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
