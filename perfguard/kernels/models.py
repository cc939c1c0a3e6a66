"""Whole models: every fused kernel of a Relax (or ONNX) model, named stably, as kernels to guard.

A [[model]] entry's source is a "module:function" returning a Relax IRModule (written with
tvm.relax.frontend.nn, say) or an .onnx file with its input shapes. For each target the model
goes through the legalisation passes of TVM's CPU pipeline (library dispatch, LegalizeOps,
AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, RewriteDataflowReshape) and TVM's task extraction
(meta_schedule.relax_integration.extract_tasks) lists its fused PrimFuncs with their calls per
inference. Each becomes a KernelSpec carrying its PrimFunc as TVMScript.

Names are "<model>.<operator>.<shape digest>": the operator is the fused function's name with
TVM's de-duplicating digits dropped (fused_matmul1_add1 -> matmul_add), the digest is over the
parameters' shapes and dtypes. An edit elsewhere in the model renames nothing; a kernel whose
shapes change gets a new name (and the model view pairs it with the old one as renamed).

Extraction is cached under the model's content digest (the ONNX file's bytes with its input
shapes, or the Relax module's text), the target, TVM's version and EXTRACT_RECIPE. In front of
that, a model's record (keyed on its entry, the target, perfguard and its environment) lists the
files its source read (the modules a Python source imported, at any depth; the ONNX file; the
tuning database) with their digests: while they are unchanged, the kernels come from the record
without importing TVM or calling the source, which the content digest needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard.atomic import atomic_write_text
from perfguard.config import Config, KernelSpec, ModelSpec, load_callable
from perfguard.errors import InfraError, InputError
from perfguard.fingerprints import environment_digest
from perfguard.user_code import depend_on, recording, unchanged

# Part of every extraction key: bump when the passes or the naming change.
EXTRACT_RECIPE = 2
ENTRY = "perfguard.kernels.models:extracted"  # what a model kernel's `entry` says (its `ir` is what builds)
# Relax operators that may stay in a legalised model: they call kernels or move memory, none computes.
_PLUMBING = re.compile(r"^relax\.(call_tir|call_tir_inplace|builtin\.|memory\.|vm\.|null_value|reshape$|"
                       r"shape_of|tensor_to_shape|shape_to_tensor|print|assert_op)")


@dataclass(frozen=True)
class ModelKernel:
    name: str  # <model>.<operator>.<shape digest>
    op: str
    calls: int  # calls per inference
    signature: str  # "float32[4,64],float32[64,128]->float32[4,128]"
    outputs: int
    ir: str  # TVMScript of an IRModule holding the PrimFunc "main"


def extracted(**params: Any):
    """The entry named by model kernels: never called, their `ir` is built (pipeline.resolve_kernel)."""
    raise InputError(f"{ENTRY} builds nothing by itself: it names the kernels perfguard extracts from a [[model]]")


def _sha(*parts: str) -> str:
    return hashlib.sha256(b"".join(part.encode() + b"\0" for part in parts)).hexdigest()  # as build.cache.digest


def _where(config: Config, spec: ModelSpec) -> str:
    return f"{config.path}: model '{spec.name}'"


# --- loading: the model's source -> (content digest, a thunk giving the Relax IRModule) ----------

def _onnx_source(config: Config, spec: ModelSpec):
    where = _where(config, spec)
    path = Path(spec.source) if os.path.isabs(spec.source) else config.root / spec.source
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{where}: source '{spec.source}': no such file ({path})") from None
    except OSError as exc:
        raise InputError(f"{where}: source '{spec.source}': cannot read: {exc.strerror or exc}") from None
    inputs = {k: [list(shape), dtype] for k, (shape, dtype) in sorted(spec.inputs.items())}
    content = _sha("onnx", hashlib.sha256(data).hexdigest(), json.dumps(inputs))

    def load():
        try:
            import onnx
        except ImportError:
            raise InfraError(f"{where}: the 'onnx' package is not installed (pip install onnx; "
                             f"scripts/setup.sh installs it)") from None
        try:
            model = onnx.load_model_from_string(data)
        except Exception as exc:  # protobuf's DecodeError and friends: not an ONNX file
            raise InputError(f"{where}: {spec.source} does not parse as ONNX: {_first(exc)}") from None
        shapes, dtypes = _onnx_inputs(model, spec, where)
        from tvm.relax.frontend.onnx import from_onnx

        unsupported = _unsupported_onnx_ops(model)
        if unsupported:
            raise InputError(f"{where}: {spec.source}: unsupported ONNX operator(s) {', '.join(unsupported)} "
                             f"(TVM's ONNX frontend has no converter)")
        try:
            return from_onnx(model, shape_dict=shapes, dtype_dict=dtypes)
        except Exception as exc:
            raise InputError(f"{where}: {spec.source}: TVM's ONNX frontend refused it: {_first(exc)}") from None

    return content, load


def _onnx_inputs(model, spec: ModelSpec, where: str) -> tuple[dict, dict]:
    """Every graph input's static shape and dtype: the file's, or the config's `inputs`."""
    import onnx

    initialisers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initialisers]
    names = {i.name for i in graph_inputs}
    for name in spec.inputs:
        if name not in names:
            raise InputError(f"{where}: inputs.{name}: the model has no such input (its inputs: "
                             f"{', '.join(sorted(names)) or 'none'})")
    shapes, dtypes = {}, {}
    for info in graph_inputs:
        tensor = info.type.tensor_type
        given_shape, given_dtype = spec.inputs.get(info.name, (None, None))
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tensor.shape.dim]
        if given_shape is None and (not tensor.HasField("shape") or None in dims):
            raise InputError(f"{where}: input '{info.name}' has no static shape in {spec.source}: give it, "
                             f"e.g. inputs = {{ {info.name} = [1, 3, 32, 32] }}")
        shapes[info.name] = list(given_shape) if given_shape is not None else dims
        dtypes[info.name] = given_dtype or str(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    return shapes, dtypes


def _unsupported_onnx_ops(model) -> list[str]:
    from tvm.relax.frontend.onnx import onnx_frontend

    table = onnx_frontend._get_convert_map()
    return sorted({node.op_type for node in model.graph.node if node.op_type not in table})


def _python_source(config: Config, spec: ModelSpec):
    where = _where(config, spec)
    func = load_callable(spec.source, config.root, where, "source")
    try:
        out = func(**spec.params)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}") from None
    except Exception as exc:
        raise InputError(f"{where}: source '{spec.source}' raised {type(exc).__name__}: {_first(exc)}") from None
    mod = out[0] if isinstance(out, tuple) and out else out  # nn.Module.export_tvm gives (mod, params)
    import tvm

    if not isinstance(mod, tvm.IRModule):
        raise InputError(f"{where}: source '{spec.source}' returned {type(mod).__name__}, expected a Relax "
                         f"IRModule (or export_tvm's (IRModule, params))")
    return _sha("relax", mod.script()), lambda: mod


