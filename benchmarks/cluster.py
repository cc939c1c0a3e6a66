"""`perfguard check` on a real Dask cluster (a scheduler and worker processes started here, each
worker in a folder and cache of its own) against the local pool, and the cluster's fault cases.

    python benchmarks/cluster.py [--workers 2] [--growth-kernels 100] [--growth-targets aarch64]
                                 [--skip-growth] [--skip-faults]

Runs, each `perfguard check` in a process of its own:

- this repository's check, cold (`--recompute`: every job lowered, built, simulated and checked
  again), with the local pool (-j WORKERS) and on the cluster (--executor dask);
- a project of --growth-kernels built-in-family kernels (benchmarks/growth.py's generator), cold,
  local and on the cluster;
- faults: a scheduler with no worker; a worker whose PATH has no qemu (refused by name, the
  others run its share); a worker that cannot see the project (a mount namespace hides it).

Reported: the client's CPU and wall seconds (its rusage: the check and what it started), the
workers' CPU seconds (the report's timings.cluster: each job's CPU on its worker), the jobs each
worker ran, and whether the cluster's results equal the local pool's (statistics, predicted
times, verdicts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import growth  # noqa: E402 - the synthetic project's generator, beside this script


def start_scheduler(work: Path) -> tuple[subprocess.Popen, str]:
    work.mkdir(parents=True, exist_ok=True)
    port_file = work / "scheduler.json"
    proc = subprocess.Popen(
        [
            "dask",
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(port_file),
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        if port_file.exists():
            try:
                return proc, json.loads(port_file.read_text())["address"]
            except (json.JSONDecodeError, KeyError):
                pass
        time.sleep(0.1)
    raise SystemExit("the scheduler did not start")


def start_worker(
    address: str, name: str, work: Path, env: dict | None = None, hide: Path | None = None
) -> subprocess.Popen:
    folder = work / f"worker-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    command = ["dask", "worker", address, "--nthreads", "1", "--name", name, "--no-dashboard"]
    if hide is not None:
        command = ["unshare", "--mount", "sh", "-c", f'mount -t tmpfs tmpfs "{hide}" && exec "$@"', "w", *command]
    return subprocess.Popen(
        command,
        cwd=folder,
        env={**os.environ, "PERFGUARD_WORKER_CACHE_DIR": str(folder / "cache"), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for_workers(address: str, count: int) -> None:
    import distributed

    with distributed.Client(address, set_as_default=False) as client:
        client.wait_for_workers(count, timeout=120)


def stop(processes) -> None:
    for proc in processes:
        proc.terminate()
    for proc in processes:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def check(config: Path, args: list[str], report_dir: Path, ok=(0, 1)) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfguard.shells.cli",
            "check",
            "--config",
            str(config),
            "--report-dir",
            str(report_dir),
            *args,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit(
            f"check {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    data = json.loads((report_dir / "perfguard.json").read_text())
    cluster = data["timings"].get("cluster", [])
    return {
        "exit": proc.returncode,
        "wall_s": wall,
        "cpu_s": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
        "workers_cpu_s": sum(w["cpu_s"] for w in cluster),
        "per_worker": cluster,
        "results": [(r["kernel"], r["target"], r["verdict"], r["stats"], r["current_time_s"]) for r in data["results"]],
        "stderr": proc.stderr.strip().splitlines()[-3:],
    }


def compare(name: str, config: Path, work: Path, address: str, jobs: int, rows: dict) -> None:
    local = check(config, ["--recompute", "-j", str(jobs)], work / f"{name}-local")
    remote = check(config, ["--recompute", "--executor", "dask", "--scheduler", address], work / f"{name}-cluster")
    rows[name] = {
        "local": local,
        "cluster": remote,
        "same": local["results"] == remote["results"],
        "results": len(local["results"]),
    }
    print(
        f"{name}: local {local['cpu_s']:.1f} CPU-s {local['wall_s']:.1f} s; cluster client {remote['cpu_s']:.1f} "
        f"CPU-s, workers {remote['workers_cpu_s']:.1f} CPU-s, {remote['wall_s']:.1f} s; same: {rows[name]['same']}",
        flush=True,
    )


def faults(work: Path, rows: dict) -> None:
    config = growth.project(work / "faults-project", 4, ["aarch64"])
    (config.parent / "cache").mkdir()
    lines = {}
    sched, address = start_scheduler(work / "faults-empty")
    try:  # no worker at all
        started = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "perfguard.shells.cli",
                "check",
                "--config",
                str(config),
                "--executor",
                "dask",
                "--scheduler",
                address,
                "--join-timeout",
                "10",
                "--recompute",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        lines["no worker"] = {
            "exit": proc.returncode,
            "wall_s": round(time.perf_counter() - started, 1),
            "said": proc.stderr.strip().splitlines()[-1:],
        }
    finally:
        stop([sched])
    sched, address = start_scheduler(work / "faults-noqemu")
    path = ":".join(p for p in os.environ["PATH"].split(":") if not Path(p, "qemu-aarch64").exists())
    shim = work / "noqemu-bin"  # the same PATH without qemu-aarch64: a worker machine that lacks it
    shim.mkdir(exist_ok=True)
    for folder in os.environ["PATH"].split(":"):
        if Path(folder, "qemu-aarch64").exists():
            for tool in Path(folder).iterdir():
                if tool.name != "qemu-aarch64" and not (shim / tool.name).exists():
                    (shim / tool.name).symlink_to(tool)
    workers = [
        start_worker(address, "full", work / "faults-noqemu"),
        start_worker(address, "noqemu", work / "faults-noqemu", env={"PATH": f"{shim}:{path}"}),
    ]
    try:
        wait_for_workers(address, 2)
        got = check(config, ["--recompute", "--executor", "dask", "--scheduler", address], work / "faults-noqemu-r")
        lines["worker without qemu"] = {"exit": got["exit"], "said": got["stderr"], "per_worker": got["per_worker"]}
    finally:
        stop(workers + [sched])
    rows["faults"] = lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--growth-kernels", type=int, default=100)
    parser.add_argument("--growth-targets", default="aarch64")
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pg-cluster-"))
    rows: dict = {}
    try:
        sched, address = start_scheduler(work)
        workers = [start_worker(address, f"w{i}", work) for i in range(args.workers)]
        try:
            wait_for_workers(address, args.workers)
            compare("this repository", REPO / "perfguard.toml", work, address, args.workers, rows)
            if not args.skip_growth:
                config = growth.project(work / "growth", args.growth_kernels, args.growth_targets.split(","))
                compare(
                    f"{args.growth_kernels} kernels on {args.growth_targets}", config, work, address, args.workers, rows
                )
        finally:
            stop(workers + [sched])
        if not args.skip_faults:
            faults(work, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    cpu = os.cpu_count()
    print(
        f"{args.workers} Dask workers (dask worker --nthreads 1, own caches) vs the local pool -j {args.workers}, "
        f"{cpu} CPUs\n"
    )
    print("| project | results | executor | client CPU s | workers' CPU s | wall s | jobs per worker | same results |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- | --- |")
    for name, row in rows.items():
        if name == "faults":
            continue
        for side in ("local", "cluster"):
            r = row[side]
            per = ", ".join(f"{w['worker']} {w['jobs']}" for w in r["per_worker"]) or "-"
            print(
                f"| {name} | {row['results']} | {side} | {r['cpu_s']:.1f} | {r['workers_cpu_s']:.1f} | "
                f"{r['wall_s']:.1f} | {per} | {'yes' if row['same'] else 'NO'} |"
            )
    for name, fault in rows.get("faults", {}).items():
        print(f"\nfault: {name}: exit {fault['exit']}" + (f" after {fault['wall_s']} s" if "wall_s" in fault else ""))
        for line in fault.get("said", []):
            print(f"    {line}")
        if fault.get("per_worker"):
            print("    jobs: " + ", ".join(f"{w['worker']} {w['jobs']}" for w in fault["per_worker"]))


if __name__ == "__main__":
    main()
