"""A check costs what changed: the whole check, and each job, reused while nothing it depends on
changed (perfguard.runs.check_record, perfguard.job.record), and redone when anything did.

Real TVM, cross compilers and QEMU on two small user kernels; kernel `a` reaches its schedule
through two imports (kern/a.py -> kern/mid.py -> kern/helper.py), kernel `b` shares none of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from perfguard.shells.cli import main
from tests.conftest import REPO

TOML = """
[perfguard]
targets = ["x86_64"]

[[kernel]]
name = "a"
entry = "kern.a:kernel"
params = { n = 64 }

[[kernel]]
name = "b"
entry = "kern.b:kernel"
params = { n = 64 }
"""

FILES = {
    "kern/__init__.py": "",
    "kern/a.py": """
        from kern import mid


        def kernel(n):
            return mid.build(n)
    """,
    "kern/mid.py": """
        from kern.helper import FACTOR
        import tvm
        from tvm import te


        def build(n):
            A = te.placeholder((n, n), "float32", name="A")
            B = te.compute((n, n), lambda i, j: A[i, j] * FACTOR, name="B")
            return tvm.IRModule({"main": te.create_prim_func([A, B])})
    """,
    "kern/helper.py": "FACTOR = 2.0\n",
    "kern/b.py": """
        import tvm
        from tvm import te


        def kernel(n):
            A = te.placeholder((n,), "float32", name="A")
            B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
            return tvm.IRModule({"main": te.create_prim_func([A, B])})
    """,
}

# The check in a process of its own, saying which heavy packages it imported.
PROBE = (
    "import sys; from perfguard.shells.cli import main; code = main(sys.argv[1:]); "
    "print('IMPORTED', sorted({m.split('.')[0] for m in sys.modules} & {'tvm', 'matplotlib', 'sklearn'})); "
    "sys.exit(code)"
)


def check(config: Path, *extra: str) -> tuple[int, dict]:
    code = main(["check", "--config", str(config), "-j", "1", *extra])
    return code, json.loads((config.parent / "reports" / "perfguard.json").read_text())


def ran(report: dict) -> set[str]:
    """The kernels whose jobs ran (not taken from their records)."""
    timings = report["timings"]
    return {j["kernel"] for j in timings.get("jobs", []) if not j.get("reused")}


def without_timings(report: dict, run_facts: tuple[str, ...] = ("seconds",)) -> dict:
    """A report as two checks of the same inputs must give it alike: the time it was made, the
    timings and each result's run seconds (or all `run_facts`) aside."""
    data = {k: v for k, v in report.items() if k not in ("created", "timings")}
    data["results"] = [{k: v for k, v in r.items() if k not in run_facts} for r in report["results"]]
    return data


def test_a_noop_check_is_the_uncached_one_without_the_work(project, capsys):
    config = project(TOML, FILES)
    code, first = check(config)  # (its jobs may come from records of another test: the cache is the session's)
    assert code == 0 and not first["timings"].get("reused")

    code, uncached = check(config, "--recompute")  # judged and rendered again, every job lowered again
    assert code == 0 and ran(uncached) == {"a", "b"}
    pages = {
        p.relative_to(config.parent / "reports"): p.read_bytes()
        for p in (config.parent / "reports").rglob("*")
        if p.is_file() and p.name != "perfguard.json"
    }
    assert {p.as_posix() for p in pages} >= {"index.html", "summary.md", "kernels/a.html", "kernels/b.html"}

    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "check", "--config", str(config), "--timings"],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "IMPORTED []" in proc.stdout  # neither TVM nor matplotlib (nor scikit-learn)
    assert "the whole check was reused from its record" in proc.stdout
    cached = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    timings = cached["timings"]
    assert timings["reused"] is True and timings["workers"] == 0 and not timings.get("jobs")
    assert not {"jobs", "judge", "explain"} & set(timings["stages"])  # no pool, nothing judged or built
    assert without_timings(cached) == without_timings(uncached)  # field for field
    assert cached["created"] >= uncached["created"] and cached["timings"] != uncached["timings"]
    for path, data in pages.items():  # the same pages, as the uncached check rendered them
        assert (config.parent / "reports" / path).read_bytes() == data, path


