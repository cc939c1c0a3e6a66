"""Autotuning on simulators, evaluated (benchmarks/RESULTS.md, "## Autotuning").

    python benchmarks/tune_eval.py native-vs-sim [--trials 32] [--strategies knobs,evolutionary]
                                                  [--baselines DIR]
        x86_64, GEMM and conv2d: tune once scoring candidates by simulation + predictor (the
        calibrated models under DIR/models, else the analytical model) and once
        by native timing, same budget and seed; then time both winners natively, interleaved,
        and report the simulator-chosen best relative to the native-chosen best and both wall times.
    python benchmarks/tune_eval.py cross [--trials 32] [--targets aarch64,riscv64]
        the tuned schedule vs the hand-written configured one: simulated instructions and
        predicted time per kernel call.
    python benchmarks/tune_eval.py scaling [--jobs 24]
        simulations per minute with 1 and 2 local workers and a 2-worker Dask local cluster,
        each on a fresh cache (every job is built and simulated).
    python benchmarks/tune_eval.py families [--trials 4]
        every built-in family on every target with each strategy: does tuning run end to end.

Kernels come from this repository's perfguard.toml (gemm_256, conv2d_3x3_28, and one kernel
per family); each run works in its own scratch project. cross and families share one build
cache (--cache, default a temporary folder); native-vs-sim and scaling give every run an
empty cache of its own, so that wall times include every build and simulation. --json FILE
keeps the raw figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from perfguard.compile.cache import BuildCache
from perfguard.config import Config, KernelSpec, load_config
from perfguard.executors import make_executor
from perfguard.job.native import time_native
from perfguard.job.run import Job, run_job
from perfguard.tune.output import fmt_time
from perfguard.tune.session import tune_kernel

REPO = Path(__file__).resolve().parents[1]
EVAL_KERNELS = ("gemm_256", "conv2d_3x3_28")
FAMILY_KERNELS = ("gemm_512x64x128", "gemv_1024", "conv2d_1x1_14", "depthwise_3x3_56", "dense_relu_16x512x256")


def project(cache: Path, scratch: Path, targets: tuple[str, ...], baselines: Path | None = None) -> Config:
    """The repository's kernels in a scratch project (its own tuned/ and reports/); `baselines`
    is where its calibrated models are (default: none, so the analytical model scores)."""
    text = (REPO / "perfguard.toml").read_text()
    text = text.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache}"\n', 1)
    text = text.replace('baseline_dir = "baselines"', f'baseline_dir = "{baselines or scratch / "baselines"}"')
    text = text.replace('targets = ["x86_64", "aarch64", "riscv64"]', f"targets = {json.dumps(list(targets))}")
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "perfguard.toml").write_text(text)
    return load_config(scratch / "perfguard.toml")


def run_tune(config, kernel, target, strategy, trials, measure, workers=2, seed=0):
    with make_executor("local", workers) as executor:
        started = time.monotonic()
        result = tune_kernel(
            config,
            config.kernel(kernel),
            config.profile(target),
            executor,
            strategy=strategy,
            trials=trials,
            measure=measure,
            seed=seed,
        )
        return result, time.monotonic() - started


def retime(profile, binaries: dict[str, Path], rounds: int = 5) -> dict[str, float]:
    """Native medians of each binary, measured in alternation so that drift hits both alike."""
    samples: dict[str, list[float]] = {name: [] for name in binaries}
    for _ in range(rounds):
        for name, binary in binaries.items():
            samples[name].append(time_native(binary, profile, name).median_s)
    return {name: statistics.median(values) for name, values in samples.items()}


def table(header: list[str], rows: list[list[str]]) -> None:
    """A Markdown table; a header starting with '#' (counts) or '~' (measures) is right-aligned."""
    print("| " + " | ".join(h.lstrip("#~ ") for h in header) + " |")
    print("| --- | " + " | ".join("---:" if h.startswith(("#", "~")) else "---" for h in header[1:]) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def native_vs_sim(args) -> dict:
    """Each tuning run starts from an empty cache of its own, so both wall times include every build."""
    rows = []
    for kernel in EVAL_KERNELS:
        for strategy in args.strategies:
            runs, walls, configs = {}, {}, {}
            for measure in ("sim", "native"):
                tag = f"nvs-{kernel}-{strategy}-{measure}"
                configs[measure] = project(
                    args.scratch / f"cache-{tag}", args.scratch / tag, ("x86_64",), args.baselines
                )
                runs[measure], walls[measure] = run_tune(
                    configs[measure], kernel, "x86_64", strategy, args.trials, measure
                )
            sim, nat = runs["sim"], runs["native"]

            def binary(measure, trial):  # called within this iteration
                return BuildCache(configs[measure].storage.cache_dir).build_dir(trial.content_hash) / "harness"  # noqa: B023

            times = retime(
                configs["sim"].profile("x86_64"),
                {
                    "configured": binary("sim", sim.configured),
                    "sim_best": binary("sim", sim.tuned),
                    "native_best": binary("native", nat.tuned),
                },
            )
            row = {
                "kernel": kernel,
                "strategy": strategy,
                "trials": args.trials,
                "sim_wall_s": walls["sim"],
                "native_wall_s": walls["native"],
                **{f"{k}_native_s": v for k, v in times.items()},
                "sim_best_vs_native_best": times["sim_best"] / times["native_best"],
                "sim_errors": sim.errors,
                "native_errors": nat.errors,
                "model": sim.model,
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    table(
        [
            "kernel",
            "strategy",
            "# trials",
            "~configured (native)",
            "~sim-chosen best (native)",
            "~native-chosen best (native)",
            "~sim-chosen / native-chosen",
            "~wall, sim tuning",
            "~wall, native tuning",
        ],
        [
            [
                r["kernel"],
                r["strategy"],
                str(r["trials"]),
                fmt_time(r["configured_native_s"]),
                fmt_time(r["sim_best_native_s"]),
                fmt_time(r["native_best_native_s"]),
                f"{100 * (r['sim_best_vs_native_best'] - 1):+.1f} %",
                f"{r['sim_wall_s']:.0f} s",
                f"{r['native_wall_s']:.0f} s",
            ]
            for r in rows
        ],
    )
    return {"native_vs_sim": rows}


def matrix(args, kernels: tuple[str, ...], tag: str):
    """(target, kernel, strategy, scratch project) for every combination asked for."""
    for target in args.targets:
        for kernel in kernels:
            for strategy in args.strategies:
                yield (
                    target,
                    kernel,
                    strategy,
                    project(args.cache, args.scratch / f"{tag}-{target}-{kernel}-{strategy}", (target,)),
                )


def cross(args) -> dict:
    rows = []
    for target, kernel, strategy, config in matrix(args, EVAL_KERNELS, "cross"):
        result, wall = run_tune(config, kernel, target, strategy, args.trials, "sim")
        row = {
            "target": target,
            "kernel": kernel,
            "strategy": strategy,
            "trials": args.trials,
            "wall_s": wall,
            "errors": result.errors,
            "model": result.model,
            "configured_insts": result.configured.stats["insts"],
            "tuned_insts": result.tuned.stats["insts"],
            "configured_s": result.configured.predicted_s,
            "tuned_s": result.tuned.predicted_s,
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    table(
        [
            "target",
            "kernel",
            "strategy",
            "# trials",
            "~instructions, configured -> tuned",
            "~predicted, configured -> tuned",
            "~speed-up",
            "# errors",
            "~wall",
        ],
        [
            [
                r["target"],
                r["kernel"],
                r["strategy"],
                str(r["trials"]),
                f"{r['configured_insts'] / 1e6:.2f} M -> {r['tuned_insts'] / 1e6:.2f} M",
                f"{fmt_time(r['configured_s'])} -> {fmt_time(r['tuned_s'])}",
                f"{r['configured_s'] / r['tuned_s']:.2f}x",
                str(r["errors"]),
                f"{r['wall_s']:.0f} s",
            ]
            for r in rows
        ],
    )
    return {"cross": rows}


def warm_up(_: int) -> None:
    """Import what a job needs, and stay busy long enough that every worker gets one."""
    import tvm  # noqa: F401

    import perfguard.job.run  # noqa: F401

    time.sleep(2.0)


def scaling(args) -> dict:
    """Distinct knob variants of gemm_256 on aarch64 and riscv64: build + simulate each."""
    from perfguard.kernels import get_family

    family = get_family("gemm")
    variants = list(family.space(M=128, N=128, K=128))[:: max(1, 28800 // args.jobs)][: args.jobs // 2]
    rows = []
    for name, kind, workers in (
        ("local, 1 worker", "local", 1),
        ("local, 2 workers", "local", 2),
        ("Dask LocalCluster, 2 workers", "dask", 2),
    ):
        cache = Path(tempfile.mkdtemp(prefix="scaling-", dir=args.scratch))
        config = project(cache, args.scratch / f"scaling-{kind}-{workers}", ("aarch64", "riscv64"))
        jobs = [
            Job(
                KernelSpec(f"v{i}", "perfguard.kernels.gemm:gemm", "gemm", params),
                config.profile(t),
                config.root,
                cache,
                "qemu",
                600.0,
                1,
                1,
            )
            for i, params in enumerate(variants)
            for t in ("aarch64", "riscv64")
        ]
        with make_executor(kind, workers) as executor:
            executor.map(warm_up, range(workers))  # start-up (worker spawn, imports) is not throughput
            started = time.monotonic()
            results = executor.map(run_job, jobs)
            wall = time.monotonic() - started
        stats = [json.dumps(r.stats.to_record(), sort_keys=True) for r in results if r.ok]
        rows.append(
            {
                "executor": name,
                "jobs": len(jobs),
                "ok": len(stats),
                "wall_s": wall,
                "per_minute": 60 * len(jobs) / wall,
                "digest": hash(tuple(stats)),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    same = len({r["digest"] for r in rows}) == 1
    table(
        ["executor", "# simulations", "~wall", "~simulations / minute"],
        [[r["executor"], str(r["jobs"]), f"{r['wall_s']:.1f} s", f"{r['per_minute']:.1f}"] for r in rows],
    )
    print(f"\nstatistics identical across executors: {'yes' if same else 'NO'}")
    return {"scaling": rows, "identical": same}


def families(args) -> dict:
    rows = []
    for target, kernel, strategy, config in matrix(args, FAMILY_KERNELS, "fam"):
        try:
            result, wall = run_tune(config, kernel, target, strategy, args.trials, "sim")
            ok = result.tuned is not None and result.tuned.ok
            row = {
                "target": target,
                "kernel": kernel,
                "strategy": strategy,
                "ok": ok,
                "wall_s": wall,
                "errors": result.errors,
                "speedup": result.speedup,
            }
        except Exception as exc:  # report and go on: the table shows what failed
            row = {
                "target": target,
                "kernel": kernel,
                "strategy": strategy,
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
            }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    table(
        ["target", "kernel", "strategy", "result", "# candidate errors", "~speed-up", "~wall"],
        [
            [
                r["target"],
                r["kernel"],
                r["strategy"],
                "ok" if r["ok"] else r.get("error", "failed"),
                str(r.get("errors", "-")),
                f"{r['speedup']:.2f}x" if r.get("speedup") else "-",
                f"{r.get('wall_s', 0):.0f} s",
            ]
            for r in rows
        ],
    )
    return {"families": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("native-vs-sim", "cross", "scaling", "families"))
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--strategies", type=lambda s: s.split(","), default=["knobs", "evolutionary"])
    parser.add_argument("--targets", type=lambda s: s.split(","), default=["aarch64", "riscv64"])
    parser.add_argument("--cache", type=Path, help="build/simulation cache (default: a temporary folder)")
    parser.add_argument(
        "--baselines",
        type=Path,
        help="baseline folder with the calibrated models to score with (default: none: the analytical model)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.scratch = Path(tempfile.mkdtemp(prefix="perfguard-tune-eval-"))
    args.cache = args.cache or args.scratch / "cache"
    data = {"native-vs-sim": native_vs_sim, "cross": cross, "scaling": scaling, "families": families}[args.what](args)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
