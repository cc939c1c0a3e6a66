"""Field tools as evidence (issue 37 item 4): does OSACA add signal beside llvm-mca on the verdict pairs?

For every verdict pair (benchmarks/verdict_pairs.py) both sides are built and simulated exactly as
benchmarks/verdicts.py does (its `build_sides`: perfguard's build, cache and QEMU block profile for
the x86_64 profile). The pipeline model (perfguard.predict.pipeline) is the baseline: llvm-mca
cycles per executed block x the block's execution count (loop bodies that QEMU split into several
blocks scheduled whole), plus its cache-miss stalls. OSACA replaces llvm-mca's cycles per block,
weighted the same way, on the hot blocks: those that make up --hot of the side's llvm-mca block
cycles (the rest, and rep-string blocks llvm-mca does not schedule either, keep llvm-mca's cycles;
so do blocks with an instruction OSACA's machine model does not know, and their share is reported).
A block's asm is the llvm-mc disassembly the pipeline model schedules; a loop body of several
blocks is analysed whole and shared out over its blocks as the pipeline model shares llvm-mca's
cycles. Per block OSACA gives:

    tp   throughput: the busiest port's cycles per iteration (optimal port assignment)
    lcd  the longest loop-carried dependency chain, cycles per iteration
    cp   the critical path of one iteration (no overlap between iterations: an upper bound)

and the models scored are osaca-tp, osaca-lcd (max(tp, lcd): OSACA's own estimate of a loop),
osaca-cp (each + the pipeline model's stall cycles), and pipeline+lcd: the pipeline model with
each hot block's cycles raised to OSACA's LCD where that is larger (the extra feature question).

Predicted deltas are scored against both committed native timings with verdicts.py's `summarize`
(Spearman, missed regressions, false alarms): verdicts-native.json (AMD EPYC, Zen 1, family 23
model 1) with OSACA's --zen-arch and verdicts-native-intel-6-167.json (Intel Xeon, family 6 model
167: Rocket Lake, a Cypress Cove core, Sunny Cove's back-port) with --xeon-arch (defaults ZEN2: OSACA's
ZEN1 database does not know most of these kernels' instructions; ICL: the nearest core). --archs
scores more OSACA models against both CPUs as a sensitivity table. Units of more than MAX_INSNS
instructions keep llvm-mca's cycles (OSACA takes minutes on each).

With --kerncraft-machines, kerncraft's ECM data model (pycachesim simulating the access stream of
benchmarks/kerncraft/gemv_{ik,ki}.c, gemv hand-written in kerncraft's C with the tile_m, tile_k and
order knobs) scores the gemv pairs: its data cycles alone, and composed with the pipeline model's
core cycles overlapping (max) or not (sum).

Install the tools with `pip install osaca==0.7.1 kerncraft==0.8.18 pycachesim==0.3.1` (the pins of
pyproject's `bench` extra, `pip install -e '.[bench]'` in a development checkout; not in the test
extra, CI does not install them). kerncraft's machine files are in its source distribution only:
`pip download kerncraft==0.8.18 --no-deps --no-binary :all: -d DIR` and unpack it. Run:

    PERFGUARD_CACHE_DIR=/tmp/osaca-cache python benchmarks/field_tools.py [--pairs SUBSTR,..] [--json FILE]
        [--zen-arch ZEN2] [--xeon-arch ICL] [--archs ICX,ZEN1] [--hot 0.995] [--unknown ignore|fallback]
        [--kerncraft-machines DIR/kerncraft-0.8.18/examples/machine-files] [-j N]

OSACA's results are cached per (OSACA version, arch, asm) under CACHE_DIR/osaca.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(REPO))

from benchmarks.verdicts import (  # noqa: E402
    NATIVE_FILE,
    Side,
    build_sides,
    load_native,
    native_delta,
    native_key,
    predicted_deltas,
    select_pairs,
    summarize,
)
from perfguard.atomic import atomic_write_text  # noqa: E402
from perfguard.config import load_config  # noqa: E402
from perfguard.predict.pipeline import BlockCost, PipelineModel, loop_bodies  # noqa: E402

CPUS = {
    "zen1": ("AMD EPYC, Zen 1 (family 23 model 1)", NATIVE_FILE),
    "xeon": ("Intel Xeon, family 6 model 167", NATIVE_FILE.with_name("verdicts-native-intel-6-167.json")),
}
METRICS = ("tp", "lcd", "cp")
VARIANTS = ("osaca-tp", "osaca-lcd", "osaca-cp", "pipeline+lcd")
MAX_INSNS = (
    150  # larger units (unrolled bodies of up to 1,000+ instructions) take OSACA minutes each: llvm-mca's cycles
)
LCD_TIMEOUT = 5  # seconds per block (OSACA's default is 10): the analyses found so far count, as osaca does

_BRANCH = re.compile(r"^(j[a-z]+|call[a-z]*)\s+-?\d+$")  # llvm-mc prints relative targets OSACA cannot parse


def osaca_asm(lines: list[str]) -> str:
    """The block as an AT&T loop body OSACA parses: comments dropped, numeric branch targets
    pointed at the body's own label."""
    out = [".L0:"]
    for line in lines:
        line = line.split("#", 1)[0].strip()
        found = _BRANCH.match(line)
        out.append(f"{found.group(1)} .L0" if found else line)
    return "\n".join(out) + "\n"


