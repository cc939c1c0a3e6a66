"""Whole-model kernels with a schedule edit, for the verdict benchmark (benchmarks/verdict_pairs.py).

`model_kernel(model=..., op=..., vector=..., unroll=..., **model params)` builds one of the example
Relax models (examples/relax_models.py), extracts its fused kernels as `perfguard check` does for a
[[model]] (perfguard.kernels.models.extract_model: TVM's CPU legalisation, fusion and task
extraction, for the x86_64 target), takes the kernel of operator `op`, and applies the edit:

- vector: each block's innermost data-parallel loop is moved inside its reduction loops (if any),
  split by `vector` and vectorised (1: the kernel as TVM legalised it: unscheduled loops);
- unroll: TVM's auto-unroll step on each block's outermost loop (0: none).

So a pair is the same fused kernel, as a model hands it to perfguard, before and after the kind of
schedule a tuning record or a hand-written schedule would give it.
"""

from __future__ import annotations

from perfguard.errors import InputError

TARGET = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "x86-64-v3"}  # the x86_64 profile's


def _kernel_ir(model: str, op: str, which: int, params: dict) -> str:
    from examples import relax_models
    from perfguard.kernels.models import extract_model

    mod = getattr(relax_models, model)(**params)
    mod = mod[0] if isinstance(mod, tuple) else mod
    kernels = [k for k in extract_model(mod, TARGET, model, f"benchmarks.model_kernels {model}") if k.op == op]
    if which >= len(kernels):
        raise InputError(f"model {model} {params}: {len(kernels)} kernels of operator '{op}', no kernel {which}")
    return kernels[which].ir


def _schedule(mod, vector: int, unroll: int):
    import tvm
    import tvm.s_tir

    sch = tvm.s_tir.Schedule(mod)
    names = [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))]
    for name in names:
        block = sch.get_sblock(name)
        loops = sch.get_loops(block)
        kinds = [int(v.iter_type) for v in sch.get(block).iter_vars]
        if vector > 1 and len(kinds) == len(loops):
            spatial = [i for i, kind in enumerate(kinds) if kind == 0]  # IterVar.DataPar
            if spatial:
                last = spatial[-1]
                extent = sch.get(loops[last]).extent
                if int(extent) % vector == 0:
                    order = [loops[i] for i in range(len(loops)) if i != last] + [loops[last]]
                    if last != len(loops) - 1:
                        sch.reorder(*order)
                    _, lanes = sch.split(loops[last], [None, vector])
                    sch.vectorize(lanes)
        if unroll > 1:
            outer = sch.get_loops(sch.get_sblock(name))[0]
            sch.annotate(outer, "pragma_auto_unroll_max_step", unroll)
            sch.annotate(outer, "pragma_unroll_explicit", 1)
    return sch.mod


def model_kernel(
    model: str = "mlp", op: str = "matmul_add_relu", which: int = 0, vector: int = 1, unroll: int = 0, **params
):
    """`which`: among several kernels of the operator (conv_block's two 3x3 convolutions), the
    which-th in name order."""
    import tvm

    mod = tvm.script.from_source(_kernel_ir(model, op, which, params))
    return _schedule(mod, vector, unroll) if vector > 1 or unroll > 1 else mod
