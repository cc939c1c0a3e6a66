"""A reused answer is exactly a fresh one (issue 36): for each way a kernel's answer can depend on
something outside its config entry, an edit makes a plain check give what a check that ignores
every cache gives (`--recompute`: no build, simulation, output check, timing or record reused).

Real TVM, cross compiler and QEMU, on one small project whose kernels each reach their size (or
their reference's answer) through one kind of input: a package outside the project folder laid
out as in site-packages, an environment variable, a module loaded by path, a file opened relative
to the current folder, and a reference that imports a constant and loads a `.npy`. Every edit
changes the answer (a regression, or a wrong result), so a stale "unchanged" cannot pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from perfguard.shells.cli import main

pytestmark = [pytest.mark.xdist_group("stale-reuse")]

SIZE_ENV = "PERFGUARD_TEST_STALE_N"

TOML = """
[perfguard]
targets = ["x86_64"]

[[kernel]]
name = "outside"
entry = "kern.outside:kernel"

[[kernel]]
name = "env"
entry = "kern.env:kernel"

[[kernel]]
name = "bypath"
entry = "kern.bypath:kernel"

[[kernel]]
name = "relative"
entry = "kern.relative:kernel"

[[kernel]]
name = "refdata"
entry = "kern.refdata:kernel"
reference = "kern.refdata:reference"
"""

SCALE = """
import tvm
from tvm import te


def scale(n, factor=2.0):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * factor, name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})
"""

FILES = {
    "kern/__init__.py": "",
    "kern/scale.py": SCALE,
    "kern/outside.py": """
        from kern.scale import scale
        from extlib.sizes import N


        def kernel():
            return scale(N)
    """,
    "kern/env.py": f"""
        import os
        from kern.scale import scale


        def kernel():
            return scale(int(os.environ.get("{SIZE_ENV}", "64")))
    """,
    "kern/bypath.py": """
        import importlib.util
        from pathlib import Path
        from kern.scale import scale

        _spec = importlib.util.spec_from_file_location("loose_sizes", Path(__file__).parent.parent / "loose" / "sizes.py")
        _sizes = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_sizes)


        def kernel():
            return scale(_sizes.N)
    """,
    "loose/sizes.py": "N = 64\n",
    "kern/relative.py": """
        from kern.scale import scale


        def kernel():
            with open("size.txt") as handle:  # relative: the current folder's
                return scale(int(handle.read()))
    """,
    "kern/refdata.py": """
        import numpy as np
        from pathlib import Path
        from kern.scale import scale
        from kern.refconst import FACTOR


        def kernel():
            return scale(64)


        def reference(inputs):
            weights = np.load(Path(__file__).parent / "weights.npy")
            return [inputs[0] * FACTOR * weights]
    """,
    "kern/refconst.py": "FACTOR = 2.0\n",
}


def _site_packages(base: Path, n: int) -> Path:
    """extlib laid out as a plain copy in a site-packages folder outside the project."""
    site = base / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "extlib").mkdir(parents=True, exist_ok=True)
    (site / "extlib" / "__init__.py").write_text("")
    (site / "extlib" / "sizes.py").write_text(f"N = {n}\n")
    return site


@pytest.fixture(scope="module")
def stale_project(tmp_path_factory, cache_dir):
    base = tmp_path_factory.mktemp("stale")
    root = base / "proj"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "perfguard.toml").write_text(TOML.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache_dir}"\n', 1))
    np.save(root / "kern" / "weights.npy", np.ones(64, dtype="float32"))
    site = _site_packages(base, 64)
    here = Path.cwd()
    for folder in (root, base / "other"):
        folder.mkdir(exist_ok=True)
        (folder / "size.txt").write_text("64\n")
    sys.path.insert(0, str(site))
    os.environ.pop(SIZE_ENV, None)
    os.chdir(root)
    try:
        config = root / "perfguard.toml"
        assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
        yield config, site, base
    finally:
        os.chdir(here)
        sys.path.remove(str(site))
        os.environ.pop(SIZE_ENV, None)
        for name in [m for m in sys.modules if m == "extlib" or m.startswith("extlib.")]:
            del sys.modules[name]


def check(config: Path, *extra: str) -> tuple[int, dict[str, dict]]:
    code = main(["check", "--config", str(config), "-j", "1", *extra])
    report = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    return code, {r["kernel"]: r for r in report["results"]}


def answer(result: dict) -> tuple:
    return result["verdict"], result["delta_pct"], result["current_time_s"]


def plain_and_fresh(config: Path, kernel: str) -> tuple[tuple, tuple]:
    """The kernel's answer from a plain check (what records give), then from one ignoring every cache."""
    code, plain = check(config)
    fresh_code, fresh = check(config, "--kernels", kernel, "--recompute")
    return (code, answer(plain[kernel])), (fresh_code, answer(fresh[kernel]))


