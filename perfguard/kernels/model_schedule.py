"""The schedule a model kernel is guarded with when no tuning database has a record for it.

TVM's CPU pipeline (`tvm.compile` without tuning) builds a fused kernel as the loops LegalizeOps
wrote: no tiling, no vectorisation (a ResNet-18-like network ran at about 1.5 GFLOP/s with no
vector FP instruction). Nobody ships that, and a regression in what does ship cannot be seen
in it. So, without a database record, perfguard schedules each kernel with **TVM's own CPU
schedule rules**, MetaSchedule's `llvm` design space (inline what is injective, multi-level
tiling `SSRSRS`, vectorise and unroll the innermost loops), with every sampled decision fixed
by a rule instead of searched:

- the innermost spatial loops of each tiled block are split to fill two vectors of the width
  TVM's LLVM back end reports for the target (`tvm.target.codegen.llvm_get_vector_width`, over the
  output's bits: it says 512 bits for every x86_64 profile, 128 for aarch64 and riscv64; LLVM
  splits a wider vector into the ISA's registers): tiles of 32 float32 elements on x86_64, 8 on
  aarch64 and riscv64, the last loop first, the one before it only when the last is covered whole;
- the first other spatial loop with more than one iteration gets a register tile of 4;
- reductions run whole inside the tile (one level), loops outside it carry the rest;
- unrolling up to 16 steps; a producer (padding) is computed in full before its consumer.

No parallel loops (the simulator runs one core; the kernel's per-core code is what is judged),
no rfactor (a multi-core device's) and no custom rules (registered for GPUs). The result is deterministic: the same kernel and target
give the same code. A kernel the rules cannot schedule keeps its unscheduled loops, and its
`schedule` says so. benchmarks/RESULTS.md has the effect on a ResNet-18-like model.
"""

from __future__ import annotations

import sys
import types

SCHEDULE_RECIPE = 1  # part of the extraction key: bump when the rules or the decisions change
VECTORS = 2  # vectors per innermost tile
REGISTER_TILE = 4
UNROLL_STEPS = 16


def _tune_context(ms, **kwargs):
    """A MetaSchedule TuneContext without its import of every tensor intrinsic: TuneContext imports
    tvm.s_tir.tensor_intrin (hundreds of TVMScript functions, CUDA's among them: 28 s on a loaded
    machine), which the CPU rules used here never look up. A real import before or after is untouched."""
    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return ms.TuneContext(**kwargs)
    stand_in = types.ModuleType(name)
    sys.modules[name] = stand_in
    try:
        return ms.TuneContext(**kwargs)
    finally:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]


def _rules(ms) -> list:
    """MetaSchedule's default llvm rules, without rfactor or custom rules and with parallel loops off."""
    rules = []
    for rule in ms.ScheduleRule.create("llvm"):
        kind = type(rule).__name__
        if kind in ("AddRFactor", "ApplyCustomRule"):  # a multi-core device; rules registered for a GPU
            continue
        if kind == "ParallelizeVectorizeUnroll":
            rule = ms.schedule_rule.ParallelizeVectorizeUnroll(
                max_jobs_per_core=-1, max_vectorize_extent=64, unroll_max_steps=[0, 16, 64, 512], unroll_explicit=True
            )
        rules.append(rule)
    return rules


def _largest_divisor(extent: int, most: int) -> int:
    return max(d for d in range(1, max(1, min(extent, most)) + 1) if extent % d == 0)


def _tile_runs(insts) -> list[list[int]]:
    """The indices of the SamplePerfectTile instructions, in runs (one run per tiled block)."""
    runs, run = [], []
    for i, inst in enumerate(insts):
        kind = inst.kind.name
        if kind == "SamplePerfectTile":
            run.append(i)
        elif kind != "Split" and run:
            runs.append(run)
            run = []
    return runs + ([run] if run else [])


def _tiles(insts, extents: dict[int, int], lanes: int) -> dict[int, list[int]]:
    """Every SamplePerfectTile's factors by the rules in the module docstring."""
    decisions = {}
    for run in _tile_runs(insts):
        spatial = [i for i in run if int(insts[i].attrs[0]) == 4]
        vector, budget = {}, lanes * VECTORS
        for i in reversed(spatial):
            inner = _largest_divisor(extents[i], budget)
            vector[i] = inner
            budget //= inner
            if inner != extents[i] or budget <= 1:
                break
        tiled = False
        for i in spatial:
            extent, inner, register = extents[i], vector.get(i, 1), 1
            if not tiled and i not in vector and extent > 1:
                register, tiled = _largest_divisor(extent, REGISTER_TILE), True
            decisions[i] = [extent // (inner * register), 1, register, inner]
        for i in run:
            if i not in decisions:  # reductions (and any other split): whole in the innermost level
                n = int(insts[i].attrs[0])
                decisions[i] = [1] * (n - 1) + [extents[i]]
    return decisions


def default_schedule(ir: str, tvm_target: dict) -> str | None:
    """The kernel (TVMScript of an IRModule with "main") scheduled by the default rules, as
    TVMScript; None when the rules do not apply to it (it keeps its loops)."""
    import tvm
    from tvm import s_tir
    from tvm.s_tir import meta_schedule as ms

    mod = tvm.script.from_source(ir)
    target = tvm.target.Target({**tvm_target, "num-cores": 1})
    outputs = [p for p in mod["main"].params][-1:]
    bits = max(8, tvm.DataType(str(outputs[0].dtype)).bits) if outputs else 32
    lanes = max(1, int(tvm.target.codegen.llvm_get_vector_width(target)) // bits)
    try:
        context = _tune_context(
            ms,
            mod=mod,
            target=target,
            task_name="perfguard-default",
            rand_state=1,
            space_generator=ms.space_generator.PostOrderApply(
                sch_rules=_rules(ms), postprocs="llvm", mutator_probs="llvm"
            ),
        )
        spaces = context.space_generator.generate_design_space(mod)
        if not spaces:
            return None
        trace = spaces[0].trace
        insts = list(trace.insts)
        position = {inst.__chandle__(): i for i, inst in enumerate(insts)}
        extents: dict[int, int] = {}
        probe = s_tir.Schedule(mod)

        def measure(inst, inputs, attrs, decision):
            if inst.kind.name == "SamplePerfectTile":
                extents[position[inst.__chandle__()]] = int(probe.get(inputs[0]).extent)
            return decision

        trace.apply_to_schedule(probe, remove_postproc=True, decision_provider=measure)
        tiles = _tiles(insts, extents, lanes)

        def decide(inst, inputs, attrs, decision):
            kind = inst.kind.name
            if kind == "SamplePerfectTile":
                return tiles[position[inst.__chandle__()]]
            if kind == "SampleCategorical":
                candidates = [int(c) for c in attrs[0]]
                return candidates.index(UNROLL_STEPS) if UNROLL_STEPS in candidates else 0
            if kind == "SampleComputeLocation":
                return -1
            return decision

        sch = s_tir.Schedule(mod)
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=decide)
        for postproc in context.space_generator.postprocs:
            if not postproc.apply(sch):
                return None
        return sch.mod.script()
    except Exception:  # TVM raises many types; the kernel keeps its loops, and says so
        return None
