"""Executors: the local pool and Dask distributed run the same jobs to the same results."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from perfguard.config import KernelSpec
from perfguard.errors import InfraError, InputError
from perfguard.executors import LocalExecutor, default_workers, make_executor, pool_size
from perfguard.executors.dask import WORKER_CACHE_ENV, DaskExecutor, on_worker
from perfguard.job.run import Job, run_job
from perfguard.shells.cli import main
from perfguard.targets import BUILTIN

distributed = pytest.importorskip("distributed")

GEMM = "perfguard.kernels.gemm:gemm"


# The cluster's own bookkeeping at a slower pace and without the statistical profiler, which no test
# here reads: at Dask's defaults (an event-loop tick every 20 ms in each of its five processes, a system
# monitor every 0.5 s, stacks sampled every 10 ms) an idle two-worker cluster burns ~0.15 CPU-s a second.
QUIET_CLUSTER = {
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.profile.enabled": False,
}


@pytest.fixture(scope="module")
def cluster():
    """A real two-worker Dask cluster, started apart from perfguard as a user's would be."""
    import dask

    with dask.config.set(QUIET_CLUSTER):  # read as the scheduler and the workers start
        started = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0", silence_logs=40
        )
    with started as c:
        yield c


def _jobs(cache: Path) -> list[Job]:
    # three schedules: more jobs than workers, one worker runs two, results out of order in time; on
    # one ISA, as an executor runs a job the same whatever its ISA
    shapes = [dict(M=32, N=32, K=32, tile_m=t, vector=v) for t, v in ((4, 1), (16, 8), (8, 4))]
    # warm_pipeline off (as for model = "analytical"): what is compared is the jobs' results, not
    # llvm-mca's schedules of their blocks, which a job only writes to its cache
    return [
        Job(
            KernelSpec(f"g{i}", GEMM, "gemm", params),
            BUILTIN["aarch64"],
            Path("."),
            cache,
            "qemu",
            300.0,
            1,
            1,
            warm_pipeline=False,
        )
        for i, params in enumerate(shapes)
    ]


def _fingerprint(results) -> list[tuple]:
    return [
        (
            r.kernel,
            r.target,
            r.ok,
            r.content_hash,
            r.binary_hash,
            json.dumps(r.stats.to_record(), sort_keys=True),
            r.max_error,
        )
        for r in results
    ]


@pytest.mark.slow
def test_dask_and_local_give_identical_results(cluster, tmp_path):
    """Each executor simulates from scratch (its own cache), so equality is not a cache hit. The local
    side runs in this process: a pool's workers would each import TVM again, and what is compared is
    the cluster's results with a local run's."""
    seen: list[int] = []
    with LocalExecutor(1) as local:
        local_results = local.map(run_job, _jobs(tmp_path / "local"))
    with make_executor("dask", scheduler=cluster.scheduler_address) as dask:
        assert dask.workers == 2 and "dask cluster" in dask.describe()
        dask_results = dask.map(run_job, _jobs(tmp_path / "dask"), on_result=lambda i, r: seen.append(i))
    assert all(r.ok and r.resimulated for r in local_results + dask_results)
    assert _fingerprint(dask_results) == _fingerprint(local_results)  # and in submission order
    assert sorted(seen) == list(range(len(dask_results)))


@pytest.mark.slow
def test_check_on_a_dask_cluster_reports_what_the_local_pool_reports(cluster, project):
    config = project("""
        [perfguard]
        targets = ["aarch64", "riscv64"]

        [[kernel]]
        name = "gemm_small"
        entry = "perfguard.kernels.gemm:gemm"
        family = "gemm"
        params = { M = 32, N = 32, K = 16, vector = 4 }
        """)
    reports = []
    # --recompute: the second check would otherwise take both results from the first's job records
    # (perfguard.job.record) and start no executor at all
    for extra in (["-j", "1"], ["--executor", "dask", "--scheduler", cluster.scheduler_address, "--recompute"]):
        assert main(["check", "--config", str(config), *extra]) == 0
        data = json.loads((config.parent / "reports" / "perfguard.json").read_text())
        reports.append([(r["kernel"], r["target"], r["stats"], r["current_time_s"]) for r in data["results"]])
        assert not any(job.get("reused") for job in data["timings"]["jobs"]), data["timings"]  # every job ran
    assert reports[0] == reports[1] and len(reports[0]) == 2


def test_local_executor_submit_and_results_in_order():
    with LocalExecutor(1) as inline:
        assert inline.submit(abs, -3).result() == 3
        future = inline.submit(int, "x")  # a failing job raises from result(), as a pool's would
        with pytest.raises(ValueError):
            future.result()
    order: list[int] = []
    assert LocalExecutor(2).map(abs, [-1, -2, -3], on_result=lambda i, r: order.append(i)) == [1, 2, 3]
    assert sorted(order) == [0, 1, 2]


