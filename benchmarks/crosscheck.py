"""QEMU plugin vs cachegrind on x86_64: the same harness binaries and cache geometry (the x86_64
profile's, and optionally the same with a more associative L1D), both simulators run through
perfguard.job.run.run_job; prints one Markdown table per geometry.

Bounds, per kernel call: instructions within 1 %, L1D misses within 2 %, L2 misses within
5 %, each with an absolute floor of FLOOR counts. The floor covers what the two
region-of-interest methods alone move: the plugin counts between the marker calls, so the
first execution of the marker functions' and the loop's code lines is cold in its region
(2-3 L1I and L2 misses); cachegrind subtracts a REPS=0 run, which executes them as well, and
the output writing after the region can see a line or two more or less. A kernel that fits
in L2 is left with about zero L2 misses per call after the warm-up call, where a ratio of
such counts means nothing; 16 lines is well below every count the ratios judge here.

    python benchmarks/crosscheck.py [--config perfguard.toml] [--kernels a,b] [--wide-l1d WAYS] [-j N]

With --gem5: QEMU plugin vs gem5 AtomicSimpleCPU (the `gem5` column), on x86_64v1, riscv64 and
aarch64 (the ISAs with a gem5 build: PERFGUARD_GEM5_X86 / _RISCV / _ARM), every field both report, bounds
GEM5_BOUNDS per kernel call with the same floor; the fields gem5 reports null are listed with
the reason (perfguard.sim.gem5.NULL_FIELDS, and _X86 / _ARM for that ISA's).

    python benchmarks/crosscheck.py --gem5 [--targets x86_64v1,riscv64,aarch64] [--kernels a,b] [-j N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from perfguard.config import KernelSpec, load_config
from perfguard.executors.local import LocalExecutor
from perfguard.job.run import Job, JobResult, run_job
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN, TargetProfile

TARGET = "x86_64"
FLOOR = 16
# field -> relative bound
BOUNDS = {"insts": 0.01, "l1d_misses": 0.02, "l2_misses": 0.05}


@dataclass(frozen=True)
class Agreement:
    field: str
    qemu: int
    cachegrind: int
    bound: float

    @property
    def relative(self) -> float:
        return (self.cachegrind - self.qemu) / max(self.qemu, 1)

    @property
    def ok(self) -> bool:
        return abs(self.cachegrind - self.qemu) <= max(self.bound * self.qemu, FLOOR)


def agreements(qemu: Stats, cachegrind: Stats) -> list[Agreement]:
    rows = []
    for name, bound in BOUNDS.items():
        a, b = getattr(qemu, name), getattr(cachegrind, name)
        if a is None or b is None:
            raise ValueError(f"{name}: missing from the {'QEMU' if a is None else 'cachegrind'} statistics")
        rows.append(Agreement(name, a, b, bound))
    return rows


def run_pairs(
    specs: list[KernelSpec],
    root: Path,
    cache_dir: Path,
    profile: TargetProfile = BUILTIN[TARGET],
    *,
    reps: int = 1,
    warmup: int = 1,
    timeout: float = 1800,
    workers: int | None = None,
    other: str = "cachegrind",
) -> list[tuple[JobResult, JobResult]]:
    """(QEMU result, `other` simulator's result) per kernel."""
    jobs = [
        Job(spec, profile, root, cache_dir, simulator, timeout, reps, warmup)
        for spec in specs
        for simulator in ("qemu", other)
    ]
    results = LocalExecutor(workers).map(run_job, jobs)
    return list(zip(results[0::2], results[1::2]))


def geometry(profile: TargetProfile) -> str:
    return ", ".join(
        f"{level.upper()} {c.size // 1024} KiB {c.assoc}-way"
        for level, c in (("l1i", profile.l1i), ("l1d", profile.l1d), ("l2", profile.l2))
    )


def _pct(value: float) -> str:
    return f"{100 * value:+.2f} %"


def markdown(pairs: list[tuple[JobResult, JobResult]]) -> str:
    head = ["kernel"]
    for name, bound in BOUNDS.items():
        head += [f"{name} QEMU", f"{name} cachegrind", f"diff (bound {100 * bound:g} %)"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for qemu, grind in pairs:
        if not (qemu.ok and grind.ok):
            lines.append(f"| {qemu.kernel} | error: {qemu.error or grind.error} |")
            continue
        cells = [qemu.kernel]
        for row in agreements(qemu.stats, grind.stats):
            note = " FAIL" if not row.ok else " (floor)" if abs(row.relative) > row.bound else ""
            cells += [str(row.qemu), str(row.cachegrind), _pct(row.relative) + note]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def passed(pairs: list[tuple[JobResult, JobResult]]) -> bool:
    return all(q.ok and g.ok and all(r.ok for r in agreements(q.stats, g.stats)) for q, g in pairs)


# QEMU plugin vs gem5: instruction counts (branch classes too) within 0.01 %, memory and
# cache counts within 2 %, per kernel call, each with the absolute floor FLOOR. The floor
# covers the region boundaries: the plugin's region runs from the return of
# perfguard_roi_begin to the call of perfguard_roi_end (one more call and return, a few
# loop instructions), gem5's is the difference of a REPS=R and a REPS=0 run.
GEM5_TARGETS = ("x86_64v1", "riscv64", "aarch64")
GEM5_TIMEOUT = 7200.0  # seconds for both gem5 runs of one kernel
GEM5_BOUNDS = {
    "insts": 0.0001,
    "loads": 0.02,
    "stores": 0.02,
    "branches": 0.0001,
    "cond_branches": 0.0001,
    "indirect_branches": 0.0001,
    "calls": 0.0001,
    "returns": 0.0001,
    "fp_insts": 0.0001,
    "vec_insts": 0.0001,
    "l1i_accesses": 0.02,
    "l1i_misses": 0.02,
    "l1d_accesses": 0.02,
    "l1d_misses": 0.02,
    "l1d_writebacks": 0.02,
    "l2_accesses": 0.02,
    "l2_misses": 0.02,
    "l2_writebacks": 0.02,
}


# gem5's caches see physical addresses (SE mode hands out page frames in first-touch order), the
# plugin's virtual ones. Where a cache way is at most a page, the set index lies in the page offset,
# the same in both; where it is larger (aarch64's 32 KiB 2-way L1D: 16 KiB ways, 4 pages), the two
# address streams fall into different sets and the conflict misses differ with where the pages
# landed: such a row is shown, not judged. A field -> the cache levels whose indexing it depends on.
PAGE = 4096
_INDEXED_BY = {
    "l1i_misses": ("l1i",),
    "l1d_misses": ("l1d",),
    "l2_accesses": ("l1i", "l1d"),
    "l2_misses": ("l1i", "l1d", "l2"),
    "l2_writebacks": ("l1i", "l1d", "l2"),
}
NOT_JUDGED = (
    "a way of {levels} spans more than a {page} B page, and gem5 indexes physical "
    "addresses (frames in first-touch order), the plugin virtual ones"
)


@dataclass(frozen=True)
class Gem5Row:
    field: str
    qemu: int | None
    gem5: int | None
    bound: float
    unjudged: str | None = None  # why a row both report is shown but not judged

    @property
    def compared(self) -> bool:
        return self.qemu is not None and self.gem5 is not None and self.unjudged is None

    @property
    def ok(self) -> bool:
        if self.unjudged is not None:
            return True
        if not self.compared:
            return self.gem5 is None  # a field gem5 reports null is documented, never a mismatch
        return abs(self.gem5 - self.qemu) <= max(self.bound * self.qemu, FLOOR)


def wide_ways(profile: TargetProfile) -> list[str]:
    """The cache levels of `profile` whose ways are larger than a page."""
    return [
        level for level in ("l1i", "l1d", "l2") if getattr(profile, level).size // getattr(profile, level).assoc > PAGE
    ]


def gem5_rows(qemu: Stats, gem5: Stats, profile: TargetProfile) -> list[Gem5Row]:
    wide = wide_ways(profile)
    rows = []
    for name, bound in GEM5_BOUNDS.items():
        levels = [level.upper() for level in _INDEXED_BY.get(name, ()) if level in wide]
        why = NOT_JUDGED.format(levels=" and ".join(levels), page=PAGE) if levels else None
        rows.append(Gem5Row(name, getattr(qemu, name), getattr(gem5, name), bound, why))
    return rows


def gem5_markdown(pairs: list[tuple[JobResult, JobResult]], profile: TargetProfile) -> str:
    """One row per kernel and field: the plugin's count, gem5's, the difference; then the rows shown
    but not judged, and the fields gem5 reports null on the profile's ISA, each with its reason."""
    from perfguard.sim.gem5 import NULL_FIELDS, NULL_FIELDS_ARM, NULL_FIELDS_X86

    lines = ["| kernel | field | QEMU | gem5 | diff | bound |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    nulls: set[str] = set()
    unjudged: dict[str, str] = {}
    for qemu, gem5 in pairs:
        if not (qemu.ok and gem5.ok):
            lines.append(f"| {qemu.kernel} | error: {qemu.error or gem5.error} | | | | |")
            continue
        for row in gem5_rows(qemu.stats, gem5.stats, profile):
            if row.gem5 is None:
                nulls.add(row.field)
                continue
            if row.qemu is None:
                diff = "QEMU null"
            else:
                rel = (row.gem5 - row.qemu) / max(row.qemu, 1)
                note = (
                    " (not judged)"
                    if row.unjudged
                    else " FAIL"
                    if not row.ok
                    else " (floor)"
                    if abs(rel) > row.bound
                    else ""
                )
                diff = f"{row.gem5 - row.qemu:+d} ({_pct(rel)}){note}"
                if row.unjudged:
                    unjudged[row.field] = row.unjudged
            lines.append(f"| {qemu.kernel} | {row.field} | {row.qemu} | {row.gem5} | {diff} | {100 * row.bound:g} % |")
    reasons = {**NULL_FIELDS, **{"x86_64": NULL_FIELDS_X86, "aarch64": NULL_FIELDS_ARM}.get(profile.isa, {})}
    if unjudged:
        lines.append("")
        lines.append(
            "Shown, not judged: " + "; ".join(f"`{name}`: {why}" for name, why in sorted(unjudged.items())) + "."
        )
    if nulls:
        lines.append("")
        lines.append(
            "gem5 reports null (not compared): "
            + "; ".join(f"`{name}`: {reasons.get(name, 'gem5 has no such count')}" for name in sorted(nulls))
            + "."
        )
    return "\n".join(lines)


def gem5_passed(pairs: list[tuple[JobResult, JobResult]], profile: TargetProfile) -> bool:
    return all(q.ok and g.ok and all(r.ok for r in gem5_rows(q.stats, g.stats, profile)) for q, g in pairs)


def main_gem5(config, specs: list[KernelSpec], targets: list[str], cache_dir: Path, jobs: int | None) -> int:
    import time

    ok = True
    for name in targets:
        profile = config.profile(name)
        chosen = [s for s in specs if s.targets is None or name in s.targets or profile.isa in s.targets]
        start = time.monotonic()
        # gem5 runs at 1-2 MIPS: the config's timeout (600 s) is too short for the larger kernels
        sim = config.simulation
        pairs = run_pairs(
            chosen,
            config.root,
            cache_dir,
            profile,
            reps=sim.reps,
            warmup=sim.warmup,
            timeout=max(sim.timeout, GEM5_TIMEOUT),
            workers=jobs,
            other="gem5",
        )
        print(
            f"{name}: {geometry(profile)}, {profile.l1d.line} B lines; per kernel call, REPS={sim.reps} "
            f"WARMUP={sim.warmup}; bounds with an absolute floor of {FLOOR}; "
            f"{time.monotonic() - start:.0f} s.\n"
        )
        print(gem5_markdown(pairs, profile) + "\n")
        ok = ok and gem5_passed(pairs, profile)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("perfguard.toml"))
    parser.add_argument("--kernels", help="comma-separated kernel names (default: every kernel)")
    parser.add_argument("--cache-dir", type=Path, help="default: a fresh temporary directory")
    parser.add_argument(
        "--wide-l1d",
        type=int,
        default=64,
        metavar="WAYS",
        help="also compare with the L1D made this associative, same size and line, which "
        "takes out set conflicts that depend on where each emulator puts stack and heap "
        "(0: skip; default 64)",
    )
    parser.add_argument("-j", "--jobs", type=int)
    parser.add_argument("--gem5", action="store_true", help="QEMU plugin vs gem5 instead of cachegrind")
    parser.add_argument("--targets", default=",".join(GEM5_TARGETS), help="with --gem5: target profiles")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    specs = [config.kernel(n) for n in args.kernels.split(",")] if args.kernels else list(config.kernels)
    if args.gem5:
        cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="pg-crosscheck-"))
        return main_gem5(config, specs, args.targets.split(","), cache_dir, args.jobs)
    specs = [s for s in specs if s.targets is None or TARGET in s.targets]
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="pg-crosscheck-"))
    profiles = [BUILTIN[TARGET]]
    if args.wide_l1d:
        profiles.append(replace(BUILTIN[TARGET], l1d=replace(BUILTIN[TARGET].l1d, assoc=args.wide_l1d)))
    ok = True
    for profile in profiles:
        sim = config.simulation
        pairs = run_pairs(
            specs,
            config.root,
            cache_dir,
            profile,
            reps=sim.reps,
            warmup=sim.warmup,
            timeout=sim.timeout,
            workers=args.jobs,
        )
        print(
            f"{TARGET}: {geometry(profile)}, {profile.l1d.line} B lines; per kernel call, REPS={sim.reps} "
            f"WARMUP={sim.warmup}; bounds with an absolute floor of {FLOOR}.\n"
        )
        print(markdown(pairs) + "\n")
        ok = ok and passed(pairs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
