"""Does the top "where" entry name the edited loop nest? Real schedule edits, every ISA.

Each edit changes one knob of a kernel: a built-in family's (perfguard/kernels) or a user
kernel's (examples/kernels: an attention head with softmax, a layer norm, an int8 matmul; the
cookbook's recipes, examples/cookbook: an arg-max via rfactor, a stencil, a gather, a quantized
matmul; and a new user's, tests/captured/kernels.py: an embedding gather, a 2-D tiled stencil). Both
versions are built and simulated with perfguard (QEMU) on each target, and the change is
attributed exactly as `perfguard check` does (judge.attribution with the pipeline model). The
place the where line names (report.where.places(...)[0]) is then judged against facts the
attribution did not use:

- the edited nests: the loop nests (named by the buffers they write) whose scheduled TIR (the
  module the kernel's entry returns, each outermost loop printed as TVMScript) differs between
  the two versions, or that only one version has;
- code that only moved: a function outside the kernel whose executed blocks (sizes, instruction
  counts, executions) are the same on both sides ran the same code; naming it is naming moved
  code.

The top entry is the first code place of the where line (after the cache-miss stalls when they
lead it: the simulator counts misses per run, so no loop can be named for them; such cases are
marked). Outcomes: "edited nest" (a loop of an edited nest, or its code no loop was named for),
"other nest", "no nest" (kernel code placed in no nest; "loop not decided" among several counted
apart as "ambiguous"), "outside the kernel" (a C library or harness function whose code changed
or ran another number of times), "moved code" (the failure this benchmark exists to catch) and
"no change".

    python benchmarks/attribution_edits.py [--targets x86_64,aarch64,riscv64] [--edits 1,5] [-j 2]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.compile.loops import scheduled_nests
from perfguard.config import KernelSpec
from perfguard.document.result import EITHER_NEST
from perfguard.executors import LocalExecutor
from perfguard.job.run import Job, run_job
from perfguard.judge.attribution import attribute
from perfguard.predict.pipeline import PipelineModel
from perfguard.report import where
from perfguard.targets import BUILTIN

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the user kernels (examples.kernels), as a project's own modules


@dataclass(frozen=True)
class Kernel:
    name: str
    entry: str
    family: str | None
    params: dict
    reference: str | None = None
    flops: str | None = None
    outputs: int | None = None
    inputs: dict | None = None

    def spec(self, **edit) -> KernelSpec:
        suffix = "_".join(f"{k}-{v}" for k, v in sorted(edit.items()))
        return KernelSpec(
            f"{self.name}{'_' + suffix if suffix else ''}",
            self.entry,
            self.family,
            {**self.params, **edit},
            reference=self.reference,
            flops=self.flops,
            outputs=self.outputs,
            inputs=self.inputs,
        )


@dataclass(frozen=True)
class Edit:
    kernel: Kernel
    change: dict = field(default_factory=dict)
    what: str = ""
    moved: frozenset = frozenset()  # a loop-order edit: the loops it moved (either build's variables)


GEMM = Kernel(
    "gemm",
    "perfguard.kernels.gemm:gemm",
    "gemm",
    dict(M=128, N=128, K=128, tile_m=32, tile_n=32, tile_k=4, vector=8, unroll=4),
)
GEMV = Kernel("gemv", "perfguard.kernels.gemv:gemv", "gemv", dict(M=512, K=512, tile_m=8, tile_k=256, vector=8))
CONV = Kernel(
    "conv2d",
    "perfguard.kernels.conv2d:conv2d",
    "conv2d",
    dict(N=1, C=16, H=14, W=14, F=32, R=3, S=3, stride=1, padding=1, tile_f=8, tile_p=2, tile_q=14, vector=1),
)
DEPTHWISE = Kernel(
    "depthwise",
    "perfguard.kernels.depthwise:depthwise_conv2d",
    "depthwise_conv2d",
    dict(N=1, C=16, H=28, W=28, R=3, S=3, stride=1, padding=1, tile_c=4, tile_p=4, tile_q=28, vector=4),
)
DENSE = Kernel(
    "dense_relu",
    "perfguard.kernels.dense_relu:dense_relu",
    "dense_relu",
    dict(B=16, I=256, O=128, tile_b=4, tile_o=8, tile_i=256, vector=8),
)
QGEMM = Kernel("qgemm", "perfguard.kernels.qgemm:qgemm", "qgemm", dict(M=64, N=64, K=128, tile_m=4, tile_n=16))
QCONV = Kernel(
    "qconv2d",
    "perfguard.kernels.qconv2d:qconv2d",
    "qconv2d",
    dict(
        H=14,
        W=14,
        C=32,
        F=32,
        R=3,
        S=3,
        stride=1,
        padding=1,
        tile_f=16,
        tile_q=7,
        requantize=True,
        rq_multiplier=1518500250,
        rq_shift=33,
    ),
)
ATTENTION = Kernel(
    "attention",
    "examples.kernels.attention:attention",
    None,
    dict(S=64, D=32, vector=8),
    "examples.kernels.attention:reference",
    "examples.kernels.attention:flops",
)
LAYER_NORM = Kernel(
    "layer_norm",
    "examples.kernels.layer_norm:layer_norm",
    None,
    dict(R=32, N=256, vector=8),
    "examples.kernels.layer_norm:reference",
    "examples.kernels.layer_norm:flops",
)
INT8 = Kernel(
    "int8_matmul",
    "examples.kernels.int8_matmul:int8_matmul",
    None,
    dict(M=32, N=64, K=128, vector=16),
    "examples.kernels.int8_matmul:reference",
    "examples.kernels.int8_matmul:flops",
)
# The cookbook's recipes (examples/cookbook, docs/kernels.md; issue 42)
COOKBOOK = "examples.cookbook.recipes"
GATHER = Kernel(
    "gather",
    f"{COOKBOOK}.gather:gather",
    None,
    dict(V=512, D=32, N=64, vector=8),
    f"{COOKBOOK}.gather:gather_ref",
    "0",
    inputs={"idx": {"low": 0, "high": 512, "seed": None}},
)
ARGMAX = Kernel(
    "argmax",
    f"{COOKBOOK}.argmax:argmax",
    None,
    dict(R=16, N=256, split=8, order="ik"),
    f"{COOKBOOK}.argmax:argmax_ref",
    "R * N",
    outputs=2,
)
STENCIL = Kernel(
    "stencil",
    f"{COOKBOOK}.stencil:stencil",
    None,
    dict(H=32, W=64, tile=8, vector=8),
    f"{COOKBOOK}.stencil:stencil_ref",
    "5 * H * W",
)
QMATMUL = Kernel(
    "qmatmul",
    f"{COOKBOOK}.qmatmul:qmatmul",
    None,
    dict(M=16, N=32, K=64, vector=16),
    f"{COOKBOOK}.qmatmul:qmatmul_ref",
    "2 * M * N * K",
    inputs={"A": {"low": 0, "high": 256, "seed": None}},
)
# A new user's kernels (issue 42's held-to criterion, tests/captured/kernels.py): an embedding
# gather with int32 and int64 indices, and a stencil tiled in rows and columns
USER = "tests.captured.kernels"
EMBED = {
    dtype: Kernel(
        f"embed_{dtype}",
        f"{USER}:embed",
        None,
        dict(V=1024, D=64, N=128, idx_dtype=dtype, vector=8, order="ij"),
        f"{USER}:embed_ref",
        "0",
        inputs={"idx": {"low": 0, "high": 1024, "seed": None}},
    )
    for dtype in ("int32", "int64")
}
STENCIL2D = Kernel(
    "stencil2d",
    f"{USER}:stencil2d",
    None,
    dict(H=64, W=64, ti=8, tj=16, vector=8),
    f"{USER}:stencil2d_ref",
    "6 * H * W",
)

EDITS = [
    Edit(GEMM, {"order": "kij"}, "tile loop order ijk -> kij", frozenset({"i_0", "j_0", "k_0"})),
    Edit(GEMM, {"inner": "kij"}, "inner loop order ikj -> kij", frozenset({"i_1", "k_1"})),
    Edit(GEMM, {"vector": 1}, "vectorisation off"),
    Edit(GEMM, {"tile_k": 32}, "tile_k 4 -> 32"),
    Edit(GEMM, {"unroll": 0}, "TVM unrolling off"),
    Edit(GEMV, {"tile_k": 32}, "tile_k 256 -> 32"),
    Edit(GEMV, {"order": "ki"}, "tile loop order ik -> ki", frozenset({"i_0", "k_0"})),
    Edit(CONV, {"tile_q": 7}, "tile_q 14 -> 7"),
    Edit(CONV, {"order": "FcPQrsfpq"}, "loop order: channels outside the output tiles", frozenset({"c", "y_0", "x_0"})),
    Edit(DEPTHWISE, {"vector": 1}, "vectorisation off"),
    Edit(DEPTHWISE, {"order": "rs_outer"}, "window loops outside the tile", frozenset({"r", "s", "c_1", "y_1"})),
    Edit(DENSE, {"order": "ob"}, "tile loop order bo -> ob", frozenset({"b_0", "o_0"})),
    Edit(DENSE, {"tile_i": 64}, "tile_i 256 -> 64"),
    Edit(QGEMM, {"tile_n": 4}, "tile_n 16 -> 4"),
    Edit(QCONV, {"tile_f": 8}, "tile_f 16 -> 8"),
    Edit(
        ATTENTION, {"qk_order": "ijd"}, "scores: reduction innermost (vectorisation lost)", frozenset({"j", "d", "j_0"})
    ),
    Edit(ATTENTION, {"pv_order": "ict"}, "output product: reduction innermost", frozenset({"c", "t", "c_0"})),
    Edit(ATTENTION, {"inline_p": True}, "probabilities computed inside the output product"),
    Edit(ATTENTION, {"vector": 4}, "both products 8 -> 4 lanes"),
    Edit(LAYER_NORM, {"vector": 1}, "normalising loop not vectorised"),
    Edit(LAYER_NORM, {"order": "nr"}, "normalising loop order rows inside", frozenset({"r", "n", "n_0"})),
    Edit(LAYER_NORM, {"lanes": 8}, "statistics summed in 8 lanes"),
    Edit(INT8, {"order": "ijk"}, "reduction innermost", frozenset({"j", "k", "j_0"})),
    Edit(INT8, {"vector": 4}, "16 -> 4 lanes"),
    Edit(INT8, {"tile_k": 32}, "reduction split into chunks of 32"),
    Edit(ARGMAX, {"order": "ki"}, "partial results' loops turned around", frozenset({"k_0", "k_1"})),
    Edit(ARGMAX, {"split": 4}, "row split in 4 parts, not 8"),
    Edit(STENCIL, {"vector": 1}, "vectorisation off"),
    Edit(STENCIL, {"tile": 4}, "row tile 8 -> 4"),
    Edit(GATHER, {"vector": 1}, "vectorisation off (LLVM re-vectorises: same code)"),
    Edit(QMATMUL, {"vector": 4}, "16 -> 4 lanes"),
    *(
        Edit(EMBED[dtype], {"order": "ji"}, "column chunks moved outside the rows", frozenset({"i", "j_0"}))
        for dtype in ("int32", "int64")
    ),
    Edit(STENCIL2D, {"vector": 1}, "column lanes not vectorised"),
]


def nests(spec: KernelSpec) -> dict[str, str]:
    """Each nest of the scheduled module `spec`'s entry returns, named by the buffers it writes
    (compile.loops.scheduled_nests, as attribution names nests): its TVMScript text."""
    import importlib

    import tvm
    import tvm.s_tir

    module, function = spec.entry.split(":")
    mod = getattr(importlib.import_module(module), function)(**spec.params)
    texts = []
    for _, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        body = func.body.block.body if isinstance(func.body, tvm.s_tir.SBlockRealize) else func.body
        texts += [
            stmt.script()
            for stmt in (list(body.seq) if isinstance(body, tvm.tirx.SeqStmt) else [body])
            if isinstance(stmt, tvm.tirx.For)
        ]
    named = scheduled_nests(mod)
    assert len(named) == len(texts), spec.name
    out: dict[str, str] = {}
    for (_, writes), text in zip(named, texts):
        name = ", ".join(writes)
        out[name] = out.get(name, "") + text
    return out


def same_code(stats_a, stats_b, symbol: str) -> bool:
    """Whether a function ran the same blocks (size, instructions, executions) on both sides."""

    def shape(stats):
        return sorted((b.size, b.insns, b.count) for b in stats.blocks.blocks if b.symbol == symbol)

    return shape(stats_a) == shape(stats_b)


def by_address(model: PipelineModel, base, edited) -> str:
    """What pairing blocks by start address (perfguard before content pairing) put first: the block
    whose cycles moved most the way the whole change did, and whether it is code that only moved
    (the same normalised code run as often at another address on the other side)."""
    from perfguard.judge.code_identity import normalised

    isa = model.profile.triple.split("-")[0]
    sides = [model.block_costs(base.stats), model.block_costs(edited.stats)]
    by_addr: dict[int, list[float]] = {}
    for side, costs in enumerate(sides):
        for c in costs:
            by_addr.setdefault(c.block.addr, [0.0, 0.0])[side] += c.cycles
    change = sum(b - a for a, b in by_addr.values())
    sign = 1 if change >= 0 else -1
    addr = max(by_addr, key=lambda k: (sign * (by_addr[k][1] - by_addr[k][0]), -k))
    side = 1 if by_addr[addr][1] else 0
    block = next(c for c in sides[side] if c.block.addr == addr)
    form = (block.block.symbol, normalised(block.timing.asm, isa), block.block.count)
    twin = any(
        (c.block.symbol, normalised(c.timing.asm, isa), c.block.count) == form and c.block.addr != addr
        for c in sides[1 - side]
    )
    return f"{'moved code' if twin else 'changed code'} ({block.block.symbol or '?'})"


def judge(edit: Edit, base, edited, cache_dir: Path, changed: set[str]) -> dict:
    profile = BUILTIN[base.target]
    model = PipelineModel(profile, cache_dir)
    a = attribute(model, base.stats, edited.stats, (base.loops, edited.loops)).attribution
    functions = set((edited.loops or {}).get("functions", []))
    found = where.places(a)
    row = {
        "edit": edit,
        "target": base.target,
        "delta_pct": 100.0 * a.change_cycles / a.baseline_cycles,
        "edited": sorted(changed),
        "line": where.where_line(a),
        "outcome": "no change",
        "ambiguous_places": 0,
        "by_address": by_address(model, base, edited),
    }
    row["ambiguous_places"] = sum(
        1 for p in found if p.node.name == "loop not decided" and abs(a.share(p.node.delta_cycles) or 0) >= 10
    )
    if not found:
        return row
    top = found[0]
    function = top.of("function").name
    nest = top.of("nest")
    if function not in functions and function != "(no symbol)":
        row["outcome"] = "moved code" if same_code(base.stats, edited.stats, function) else "outside the kernel"
    elif nest is not None:
        # a loop of nests of one shape, not told apart: each of them must be an edited nest
        either = nest.name.split(EITHER_NEST)
        row["outcome"] = "edited nest" if all(n in changed for n in either) else "other nest"
    else:
        row["outcome"] = "ambiguous" if top.node.name == "loop not decided" else "no nest"
    row["top"] = where.name(top) + (" (after cache-miss stalls)" if row["line"].startswith("cache-miss") else "")
    if edit.moved:
        row["loop"] = "moved loop" if top.node.kind == "loop" and top.node.name in edit.moved else "other loop"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="x86_64,aarch64,riscv64")
    ap.add_argument("--edits", default=None, help="1-based numbers of the edits to run (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    cache_dir = Path(os.environ.get("PERFGUARD_CACHE_DIR") or Path.home() / ".cache" / "perfguard")
    chosen = [EDITS[int(n) - 1] for n in args.edits.split(",")] if args.edits else EDITS
    targets = args.targets.split(",")
    specs: dict[str, KernelSpec] = {}
    cases = []
    for edit in chosen:
        base, changed = edit.kernel.spec(), edit.kernel.spec(**edit.change)
        specs.setdefault(base.name, base)
        specs.setdefault(changed.name, changed)
        cases += [(edit, base.name, changed.name, t) for t in targets]
    jobs = {
        (name, t): Job(spec, BUILTIN[t], ROOT, cache_dir, "qemu", 1800, 1, 1)
        for name, spec in specs.items()
        for t in targets
    }
    keys = list(jobs)
    results = dict(zip(keys, LocalExecutor(args.jobs).map(run_job, [jobs[k] for k in keys])))
    rows = []
    for edit, base, changed, t in cases:
        a, b = results[(base, t)], results[(changed, t)]
        if not a.ok or not b.ok:
            rows.append(
                {
                    "edit": edit,
                    "target": t,
                    "outcome": "error",
                    "line": (a.error or b.error or "")[:200],
                    "edited": [],
                    "delta_pct": None,
                    "ambiguous_places": 0,
                }
            )
            continue
        before, after = nests(edit.kernel.spec()), nests(edit.kernel.spec(**edit.change))
        changed = {name for name in set(before) | set(after) if before.get(name) != after.get(name)}
        rows.append(judge(edit, a, b, cache_dir, changed))
        rows[-1]["nests"] = len(set(before) | set(after))
    print(
        "| # | kernel | edit | target | delta (pipeline) | edited nest(s) | top where entry | outcome | "
        "by address (before) |"
    )
    print("|--:|---|---|---|--:|---|---|---|---|")
    for r in rows:
        n = EDITS.index(r["edit"]) + 1
        delta = "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f} %"
        print(
            f"| {n} | {r['edit'].kernel.name} | {r['edit'].what} | {r['target']} | {delta} | "
            f"{', '.join(r['edited']) or '-'} | {r.get('top', r['line'])} | {r['outcome']}"
            f"{'; ' + r['loop'] if 'loop' in r else ''} | "
            f"{r.get('by_address', '-')} |"
        )
    tally = Counter(r["outcome"] for r in rows)
    judged = [r for r in rows if r["outcome"] not in ("error", "no change")]
    named = tally["edited nest"]
    print(
        f"\n{len(rows)} cases ({len(chosen)} edits x {len(targets)} targets): edited nest named in {named} of "
        f"{len(judged)} with a change ({100.0 * named / max(1, len(judged)):.0f} %); "
        + ", ".join(f"{k} {v}" for k, v in sorted(tally.items()) if k != "edited nest")
    )
    several = [r for r in judged if r.get("nests", 1) > 1]
    print(
        f"of them, kernels with more than one nest: edited nest named in "
        f"{sum(r['outcome'] == 'edited nest' for r in several)} of {len(several)}"
    )
    ordered = [r for r in judged if "loop" in r]
    print(
        f"loop-order edits: a loop the edit moved named first in {sum(r['loop'] == 'moved loop' for r in ordered)} "
        f"of {len(ordered)}"
    )
    before = sum(1 for r in rows if r.get("by_address", "").startswith("moved code"))
    print(f"pairing by address (before) put moved code first in {before} of {len(judged)}")
    print(
        f"moved code named: {tally['moved code']}; top entry ambiguous: {tally['ambiguous']}; places of 10 % or "
        f"more of a change left ambiguous: {sum(r['ambiguous_places'] for r in rows)}"
    )
    print("\nwhere lines:")
    for r in rows:
        print(f"  {EDITS.index(r['edit']) + 1} {r['edit'].kernel.name} [{r['target']}]: {r['line']}")


if __name__ == "__main__":
    main()
