"""A [[model]]'s source, loaded: an ONNX file with its input shapes, or a Python "module:function"
returning a Relax IRModule. Each gives the model's content digest (what its extraction is cached
under) and a thunk that makes the IRModule and its graph nodes (kernels/models.py extracts the
kernels from it)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from perfguard.config import Config, ModelSpec
from perfguard.errors import InfraError, InputError
from perfguard.fingerprints import digest
from perfguard.kernels import model_graph
from perfguard.user_code.imports import load_callable


def model_where(config: Config, spec: ModelSpec) -> str:
    return f"{config.path}: model '{spec.name}'"


# --- (content digest, a thunk giving the Relax IRModule and its nodes) ---


def onnx_source(config: Config, spec: ModelSpec):
    where = model_where(config, spec)
    path = Path(spec.source) if os.path.isabs(spec.source) else config.root / spec.source
    try:
        file_sha = _file_digest(path)
    except FileNotFoundError:
        raise InputError(f"{where}: source '{spec.source}': no such file ({path})") from None
    except OSError as exc:
        raise InputError(f"{where}: source '{spec.source}': cannot read: {exc.strerror or exc}") from None
    inputs = {k: [list(shape), dtype] for k, (shape, dtype) in sorted(spec.inputs.items())}
    content = digest("onnx", file_sha, json.dumps(inputs))

    def load():
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{where}: source '{spec.source}': cannot read: {exc.strerror or exc}") from None
        try:
            import onnx
        except ImportError:
            raise InfraError(
                f"{where}: the 'onnx' package is not installed (pip install onnx; scripts/setup.sh installs it)"
            ) from None
        try:
            model = onnx.load_model_from_string(data)
        except Exception as exc:  # protobuf's DecodeError and friends: not an ONNX file
            raise InputError(f"{where}: {spec.source} does not parse as ONNX: {first_line(exc)}") from None
        shapes, dtypes = _onnx_inputs(model, spec, where)
        unsupported = _unsupported_onnx_ops(model)
        if unsupported:
            raise InputError(
                f"{where}: {spec.source}: unsupported ONNX operator(s) {', '.join(unsupported)} "
                f"(TVM's ONNX frontend has no converter)"
            )
        if model.ir_version < 3:
            raise InputError(f"{where}: {spec.source}: ONNX IR version {model.ir_version}: TVM reads 3 and later")
        return model_graph.import_onnx(model, shapes, dtypes, where, spec.source)

    return content, load


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    """sha256 of a model file, once per process while it is unchanged (ResNet-18 is 47 MB, read per target)."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _DIGESTS[key]


def _onnx_inputs(model, spec: ModelSpec, where: str) -> tuple[dict, dict]:
    """Every graph input's static shape and dtype: the file's, or the config's `inputs`."""
    import onnx

    initialisers = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initialisers]
    names = {i.name for i in graph_inputs}
    for name in spec.inputs:
        if name not in names:
            raise InputError(
                f"{where}: inputs.{name}: the model has no such input (its inputs: "
                f"{', '.join(sorted(names)) or 'none'})"
            )
    shapes, dtypes = {}, {}
    for info in graph_inputs:
        tensor = info.type.tensor_type
        given_shape, given_dtype = spec.inputs.get(info.name, (None, None))
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tensor.shape.dim]
        if given_shape is None and (not tensor.HasField("shape") or None in dims):
            raise InputError(
                f"{where}: input '{info.name}' has no static shape in {spec.source}: {_shape_hint(info.name, tensor)}"
            )
        shapes[info.name] = list(given_shape) if given_shape is not None else dims
        dtypes[info.name] = given_dtype or str(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    return shapes, dtypes


def _shape_hint(name: str, tensor) -> str:
    """What to write in `inputs`: the declared shape with each symbolic dimension (batch, ...) as 1."""
    if not tensor.HasField("shape") or not tensor.shape.dim:
        return f"give it, e.g. inputs = {{ {name} = [1, 3, 224, 224] }} (the file declares no shape at all)"
    dims, symbolic = [], []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(str(d.dim_value))
        else:
            dims.append("1")
            symbolic.append(d.dim_param or "?")
    declared = "x".join(
        str(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?")
        for d in tensor.shape.dim
    )
    return (
        f"it declares {declared}; give the size of {', '.join(repr(s) for s in symbolic)}, e.g. "
        f"inputs = {{ {name} = [{', '.join(dims)}] }}"
    )


def _unsupported_onnx_ops(model) -> list[str]:
    from tvm.relax.frontend.onnx import onnx_frontend

    table = onnx_frontend._get_convert_map()
    return sorted({node.op_type for node in model.graph.node if node.op_type not in table and node.op_type != "If"})


def python_source(config: Config, spec: ModelSpec):
    where = model_where(config, spec)
    func = load_callable(spec.source, config.root, where, "source")
    try:
        out = func(**spec.params)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}") from None
    except Exception as exc:
        raise InputError(f"{where}: source '{spec.source}' raised {type(exc).__name__}: {first_line(exc)}") from None
    mod = out[0] if isinstance(out, tuple) and out else out  # nn.Module.export_tvm gives (mod, params)
    import tvm

    if not isinstance(mod, tvm.IRModule):
        raise InputError(
            f"{where}: source '{spec.source}' returned {type(mod).__name__}, expected a Relax "
            f"IRModule (or export_tvm's (IRModule, params))"
        )
    return digest("relax", mod.script()), lambda: (mod, None)


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]