def test_pool_size_is_one_worker_per_four_jobs_up_to_the_cpus_or_what_was_asked():
    cpus = default_workers()
    assert [pool_size(None, n) for n in (0, 1, 4)] == [1, 1, 1]  # a few jobs: in this process, no pool
    assert pool_size(None, 5) == min(cpus, 2) and pool_size(None, 400) == cpus
    assert pool_size(3, 2) == 2 and pool_size(3, 10) == 3 and pool_size(1, 400) == 1  # -j: never more than the jobs


def test_worker_cache_override(tmp_path, monkeypatch):
    job = _jobs(tmp_path / "submitter")[0]
    monkeypatch.setenv(WORKER_CACHE_ENV, str(tmp_path / "worker"))
    assert on_worker(lambda j: j.cache_dir, job) == tmp_path / "worker"
    monkeypatch.delenv(WORKER_CACHE_ENV)
    assert on_worker(lambda j: j.cache_dir, job) == tmp_path / "submitter"


def test_executor_errors_are_clear():
    with pytest.raises(InputError, match="--scheduler needs --executor dask"):
        make_executor("local", scheduler="tcp://127.0.0.1:8786")
    with pytest.raises(InputError, match="unknown executor"):
        make_executor("ray")
    with pytest.raises(InputError, match="scheduler file not found"):
        make_executor("dask", scheduler="/nonexistent/scheduler.json")
    with pytest.raises(InfraError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        DaskExecutor("tcp://127.0.0.1:9", timeout=2)


@pytest.mark.slow
def test_tuning_runs_the_same_trials_on_either_executor(cluster, project):
    from perfguard.config import load_config
    from perfguard.tune.session import tune_kernel

    config = load_config(
        project("""
        [perfguard]
        targets = ["riscv64"]

        [[kernel]]
        name = "gemm_tiny"
        entry = "perfguard.kernels.gemm:gemm"
        family = "gemm"
        params = { M = 16, N = 16, K = 16 }
        """)
    )
    runs = []
    # the local run in this process (no pool to start); the cluster's two workers score a batch at once
    for executor in (LocalExecutor(1), make_executor("dask", scheduler=cluster.scheduler_address)):
        with executor:
            result = tune_kernel(
                config,
                config.kernel("gemm_tiny"),
                config.profile("riscv64"),
                executor,
                strategy="knobs",
                trials=4,
                batch=3,
            )  # 3 at random, then 1 the model proposes
        runs.append([(t.params, t.ok, t.predicted_s, t.stats) for t in result.trials])
    assert runs[0] == runs[1] and len(runs[0]) == 4


@pytest.fixture
def worker_cache(cluster, tmp_path):
    """The module's cluster with PERFGUARD_WORKER_CACHE_DIR in its workers' environment for one test,
    as a remote cluster's workers would have it: a cache folder the submitting machine cannot see."""
    path = tmp_path / "worker-cache"
    with distributed.Client(cluster, set_as_default=False) as client:
        client.run(lambda: os.environ.__setitem__(WORKER_CACHE_ENV, str(path)))
        try:
            yield path
        finally:
            client.run(lambda: os.environ.pop(WORKER_CACHE_ENV, None))


@pytest.mark.slow
def test_calibration_on_workers_with_their_own_cache(cluster, worker_cache, project):
    """Workers build into a cache the submitting machine cannot see; it rebuilds before timing."""
    config = project("""
        [perfguard]
        targets = ["x86_64"]
        """)
    groups = config.parent / "groups.json"
    groups.write_text(json.dumps([{"M": 64, "N": 32, "K": 64}]))  # one shape of two variants
    assert (
        main(
            [
                "calibrate",
                "collect",
                "--config",
                str(config),
                "--target",
                "x86_64",
                "--family",
                "gemm",
                "--variants",
                "2",
                "--groups",
                str(groups),
                "--executor",
                "dask",
                "--scheduler",
                cluster.scheduler_address,
                "--max-cv",
                "100",
                "--max-neighbour-busy",
                "0",
            ]
        )
        == 0
    )
    rows = json.loads((config.parent / "baselines/datasets/x86_64/gemm.json").read_text())["rows"]
    # Every variant was timed here (--max-cv 100: no timing rejected as unsteady, however busy the machine).
    assert [r["group"] for r in rows] == ["K=64,M=64,N=32"] * 2 and all(r["native_s"] > 0 for r in rows)
    assert any((worker_cache / "builds").rglob("harness"))  # simulated remotely
