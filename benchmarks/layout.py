"""How far code placement alone moves native time and the pipeline model.

Every verdict pair's kernels (benchmarks/verdict_pairs.py) are built again with the harness padded
by each of --offsets bytes before the kernel's code (perfguard.job.run.Job.code_offset: the same
kernel object, linked further on), simulated by the QEMU plugin and scored by the pipeline model.
With --native, the offsets of each kernel are timed on this machine, interleaved (perfguard.job.native,
several processes per attempt), so that a pair's native delta can be taken at one layout or
averaged over all of them.

It reports, per kernel ("side"), the spread of the predicted cycles and of the native time over
the offsets, and, per pair, how far its time ratio moves from the first offset's; and the pipeline
model's agreement with the native deltas at the first offset and averaged over the offsets.

    python benchmarks/layout.py [--offsets 0,64,128,192] [--pairs SUBSTR,..] [--native] [--json FILE] [-j N]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(REPO))

from benchmarks.verdicts import build_sides, select_pairs  # noqa: E402
from perfguard.atomic import atomic_write_text  # noqa: E402
from perfguard.config import load_config  # noqa: E402
from perfguard.job.native import PROCESSES, pick_cpu, this_machine, time_interleaved  # noqa: E402
from perfguard.predict.pipeline import PipelineModel  # noqa: E402

MOVED = (0.01, 0.05)  # a side "moved" by more than these fractions


def spread(values: list[float]) -> float:
    """(max - min) / min: how far apart the layouts put one kernel."""
    return max(values) / min(values) - 1.0


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def side_table(name: str, per_side: dict[str, list[float]]) -> str:
    spreads = {k: spread(v) for k, v in per_side.items()}
    worst = max(spreads, key=spreads.get)
    moved = ", ".join(f"{sum(s > m for s in spreads.values())} above {100 * m:g} %" for m in MOVED)
    return (
        f"{name}: {len(spreads)} kernels; spread over the offsets median {100 * statistics.median(spreads.values()):.1f} %, "
        f"{moved}; max {100 * spreads[worst]:.1f} % ({worst})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config")
    parser.add_argument(
        "--offsets",
        default="0,64,128,192",
        help="bytes of padding before the kernel's code, comma-separated (default 0,64,128,192)",
    )
    parser.add_argument("--pairs", help="comma-separated substrings of pair names (default: every pair)")
    parser.add_argument("--native", action="store_true", help="time every kernel at every offset on this machine")
    parser.add_argument(
        "--processes",
        type=int,
        default=PROCESSES,
        help=f"harness processes per kernel and offset in each attempt (default {PROCESSES})",
    )
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("-j", "--jobs", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        offsets = [int(o) for o in args.offsets.split(",")]
    except ValueError:
        raise SystemExit(f"layout: --offsets '{args.offsets}': comma-separated byte counts") from None
    if len(offsets) < 2 or len(set(offsets)) != len(offsets) or min(offsets) < 0:
        raise SystemExit(f"layout: --offsets '{args.offsets}': at least two distinct byte counts, none negative")
    config = load_config(args.config)
    profile = config.profile("x86_64", "--profile")
    pairs = select_pairs(args.pairs)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    builds = {}
    for offset in offsets:
        log(f"building and simulating {len(pairs)} pairs at code offset {offset}")
        builds[offset] = build_sides(pairs, config, profile, args.jobs, code_offset=offset)
    model = PipelineModel(profile, config.storage.cache_dir)
    kernels: dict[str, dict] = {}  # "pair name/before|after" of a kernel's first pair -> its figures
    side_of: dict[tuple[str, int], str] = {}
    for pair in pairs:
        for k, side in enumerate(("before", "after")):
            label = f"{pair.name}/{side}"
            binary_at = {o: builds[o][pair.name][k] for o in offsets}
            first = binary_at[offsets[0]].result.content_hash
            known = next((name for name, fig in kernels.items() if fig["key"] == first), None)
            if known:
                side_of[(pair.name, k)] = known
                continue
            side_of[(pair.name, k)] = label
            kernels[label] = {
                "key": first,
                "binaries": {o: str(binary_at[o].binary) for o in offsets},
                "insts": {o: binary_at[o].stats.insts for o in offsets},
                "cycles": {o: float(model.cycles(binary_at[o].stats, label)) for o in offsets},
            }
    changed_counts = sorted(name for name, fig in kernels.items() if len(set(fig["insts"].values())) > 1)
    lines = [
        f"code offsets {offsets}, {len(pairs)} pairs, {len(kernels)} distinct kernels, pipeline model {model.model_id}",
        f"instruction counts differ between offsets on {len(changed_counts)} kernels"
        + (f" (first: {changed_counts[0]})" if changed_counts else ""),
        side_table("pipeline model, predicted cycles", {k: list(f["cycles"].values()) for k, f in kernels.items()}),
    ]
    if args.native:
        cpu = pick_cpu()
        machine = this_machine().to_dict()
        for i, (label, fig) in enumerate(kernels.items(), 1):
            log(f"[{i}/{len(kernels)}] timing {label} at {len(offsets)} offsets")
            timings = time_interleaved(
                [Path(fig["binaries"][o]) for o in offsets],
                profile,
                [f"{label} (offset {o})" for o in offsets],
                processes=args.processes,
                cpu=cpu,
            )
            fig["native_s"] = {o: t.median_s for o, t in zip(offsets, timings)}
            fig["native_steady"] = all(t.steady for t in timings)
        lines.append(
            f"native, {machine['cpu_id']}: "
            + side_table("median call", {k: list(f["native_s"].values()) for k, f in kernels.items()})
        )
        unsteady = [k for k, f in kernels.items() if not f["native_steady"]]
        lines.append(f"unsteady native timings (kept, flagged): {len(unsteady)}")

    def delta(pair, what: str, at) -> float:
        before, after = (kernels[side_of[(pair.name, k)]][what] for k in (0, 1))
        if at == "mean":
            return geomean([after[o] / before[o] for o in offsets]) - 1.0
        return after[at] / before[at] - 1.0

    rows = []
    for pair in pairs:
        row = {"pair": pair.name, "pipeline": {o: delta(pair, "cycles", o) for o in offsets}}
        if args.native:
            row["native"] = {o: delta(pair, "native_s", o) for o in offsets}
            row["native_mean"] = delta(pair, "native_s", "mean")
        rows.append(row)
    for what in ("pipeline", "native") if args.native else ("pipeline",):
        # how far a pair's time ratio (after / before) moves from the first offset's, as a fraction
        moves = [max(abs((1 + r[what][o]) / (1 + r[what][offsets[0]]) - 1) for o in offsets) for r in rows]
        worst = rows[max(range(len(rows)), key=moves.__getitem__)]["pair"]
        lines.append(
            f"{what}: pair ratios (after / before), largest move from offset {offsets[0]}'s: median "
            f"{100 * statistics.median(moves):.1f} %, above 5 % on {sum(m > 0.05 for m in moves)} of "
            f"{len(rows)}, above 10 % on {sum(m > 0.10 for m in moves)}; max {100 * max(moves):.1f} % ({worst})"
        )
    if args.native:
        at_first = [r["native"][offsets[0]] for r in rows]
        mean = [r["native_mean"] for r in rows]
        predicted = [r["pipeline"][offsets[0]] for r in rows]
        predicted_mean = [geomean([1 + r["pipeline"][o] for o in offsets]) - 1 for r in rows]
        lines.append(
            f"Spearman, pipeline (offset {offsets[0]}) against native at offset {offsets[0]}: "
            f"{spearman(predicted, at_first):.3f}; against native averaged over the offsets: "
            f"{spearman(predicted, mean):.3f}; pipeline averaged too: {spearman(predicted_mean, mean):.3f}"
        )
    print("\n".join(lines))
    if args.json:
        out = {"offsets": offsets, "model": model.model_id, "kernels": kernels, "pairs": rows, "summary": lines}
        if args.native:
            out["machine"] = machine
        atomic_write_text(args.json, json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
