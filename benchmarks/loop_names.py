"""How often attribution names a block's TIR loop, and whether the name is right.

For each kernel of a config x target: build and simulate it with perfguard (QEMU), take the
kernel's block sites (the blocks run from one address) that cost the most pipeline-model cycles
(together at least --cover of the kernel's), and name each with judge.attribution.LoopNamer
(execution counts against the build's loop nest, the nests' order, the debug information). An
independent check of the names: the DWARF the build's own kernel.o carries (TVM 0.27 writes no
line table worth the name, line 0 only, but it describes each loop variable by a location list:
the address ranges where LLVM keeps its value, a constant in each copy of a loop it unrolled).
`llvm-dwarfdump-19` reads them; the kernel's functions' addresses in the harness and in kernel.o
place them (one function at a time: a function the C library also defines may come from there).
Of a block named loop X: "confirmed" when X's variable has a location in the block and no deeper
loop's does (a loop inside X that LLVM kept, per the counts: not one it unrolled completely, nor
one inside such a loop); "deeper loop live" when such a loop's variable has one there (the block may sit inside that loop: the name
is too shallow or wrong); "not located" when neither (LLVM often rewrites an induction variable
and keeps no location for it). A block no loop variable covers gets no verdict.

    python benchmarks/loop_names.py [--config perfguard.toml] [--targets x86_64,aarch64,riscv64]
                                    [--kernels a,b] [--cover 0.9] [--weight cycles|insts]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from perfguard.compile.loops import elf_functions, variable_ranges
from perfguard.config import load_config
from perfguard.job.run import run_job
from perfguard.judge.attribution import LoopNamer
from perfguard.predict.pipeline import PipelineModel
from perfguard.runs.check import make_jobs, select


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="perfguard.toml")
    ap.add_argument("--targets", default="x86_64,aarch64,riscv64")
    ap.add_argument("--kernels", default=None)
    ap.add_argument("--cover", type=float, default=0.9)
    ap.add_argument(
        "--weight",
        choices=("cycles", "insts"),
        default="cycles",
        help="weigh sites by pipeline-model cycles (default) or by instructions run",
    )
    args = ap.parse_args()
    config = load_config(Path(args.config))
    pairs = select(config, args.kernels.split(",") if args.kernels else None, args.targets.split(","))
    pairs = [(spec, t) for spec, t in pairs if spec.model is None]
    tally: Counter = Counter()
    rows: list[tuple[str, Counter]] = []  # per kernel x target: shares of its instructions by outcome
    for job in make_jobs(config, pairs, "qemu"):
        result = run_job(job)
        if not result.ok:
            print(f"{job.label}: {result.error}")
            continue
        namer = LoopNamer(result.loops, result.stats, job.label)
        layout = namer.layout
        tally["kernels"] += 1
        cycles: Counter = Counter()  # per site: its pipeline-model cycles (or instructions) per call
        for cost in PipelineModel(job.profile, config.storage.cache_dir).block_costs(result.stats, job.label):
            if cost.block.addr in namer.sites:
                b = cost.block
                cycles[b.addr] += cost.cycles if args.weight == "cycles" else b.insns * b.count
        blocks = sorted(namer.sites, key=lambda addr: (-cycles[addr], addr))
        total = sum(cycles.values()) or 1
        build_dir = Path(config.storage.cache_dir) / "builds" / result.content_hash[:2] / result.content_hash
        in_obj, in_harness = elf_functions(build_dir / "kernel.o"), elf_functions(build_dir / "harness")
        shifts = {f: in_harness[f][0] - v[0] for f, v in in_obj.items() if f in in_harness}  # where each landed
        ranges = variable_ranges(build_dir / "kernel.o")
        depth = {}
        for i, loop in enumerate(layout.nest.loops if layout else ()):
            depth.setdefault(loop.var, (len(layout.nest.path(i)), i))
        row: Counter = Counter()
        rows.append((job.label, row))
        print(
            f"\n{job.label}: {len(blocks)} kernel blocks; loop variables with locations: "
            f"{sorted(v for v in ranges if v in depth and ranges[v])}"
        )
        covered = 0
        for addr in blocks:
            if covered >= args.cover * total:
                break
            covered += cycles[addr]
            symbol, runs, end = namer.sites[addr]
            loop, candidates = namer.name(symbol, runs, addr, end)
            if loop is not None:
                said, kind = loop.describe(), "named"
            elif candidates:
                said, kind = "ambiguous: " + " | ".join(c.var for c in candidates), "ambiguous"
            else:
                said, kind = "-", "unnamed"
            live = set()
            shift = shifts.get(symbol)
            if shift is not None:
                lo, hi = addr - shift, end - shift
                live = {v for v in depth if any(a < hi and lo < e for a, e in ranges.get(v, ()))}
            verdict = ""
            if live:
                tally["with_dwarf"] += 1
                if loop is not None:
                    nest = layout.nest
                    me = next(
                        i
                        for i in range(len(nest.loops))
                        if [nest.loops[j].var for j in nest.path(i)] == [x.var for x in loop.path]
                    )
                    around = {nest.loops[j].var for j in nest.path(me)}
                    inner = {
                        nest.loops[j].var
                        for j in range(len(nest.loops))
                        if me in nest.path(j)
                        and j != me
                        and j not in layout.flat
                        and not any(k in layout.flat for k in nest.path(j)[nest.path(j).index(me) + 1 :])
                    }
                    deeper = (live & inner) - around
                    if deeper:
                        verdict, outcome = f"DEEPER LOOP LIVE ({', '.join(sorted(deeper))})", "contradicted"
                    elif loop.var in live:
                        verdict, outcome = "confirmed", "confirmed"
                    else:
                        verdict, outcome = "not located", "unconfirmed"
                    tally[outcome] += 1
                    row[outcome] += 100.0 * cycles[addr] / total
                verdict += f" [DWARF: {', '.join(sorted(live, key=lambda v: depth[v]))}]"
            share = 100.0 * cycles[addr] / total
            tally[kind] += 1
            tally[kind + "_share"] += share
            row[kind] += share
            tally["blocks"] += 1
            print(f"  0x{addr:x} {share:5.1f} % x{runs:<8} {kind:9} {said}{'  ' + verdict if verdict else ''}")
    print(
        "\n| kernel [target] | named | ambiguous | unnamed | named & confirmed | named, a deeper loop's variable live "
        "| named, not located |\n|---|--:|--:|--:|--:|--:|--:|"
    )
    for label, row in rows:
        print(
            f"| {label} | "
            + " | ".join(
                f"{row[k]:.0f} %" for k in ("named", "ambiguous", "unnamed", "confirmed", "contradicted", "unconfirmed")
            )
            + " |"
        )
    print(
        f"\nhot blocks: {tally['blocks']}: named {tally['named']}, ambiguous {tally['ambiguous']}, "
        f"unnamed {tally['unnamed']}; with a DWARF location {tally['with_dwarf']}; of the named: confirmed "
        f"{tally['confirmed']}, not located {tally['unconfirmed']}, a deeper loop's variable live "
        f"{tally['contradicted']}"
    )
    print(
        f"share of the kernel's {'pipeline-model cycles' if args.weight == 'cycles' else 'instructions'}: named {tally['named_share'] / max(1, tally['kernels']):.1f} %, "
        f"ambiguous {tally['ambiguous_share'] / max(1, tally['kernels']):.1f} %, unnamed "
        f"{tally['unnamed_share'] / max(1, tally['kernels']):.1f} % (mean per kernel x target)"
    )


if __name__ == "__main__":
    main()
