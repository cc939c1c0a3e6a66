"""A ResNet-18-like ONNX model (examples/make_resnet.py: 1x3x64x64, 11.7 M parameters) through perfguard.

    python benchmarks/model_resnet.py edits [--target x86_64]
    python benchmarks/model_resnet.py schedule [--targets x86_64,aarch64]
    python benchmarks/model_resnet.py timing [--targets x86_64,aarch64]

`edits`: baselines of the model, then a check of each edit a reviewer would make (widen stage 3
256 -> 320, a third block in stage 3, layer2.1.conv1 swapped for two 1x1 convolutions, layer2.1
removed): the model's verdict, its delta, the summary's counts of model kernels and every change
line perfguard prints. `schedule`: the model with `schedule = "none"` (TVM's unscheduled loops,
what tvm.compile builds without tuning) and with the default (TVM's default CPU rules, fixed
decisions): predicted time per inference, GFLOP/s (TVM's flop estimate x calls / predicted time)
and the vector share of FP instructions (calls-weighted). `timing`: a cold check (empty cache),
a no-op check (nothing changed) and a check after one widened stage, with the check's own stage
timings (wall and CPU seconds: CPU, user + sys with children, is the figure on a shared machine).

Each part works in a temporary folder with its own cache (PERFGUARD_CACHE_DIR to reuse one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from examples.make_resnet import write as write_resnet  # noqa: E402

TOML = """[perfguard]
targets = {targets}
cache_dir = "{cache}"

[[model]]
name = "resnet18"
source = "resnet18.onnx"
inputs = {{ input = [1, 3, 64, 64] }}
{extra}
"""
EDITS = {
    "widen stage 3 (256 -> 320 channels)": dict(widths=(64, 128, 320, 512)),
    "deepen stage 3 (a third block)": dict(depths=(2, 2, 3, 2)),
    "swap layer2.1.conv1 (3x3) for two 1x1": dict(split=("layer2.1.conv1",)),
    "remove block layer2.1": dict(depths=(2, 1, 2, 2)),
}


def project(work: Path, targets: list[str], cache: Path, extra: str = "", **edit) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    write_resnet(work / "resnet18.onnx", **edit)
    config = work / "perfguard.toml"
    config.write_text(TOML.format(targets=json.dumps(targets), cache=cache, extra=extra))
    return config


def perfguard(config: Path, *args: str) -> tuple[int, str, float, float]:
    """(exit code, stdout, CPU seconds, wall seconds) of one perfguard command."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "perfguard.shells.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if proc.returncode not in (0, 1):
        raise SystemExit(f"perfguard {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, proc.stdout, cpu, wall


def edits(target: str, cache: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="pg-resnet-edits-"))
    config = project(work, [target], cache)
    perfguard(config, "baseline", "update")
    for name, edit in EDITS.items():
        project(work, [target], cache, **edit)
        code, _, _, _ = perfguard(config, "check", "--json", str(work / "edit.json"))
        report = json.loads((work / "edit.json").read_text())
        (view,) = report["models"]
        s = report["summary"]
        print(
            f"### {name}\n\n`perfguard check` exit {code}: model {view['verdict']} {view['delta_pct']:+.2f} % "
            f"({view['baseline_total_s'] * 1e3:.3f} -> {view['current_total_s'] * 1e3:.3f} ms per inference); "
            f"model kernels: {s.get('changed', 0)} changed, {s['new']} new, {s['removed']} removed\n"
        )
        print("```")
        print("\n".join(view["changes"]))
        print("```\n")
    project(work, [target], cache)