def _first(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


# --- extraction: Relax IRModule -> fused kernels --------------------------------------------------

def _entry_function(mod, where: str):
    from tvm import relax

    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, relax.Function)}
    if not funcs:
        raise InputError(f"{where}: the module has no Relax function")
    if "main" in funcs:
        return "main", funcs["main"]
    if len(funcs) == 1:
        return next(iter(funcs.items()))
    raise InputError(f"{where}: the module has several Relax functions ({', '.join(sorted(funcs))}) and no "
                     f"'main': keep the one to guard")


def _bind_weights(mod, name: str, func):
    """nn.Module's export passes the weights as parameters after `num_input`: bind them (zeros) as
    a deployed model does, so FoldConstant folds their layout changes away as it would there."""
    import numpy as np
    import tvm
    from tvm import relax

    attrs = func.attrs or {}
    if "num_input" not in attrs:
        return mod
    n = int(attrs["num_input"])
    bound = {}
    for param in list(func.params)[n:]:
        ty = param.ty  # TVM 0.27: Relax's struct_info became `ty`
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            continue
        shape = [int(d) for d in ty.shape.values]
        bound[str(param.name)] = tvm.runtime.tensor(np.zeros(shape, dtype=str(ty.dtype)))
    return relax.transform.BindParams(name, bound)(mod) if bound else mod


def _legalise(mod, target, where: str):
    import tvm
    from tvm.relax.backend.cpu_generic.pipeline import legalize_passes, library_dispatch_passes

    from tvm import relax

    # As the CPU pipeline does, then a reshape that is only a view stops being a kernel (it never runs).
    passes = library_dispatch_passes(target) + legalize_passes(target) + [relax.transform.RewriteDataflowReshape()]
    try:
        with target:
            return tvm.transform.Sequential(passes)(mod)
    except Exception as exc:
        raise InputError(f"{where}: TVM could not legalise the model: {_first(exc)}") from None


def _leftover_ops(mod, name: str) -> list[str]:
    """Relax operators the legalisation left as they were: TVM has no kernel for them."""
    import tvm
    from tvm import relax

    found: set[str] = set()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            op_name = str(expr.op.name)
            if not _PLUMBING.match(op_name):
                found.add(op_name)

    relax.analysis.post_order_visit(mod[name], visit)
    return sorted(found)


