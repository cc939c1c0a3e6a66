"""Is this machine quiet enough to time natively? One binary timed in six separate processes.

Builds one kernel of the repository's config (the x86_64 profile, a 128x128x128 gemm with its
default schedule) exactly as `perfguard check` builds it, then runs its harness in N processes
one after another, pinned to one core with ASLR off (perfguard.job.native), and prints each
process's median and fastest call, the robust spread of the calls within each process, the spread
of the processes' medians ((max - min) / median), and the load of the other CPUs meanwhile.

Native timing for calibration (`perfguard calibrate collect`, benchmarks/verdicts.py) is worth
doing when the processes' medians agree within about 2 % and the neighbours are idle.

    python benchmarks/noise.py [--processes 6] [--calls 200] [--cpu N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(REPO))

from benchmarks.verdict_pairs import Pair  # noqa: E402
from benchmarks.verdicts import build_sides  # noqa: E402
from perfguard.config import load_config  # noqa: E402
from perfguard.job.native import (  # noqa: E402
    NeighbourWatch,
    check_native,
    pick_cpu,
    process_spread,
    robust_cv,
    this_machine,
    time_process,
)

SHAPE = dict(M=128, N=128, K=128)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "perfguard.toml")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per process (default 200)")
    parser.add_argument("--cpu", type=int, help="core to pin to (default: the last one)")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    profile = config.profile("x86_64", "--profile")
    check_native(profile)
    # A pair whose edit changes nothing: both sides are the same binary, built once.
    pair = Pair("gemm", dict(SHAPE, vector=8), "vector", 8)
    side = build_sides([pair], config, profile)[pair.name][0]
    cpu = pick_cpu() if args.cpu is None else args.cpu
    machine = this_machine()
    print(f"# {machine.cpu} ({machine.cpu_id}); pinned to CPU {cpu}; binary {side.binary}")
    medians, loads = [], []
    for index in range(args.processes):
        watch = NeighbourWatch(cpu)
        started = time.monotonic()
        run = time_process(side.binary, args.calls, 10, cpu, 600.0, "noise")
        load = watch.load()
        loads.append(load)
        medians.append(run.median_s)
        print(
            f"process {index + 1}: median {run.median_s * 1e6:9.2f} us  fastest {run.min_s * 1e6:9.2f} us  "
            f"robust CV {100 * robust_cv(list(run.calls)):5.2f} %  preempted {run.preempted:3d}  "
            f"neighbours {'?' if load is None else f'{load:.2f}'} CPUs  ({time.monotonic() - started:.1f} s)"
        )
    known = [x for x in loads if x is not None]
    print(
        f"medians' spread (max - min) / median: {100 * process_spread(medians):.2f} %; "
        f"median {statistics.median(medians) * 1e6:.2f} us; "
        f"neighbour load max {max(known) if known else float('nan'):.2f} CPUs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