def _totals(report: dict) -> dict[str, dict]:
    """Per target: predicted time, flops and FP instruction counts per inference, summed over the model."""
    out: dict[str, dict] = {}
    results = {(r["kernel"], r["target"]): r for r in report["results"]}
    for view in report["models"]:
        t = out.setdefault(
            view["target"], {"time": view["current_total_s"], "flops": 0.0, "fp": 0, "vec_fp": 0, "kernels": 0}
        )
        for row in view["kernels"]:
            r = results[(row["kernel"], view["target"])]
            calls = row["calls"] or 0
            t["flops"] += (r.get("flops") or 0) * calls
            t["fp"] += (r["stats"].get("fp_insts") or 0) * calls
            t["vec_fp"] += (r["stats"].get("vec_fp_insts") or 0) * calls
            t["kernels"] += 1
    return out


def schedule(targets: list[str], cache: Path) -> None:
    print("| target | schedule | predicted per inference | GFLOP/s | vector share of FP instructions |")
    print("|---|---|--:|--:|--:|")
    rows = {}
    for kind, extra in (("none (TVM's loops)", 'schedule = "none"'), ("default (TVM's CPU rules)", "")):
        work = Path(tempfile.mkdtemp(prefix="pg-resnet-schedule-"))
        config = project(work, targets, cache, extra)
        perfguard(config, "check", "--json", str(work / "check.json"))
        rows[kind] = _totals(json.loads((work / "check.json").read_text()))
    for target in targets:
        for kind, found in rows.items():
            t = found[target]
            share = t["vec_fp"] / (t["fp"] + t["vec_fp"]) * 100 if t["fp"] + t["vec_fp"] else 0.0
            print(
                f"| {target} | {kind} | {t['time'] * 1e3:.2f} ms | {t['flops'] / t['time'] / 1e9:.2f} | {share:.1f} % |"
            )
        before, after = (rows[k][target]["time"] for k in rows)
        print(f"| {target} | speed-up | {before / after:.1f}x | | |")


def timing(targets: list[str], cache: Path) -> None:
    """A cold check (an empty cache), a no-op one, and one after stage 4 is widened 512 -> 640
    channels (its kernels and the dense layer's take new shapes), each a fresh process, with the
    check's own stage timings (perfguard.timings, the JSON report's `timings`)."""
    work = Path(tempfile.mkdtemp(prefix="pg-resnet-timing-"))
    config = project(work, targets, cache)
    for label, edit in (
        ("cold (empty cache)", {}),
        ("no-op (nothing changed)", {}),
        ("stage 4 widened (512 -> 640 channels)", dict(widths=(64, 128, 256, 640))),
    ):
        if edit:
            project(work, targets, cache, **edit)
        _, _, cpu, wall = perfguard(config, "check", "--json", str(work / "check.json"))
        timings = json.loads((work / "check.json").read_text()).get("timings") or {}
        print(f"\n{label}, targets {', '.join(targets)}: {cpu:.1f} CPU-s, {wall:.1f} wall s (the whole process)\n")
        print("| stage | wall s | CPU s |\n|---|--:|--:|")
        for name, span in (timings.get("stages") or {}).items():
            print(f"| {name} | {span['wall_s']:.2f} | {span['cpu_s']:.2f} |")
        total = timings.get("total") or {}
        if total:
            print(f"| total | {total['wall_s']:.2f} | {total['cpu_s']:.2f} |")
        jobs = timings.get("jobs") or []
        print(
            f"\n{len(jobs)} jobs, {sum(1 for j in jobs if j.get('reused'))} reused from their records"
            + ("; the whole check reused from its record" if timings.get("reused") else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("edits", "schedule", "timing"))
    parser.add_argument("--target", default="x86_64")
    parser.add_argument("--targets", default="x86_64,aarch64")
    args = parser.parse_args()
    cache = Path(os.environ.get("PERFGUARD_CACHE_DIR") or tempfile.mkdtemp(prefix="pg-resnet-cache-"))
    with contextlib.suppress(KeyboardInterrupt):
        if args.part == "edits":
            edits(args.target, cache)
        elif args.part == "schedule":
            schedule(args.targets.split(","), cache)
        else:
            timing(args.targets.split(","), Path(tempfile.mkdtemp(prefix="pg-resnet-cold-")))


if __name__ == "__main__":
    main()