def operator_name(task_name: str) -> str:
    """fused_matmul1_add1 -> matmul_add: TVM's de-duplicating digits (and the fused_ prefix) dropped."""
    parts = [re.sub(r"(?<=[a-z_])\d+$", "", p) for p in task_name.split("_")]
    parts = [p for p in parts if p and not p.isdigit()]
    if parts and parts[0] == "fused" and len(parts) > 1:
        parts = parts[1:]
    return "_".join(parts) or "kernel"


def _buffers(func) -> list:
    """A PrimFunc's parameter buffers (TVM 0.27's parameters are buffers; older ones map vars to them)."""
    buffer_map = getattr(func, "buffer_map", None)
    return [buffer_map[p] if buffer_map is not None and p in buffer_map else p for p in func.params]


def _signature(func, outputs: int) -> str:
    shapes = []
    for buf in _buffers(func):
        shapes.append(f"{buf.dtype}[{','.join(str(int(d)) for d in buf.shape)}]")
    n = len(shapes) - outputs
    return ",".join(shapes[:n]) + "->" + ",".join(shapes[n:])


def _outputs_per_kernel(mod, name: str) -> dict[str, int]:
    """Each called PrimFunc's output count, from its call_tir's output type (Relax passes outputs last)."""
    import tvm
    from tvm import relax

    counts: dict[str, int] = {}

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
            out = expr.ty_args[0] if expr.ty_args else None
            fields = getattr(out, "fields", None)
            counts[expr.args[0].name_hint] = len(fields) if fields is not None else 1

    relax.analysis.post_order_visit(mod[name], visit)
    return counts


def extract_model(mod, tvm_target: dict, model_name: str, where: str) -> list[ModelKernel]:
    """The model's fused kernels for one target, named, in name order."""
    import tvm
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks

    name, func = _entry_function(mod, where)
    mod = _bind_weights(mod, name, func)
    target = tvm.target.Target(tvm_target)
    mod = _legalise(mod, target, where)
    left = _leftover_ops(mod, name)
    if left:
        raise InputError(f"{where}: unsupported operator(s) {', '.join(left)} (TVM has no legalisation to a "
                         f"kernel for them)")
    outputs_of = _outputs_per_kernel(mod, name)
    kernels: dict[str, list] = {}
    for task in extract_tasks(mod, target):
        kmod = task.dispatched[0]
        prim = kmod["main"]
        outputs = outputs_of.get(task.task_name, 1)
        signature = _signature(prim, outputs)
        op = operator_name(task.task_name)
        base = f"{model_name}.{op}.{_sha(signature)[:6]}"
        kernels.setdefault(base, []).append((op, int(task.weight), signature, outputs, kmod.script()))
    out = []
    for base, group in kernels.items():
        # Same operator, same shapes, other code (a slice at another offset): told apart by their code.
        group.sort(key=lambda g: _sha(g[4]))
        for op, calls, signature, outputs, ir in group:
            name = base if len(group) == 1 else f"{base}-{_sha(ir)[:4]}"
            out.append(ModelKernel(name, op, calls, signature, outputs, ir))
    return sorted(out, key=lambda k: k.name)


