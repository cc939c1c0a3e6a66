"""Whole models: every fused kernel of a Relax (or ONNX) model, named stably, as kernels to guard.

A [[model]] entry's source is a "module:function" returning a Relax IRModule (written with
tvm.relax.frontend.nn, say) or an .onnx file with its input shapes. For each target the model
goes through the legalisation passes of TVM's CPU pipeline (library dispatch, LegalizeOps,
AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, RewriteDataflowReshape) and TVM's task extraction
(meta_schedule.relax_integration.extract_tasks) lists its fused PrimFuncs with their calls per
inference. Each becomes a KernelSpec carrying its PrimFunc as TVMScript, scheduled as it would
ship (the model's MetaSchedule database, else kernels.model_schedule's default), and what it is
in the model's terms (kernels.model_graph): the graph nodes each of its calls computes, where
those calls are in the model's call order, and its layer (operator, shapes, window, stride).

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

import difflib
import hashlib
import importlib.metadata
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from perfguard.atomic import atomic_write_text
from perfguard.config import Config, KernelSpec, ModelSpec
from perfguard.errors import InfraError, InputError
from perfguard.fingerprints import digest, environment_digest
from perfguard.kernels import model_graph
from perfguard.kernels.model_schedule import SCHEDULE_RECIPE, default_schedule
from perfguard.kernels.model_sources import first_line, model_where, onnx_source, python_source
from perfguard.user_code.reads import depend_on, recording, unchanged

# Part of every extraction key: bump when the passes, the naming or what a kernel records change.
EXTRACT_RECIPE = 4
ENTRY = "perfguard.kernels.models:extracted"  # what a model kernel's `entry` says (its `ir` is what builds)
# Relax operators that may stay in a legalised model: they call kernels or move memory, none computes.
_PLUMBING = re.compile(
    r"^relax\.(call_tir|call_tir_inplace|builtin\.|memory\.|vm\.|null_value|reshape$|"
    r"shape_of|tensor_to_shape|shape_to_tensor|print|assert_op)"
)


# What built a model kernel's code (its `schedule` param): its record in the model's database; the
# default rules (kernels.model_schedule); none (`schedule = "none"`: TVM's unscheduled loops); or
# unscheduled, the default rules not applying to it.
SCHEDULES = ("database", "default", "none", "unscheduled")


@dataclass(frozen=True)
class ModelKernel:
    name: str  # <model>.<operator>.<shape digest>
    op: str
    calls: int  # calls per inference
    signature: str  # "float32[4,64],float32[64,128]->float32[4,128]"
    outputs: int
    ir: str  # TVMScript of an IRModule holding the PrimFunc "main"
    positions: list[int]  # each call's index in the model's call order (0: the first kernel call of an inference)
    nodes: list[list[list[str]]]  # per call: the graph nodes it computes, [[name, operator], ...]
    layer: dict[str, Any]  # its anchor operator: op, in, out (shapes), weight, window, stride, groups
    schedule: str  # SCHEDULES
    graph: str  # what the nodes are: "onnx" nodes or "relax" bindings
    flops: int | None  # TVM's estimate for one call (tvm.s_tir.analysis.estimate_tir_flops), None when it has none

    def params(self, model: str) -> dict[str, Any]:
        """What the kernel is, as its results and baselines record it (`positions` travel apart: an
        edit elsewhere in the model moves them, and must not rewrite this kernel's baseline)."""
        return {
            "model": model,
            "op": self.op,
            "calls": self.calls,
            "shapes": self.signature,
            "layer": self.layer,
            "nodes": self.nodes,
            "graph": self.graph,
            "schedule": self.schedule,
        }


def extracted(**params: Any):
    """The entry named by model kernels: never called, their `ir` is built (pipeline.resolve_kernel)."""
    raise InputError(f"{ENTRY} builds nothing by itself: it names the kernels perfguard extracts from a [[model]]")


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
    raise InputError(
        f"{where}: the module has several Relax functions ({', '.join(sorted(funcs))}) and no "
        f"'main': keep the one to guard"
    )


def _bind_weights(mod, name: str, func):
    """nn.Module's export passes the weights as parameters after `num_input`: bind them (zeros) as
    a deployed model does, so FoldConstant folds their layout changes away as it would there."""
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
    """(legalised, fused, final): the module after TVM's CPU legalisation up to FuseOps, after FuseOps,
    and after FuseTIR (kernel_graph traces calls through the three)."""
    import tvm
    from tvm import relax
    from tvm.relax.backend.cpu_generic.pipeline import legalize_passes, library_dispatch_passes

    # As the CPU pipeline does, then a reshape that is only a view stops being a kernel (it never runs).
    passes = library_dispatch_passes(target) + legalize_passes(target) + [relax.transform.RewriteDataflowReshape()]
    names = [p.info.name for p in passes]
    fuse = names.index("FuseOps") if "FuseOps" in names else len(passes)
    tir = names.index("FuseTIR") if "FuseTIR" in names else len(passes)
    stages = []
    try:
        with target:
            for chunk in (passes[:fuse], passes[fuse:tir], passes[tir:]):
                mod = tvm.transform.Sequential(chunk)(mod)
                stages.append(mod)
    except Exception as exc:
        raise InputError(f"{where}: TVM could not legalise the model: {first_line(exc)}") from None
    return tuple(stages)


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


def extract_model(
    mod, tvm_target: dict, model_name: str, where: str, nodes: dict[str, model_graph.Node] | None = None
) -> list[ModelKernel]:
    """The model's fused kernels for one target, unscheduled, named, in name order. `nodes`: the
    graph node of each binding of the entry function (an ONNX import's); None: a Relax source's,
    named after the weights the bindings read."""
    import tvm
    import tvm_ffi
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks

    name, func = _entry_function(mod, where)
    graph = "relax" if nodes is None else "onnx"
    nodes = model_graph.relax_nodes(func) if nodes is None else nodes
    source = _bind_weights(mod, name, func)
    target = tvm.target.Target(tvm_target)
    legalised, fused, final = _legalise(source, target, where)
    left = _leftover_ops(final, name)
    if left:
        raise InputError(
            f"{where}: unsupported operator(s) {', '.join(left)} (TVM has no legalisation to a kernel for them)"
        )
    calls = model_graph.trace_calls(source, legalised, fused, final, nodes, name)
    outputs_of = _outputs_per_kernel(final, name)
    functions = {gv.name_hint: f for gv, f in final.functions.items()}
    digest_of: dict[str, object] = {}

    def code(func_name: str) -> object:  # equal code, equal task (extract_tasks groups calls so)
        if func_name not in digest_of:
            digest_of[func_name] = (
                tvm_ffi.structural_hash(functions[func_name]) if func_name in functions else ("unknown", func_name)
            )
        return digest_of[func_name]

    kernels: dict[str, list] = {}
    for task in extract_tasks(final, target):
        kmod = task.dispatched[0]
        prim = kmod["main"]
        outputs = outputs_of.get(task.task_name, 1)
        signature = _signature(prim, outputs)
        op = operator_name(task.task_name)
        mine = [i for i, c in enumerate(calls) if c.func == task.task_name or code(c.func) == code(task.task_name)]
        sites = [[[n.name, n.op] for n in calls[i].nodes] for i in mine]
        layer = calls[mine[0]].layer if mine else {}
        base = f"{model_name}.{op}.{digest(signature)[:6]}"
        kernels.setdefault(base, []).append(
            (op, int(task.weight), signature, outputs, kmod.script(), mine, sites, layer, _flops(kmod))
        )
    out = []
    for base, group in kernels.items():
        # Same operator, same shapes, other code (a slice at another offset): told apart by their code.
        group.sort(key=lambda g: digest(g[4]))
        for op, calls_, signature, outputs, ir, positions, sites, layer, flops in group:
            kernel = base if len(group) == 1 else f"{base}-{digest(ir)[:4]}"
            out.append(
                ModelKernel(kernel, op, calls_, signature, outputs, ir, positions, sites, layer, "none", graph, flops)
            )
    return sorted(out, key=lambda k: k.name)


def _flops(mod) -> int | None:
    """TVM's flop estimate of the unscheduled kernel (a schedule moves no flop)."""
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        flops = int(estimate_tir_flops(mod))
    except Exception:  # an operator the estimate does not know: no GFLOP/s for this kernel
        return None
    return flops if flops > 0 else None


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
    with recording(config.root, exclude=(config.storage.cache_dir,)) as read:
        kernels = _model_kernels(config, spec, target)
    if spec.is_file:  # outside the project folder too
        read.add(Path(spec.source) if os.path.isabs(spec.source) else config.root / spec.source)
    if spec.database:
        read.add(
            *(
                _database_folder(config, spec) / name
                for name in ("database_workload.json", "database_tuning_record.json")
            )
        )
    try:
        atomic_write_text(
            _cache_file(config.storage.cache_dir, front),
            json.dumps({"depends": read.digests(), "kernels": [k.__dict__ for k in kernels]}, sort_keys=True),
        )
    except (InfraError, OSError):
        pass  # a cache that cannot be written costs only the reuse
    return kernels


def _front_key(config: Config, spec: ModelSpec, target: str) -> str:
    """The model entry, the target and everything perfguard runs it with (not the files its source reads)."""
    return digest(
        "model record",
        json.dumps(spec.__dict__, sort_keys=True, default=str),
        json.dumps(config.profile(target).tvm_target, sort_keys=True),
        str(EXTRACT_RECIPE),
        str(SCHEDULE_RECIPE),
        environment_digest(),
    )


def _read_front(config: Config, key: str) -> list[ModelKernel] | None:
    try:
        record = json.loads(_cache_file(config.storage.cache_dir, key).read_text())
        if not unchanged(config.root.resolve(), record["depends"]):
            return None
        kernels = [ModelKernel(**k) for k in record["kernels"]]
        depend_on(config.root, record["depends"])
        return kernels
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent, damaged or stale: extract (or find the extraction) again


def _tvm_version() -> str:
    """TVM's version without importing TVM (seconds): a cached extraction needs no TVM at all."""
    try:
        return importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:  # a TVM built from source
        import tvm

        return tvm.__version__


def _model_kernels(config: Config, spec: ModelSpec, target: str) -> list[ModelKernel]:
    """Every kernel of the model on `target`, scheduled as it would ship (skipped ones too: see
    model_specs), from the extraction cache when the model's content did not change."""
    where = model_where(config, spec)
    content, load = (onnx_source if spec.is_file else python_source)(config, spec)
    profile = config.profile(target)
    key = digest(
        content,
        json.dumps(profile.tvm_target, sort_keys=True),
        _tvm_version(),
        str(EXTRACT_RECIPE),
        spec.name,
        _database_digest(config, spec),
        spec.schedule,
        str(SCHEDULE_RECIPE),
    )
    path = _cache_file(config.storage.cache_dir, key)
    try:
        records = json.loads(path.read_text())
        return [ModelKernel(**r) for r in records]
    except (OSError, ValueError, TypeError):
        pass  # absent or damaged: extract again
    mod, nodes = load()
    kernels = extract_model(mod, profile.tvm_target, spec.name, f"{where} on {target}", nodes)
    if not kernels:
        raise InputError(f"{where}: TVM extracted no kernel from the model on {target}")
    kernels = [_scheduled(k, config, spec, profile, where) for k in kernels]
    atomic_write_text(path, json.dumps([k.__dict__ for k in kernels], sort_keys=True))
    return kernels


def _scheduled(kernel: ModelKernel, config: Config, spec: ModelSpec, profile, where: str) -> ModelKernel:
    """The kernel as it would ship: its database record, else the default rules (or its loops)."""
    if spec.database:
        tuned = _database_schedule(kernel, config, spec, profile, where)
        if tuned is not None:
            return replace(kernel, ir=tuned, schedule="database")
    if spec.schedule == "none":
        return replace(kernel, schedule="none")
    scheduled = default_schedule(kernel.ir, profile.tvm_target)
    return replace(kernel, ir=scheduled or kernel.ir, schedule="default" if scheduled else "unscheduled")


def _database_folder(config: Config, spec: ModelSpec) -> Path:
    assert spec.database is not None  # called for a model that names one
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
            parts.append("missing")  # _database_schedule says so, naming the file
    return digest(spec.database, *parts)


def _database_schedule(kernel: ModelKernel, config: Config, spec: ModelSpec, profile, where: str) -> str | None:
    """The kernel's tuned schedule from the MetaSchedule database (TVMScript), None without a record."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    folder = _database_folder(config, spec)
    files = folder / "database_workload.json", folder / "database_tuning_record.json"
    if not all(f.is_file() for f in files):
        raise InputError(
            f"{where}: database '{spec.database}': expected {files[0].name} and {files[1].name} in {folder}"
        )
    try:
        database = ms.database.JSONDatabase(str(files[0]), str(files[1]), allow_missing=False)
        mod = tvm.script.from_source(kernel.ir)
        target = tvm.target.Target({**profile.tvm_target, "num-cores": 1})
        sch = database.query_schedule(mod, target, workload_name="main")
    except Exception as exc:
        raise InputError(f"{where}: database '{spec.database}' cannot be read: {first_line(exc)}") from None
    return None if sch is None else sch.mod.script()


# --- what is guarded: every call not skipped ----------------------------------------------------------


def _skipped(kernel: ModelKernel, skip: set[str]) -> list[int]:
    """The indices of the kernel's calls that `skip` names (by a node of the call, or the kernel)."""
    if kernel.name in skip:
        return list(range(len(kernel.positions)))
    return [i for i, site in enumerate(kernel.nodes) if any(name in skip for name, _ in site)]


def _guarded(kernel: ModelKernel, skip: set[str]) -> ModelKernel | None:
    """The kernel with its skipped calls left out; None when every call is skipped."""
    gone = set(_skipped(kernel, skip))
    if not gone:
        return kernel
    keep = [i for i in range(len(kernel.positions)) if i not in gone]
    if not keep:
        return None
    return replace(
        kernel, calls=len(keep), positions=[kernel.positions[i] for i in keep], nodes=[kernel.nodes[i] for i in keep]
    )


def skipped_calls(config: Config, spec: ModelSpec, target: str) -> list[dict[str, Any]]:
    """The calls `skip` leaves out on `target`, per kernel: {"kernel", "calls", "nodes", "layer", "op"}
    (what the model view says of them: they are in no total)."""
    out = []
    for k in model_kernels(config, spec, target):
        gone = _skipped(k, set(spec.skip))
        if gone:
            out.append(
                {
                    "kernel": k.name,
                    "op": k.op,
                    "calls": len(gone),
                    "nodes": [k.nodes[i] for i in gone],
                    "layer": k.layer,
                }
            )
    return out


def _check_skip(config: Config, spec: ModelSpec, kernels: list[ModelKernel]) -> None:
    """Every `skip` entry names a node or kernel of the model: a misspelt one would guard what it meant to skip."""
    known = {k.name for k in kernels} | {name for k in kernels for site in k.nodes for name, _ in site}
    for entry in spec.skip:
        if entry not in known:
            near = difflib.get_close_matches(entry, sorted(known), n=3)
            hint = f" (did you mean {', '.join(repr(n) for n in near)}?)" if near else ""
            raise InputError(f"{model_where(config, spec)}: skip: '{entry}' names no node or kernel of the model{hint}")


def model_specs(config: Config, spec: ModelSpec, targets: list[str]) -> list[KernelSpec]:
    """The model's kernels as KernelSpecs, one per kernel, each limited to the targets that have it;
    calls that `skip` names are left out (a kernel whose every call is skipped is not guarded)."""
    by_name: dict[str, list[tuple[ModelKernel, str]]] = {}
    for target in targets:
        kernels = model_kernels(config, spec, target)
        _check_skip(config, spec, kernels)
        for each in kernels:
            kept = _guarded(each, set(spec.skip))
            if kept is not None:
                by_name.setdefault(kept.name, []).append((kept, target))
    out = []
    for name, found in sorted(by_name.items()):
        # One spec per distinct kernel: a target whose extraction differs (code, calls) gets its own spec.
        groups: dict[str, tuple[ModelKernel, list[str]]] = {}
        for k, target in found:
            key = json.dumps([k.ir, k.positions, k.params(spec.name)], sort_keys=True)
            groups.setdefault(key, (k, []))[1].append(target)
        for k, ts in groups.values():
            out.append(
                KernelSpec(
                    name=name,
                    entry=ENTRY,
                    family=None,
                    params=k.params(spec.name),
                    threshold=spec.kernel_threshold,
                    targets=tuple(ts),
                    outputs=k.outputs,
                    ir=k.ir,
                    model=spec.name,
                    positions=tuple(k.positions),
                    flops=None if k.flops is None else str(k.flops),
                )
            )
    return out


def origin(params: dict[str, Any]) -> str:
    """Where a model kernel comes from, for messages: ` (ONNX node 'fc', Gemm)`, or '' for another kernel."""
    nodes = params.get("nodes") if isinstance(params, dict) else None
    if not isinstance(nodes, list) or not nodes or not isinstance(nodes[0], list) or not nodes[0]:
        return ""
    try:
        name, op = str(nodes[0][0][0]), str(nodes[0][0][1])  # the first call's anchor
    except (TypeError, IndexError):
        return ""
    kind = "ONNX node" if params.get("graph") == "onnx" else "Relax binding"
    more = f" and {len(nodes) - 1} more call(s)" if len(nodes) > 1 else ""
    return f" ({kind} '{name}', {op}{more})"