_MODELS: dict = {}


def analyse(job: tuple[str, str]) -> dict:
    """OSACA on one loop body: tp, lcd, cp cycles per iteration and the instructions it does not know."""
    from osaca.parser import ParserX86ATT
    from osaca.semantics import ArchSemantics, KernelDG, MachineModel

    arch, text = job
    if arch not in _MODELS:  # loading a machine model takes up to a second: once per worker
        parser = ParserX86ATT()
        model = MachineModel(arch=arch)
        _MODELS[arch] = (parser, model, ArchSemantics(parser, model))
    parser, model, semantics = _MODELS[arch]
    try:
        kernel = parser.parse_file(text)
        semantics.normalize_instruction_forms(kernel)
        semantics.add_semantics(kernel)
        semantics.assign_optimal_throughput(kernel)
        graph = KernelDG(kernel, parser, model, semantics, LCD_TIMEOUT, False)
        tp = max(ArchSemantics.get_throughput_sum(kernel) or [0.0])
        cp = sum(x.latency_cp for x in graph.get_critical_path())
        deps = graph.get_loopcarried_dependencies()
        lcd = max((d["latency"] for d in deps.values()), default=0.0)
    except Exception as exc:  # noqa: BLE001 - OSACA's parser raises anything; the block falls back to llvm-mca
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    unknown = [
        x.mnemonic for x in kernel if x.mnemonic and "tp_unknown" in x.flags and not x.mnemonic.startswith("nop")
    ]
    return {"tp": float(tp), "lcd": float(lcd), "cp": float(cp), "unknown": unknown, "timed_out": graph.timed_out}


class OsacaCache:
    def __init__(self, cache_dir: Path):
        import osaca

        self.version = osaca.__version__
        self.path = cache_dir / "osaca" / f"results-{self.version}.json"
        self.data: dict = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def key(self, arch: str, text: str) -> str:
        return hashlib.sha256(f"{self.version}\0{arch}\0{text}".encode()).hexdigest()

    def fill(self, jobs: list[tuple[str, str]], workers: int) -> float:
        """Runs the analyses not cached yet, in the order given, saving as it goes (a run cut short keeps them)."""
        from concurrent.futures import as_completed

        todo = list({self.key(*j): j for j in jobs if self.key(*j) not in self.data}.items())
        start = time.monotonic()
        if todo:
            print(f"osaca: {len(todo)} block analyses to run", file=sys.stderr, flush=True)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = {pool.submit(analyse, job): key for key, job in todo}
                for done, future in enumerate(as_completed(futures), 1):
                    self.data[futures[future]] = future.result()
                    if done % 100 == 0 or done == len(todo):
                        atomic_write_text(self.path, json.dumps(self.data, sort_keys=True))
                        print(
                            f"osaca: {done}/{len(todo)}, {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True
                        )
        return time.monotonic() - start

    def get(self, arch: str, text: str) -> dict:
        return self.data[self.key(arch, text)]


def hot_units(costs: list[BlockCost], triple: str, hot: float) -> list[tuple[list[int], str]]:
    """The hot blocks as units OSACA analyses: (indices into costs, asm text); a multi-block loop
    body is one unit with all its blocks."""
    total = sum(c.cycles for c in costs) or 1.0
    chosen: set[int] = set()
    got = 0.0
    for i in sorted(range(len(costs)), key=lambda i: -costs[i].cycles):
        if got >= hot * total:
            break
        chosen.add(i)
        got += costs[i].cycles
    units, seen = [], set()
    for body in loop_bodies(costs, triple):
        if chosen & set(body):
            units.append((body, [ln for j in body for ln in costs[j].timing.asm]))
            seen |= set(body)
    for i in sorted(chosen - seen):
        if costs[i].timing.bound != "rep string" and costs[i].timing.asm:
            units.append(([i], list(costs[i].timing.asm)))
    return [(body, osaca_asm(asm)) for body, asm in units if len(asm) <= MAX_INSNS]


