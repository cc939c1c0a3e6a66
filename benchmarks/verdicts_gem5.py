"""Verdicts against gem5's cores where no native machine is reachable (aarch64): a model against a model.

No Arm hardware is reachable here, so aarch64 verdicts have no native truth. This scores the
verdict pairs of benchmarks/verdict_pairs.py (the x86_64 pairs' edits, built for --profile,
default aarch64) against gem5's detailed cores instead: each gem5 reference (gem5-o3: gem5's
ArmO3CPU, gem5-minor: the in-order ArmMinorCPU, both with gem5's default parameters, perfguard's
classic caches of the profile's geometry and the profile's clock) takes the place of the native
delta, and every model (insts, analytical, pipeline: llvm-mca's scheduling model of the profile's
pipeline_cpu) and the other reference are scored against it with verdicts.py's measures: Spearman
of the deltas, missed regressions (reference >= +10 %, model <= +5 %), false alarms (reference <=
+2.5 %, model > +5 %). Both sides of a score are simulations: nothing here says how Arm silicon
behaves.

gem5 results are stored per binary in benchmarks/verdicts-gem5-PROFILE.json (the file
verdicts.py --reference uses), with each side's wall time; --gem5-jobs 0 scores only what is
stored. The CPU seconds of the gem5 children of this invocation are printed at the end.

    python benchmarks/verdicts_gem5.py [--profile aarch64] [--pairs SUBSTR,..] [--reference gem5-o3,gem5-minor]
                                       [--models insts,analytical,pipeline] [--gem5-jobs N] [--json FILE] [-j N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(REPO))

from benchmarks import verdicts as vd  # noqa: E402
from perfguard.config import load_config  # noqa: E402
from perfguard.errors import InputError  # noqa: E402


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def score_against(truth: str, deltas: dict[str, dict[str, float | None]]) -> dict[str, vd.Summary]:
    """Every other column scored with `truth`'s deltas in place of the native ones."""
    reference = {n: d for n, d in deltas[truth].items() if d is not None}
    return {m: vd.summarize(reference, deltas[m]) for m in deltas if m != truth}


def pair_table(pairs: list[vd.Pair], deltas: dict[str, dict[str, float | None]]) -> str:
    columns = list(deltas)
    lines = ["| pair | kind | " + " | ".join(columns) + " |", "| --- | --- |" + " ---: |" * len(columns)]
    for pair in pairs:
        lines.append(
            f"| `{pair.name}` | {pair.kind} | " + " | ".join(vd._pct(deltas[c][pair.name]) for c in columns) + " |"
        )
    return "\n".join(lines)


def summary_table(truth: str, summaries: dict[str, vd.Summary]) -> str:
    lines = [
        f"| against {truth} | pairs scored | Spearman of deltas | missed regressions | false alarms | "
        "sign agreement (change > 10 %) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, s in summaries.items():
        rho = "n/a" if s.spearman is None else f"{s.spearman:.3f}"
        lines.append(
            f"| {model} | {s.n} | {rho} | {len(s.missed)} | {len(s.false_alarms)} | {s.sign_agree} / {s.sign_total} |"
        )
    for model, s in summaries.items():
        for label, names in (("missed", s.missed), ("false alarms", s.false_alarms)):
            if names:
                lines.append(f"\n{model} against {truth}, {label}: " + ", ".join(f"`{n}`" for n in names))
    return "\n".join(lines)


def cost_lines(runs: dict[str, dict[str, dict]]) -> list[str]:
    """Per reference: wall seconds and simulated instructions per pair (both sides, two runs each)."""
    out = []
    for ref, by_pair in runs.items():
        if not by_pair:
            continue
        walls = [p["before"]["wall_s"] + p["after"]["wall_s"] for p in by_pair.values()]
        insts = [p["before"]["sim_insts"] + p["after"]["sim_insts"] for p in by_pair.values()]
        rate = sum(insts) / sum(walls) / 1e3 if sum(walls) else float("nan")
        out.append(
            f"{ref}: {len(walls)} pairs, wall s per pair median {statistics.median(walls):.0f} "
            f"(min {min(walls):.0f}, max {max(walls):.0f}); REPS-run instructions per pair median "
            f"{statistics.median(insts) / 1e6:.1f} M; {rate:.0f} thousand instructions per wall second"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=REPO / "perfguard.toml")
    parser.add_argument("--profile", default="aarch64")
    parser.add_argument("--pairs", help="comma-separated substrings of pair names (default: every pair)")
    parser.add_argument("--models", default="insts,analytical,pipeline")
    parser.add_argument("--reference", default="gem5-o3,gem5-minor")
    parser.add_argument("--gem5-file", type=Path)
    parser.add_argument("--gem5-jobs", type=int, default=1, help="gem5 simulations at a time (0: stored only)")
    parser.add_argument("--json", type=Path, help="also write the deltas and scores as JSON here")
    parser.add_argument("-j", "--jobs", type=int, help="parallel build/simulation jobs (QEMU)")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    references = [r for r in args.reference.split(",") if r]
    for name, known, what in ((models, vd.MODELS, "model"), (references, vd.GEM5_REFERENCES, "reference")):
        unknown = [m for m in name if m not in known]
        if unknown:
            raise SystemExit(f"verdicts_gem5: unknown {what} '{unknown[0]}' (one of {', '.join(known)})")
    if not references:
        raise SystemExit("verdicts_gem5: --reference: name at least one gem5 core")
    config = load_config(args.config)
    profile = config.profile(args.profile, "--profile")
    from perfguard.sim.gem5.se_config import check_decodable

    try:
        check_decodable(profile)
    except InputError as exc:
        raise SystemExit(f"verdicts_gem5: --profile: {exc.message}") from None
    pairs = vd.select_pairs(args.pairs)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    log(f"building and simulating {len(pairs)} pairs on {profile.name} (QEMU plugin)")
    sides = vd.build_sides(pairs, config, profile, args.jobs)
    errors: dict[str, dict[str, str]] = {}
    deltas = vd.predicted_deltas(pairs, sides, profile, config, models, errors)
    cpu_before = children_cpu_s()
    runs = vd.gem5_references(
        pairs, sides, profile, config, references, args.gem5_file or vd.gem5_file_for(profile.name), args.gem5_jobs, log
    )
    cpu_s = children_cpu_s() - cpu_before
    deltas.update(vd.reference_deltas(pairs, runs))
    covered = [p for p in pairs if all(deltas[r][p.name] is not None for r in references)]
    print(
        f"{profile.name} ({profile.pipeline_cpu} scheduling model for `pipeline`): {len(covered)} of {len(pairs)} "
        f"pairs simulated by every reference. A model against a model: no native timing exists here.\n"
    )
    print(pair_table(covered, deltas))
    scores = {}
    for truth in references:
        scores[truth] = score_against(truth, {c: {n: deltas[c][n] for n in (p.name for p in covered)} for c in deltas})
        print("\n" + summary_table(truth, scores[truth]))
    print("\ncost: " + "; ".join(cost_lines(runs)))
    print(f"gem5 child CPU seconds of this invocation: {cpu_s:.0f}")
    for model, failed in errors.items():
        first = next(iter(failed))
        print(f"\n{model} could not score {len(failed)} pairs; first: `{first}`: {failed[first]}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "profile": profile.name,
                    "pairs": [p.name for p in covered],
                    "deltas": {c: {p.name: deltas[c][p.name] for p in covered} for c in deltas},
                    "scores": {t: {m: s.to_dict() for m, s in by.items()} for t, by in scores.items()},
                },
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
