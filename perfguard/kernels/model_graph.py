"""Where each kernel of a model comes from: the graph nodes fused into each of its calls.

TVM's passes keep no link from a fused PrimFunc back to the ONNX nodes (or Relax bindings) it
was made of, so perfguard makes one:

1. **Names on the source graph.** An ONNX file is imported with TVM's own importer, told to
   bind each node's result to a variable of its own (`NamingImporter`): every binding of the
   imported `main` then belongs to one ONNX node (a binding a converter emitted on its way
   belongs to the node whose result follows it). A node without a name is named after its
   weight (`conv1.weight` -> `conv1`) or its operator and index (`Relu_3`). A Relax source's
   bindings are named after the weight they read (nn's `conv1_weight` -> `conv1`), else after
   their variable.
2. **Calls traced through fusion** (`trace_calls`). FuseOps groups bindings into functions (and
   shares one function between calls of equal code), then FuseTIR makes each a PrimFunc. The
   bindings before fusion and the bindings inside each fused call are value-numbered the same
   way (operator, then the numbers of the arguments; weights by their contents), so each call
   of the fused program gets the bindings, hence the graph nodes, it computes.
3. **Layers.** Each call's anchor is its heaviest binding (TVM's operator pattern: a convolution
   or matmul before a bias add or ReLU); the anchor's operator, input and output shapes,
   window and stride describe the layer (`conv2d 1x256x8x8 -> 1x320x4x4 3x3/2`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from perfguard.errors import InputError

# The suffixes that make a weight's name a layer's: conv1.weight, conv1_weight, conv_w -> conv1, conv1, conv.
_WEIGHT_SUFFIX = re.compile(r"([._](weight|bias|w|b|kernel|gamma|beta|scale))$")
# Relax operators that only move a weight into shape: their result still names the weight's layer.
_PLUMBING_OPS = {"reshape", "permute_dims", "expand_dims", "squeeze", "astype", "broadcast_to"}


@dataclass(frozen=True)
class Node:
    """One node of the source graph: an ONNX node (name, op type), or a Relax binding (layer, operator)."""

    name: str
    op: str


@dataclass(frozen=True)
class Call:
    """One call of a fused kernel in the model, in call order: the PrimFunc it calls, the graph nodes it
    computes (in order), and its anchor's layer description."""

    func: str  # the fused PrimFunc's global name
    nodes: tuple[Node, ...]
    layer: dict[str, Any]


def layer_name(weight: str) -> str:
    return _WEIGHT_SUFFIX.sub("", weight) or weight


# --- ONNX -----------------------------------------------------------------------------------------


def name_onnx_nodes(model) -> list[str]:
    """A unique, readable name for every node of the graph: its own, else its weight's, else op type
    and count. Returned in node order (the model itself is left as it is)."""
    initialisers = {t.name for t in model.graph.initializer}
    seen: dict[str, int] = {}
    counts: dict[str, int] = {}
    names = []
    for node in model.graph.node:
        name = node.name
        if not name:
            weights = [i for i in node.input if i in initialisers]
            name = layer_name(weights[0]) if weights else f"{node.op_type}_{counts.get(node.op_type, 0)}"
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
        if name in seen:  # two nodes of one name: the second gets a suffix
            seen[name] += 1
            name = f"{name}#{seen[name]}"
        else:
            seen[name] = 0
        names.append(name)
    return names


def import_onnx(model, shapes: dict, dtypes: dict, where: str, source: str):
    """(Relax IRModule, {binding variable name: Node}) of the ONNX model, through TVM's importer.
    A node TVM's frontend refuses is an InputError naming the node and its operator."""
    from tvm import relax
    from tvm.relax.frontend.onnx import onnx_frontend

    names = name_onnx_nodes(model)

    class NamingImporter(onnx_frontend.ONNXGraphImporter):
        """TVM's importer, with each node's result bound to a variable perfguard knows the node of."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.nodes: dict[str, Node] = {}
            self.current: Node | None = None

        def _construct_nodes(self, graph):
            # TVM's loop, node by node, so that the node being converted is known (for names and errors)
            known = len(graph.node) == len(names)  # the model's graph (TVM converts an If's branches apart)
            for index, node in enumerate(graph.node):
                self.current = Node(names[index], node.op_type) if known else None
                try:
                    super()._construct_nodes(_OneNode(graph, node))
                except InputError:
                    raise
                except Exception as exc:
                    what = f"ONNX node '{self.current.name}' ({node.op_type})" if self.current else node.op_type
                    raise InputError(
                        f"{where}: {source}: {what}: TVM's ONNX frontend refused it: {_last(exc)}"
                    ) from None

        def _convert_operator(self, op_name, inputs, attrs, opset):
            out = super()._convert_operator(op_name, inputs, attrs, opset)
            if self.current is None:
                return out
            if isinstance(out, relax.Call) and isinstance(out.ty, relax.TensorType):
                out = self.bb.emit(out, name_hint="onnx")
            for var in out.fields if isinstance(out, relax.Tuple) else [out]:
                if isinstance(var, relax.Var):
                    self.nodes.setdefault(str(var.name), self.current)  # the first node to produce it
            return out

    importer = NamingImporter(shapes, dtypes, keep_params_in_input=False, sanitize=True)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    mod = importer.from_onnx(model.graph, opset)
    return mod, _attach_unnamed(mod["main"], importer.nodes)


class _OneNode:
    """A graph seen through one of its nodes: TVM's importer loops over `graph.node`; everything
    else (initialisers, inputs, outputs) is the graph's."""

    def __init__(self, graph, node):
        self._graph, self.node = graph, [node]

    def __getattr__(self, name):
        return getattr(self._graph, name)


