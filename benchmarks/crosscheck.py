"""QEMU plugin vs cachegrind on x86_64: the same harness binaries and cache geometry (the x86_64
profile's, and optionally the same with a more associative L1D), both simulators run through
perfguard.pipeline.run_job; prints one Markdown table per geometry.

Bounds, per kernel call: instructions within 1 %, L1D misses within 2 %, L2 misses within
5 %, each with an absolute floor of FLOOR counts. The floor covers what the two
region-of-interest methods alone move: the plugin counts between the marker calls, so the
first execution of the marker functions' and the loop's code lines is cold in its region
(2-3 L1I and L2 misses); cachegrind subtracts a REPS=0 run, which executes them as well, and
the output writing after the region can see a line or two more or less. A kernel that fits
in L2 is left with about zero L2 misses per call after the warm-up call, where a ratio of
such counts means nothing; 16 lines is well below every count the ratios judge here.

    python benchmarks/crosscheck.py [--config perfguard.toml] [--kernels a,b] [--wide-l1d WAYS] [-j N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from perfguard.config import KernelSpec, load_config
from perfguard.executors.local import LocalExecutor
from perfguard.pipeline import Job, JobResult, run_job
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


def run_pairs(specs: list[KernelSpec], root: Path, cache_dir: Path, profile: TargetProfile = BUILTIN[TARGET], *,
              reps: int = 1, warmup: int = 1, timeout: float = 1800,
              workers: int | None = None) -> list[tuple[JobResult, JobResult]]:
    """(QEMU result, cachegrind result) per kernel."""
    jobs = [Job(spec, profile, root, cache_dir, simulator, timeout, reps, warmup)
            for spec in specs for simulator in ("qemu", "cachegrind")]
    results = LocalExecutor(workers).map(run_job, jobs)
    return list(zip(results[0::2], results[1::2]))


def geometry(profile: TargetProfile) -> str:
    return ", ".join(f"{level.upper()} {c.size // 1024} KiB {c.assoc}-way"
                     for level, c in (("l1i", profile.l1i), ("l1d", profile.l1d), ("l2", profile.l2)))


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=Path("perfguard.toml"))
    parser.add_argument("--kernels", help="comma-separated kernel names (default: every kernel)")
    parser.add_argument("--cache-dir", type=Path, help="default: a fresh temporary directory")
    parser.add_argument("--wide-l1d", type=int, default=64, metavar="WAYS",
                        help="also compare with the L1D made this associative, same size and line, which "
                             "takes out set conflicts that depend on where each emulator puts stack and heap "
                             "(0: skip; default 64)")
    parser.add_argument("-j", "--jobs", type=int)
    args = parser.parse_args(argv)
    config = load_config(args.config)
    specs = [config.kernel(n) for n in args.kernels.split(",")] if args.kernels else list(config.kernels)
    specs = [s for s in specs if s.targets is None or TARGET in s.targets]
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="pg-crosscheck-"))
    profiles = [BUILTIN[TARGET]]
    if args.wide_l1d:
        profiles.append(replace(BUILTIN[TARGET], l1d=replace(BUILTIN[TARGET].l1d, assoc=args.wide_l1d)))
    ok = True
    for profile in profiles:
        pairs = run_pairs(specs, config.root, cache_dir, profile, reps=config.reps, warmup=config.warmup,
                          timeout=config.timeout, workers=args.jobs)
        print(f"{TARGET}: {geometry(profile)}, {profile.l1d.line} B lines; per kernel call, REPS={config.reps} "
              f"WARMUP={config.warmup}; bounds with an absolute floor of {FLOOR}.\n")
        print(markdown(pairs) + "\n")
        ok = ok and passed(pairs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