def side_cycles(
    model: PipelineModel, side: Side, arch: str, cache: OsacaCache, hot: float, tally: dict, unknown: str
) -> dict:
    """variant -> cycles of one side; `tally` gathers the cycle shares OSACA did and did not score.
    A unit with an instruction OSACA does not know keeps llvm-mca's cycles (`unknown` "fallback")
    or OSACA's figures with that instruction costing nothing ("ignore", osaca --ignore-unknown)."""
    costs = model.block_costs(side.stats)
    stalls = model.stall_cycles(side.stats)
    base = [c.cycles_per_execution for c in costs]
    per = {m: list(base) for m in METRICS}  # cycles per execution, llvm-mca's where OSACA does not score
    plus_lcd = list(base)
    for body, text in hot_units(costs, model.profile.triple, hot):
        got = cache.get(arch, text)
        cycles = sum(costs[j].cycles for j in body)
        if "error" in got or (got["unknown"] and unknown == "fallback"):
            tally["fallback"] += cycles
            continue
        tally["osaca"] += cycles
        n = text.count("\n") - 1  # instructions: lines after the label
        tally["unknown_insns"] += sum(costs[j].block.count for j in body[-1:]) * len(got["unknown"])
        tally["insns"] += sum(costs[j].block.count for j in body[-1:]) * n
        tally["timed_out"] += cycles if got["timed_out"] else 0.0
        alone = sum(costs[j].timing.cycles for j in body) or 1.0
        for j in body:  # shared out as the pipeline model shares a body's llvm-mca cycles
            share = costs[j].timing.cycles / alone if len(body) > 1 else 1.0
            per["tp"][j] = got["tp"] * share
            per["lcd"][j] = max(got["tp"], got["lcd"]) * share
            per["cp"][j] = got["cp"] * share
            plus_lcd[j] = max(base[j], got["lcd"] * share)
    tally["all"] += sum(c.cycles for c in costs)
    tally["hot"] += sum(costs[j].cycles for body, _ in hot_units(costs, model.profile.triple, hot) for j in body)

    def total(cpe: list[float]) -> float:
        return sum(c.block.count * x for c, x in zip(costs, cpe)) + stalls

    return {
        "pipeline": total(base),
        "osaca-tp": total(per["tp"]),
        "osaca-lcd": total(per["lcd"]),
        "osaca-cp": total(per["cp"]),
        "pipeline+lcd": total(plus_lcd),
    }


# --- kerncraft: the ECM model's data transfers (pycachesim) for the gemv pairs ---

KERNELS = REPO / "benchmarks" / "kerncraft"  # gemv in kerncraft's restricted C, one file per tile-loop order
KERNCRAFT_MACHINES = {"zen1": "Zen_EPYC-7451.yml", "xeon": "SkylakeSP_Gold-6148.yml"}
ITERATIONS_PER_LINE = 16  # float32: kerncraft's cycles are per 64-byte cache line of the innermost loop


def kerncraft_data(params: dict, machine: Path, cache: dict) -> float:
    """Cycles of one gemv call moving its data between the caches and memory (kerncraft's ECMData:
    the sum of its L2, L3 and MEM transfer terms, the access stream simulated by pycachesim)."""
    import subprocess
    import tempfile

    M, K, tm, tk = params["M"], params["K"], params["tile_m"], params["tile_k"]
    key = f"{machine.name}:{params['order']}:{M}:{K}:{tm}:{tk}"
    if key not in cache:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.json"
            defines = dict(M=M, K=K, TM=tm, TK=tk, MO=M // tm, KO=K // tk)
            cmd = [
                "kerncraft",
                "-p",
                "ECMData",
                "-m",
                str(machine),
                str(KERNELS / f"gemv_{params['order']}.c"),
                "--cache-predictor",
                "SIM",
                "--unit",
                "cy/CL",
                "--json",
                str(out),
            ]
            for name, value in defines.items():
                cmd += ["-D", name, str(value)]
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600)
            result = next(iter(json.loads(out.read_text()).values()))
        cache[key] = sum(c for _, c in result["cycles"]) * M * K / ITERATIONS_PER_LINE
    return cache[key]