def _attach_unnamed(func, named: dict[str, Node]) -> dict[str, Node]:
    """Bindings a converter emitted before the node's result belong to that node."""
    out, pending = {}, []
    for binding in _bindings(func):
        name = str(binding.var.name)
        node = named.get(name)
        if node is None:
            pending.append(name)
            continue
        out[name] = node
        for earlier in pending:
            out[earlier] = node
        pending = []
    return out


# --- Relax sources -----------------------------------------------------------------------------


def relax_nodes(func) -> dict[str, Node]:
    """{binding variable: Node} of a Relax function: a binding that reads a weight parameter (one
    after `num_input`), directly or through a reshape of it, is named after the weight's layer;
    any other after its variable. The operator is the Relax operator's short name."""
    from tvm import relax

    attrs = func.attrs or {}
    params = list(func.params)
    n = int(attrs["num_input"]) if "num_input" in attrs else len(params)
    layer_of: dict[str, str] = {str(p.name): layer_name(str(p.name)) for p in params[n:]}
    out = {}
    for binding in _bindings(func):
        name, value = str(binding.var.name), binding.value
        op = _op_name(value)
        args = [a for a in getattr(value, "args", []) if isinstance(a, relax.Var)]
        layers = [layer_of[str(a.name)] for a in args if str(a.name) in layer_of]
        if layers:
            if op in _PLUMBING_OPS:  # a weight reshaped: the layer's, for whoever reads it
                layer_of[name] = layers[0]
            out[name] = Node(layers[0], op)
        else:
            out[name] = Node(name, op)
    return out


def _op_name(value) -> str:
    import tvm
    from tvm import relax

    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return str(value.op.name).removeprefix("relax.").removeprefix("nn.")
    return type(value).__name__.lower()


def _bindings(func) -> list:
    return [b for block in func.body.blocks for b in block.bindings]


