"""A perfguard killed outright (SIGKILL: the OOM killer, a runner that kills only the main
process) leaves no pool worker, no Dask worker of the local cluster it started and no simulator
running behind it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("qemu-aarch64") is None, reason="needs qemu-aarch64 (scripts/setup.sh)"),
]

# Two kernels that each simulate for several seconds, so each of the JOBS workers is busy in QEMU
# when the main process is killed.
JOBS = 2
PROJECT = """\
[perfguard]
targets = ["aarch64"]
cache_dir = "{cache}"

[[kernel]]
name = "gemm_a"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = 384, N = 384, K = 384, vector = 1, tile_n = 8 }}

[[kernel]]
name = "gemm_b"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = 384, N = 384, K = 320, vector = 1, tile_n = 8 }}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A cache holding both kernels' builds (not their simulations): each run below goes straight
    from its cache hits to QEMU, where the kill lands; no run ever stores a simulation."""
    from perfguard.config import load_config
    from perfguard.job.run import JobResult, build_kernel
    from perfguard.runs.check import make_jobs, select

    root = tmp_path_factory.mktemp("orphans-build")
    (root / "perfguard.toml").write_text(PROJECT.format(cache=root / "cache"))
    config = load_config(root / "perfguard.toml")
    for job in make_jobs(config, select(config, None, None)):
        build_kernel(job, JobResult(job.kernel.name, job.profile.name, job.kernel.family, {}, job.simulator, False))
    return root / "cache"


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.NoSuchProcess:
        return ""


def _alive(procs: list[psutil.Process]) -> list[str]:
    left = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.cmdline())[-120:]}")
        except psutil.NoSuchProcess:
            pass
    return left


# One run per executor with its own process tree: a local pool (workers that die with the main
# process, each taking its simulator with it) and a Dask cluster. `-j 1`, where the main process
# runs the simulator itself, has no tree of its own: its simulator dies with the process that
# started it, as every pool worker's does here.
@pytest.mark.parametrize(
    "command",
    [
        ["baseline", "update", "-j", str(JOBS)],  # a local process pool
        # A Dask LocalCluster started for the run: its worker processes exit when the pipe from their
        # parent closes (distributed's own watch), and take their simulators with them.
        ["check", "--executor", "dask", "-j", str(JOBS)],
    ],
    ids=["pool", "dask"],
)
def test_sigkill_of_the_main_process_leaves_no_worker_or_simulator(tmp_path, built, command):
    if "dask" in command:
        pytest.importorskip("distributed", reason="--executor dask needs Dask distributed")
    (tmp_path / "perfguard.toml").write_text(PROJECT.format(cache=built))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    main = subprocess.Popen(
        [sys.executable, "-m", "perfguard.shells.cli", *command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = psutil.Process(main.pid)
    deadline = time.monotonic() + 240
    descendants: list[psutil.Process] = []
    try:
        # Wait until every worker runs a simulator: the moment a kill hurts most.
        while time.monotonic() < deadline and main.poll() is None:
            descendants = parent.children(recursive=True)
            if sum("qemu-aarch64" in _name(p) for p in descendants) >= JOBS:
                break
            time.sleep(0.2)
        assert main.poll() is None, "the update ended before its simulations started"
        assert sum("qemu" in _name(p) for p in descendants) >= JOBS
        workers = [p for p in descendants if "python" in _name(p)]
        assert len(workers) >= JOBS, [p.cmdline() for p in descendants]
        main.send_signal(signal.SIGKILL)
        main.wait()
        end = time.monotonic() + 10
        while _alive(descendants) and time.monotonic() < end:
            time.sleep(0.2)
        left = _alive(descendants)
        assert left == [], "\n".join(left)
    finally:
        for p in [parent, *descendants]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