def kerncraft_gemv(pairs, sides, model: PipelineModel, machines: Path, cache: dict) -> dict:
    """cpu -> variant -> gemv pair -> predicted delta: the pipeline model's core cycles (its block
    cycles, without its stall term) composed with kerncraft's data cycles as the ECM model composes
    them: overlapping (max) or not (sum); and kerncraft's data term alone."""
    out: dict = {}
    for cpu, name in KERNCRAFT_MACHINES.items():
        per: dict = {"kerncraft-data": {}, "ecm-overlap": {}, "ecm-serial": {}}
        for pair in pairs:
            if pair.family != "gemv":
                continue
            got = []
            for side in sides[pair.name]:
                core = sum(c.cycles for c in model.block_costs(side.stats))
                data = kerncraft_data(side.spec.params, machines / name, cache)
                got.append({"kerncraft-data": data, "ecm-overlap": max(core, data), "ecm-serial": core + data})
            for v in per:
                per[v][pair.name] = got[1][v] / got[0][v] - 1.0
        out[cpu] = per
    return out


def _fmt(s) -> str:
    rho = "n/a" if s.spearman is None else f"{s.spearman:.3f}"
    return f"{rho} | {len(s.missed)} | {len(s.false_alarms)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "perfguard.toml")
    parser.add_argument("--pairs", help="comma-separated substrings of pair names (default: every pair)")
    parser.add_argument("--zen-arch", default="ZEN2", help="OSACA model scored against Zen 1 (default ZEN2)")
    parser.add_argument("--xeon-arch", default="ICL", help="OSACA model scored against the Xeon (default ICL)")
    parser.add_argument("--archs", default="ICX,ZEN1", help="OSACA models for the sensitivity table")
    parser.add_argument("--hot", type=float, default=0.995, help="share of llvm-mca block cycles OSACA scores")
    parser.add_argument(
        "--unknown",
        choices=("ignore", "fallback"),
        default="ignore",
        help="a block with an instruction OSACA does not know: OSACA's figures with it costing nothing "
        "(ignore, osaca --ignore-unknown; default) or llvm-mca's cycles (fallback)",
    )
    parser.add_argument(
        "--kerncraft-machines",
        type=Path,
        help="kerncraft's examples/machine-files directory (from its source distribution: "
        "pip download kerncraft==0.8.18 --no-deps --no-binary :all:); scores the gemv pairs with its ECM data model",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    archs = list(dict.fromkeys([args.zen_arch, args.xeon_arch, *[a for a in args.archs.split(",") if a]]))
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    config = load_config(args.config)
    profile = config.profile("x86_64", "--profile")
    pairs = select_pairs(args.pairs)
    log(f"building and simulating {len(pairs)} pairs")
    sides = build_sides(pairs, config, profile, args.jobs)
    model = PipelineModel(profile, config.storage.cache_dir)
    cache = OsacaCache(config.storage.cache_dir)

    jobs = []
    for arch in archs:  # the two scored models first: a run cut short has them
        for pair in pairs:
            for side in sides[pair.name]:
                jobs += [(arch, text) for _, text in hot_units(model.block_costs(side.stats), profile.triple, args.hot)]
    osaca_seconds = cache.fill(jobs, args.jobs)

    tallies = {
        a: {"osaca": 0.0, "fallback": 0.0, "timed_out": 0.0, "all": 0.0, "hot": 0.0, "unknown_insns": 0, "insns": 0}
        for a in archs
    }
    predicted: dict[str, dict[str, dict[str, float]]] = {a: {v: {} for v in VARIANTS} for a in archs}
    for arch in archs:
        for pair in pairs:
            before, after = (
                side_cycles(model, s, arch, cache, args.hot, tallies[arch], args.unknown) for s in sides[pair.name]
            )
            for v in VARIANTS:
                predicted[arch][v][pair.name] = after[v] / before[v] - 1.0
    reference = predicted_deltas(pairs, sides, profile, config, ["pipeline", "check"])

    natives = {}
    for cpu, (_, path) in CPUS.items():
        data = load_native(path)["pairs"]
        natives[cpu] = {
            p.name: native_delta(data[native_key(*sides[p.name])]).delta
            for p in pairs
            if native_key(*sides[p.name]) in data
        }
    chosen = {"zen1": args.zen_arch, "xeon": args.xeon_arch}
    lines = [
        "| model | OSACA arch | Zen 1: Spearman | missed | false alarms | OSACA arch | Xeon 6/167: Spearman | missed | false alarms |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    summary: dict = {}
    for name in ["pipeline", "check", *VARIANTS]:
        cells = [f"`{name}`"]
        for cpu in CPUS:
            arch = chosen[cpu]
            pred = reference[name] if name in reference else predicted[arch][name]
            s = summarize(natives[cpu], pred)
            summary.setdefault(name, {})[cpu] = {"arch": arch if name not in reference else None, **s.to_dict()}
            cells += ["-" if name in reference else arch, _fmt(s)]
        lines.append("| " + " | ".join(cells) + " |")
    print(f"{len(pairs)} pairs; native pairs scored: " + ", ".join(f"{c} {len(n)}" for c, n in natives.items()))
    print("\n" + "\n".join(lines))
    for name, per in summary.items():
        for cpu, s in per.items():
            for label in ("missed", "false_alarms"):
                if s[label]:
                    print(f"\n{name} vs {cpu}, {label}: " + ", ".join(f"`{n}`" for n in s[label]))
    sens = [
        "| OSACA arch | cycles OSACA scored | fell back to llvm-mca | OSACA-scored instructions it did not know | LCD timed out | "
        + " | ".join(f"{v} vs Zen 1 / vs Xeon" for v in VARIANTS)
        + " |",
        "| --- | ---: | ---: | ---: | ---: |" + " ---: |" * len(VARIANTS),
    ]
    for arch in archs:
        t = tallies[arch]
        cells = [
            arch,
            f"{100 * t['osaca'] / t['all']:.1f} %",
            f"{100 * t['fallback'] / t['all']:.1f} %",
            f"{100 * t['unknown_insns'] / max(t['insns'], 1):.1f} %",
            f"{100 * t['timed_out'] / t['all']:.1f} %",
        ]
        for v in VARIANTS:
            rhos = [summarize(natives[c], predicted[arch][v]).spearman for c in CPUS]
            cells.append(" / ".join("n/a" if r is None else f"{r:.3f}" for r in rhos))
        sens.append("| " + " | ".join(cells) + " |")
    print("\nevery OSACA model against both CPUs (Spearman):\n\n" + "\n".join(sens))
    print(f"\nOSACA analyses run now: {osaca_seconds:.0f} s (cached ones are free)")
    ecm: dict = {}
    if args.kerncraft_machines:
        start = time.monotonic()
        kc_cache_path = config.storage.cache_dir / "kerncraft" / "gemv.json"
        kc_cache = json.loads(kc_cache_path.read_text()) if kc_cache_path.is_file() else {}
        ecm = kerncraft_gemv(pairs, sides, model, args.kerncraft_machines, kc_cache)
        kc_cache_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(kc_cache_path, json.dumps(kc_cache, sort_keys=True))
        gemv = [p.name for p in pairs if p.family == "gemv"]
        rows = [
            "| model (gemv pairs only) | Zen 1: Spearman | missed | false alarms | Xeon 6/167: Spearman | missed | false alarms |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in ["pipeline", "check", "kerncraft-data", "ecm-overlap", "ecm-serial"]:
            cells = [f"`{name}`"]
            for cpu in CPUS:
                pred = reference[name] if name in reference else ecm[cpu][name]
                s = summarize({n: natives[cpu][n] for n in gemv if n in natives[cpu]}, pred)
                summary.setdefault(f"gemv:{name}", {})[cpu] = s.to_dict()
                cells.append(_fmt(s))
            rows.append("| " + " | ".join(cells) + " |")
        print(
            f"\nkerncraft {', '.join(f'{c}: {m}' for c, m in KERNCRAFT_MACHINES.items())} on the {len(gemv)} gemv pairs "
            f"({time.monotonic() - start:.0f} s):\n\n" + "\n".join(rows)
        )
        for n in gemv:
            print(
                f"- `{n}`: native "
                + ", ".join(f"{c} {100 * natives[c][n]:+.1f} %" for c in CPUS if n in natives[c])
                + f"; pipeline {100 * reference['pipeline'][n]:+.1f} %; "
                + ", ".join(f"{v}@{c} {100 * ecm[c][v][n]:+.1f} %" for c in CPUS for v in ecm[c])
            )
    if args.json:
        doc = {
            "command": " ".join(["python", "benchmarks/field_tools.py", *(argv or sys.argv[1:])]),
            "osaca": cache.version,
            "hot": args.hot,
            "unknown": args.unknown,
            "summary": summary,
            "coverage": tallies,
            "pairs": {
                p.name: {
                    "native": {c: natives[c].get(p.name) for c in CPUS},
                    "pipeline": reference["pipeline"][p.name],
                    "check": reference["check"][p.name],
                    **{f"{v}@{a}": predicted[a][v][p.name] for a in archs for v in VARIANTS},
                    **{f"{v}@{c}": ecm[c][v][p.name] for c in ecm for v in ecm[c] if p.name in ecm[c][v]},
                }
                for p in pairs
            },
        }
        atomic_write_text(args.json, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