def _last(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


# --- tracing calls through fusion ------------------------------------------------------------------


class _Numbering:
    """Value numbers: equal computations (operator, numbered arguments) get equal numbers."""

    def __init__(self):
        self.table: dict[tuple, int] = {}
        self.constants: dict[int, int] = {}

    def number(self, key: tuple) -> int:
        return self.table.setdefault(key, len(self.table))

    def arg(self, expr, env: dict) -> int:
        import tvm
        import tvm_ffi
        from tvm import relax

        if isinstance(expr, relax.Var):
            handle = expr.__chandle__()
            return env[handle] if handle in env else self.number(("param", str(expr.name)))
        if isinstance(expr, relax.Tuple):
            return self.number(("tuple", *(self.arg(f, env) for f in expr.fields)))
        if isinstance(expr, tvm.ir.expr.Constant):
            handle = expr.__chandle__()
            if handle not in self.constants:
                self.constants[handle] = tvm_ffi.structural_hash(expr)
            return self.number(("const", self.constants[handle]))
        if isinstance(expr, relax.ShapeExpr):
            return self.number(("shape", tuple(str(v) for v in expr.values)))
        return self.number(("expr", type(expr).__name__, str(expr)[:200]))

    def value(self, expr, env: dict) -> int:
        import tvm
        from tvm import relax

        if isinstance(expr, relax.Call):
            op = expr.op
            if isinstance(op, tvm.ir.Op) and op.name == "relax.call_tir":
                return self.number(("tir", expr.args[0].name_hint, self.arg(expr.args[1], env)))
            name = str(op.name) if isinstance(op, tvm.ir.Op) else getattr(op, "name_hint", str(op))
            return self.number(("call", name, *(self.arg(a, env) for a in expr.args)))
        if isinstance(expr, relax.TupleGetItem):
            return self.number(("item", self.arg(expr.tuple_value, env), int(expr.index)))
        return self.arg(expr, env)


def trace_calls(source, legalised, fused, final, nodes: dict[str, Node], entry: str = "main") -> list[Call]:
    """Every kernel call of `final` (after FuseTIR), in call order, with the graph nodes it computes
    (its anchor's node first).

    `source`: the module before legalisation (binding names -> `nodes`, and the operators'
    attributes for layer descriptions); `legalised`: after LegalizeOps and FoldConstant (the
    same binding names); `fused`: after FuseOps; `final`: after FuseTIR; `entry`: the function."""
    import tvm
    from tvm import relax

    numbering = _Numbering()
    computed: dict[int, str] = {}  # value number -> the legalised binding that computes it
    env: dict = {}
    pattern: dict[str, int] = {}
    funcs = {gv.name_hint: f for gv, f in legalised.functions.items()}
    for binding in _bindings(legalised[entry]):
        number = numbering.value(binding.value, env)
        env[binding.var.__chandle__()] = number
        computed.setdefault(number, str(binding.var.name))
        callee = _callee(binding.value)
        if callee is not None and callee in funcs:
            func = funcs[callee]
            pattern[str(binding.var.name)] = (
                int(func.attrs["op_pattern"]) if func.attrs and "op_pattern" in func.attrs else 0
            )
    source_bindings = {str(b.var.name): b for b in _bindings(source[entry])}

    per_var: dict[str, list[str]] = {}  # fused main's binding -> the legalised bindings it computes
    in_order: list[list[str]] = []  # the same, for each binding that calls something, in order
    env = {}
    for binding in _bindings(fused[entry]):
        value = binding.value
        callee = value.op if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar) else None
        if callee is not None and isinstance(fused[callee], relax.Function):
            func = fused[callee]
            inner = {p.__chandle__(): numbering.arg(a, env) for p, a in zip(func.params, value.args)}
            members = []
            for ib in _bindings(func):
                number = numbering.value(ib.value, inner)
                inner[ib.var.__chandle__()] = number
                if number in computed:
                    members.append(computed[number])
            env[binding.var.__chandle__()] = numbering.arg(func.body.body, inner)
        else:
            number = env[binding.var.__chandle__()] = numbering.value(value, env)
            members = [computed[number]] if number in computed else []
        per_var[str(binding.var.name)] = members
        if isinstance(value, relax.Call):
            in_order.append(members)

    # FuseTIR turns each call of the fused program into one call, in order (a reshape into R.reshape);
    # it may rename the variables (an output's alias `gv = lv1` becomes the call's own name).
    final_calls = [b for b in _bindings(final[entry]) if isinstance(b.value, relax.Call)]
    by_order = len(final_calls) == len(in_order)
    calls = []
    for i, binding in enumerate(final_calls):
        value = binding.value
        if not (isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir"):
            continue
        members = in_order[i] if by_order else per_var.get(str(binding.var.name), [])
        graph_nodes: list[Node] = []
        for member in members:
            node = nodes.get(member)
            if node is not None and all(n.name != node.name for n in graph_nodes):  # a layer's bias add: its layer
                graph_nodes.append(node)
        anchor = max(members, key=lambda m: pattern.get(m, 0), default=None)  # the first of the heaviest
        first = next((n for n in graph_nodes if anchor in nodes and n.name == nodes[anchor].name), None)
        if first is not None and anchor is not None:
            graph_nodes.remove(first)
            graph_nodes.insert(0, Node(first.name, nodes[anchor].op))
        layer = describe(source_bindings.get(anchor)) if anchor is not None else {}
        calls.append(Call(value.args[0].name_hint, tuple(graph_nodes), layer))
    return calls


def _callee(value) -> str | None:
    import tvm
    from tvm import relax

    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
        return value.args[0].name_hint
    return None


# --- layer descriptions ---------------------------------------------------------------------------


def _shape(expr) -> list[int] | None:
    ty = getattr(expr, "ty", None)
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return None
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        return None


def _ints(values) -> list[int]:
    return [int(v) for v in values] if values is not None else []


def describe(binding) -> dict[str, Any]:
    """The layer a binding computes: {"op", "in", "out"} and, by operator, "weight", "window",
    "stride", "groups" (plain JSON: it is stored with the kernel's baseline)."""
    if binding is None:
        return {}
    from tvm import relax

    value = binding.value
    op = _op_name(value)
    tensors = [a for a in getattr(value, "args", []) if isinstance(getattr(a, "ty", None), relax.TensorType)]
    layer: dict[str, Any] = {"op": op, "in": _shape(tensors[0]) if tensors else None, "out": _shape(binding.var)}
    attrs = getattr(value, "attrs", None)
    if op.startswith("conv") and len(tensors) > 1:
        weight = _shape(tensors[1])
        layer.update(
            weight=weight,
            window=weight[2:] if weight else None,
            stride=_ints(getattr(attrs, "strides", None)),
            groups=int(getattr(attrs, "groups", 1)),
        )
    elif op in ("matmul", "dense", "linear") and len(tensors) > 1:
        layer["weight"] = _shape(tensors[1])
    elif "pool" in op and attrs is not None and hasattr(attrs, "pool_size"):
        layer.update(window=_ints(attrs.pool_size), stride=_ints(getattr(attrs, "strides", None)))
    return layer