def _cache_file(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "models" / key[:2] / f"{key}.json"


def model_kernels(config: Config, spec: ModelSpec, target: str) -> list[ModelKernel]:
    """The model's kernels on `target`: from the model's record when none of the files its source
    read changed (no TVM imported, no source called), else from the extraction cache when the
    model's content did not change, else extracted."""
    front = _front_key(config, spec, target)
    found = _read_front(config, front)
    if found is not None:
        return found
    with recording(config.root, exclude=(config.cache_dir,)) as read:
        kernels = _model_kernels(config, spec, target)
    if spec.is_file:  # outside the project folder too
        read.add(Path(spec.source) if os.path.isabs(spec.source) else config.root / spec.source)
    if spec.database:
        read.add(*(_database_folder(config, spec) / name
                   for name in ("database_workload.json", "database_tuning_record.json")))
    try:
        atomic_write_text(_cache_file(config.cache_dir, front), json.dumps(
            {"depends": read.digests(), "kernels": [k.__dict__ for k in kernels]}, sort_keys=True))
    except (InfraError, OSError):
        pass  # a cache that cannot be written costs only the reuse
    return kernels


def _front_key(config: Config, spec: ModelSpec, target: str) -> str:
    """The model entry, the target and everything perfguard runs it with (not the files its source reads)."""
    return _sha("model record", json.dumps(spec.__dict__, sort_keys=True, default=str),
                json.dumps(config.profile(target).tvm_target, sort_keys=True), str(EXTRACT_RECIPE), environment_digest())


def _read_front(config: Config, key: str) -> list[ModelKernel] | None:
    try:
        record = json.loads(_cache_file(config.cache_dir, key).read_text())
        if not unchanged(config.root.resolve(), record["depends"]):
            return None
        kernels = [ModelKernel(**k) for k in record["kernels"]]
        depend_on(config.root, record["depends"])
        return kernels
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent, damaged or stale: extract (or find the extraction) again


def _model_kernels(config: Config, spec: ModelSpec, target: str) -> list[ModelKernel]:
    import tvm

    where = _where(config, spec)
    content, load = (_onnx_source if spec.is_file else _python_source)(config, spec)
    profile = config.profile(target)
    key = _sha(content, json.dumps(profile.tvm_target, sort_keys=True), tvm.__version__, str(EXTRACT_RECIPE),
               spec.name, _database_digest(config, spec))
    path = _cache_file(config.cache_dir, key)
    try:
        records = json.loads(path.read_text())
        return [ModelKernel(**r) for r in records]
    except (OSError, ValueError, TypeError):
        pass  # absent or damaged: extract again
    kernels = extract_model(load(), profile.tvm_target, spec.name, f"{where} on {target}")
    if not kernels:
        raise InputError(f"{where}: TVM extracted no kernel from the model on {target}")
    if spec.database:
        kernels = [_apply_database(k, config, spec, profile, where) for k in kernels]
    atomic_write_text(path, json.dumps([k.__dict__ for k in kernels], sort_keys=True))
    return kernels


def _database_folder(config: Config, spec: ModelSpec) -> Path:
    return Path(spec.database) if os.path.isabs(spec.database) else config.root / spec.database


def _database_digest(config: Config, spec: ModelSpec) -> str:
    """The database's files' bytes: re-tuning (a new record) is a new extraction, never a stale one."""
    if not spec.database:
        return ""
    folder = _database_folder(config, spec)
    parts = []
    for name in ("database_workload.json", "database_tuning_record.json"):
        try:
            parts.append(hashlib.sha256((folder / name).read_bytes()).hexdigest())
        except OSError:
            parts.append("missing")  # _apply_database says so, naming the file
    return _sha(spec.database, *parts)


def _apply_database(kernel: ModelKernel, config: Config, spec: ModelSpec, profile, where: str) -> ModelKernel:
    """The kernel with its tuned schedule from the MetaSchedule database, when the database has one."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    folder = _database_folder(config, spec)
    files = folder / "database_workload.json", folder / "database_tuning_record.json"
    if not all(f.is_file() for f in files):
        raise InputError(f"{where}: database '{spec.database}': expected {files[0].name} and {files[1].name} "
                         f"in {folder}")
    try:
        database = ms.database.JSONDatabase(str(files[0]), str(files[1]), allow_missing=False)
        mod = tvm.script.from_source(kernel.ir)
        target = tvm.target.Target({**profile.tvm_target, "num-cores": 1})
        sch = database.query_schedule(mod, target, workload_name="main")
    except Exception as exc:
        raise InputError(f"{where}: database '{spec.database}' cannot be read: {_first(exc)}") from None
    if sch is None:
        return kernel
    return ModelKernel(kernel.name, kernel.op, kernel.calls, kernel.signature, kernel.outputs, sch.mod.script())


def model_specs(config: Config, spec: ModelSpec, targets: list[str]) -> list[KernelSpec]:
    """The model's kernels as KernelSpecs, one per kernel, each limited to the targets that have it."""
    by_name: dict[str, tuple[ModelKernel, list[str]]] = {}
    irs: dict[tuple[str, str], str] = {}
    for target in targets:
        for k in model_kernels(config, spec, target):
            by_name.setdefault(k.name, (k, []))[1].append(target)
            irs[(k.name, target)] = k.ir
    out = []
    for name, (k, where) in sorted(by_name.items()):
        # One spec per distinct code: a target whose extraction differs gets its own spec.
        groups: dict[str, list[str]] = {}
        for t in where:
            groups.setdefault(irs[(name, t)], []).append(t)
        for ir, ts in groups.items():
            out.append(KernelSpec(name=name, entry=ENTRY, family=None,
                                  params={"model": spec.name, "op": k.op, "calls": k.calls, "shapes": k.signature},
                                  threshold=spec.kernel_threshold, targets=tuple(ts), outputs=k.outputs, ir=ir,
                                  model=spec.name))
    return out