def test_an_edited_helper_two_imports_away_relowers_its_kernel_only(project):
    unique = int.from_bytes(os.urandom(2), "big") % 997  # edits no earlier session recorded (the cache may persist)
    # a constant of this test's own, so the build it expects to find is the one its first check made:
    # with the shared 2.0 (other tests', other processes' builds) it saw rebuilt=True twice under load
    config = project(TOML, {**FILES, "kern/helper.py": f"FACTOR = {2 + unique / 1000}\n"})
    check(config)
    helper = config.parent / "kern" / "helper.py"

    helper.write_text(f"FACTOR = {2 + unique / 1000}  # a comment: the same code\n")
    code, report = check(config)
    assert code == 0 and ran(report) == {"a"}  # a re-lowered; b, untouched, cost nothing
    results = {r["kernel"]: r for r in report["results"]}
    assert results["a"]["rebuilt"] is False  # the same IR: the build cache still answers
    jobs = {j["kernel"]: j for j in report["timings"]["jobs"]}
    assert jobs["b"]["reused"] is True and not jobs["b"]["stages"] and jobs["b"]["total"]["cpu_s"] == 0
    assert jobs["a"]["stages"]["lower"]["cpu_s"] > 0

    before = results["a"]["content_hash"]
    helper.write_text(f"FACTOR = {3 + unique / 1000}\n")  # another constant: another kernel
    code, report = check(config)
    results = {r["kernel"]: r for r in report["results"]}
    assert ran(report) == {"a"} and results["a"]["rebuilt"] is True and results["a"]["content_hash"] != before
    # b's entry came from its result record (not judged again): as a full check gives it
    code, full = check(config, "--recompute")
    run_facts = ("seconds", "rebuilt", "resimulated")
    assert without_timings(report, run_facts) == without_timings(full, run_facts)

    code, again = check(config)  # and then nothing changed again (the record --recompute wrote)
    assert again["timings"]["reused"] is True and ran(again) == set()


def test_a_changed_baseline_is_judged_again_without_running_a_job(project):
    config = project(TOML, FILES)
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    code, report = check(config)
    assert code == 0 and {r["verdict"] for r in report["results"]} == {"unchanged"}
    code, report = check(config)
    assert report["timings"]["reused"] is True

    baseline = config.parent / "baselines" / "x86_64" / "a.json"
    data = json.loads(baseline.read_text())
    data["stats"]["insts"] = data["stats"]["insts"] // 2  # the baseline now ran half the instructions
    data["stats"]["blocks"] = None
    baseline.write_text(json.dumps(data))
    code, report = check(config)
    verdicts = {r["kernel"]: r["verdict"] for r in report["results"]}
    assert code == 1 and verdicts == {"a": "regression", "b": "unchanged"}
    assert not report["timings"].get("reused") and ran(report) == set()  # judged again; no job ran

    os.utime(baseline, (1, 1))  # touched, not changed: still the recorded check
    code, report = check(config)
    assert code == 1 and report["timings"]["reused"] is True


def test_a_changed_compiler_runs_the_jobs_again(project, tmp_path, monkeypatch):
    """The toolchain's identity is part of every key: a compiler other than the recorded one
    (here a wrapper script in front of the real one, then edited) re-runs every job."""
    config = project(TOML, FILES)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "x86_64-linux-gnu-gcc"
    real = subprocess.run(["which", "x86_64-linux-gnu-gcc"], capture_output=True, text=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    check(config)
    code, report = check(config)
    assert report["timings"]["reused"] is True

    wrapper.write_text(f'#!/bin/sh\n# another compiler\nexec {real} "$@"\n')
    code, report = check(config)
    assert code == 0 and not report["timings"].get("reused") and ran(report) == {"a", "b"}


def test_a_changed_machine_profile_is_judged_again_and_named(project):
    """`[target.x86_64] machine` keys every result entry (perfguard.machines): a record made under
    another machine (or none) is not reused, and the entry names the machine it was judged for."""
    config = project(TOML, FILES)
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    code, report = check(config)
    machine = report["results"][0]["machine"]
    assert machine["mca_cpu"] == "znver4" and "profile" not in machine and "interval" not in report["results"][0]
    assert machine["uncalibrated"] == "no machine profile chosen (on x86_64: amd-23-1, intel-6-167)"

    quantiles = {}
    for name in ("intel-6-167", "amd-23-1"):
        config.write_text(TOML + f'\n[target.x86_64]\nmachine = "{name}"\n')
        code, report = check(config)
        assert code == 0 and not report["timings"].get("reused")  # the same statistics, judged again
        for r in report["results"]:
            assert (
                r["machine"]["profile"] == name and r["machine"]["pairs"] == 85 and "uncalibrated" not in r["machine"]
            )
            assert r["interval"]["basis"].endswith(f"85 verdict pairs timed on {name}")
        quantiles[name] = report["results"][0]["machine"]["cpu"]
    assert quantiles == {
        "intel-6-167": "Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167)",
        "amd-23-1": "AMD EPYC (AuthenticAMD family 23 model 1)",
    }
