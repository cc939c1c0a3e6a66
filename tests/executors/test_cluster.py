"""A Dask cluster as a team runs one: workers in processes of their own that do not see the
project (a mount namespace hides its folder), a worker whose tools differ refused by name, a
scheduler without workers answered with a message instead of a hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from perfguard.errors import InfraError
from perfguard.executors import make_executor
from perfguard.shells.cli import main

distributed = pytest.importorskip("distributed")

# A user kernel with everything a worker would otherwise need the project for: its entry imports a
# helper module beside it, its reference and its flops are functions of the project's, and the
# reference reads a data file.
KERNELS = {
    "ops/__init__.py": "",
    "ops/shapes.py": "TILE = 4\n",
    "ops/scale.py": """
        import numpy as np
        from pathlib import Path
        import tvm
        from tvm import te
        from ops.shapes import TILE

        def scaled_add(n=64):
            a = te.placeholder((n,), name="a")
            b = te.placeholder((n,), name="b")
            c = te.compute((n,), lambda i: a[i] * 2.0 + b[i], name="c")
            func = te.create_prim_func([a, b, c])
            sch = tvm.s_tir.Schedule(func)
            (i,) = sch.get_loops(sch.get_sblock("c"))
            sch.split(i, factors=[None, TILE])
            return sch.mod

        def reference(inputs, n=64):
            factor = float((Path(__file__).parent / "factor.txt").read_text())
            a, b = inputs
            return [a * factor + b]

        def flops(n=64):
            return 2 * n
        """,
    "ops/factor.txt": "2.0\n",
    "mymodels.py": """
        from tvm.relax.frontend import nn

        class Net(nn.Module):
            def __init__(self):
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return nn.relu(self.fc(x))

        def net():
            return Net().export_tvm(spec={"forward": {"x": nn.spec.Tensor((2, 8), "float32")}})
        """,
}

TOML = """
[perfguard]
targets = ["aarch64"]

[[kernel]]
name = "scaled_add"
entry = "ops.scale:scaled_add"
reference = "ops.scale:reference"
flops = "ops.scale:flops"
params = { n = 64 }