def test_every_input_outside_the_entry_reaches_the_verdict(stale_project):
    config, site, base = stale_project
    code, results = check(config)
    assert code == 0 and {r["verdict"] for r in results.values()} == {"unchanged"}

    def edited(kernel: str, verdict: str, exit_code: int) -> None:
        plain, fresh = plain_and_fresh(config, kernel)
        assert plain == fresh, kernel
        assert fresh[0] == exit_code and fresh[1][0] == verdict, (kernel, fresh)

    # a package outside the project folder, as a plain copy in site-packages
    (site / "extlib" / "sizes.py").write_text("N = 128\n")
    edited("outside", "regression", 1)
    (site / "extlib" / "sizes.py").write_text("N = 64\n")
    edited("outside", "unchanged", 0)

    # an environment variable the kernel reads
    os.environ[SIZE_ENV] = "128"
    try:
        edited("env", "regression", 1)
    finally:
        del os.environ[SIZE_ENV]
    edited("env", "unchanged", 0)

    # a module loaded by path (spec_from_file_location + exec_module)
    loose = config.parent / "loose" / "sizes.py"
    loose.write_text("N = 128\n")
    edited("bypath", "regression", 1)
    loose.write_text("N = 64\n")

    # a file opened relative to the current folder: another folder, another answer
    (base / "other" / "size.txt").write_text("128\n")
    os.chdir(base / "other")
    try:
        edited("relative", "regression", 1)
    finally:
        os.chdir(config.parent)
    edited("relative", "unchanged", 0)

    # what the reference reads: a constant of a module it imports, then a .npy it loads
    const = config.parent / "kern" / "refconst.py"
    const.write_text("FACTOR = 3.0\n")
    edited("refdata", "wrong result", 4)
    const.write_text("FACTOR = 2.0\n")
    edited("refdata", "unchanged", 0)
    np.save(config.parent / "kern" / "weights.npy", np.full(64, 1.5, dtype="float32"))
    edited("refdata", "wrong result", 4)
    np.save(config.parent / "kern" / "weights.npy", np.ones(64, dtype="float32"))

    code, results = check(config)  # all back as they were: the records of the first answers serve again
    assert code == 0 and {r["verdict"] for r in results.values()} == {"unchanged"}


def test_a_file_edited_while_the_job_runs_gives_no_stale_record(stale_project):
    """The entry reads its size, then a second process rewrites the file before the job ends: the
    answer given is the one for what was read, and the next check measures what is there now
    (inputs are hashed when read, and one changed since is never recorded as read)."""
    config, _, _ = stale_project
    root = config.parent
    size = root / "kern" / "racy_size.txt"
    (root / "kern" / "racy.py").write_text(
        textwrap.dedent(f"""
        import subprocess, sys
        from pathlib import Path
        from kern.scale import scale


        def kernel():
            n = int(Path({str(size)!r}).read_text())
            if n == 64:  # a second process edits the file while this job runs
                subprocess.run([sys.executable, "-c", "import pathlib; pathlib.Path({str(size)!r}).write_text('128')"],
                               check=True)
            return scale(n)
    """)
    )
    size.write_text("64")
    racy = root / "racy.toml"
    racy.write_text(
        config.read_text().split("[[kernel]]")[0].replace("[perfguard]\n", '[perfguard]\nbaseline_dir = "racy"\n')
        + '[[kernel]]\nname = "racy"\nentry = "kern.racy:kernel"\n'
    )

    def racy_check(*extra: str) -> dict:
        assert main(["check", "--config", str(racy), "-j", "1", *extra]) == 0
        return json.loads((root / "reports" / "perfguard.json").read_text())["results"][0]

    first = racy_check()
    assert size.read_text() == "128"
    second, fresh = racy_check(), racy_check("--recompute")
    assert second["current_time_s"] == fresh["current_time_s"] != first["current_time_s"]


def test_wrapped_llvm_mca_is_another_timing_model(stale_project, tmp_path, monkeypatch):
    """llvm-mca by its bytes: a wrapper on PATH with the same --version (adding -dispatch=1) is
    run for the blocks, not served the real tool's cached timings, and a plain check gives what
    a fresh one does."""
    config, site, _ = stale_project
    real = subprocess.run(["which", "llvm-mca-19"], capture_output=True, text=True).stdout.strip()
    check(config)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    wrapper = bin_dir / "llvm-mca-19"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real} -dispatch=1 "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # in a process of its own, as a CI run is (a long-lived process keeps the timings it computed)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]), str(site)]))
    proc = subprocess.run(
        [sys.executable, "-m", "perfguard.shells.cli", "check", "--config", str(config), "-j", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls.is_file() and "-mcpu=" in calls.read_text()  # the wrapper scheduled the blocks
    plain = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfguard.shells.cli",
            "check",
            "--config",
            str(config),
            "-j",
            "1",
            "--kernels",
            "env",
            "--recompute",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
    )
    fresh = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    pick = lambda report: next(answer(r) for r in report["results"] if r["kernel"] == "env")  # noqa: E731
    assert pick(plain) == pick(fresh)