[[model]]
name = "net"
source = "mymodels:net"
"""


def _can_hide(folder: Path) -> bool:
    probe = subprocess.run(["unshare", "--mount", "sh", "-c", f"mount -t tmpfs tmpfs {folder}"], capture_output=True)
    return probe.returncode == 0


@pytest.fixture
def scheduler():
    """A scheduler alone: workers are started by each test, as processes of their own."""
    import dask

    with dask.config.set({"distributed.admin.tick.interval": "1s"}):
        cluster = distributed.LocalCluster(
            n_workers=0, processes=True, host="127.0.0.1", dashboard_address=":0", silence_logs=40
        )
    with cluster:
        yield cluster.scheduler_address


def _worker(
    address: str, name: str, cache: Path, hide: Path | None = None, env: dict | None = None, nanny: bool = True
):
    command = [
        sys.executable,
        "-m",
        "distributed.cli.dask_worker",
        address,
        "--nthreads",
        "1",
        "--nworkers",
        "1",
        "--name",
        name,
        "--no-dashboard",
        *([] if nanny else ["--no-nanny"]),
    ]
    environment = {**os.environ, "PERFGUARD_WORKER_CACHE_DIR": str(cache), **(env or {})}
    if hide is not None:  # the project's folder empty for this process and its children
        command = ["unshare", "--mount", "sh", "-c", f'mount -t tmpfs tmpfs "{hide}" && exec "$@"', "worker", *command]
    return subprocess.Popen(command, env=environment, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_for(address: str, names: set[str], timeout: float = 60.0) -> None:
    with distributed.Client(address, set_as_default=False) as client:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = client.scheduler_info(n_workers=-1)["workers"].values()
            if names <= {w.get("name") for w in info}:
                return
            time.sleep(0.2)
    raise AssertionError(f"workers {names} did not join")


def _stop(processes) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _results(config: Path) -> tuple[list, dict]:
    data = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    rows = [
        (r["kernel"], r["target"], r["verdict"], r["stats"], r["current_time_s"], r.get("max_error"))
        for r in data["results"]
    ]
    return rows, data["timings"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_a_worker_that_cannot_see_the_project_checks_user_kernels_and_models_as_the_local_pool(
    scheduler, project, tmp_path
):
    config = project(TOML, KERNELS)
    if not _can_hide(config.parent):
        pytest.skip("mount namespaces are not available here (needs root or user namespaces)")
    assert main(["check", "--config", str(config), "-j", "1"]) == 0  # writes no baselines: all "new"
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    assert main(["check", "--config", str(config), "-j", "1", "--recompute"]) == 0
    local, _ = _results(config)

    worker = _worker(scheduler, "blind", tmp_path / "worker-cache", hide=config.parent)
    try:
        _wait_for(scheduler, {"blind"})
        with distributed.Client(scheduler, set_as_default=False) as client:  # it really cannot see the project
            assert client.run(os.listdir, str(config.parent)) == {next(iter(client.nthreads())): []}
        assert (
            main(["check", "--config", str(config), "--executor", "dask", "--scheduler", scheduler, "--recompute"]) == 0
        )
    finally:
        _stop([worker])
    remote, timings = _results(config)
    assert remote == local and len(local) >= 2  # the user kernel and the model's kernel(s), statistics and all
    assert {r[0] for r in local} >= {"scaled_add"} and any(r[0].startswith("net.") for r in local)
    assert {j.get("worker") for j in timings["jobs"]} == {"blind"}
    assert [w["worker"] for w in timings["cluster"]] == ["blind"] and timings["cluster"][0]["cpu_s"] > 0
    assert timings["cluster"][0]["jobs"] == len(local)
    assert not any((tmp_path / "worker-cache").glob("job-records/**/*.json"))  # nothing recorded by the worker
    assert any((tmp_path / "worker-cache" / "builds").rglob("harness"))  # built there


@pytest.mark.slow
def test_a_worker_with_other_tools_is_refused_by_name_and_the_others_run_its_share(
    scheduler, project, tmp_path, capsys
):
    config = project("""
        [perfguard]
        targets = ["riscv64"]

        [[kernel]]
        name = "gemm_small"
        entry = "perfguard.kernels.gemm:gemm"
        family = "gemm"
        params = { M = 16, N = 16, K = 16 }
        """)
    # a QEMU variable set on one worker only: its simulations could differ from this machine's
    workers = [
        _worker(scheduler, "good", tmp_path / "good"),
        _worker(scheduler, "odd", tmp_path / "odd", env={"QEMU_CPU": "rv64,v=false"}),
    ]
    try:
        _wait_for(scheduler, {"good", "odd"})
        assert main(["check", "--config", str(config), "--executor", "dask", "--scheduler", scheduler]) == 0
    finally:
        _stop(workers)
    err = capsys.readouterr().err
    assert "Dask worker odd refused, its jobs go to the others: tool variables QEMU_CPU=" in err
    _, timings = _results(config)
    assert [w["worker"] for w in timings["cluster"]] == ["good"]


@pytest.mark.slow
def test_a_scheduler_without_workers_fails_with_a_message_not_a_hang(scheduler):
    started = time.monotonic()
    with pytest.raises(
        InfraError,
        match=r"no Dask worker has joined the scheduler at tcp://127\.0\.0\.1:\d+ in 1 s: "
        r"start one \(`dask worker tcp://",
    ):
        make_executor("dask", scheduler=scheduler, join_timeout=1.0)
    assert time.monotonic() - started < 20


@pytest.mark.slow
def test_a_job_run_again_after_its_worker_died_is_said_and_a_failure_names_its_worker(scheduler, tmp_path):
    from perfguard.config import KernelSpec
    from perfguard.job.run import Job, run_jobs
    from perfguard.targets import BUILTIN

    # no nanny: a killed worker stays dead, as a lost machine does
    workers = {name: _worker(scheduler, name, tmp_path / name, nanny=False) for name in ("a", "b")}
    try:
        _wait_for(scheduler, {"a", "b"})
        with make_executor("dask", scheduler=scheduler) as executor:
            # two long jobs, one per worker; worker a is killed while it runs its own
            threading.Timer(1.5, workers["a"].kill).start()
            assert executor.map(time.sleep, [4.0, 4.0]) == [None, None]
            assert len(executor.reruns) == 1
            assert "ran 2 times: started on a, then b (a worker left while running it)" in executor.reruns[0]

            # a simulation that cannot finish in its time: the error says where it ran
            job = Job(
                KernelSpec("g", "perfguard.kernels.gemm:gemm", "gemm", dict(M=64, N=64, K=64)),
                BUILTIN["riscv64"],
                tmp_path,
                tmp_path / "client-cache",
                "qemu",
                0.001,
                1,
                1,
                warm_pipeline=False,
            )
            [result] = run_jobs(executor, [job])
    finally:
        _stop(workers.values())
    assert not result.ok and result.worker == "b" and result.error.endswith("(on worker b)")
