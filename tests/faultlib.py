"""Fault injection for tests/end_to_end/test_faults.py, tests/input/test_bad_input.py and benchmarks/hardening.py.

Faulty tools are small Python scripts put first on PATH under the real tool's name
(`qemu-aarch64`, `aarch64-linux-gnu-gcc`): they answer `--version` and `-h` like the real
tool (with a suffix on the version, so that the simulation cache, keyed on it, never serves
a result the faulty tool did not produce) and misbehave on real work: crash, hang, run out of
memory, get killed, cut their statistics file short. Everything else in a scenario is real:
TVM builds, cross compilers, QEMU with perfguard's plugin for the healthy targets.

A scenario records what the issue asks of every fault: the exit code, the report (what was
and was not measured), and whether every baseline is byte for byte what it was before.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from perfguard.shells.cli import main
from tests.projects import kernel_table, with_cache

REAL = {name: shutil.which(name) for name in ("qemu-aarch64", "qemu-x86_64", "aarch64-linux-gnu-gcc")}

HEALTHY = ("gemv_h", "x86_64")  # measured by the real qemu-x86_64 in every scenario
FAULTY = ("gemm_f", "aarch64")  # its simulator (or compiler) is the faulty tool


# A healthy kernel on x86_64 and one on aarch64, whose tools a scenario replaces.
def project_text(cache: Path, timeout: float, faulty: str) -> str:
    return (
        with_cache(f'[perfguard]\ntargets = ["x86_64", "aarch64"]\ntimeout = {timeout}\n', cache)
        + kernel_table(HEALTHY[0], "perfguard.kernels.gemv:gemv", "M = 16, K = 16", "gemv", targets='["x86_64"]')
        + kernel_table(FAULTY[0], "perfguard.kernels.gemm:gemm", faulty, "gemm", targets='["aarch64"]')
    )


SMALL = "M = 16, N = 16, K = 16"
# A's 1 GiB alone is more than a 640 MiB address space: the harness's first allocation fails, before
# it fills any tensor (filling 512 MiB under QEMU first, as 8192^3 did, cost some 14 CPU-s a run).
BIG = "M = 16384, N = 16384, K = 16384"

_TOOL = '''\
#!{python}
"""A {name} that {mode}: perfguard's fault-injection tests."""
import os, resource, signal, subprocess, sys, time

REAL, MODE, ARG = {real!r}, {mode!r}, {arg!r}
args = sys.argv[1:]
# Python sets LC_CTYPE when started in the C locale (PEP 538); the guest must get the environment
# perfguard gave (empty): QEMU hands it to the guest, and its size moves the guest's stack.
ENV = {{k: v for k, v in os.environ.items() if k != "LC_CTYPE"}}
if args[:1] in (["--version"], ["-h"]):
    proc = subprocess.run([REAL, *args], capture_output=True, text=True)
    lines = proc.stdout.splitlines() or [""]
    if args[0] == "--version":
        # the fault (and its marker's path, unique to the test) in the version: simulations
        # cached by an earlier run of the same fault on a shared cache are never reused
        lines[0] += " [fault: " + MODE + " " + str(ARG) + "]"
    sys.stdout.write("\\n".join(lines) + "\\n")
    sys.stderr.write(proc.stderr)
    sys.exit(proc.returncode)
if MODE == "crash":
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGSEGV)
if MODE == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
if MODE == "hang":
    open(ARG, "w").close()
    time.sleep(3600)
if MODE == "rlimit":
    resource.setrlimit(resource.RLIMIT_AS, (ARG, ARG))
    os.execve(REAL, [REAL, *args], ENV)
if MODE == "fail":
    sys.stderr.write("{name}: internal compiler error: Segmentation fault (fault injected)\\n")
    sys.exit(1)
if MODE == "once":  # crash the first time only: a failure that would pass on a retry
    if not os.path.exists(ARG):
        open(ARG, "w").close()
        os.kill(os.getpid(), signal.SIGSEGV)
    os.execve(REAL, [REAL, *args], ENV)
if MODE == "truncate":  # run, then cut the plugin's statistics file short
    code = subprocess.run([REAL, *args], env=ENV).returncode
    plugins = [args[i + 1] for i, a in enumerate(args) if a == "-plugin"]  # the API check, then the counter
    out = [p[4:] for plugin in plugins for p in plugin.split(",") if p.startswith("out=")][0]
    data = open(out, "rb").read()
    open(out, "wb").write(data[: len(data) // 2])
    sys.exit(code)
os.execve(REAL, [REAL, *args], ENV)
'''


def fake_tool(folder: Path, name: str, mode: str, arg: object = None) -> Path:
    """An executable `folder/name` that behaves like the real `name` except on real work."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(_TOOL.format(python=sys.executable, name=name, real=REAL[name], mode=mode, arg=arg))
    path.chmod(0o755)
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below `folder`, by relative path."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass
class Run:
    code: int
    out: str  # stdout and stderr, whitespace runs made single spaces
    report: dict | None
    before: dict[str, bytes]  # the baselines folder before the run
    after: dict[str, bytes]
    seconds: float = 0.0
    notes: dict = field(default_factory=dict)

    @property
    def baselines_kept(self) -> bool:
        return self.before == self.after

    def result(self, kernel: str, target: str) -> dict | None:
        for r in (self.report or {}).get("results", []):
            if (r["kernel"], r["target"]) == (kernel, target):
                return r
        return None

    def wrong_verdicts(self, faulty: set[tuple[str, str]]) -> int:
        """Results that lie: a faulty pair that is not an error (or claims statistics), a healthy
        one that is an error, or a pair missing from the report."""
        wrong = 0
        for pair in faulty | {HEALTHY}:
            r = self.result(*pair)
            if r is None:
                wrong += 1
            elif pair in faulty:
                wrong += r["verdict"] != "error" or r.get("measured") is not False
            else:  # a healthy kernel may only fail by being cut short
                wrong += r["verdict"] == "error" and "interrupted" not in (r.get("error") or "")
        return wrong


def make_project(root: Path, cache: Path, timeout: float = 120, faulty: str = SMALL) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "perfguard.toml"
    config.write_text(project_text(cache, timeout, faulty))
    return config


def _set_environment(values: dict[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def environment(**changes: str | None):
    saved = {k: os.environ.get(k) for k in changes}
    try:
        _set_environment(changes)
        yield
    finally:
        _set_environment(saved)


def with_tools(tools: Path | None) -> dict[str, str | None]:
    path = os.environ.get("PATH", "")
    return {"PATH": f"{tools}{os.pathsep}{path}" if tools else path}


def cli(argv: list[str], config: Path, tools: Path | None = None, **env: str | None) -> Run:
    """`perfguard ARGV` in this process, output captured, with `tools` first on PATH."""
    baselines = config.parent / "baselines"
    report = config.parent / "reports" / "perfguard.json"
    report.unlink(missing_ok=True)
    before = snapshot(baselines)
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with environment(**with_tools(tools), **env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*argv, "--config", str(config)])
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    seconds = time.monotonic() - started
    data = json.loads(report.read_text()) if report.is_file() else None
    text = " ".join((out.getvalue() + " " + err.getvalue()).split())
    return Run(code, text, data, before, snapshot(baselines), seconds)


def seed(root: Path, cache: Path, timeout: float = 120, faulty: str = SMALL) -> Path:
    """A project whose kernels have baselines measured by the real tools (only the healthy one
    when the faulty kernel is BIG: simulating it for real would take minutes)."""
    config = make_project(root, cache, timeout, faulty)
    targets = ["--targets", HEALTHY[1]] if faulty != SMALL else []
    run = cli(["baseline", "update", "-j", "1", *targets], config)
    assert run.code == 0, run.out
    return config


@dataclass
class Process:
    """A real `perfguard` process, started in its own process group (as a shell runs it)."""

    popen: subprocess.Popen
    logs: Path
    config: Path
    before: dict[str, bytes]
    started: float

    def wait_for_output(self, text: str, timeout: float = 120.0) -> None:
        """Until `text` appears in the process's stdout or stderr (or it exits, or the time runs out)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = " ".join(self.logs.with_suffix(s).read_text() for s in (".out", ".err"))
            if text in " ".join(seen.split()) or self.popen.poll() is not None:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} from perfguard within {timeout:.0f} s")
            time.sleep(0.1)

    def finish(self, timeout: float = 180.0) -> Run:
        code = self.popen.wait(timeout=timeout)
        seconds = time.monotonic() - self.started
        out = self.logs.with_suffix(".out").read_text() + " " + self.logs.with_suffix(".err").read_text()
        report = self.config.parent / "reports" / "perfguard.json"
        data = json.loads(report.read_text()) if report.is_file() else None
        return Run(code, " ".join(out.split()), data, self.before, snapshot(self.config.parent / "baselines"), seconds)


def start(argv: list[str], config: Path, tools: Path | None = None, ignore_sigint: bool = False, **env: str) -> Process:
    """`perfguard ARGV` as a process of its own; with `ignore_sigint`, started with SIGINT ignored."""
    (config.parent / "reports" / "perfguard.json").unlink(missing_ok=True)
    logs = config.parent / f"perfguard-{time.monotonic_ns()}"
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None
    with open(logs.with_suffix(".out"), "w") as out, open(logs.with_suffix(".err"), "w") as err:
        popen = subprocess.Popen(
            [sys.executable, "-m", "perfguard.shells.cli", *argv, "--config", str(config)],
            stdout=out,
            stderr=err,
            env={**os.environ, **with_tools(tools), **env},
            cwd=config.parent,
            start_new_session=True,
            preexec_fn=ignore,
        )
    return Process(popen, logs, config, snapshot(config.parent / "baselines"), time.monotonic())


def wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def processes_running(marker: str) -> list[int]:
    """Pids whose command line mentions `marker` (a scenario's own temporary folder)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if marker in cmdline and int(entry.name) != os.getpid():
                pids.append(int(entry.name))
    return pids


# -- scenarios: each returns the Run of `perfguard check` under the fault ----------------------------


class Unavailable(Exception):
    """The scenario cannot run here (e.g. no permission to mount a tmpfs)."""


def tool_fault(
    mode: str,
    tool: str = "qemu-aarch64",
    arg: object = None,
    faulty: str = SMALL,
    timeout: float = 120,
    update: bool = True,
):
    """A check with one faulty tool; then, with `update`, a baseline update of the faulty target."""

    def scenario(work: Path, cache: Path) -> Run:
        config = seed(work / "proj", cache, timeout, faulty)
        tools = work / "tools"
        fake_tool(tools, tool, mode, str(work / "marker") if arg == "marker" else arg)
        run = cli(["check", "-j", "1"], config, tools)
        run.notes["leftover"] = processes_running(str(tools))
        if update:
            run.notes["update"] = cli(["baseline", "update", "-j", "1", "--targets", FAULTY[1]], config, tools)
        return run

    return scenario


def transient_crash(work: Path, cache: Path) -> Run:
    """A simulator that crashes once: the check says error (no retry); the next check passes."""
    run = tool_fault("once", arg=str(work / "crashed-once"), update=False)(work, cache)
    run.notes["next"] = cli(["check", "-j", "1"], work / "proj" / "perfguard.toml", work / "tools")
    return run


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "64k"):
    """A tiny tmpfs mounted on `path` (root only); its old content copied in and back out."""
    path.mkdir(parents=True, exist_ok=True)
    saved = snapshot(path)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise Unavailable(f"cannot mount a tmpfs on {path}: {proc.stderr.strip() or proc.returncode}")
    try:
        for name, data in saved.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)
        yield path
    finally:
        kept = snapshot(path)
        subprocess.run(["umount", "-l", str(path)], check=True)
        for name, data in kept.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_bytes(data)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of `folder`, then give `leave` bytes (whole pages) back."""
    filler = folder / ".filler"
    chunk = b"\0" * 4096
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(chunk)
        except OSError:
            pass
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))


def full_disk_baselines(work: Path, cache: Path) -> Run:
    """`baseline update` of two kernels when only one baseline fits: all or nothing."""
    config = seed(work / "proj", cache)
    baselines = config.parent / "baselines"
    for path in sorted(baselines.rglob("*.json")):  # measured before a change: update must rewrite both
        data = json.loads(path.read_text())
        data["stats"]["insts"] += 1
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    with tmpfs(baselines):
        fill(baselines, leave=4096)
        run = cli(["baseline", "update", "-j", "1"], config)
        run.notes["leftover"] = [p.name for p in baselines.rglob(".*") if p.name != ".filler"]
        (baselines / ".filler").unlink()
        run.before.pop(".filler")
        run.after = snapshot(baselines)
    return run


def full_disk_reports(work: Path, cache: Path) -> Run:
    config = seed(work / "proj", cache)
    with tmpfs(config.parent / "reports", "16k") as reports:
        fill(reports)
        run = cli(["check", "-j", "1"], config)
        run.notes["leftover"] = [p.name for p in reports.rglob("*") if p.name != ".filler"]
        (reports / ".filler").unlink()
    return run


def full_disk_cache(work: Path, cache: Path) -> Run:
    """The build and simulation cache on a full disk: nothing can be built, nothing is measured."""
    config = seed(work / "proj", cache)
    with tmpfs(work / "cache") as small:
        fill(small)
        config.write_text(config.read_text().replace(str(cache), str(small)))
        run = cli(["check", "-j", "1"], config)
    return run


def interrupted(signum: int, jobs: int, group: bool):
    """A real `perfguard check` process stopped by a signal while a simulation hangs.

    perfguard starts with SIGINT ignored, as a non-interactive shell starts a background job
    (CI runners and test harnesses start jobs so): Python then leaves SIGINT ignored, and
    perfguard must still stop (issue 30). The signal is sent once perfguard has logged
    (PERFGUARD_VERBOSE) that the hanging simulator runs; the notes record how long after it
    every simulator was gone and the process had exited."""

    def scenario(work: Path, cache: Path) -> Run:
        config = seed(work / "proj", cache)
        tools, marker = work / "tools", work / "marker"
        marker.unlink(missing_ok=True)  # left by an earlier run of this scenario in the same folder
        fake_tool(tools, "qemu-aarch64", "hang", str(marker))
        process = start(["check", "-j", str(jobs)], config, tools, ignore_sigint=True, PERFGUARD_VERBOSE="1")
        process.wait_for_output("started qemu-aarch64 as pid")
        wait_for(marker)  # the fake simulator itself runs (it is a Python script: it takes a moment)
        sent = time.monotonic()
        (os.killpg if group else os.kill)(process.popen.pid, signum)
        while processes_running(str(tools)) and time.monotonic() - sent < 30:
            time.sleep(0.01)
        gone = time.monotonic() - sent
        run = process.finish()
        run.notes["leftover"] = processes_running(str(tools))
        run.notes["simulators_gone_s"] = gone
        run.notes["exit_s"] = time.monotonic() - sent
        return run

    return scenario


SCENARIOS = {
    # name: (scenario, faulty pairs, fragment of the faulty result's error)
    "simulator crash (SIGSEGV)": (tool_fault("crash"), {FAULTY}, "killed by SIGSEGV"),
    "simulator hang (timeout)": (tool_fault("hang", arg="marker", timeout=2), {FAULTY}, "timed out after 2 s"),
    "guest out of memory (RLIMIT_AS 640 MiB)": (
        tool_fault("rlimit", arg=640 << 20, faulty=BIG),
        {FAULTY},
        "perfguard harness: out of memory",
    ),
    "simulator killed (SIGKILL, as by the OOM killer)": (tool_fault("killed"), {FAULTY}, "killed by SIGKILL"),
    "simulator output cut short": (tool_fault("truncate"), {FAULTY}, "plugin output is unparseable"),
    "compiler failure": (tool_fault("fail", tool="aarch64-linux-gnu-gcc"), {FAULTY}, "linking the harness failed"),
    "transient crash (not retried)": (transient_crash, {FAULTY}, "killed by SIGSEGV"),
    "full disk: baselines": (full_disk_baselines, set(), "No space left on device"),
    "full disk: reports": (full_disk_reports, set(), "No space left on device"),
    "full disk: cache": (full_disk_cache, {FAULTY, HEALTHY}, "No space left on device"),
    "Ctrl-C (SIGINT to the process, -j 1)": (interrupted(signal.SIGINT, 1, False), {FAULTY}, "interrupted"),
    "Ctrl-C in a terminal (SIGINT to the group, -j 2)": (interrupted(signal.SIGINT, 2, True), {FAULTY}, "interrupted"),
    "CI cancel (SIGTERM, -j 1)": (interrupted(signal.SIGTERM, 1, False), {FAULTY}, "interrupted"),
}


# -- concurrent writers ------------------------------------------------------------------------------

_KERNELS = ("k0", "k1", "k2", "k3", "k4")


def _tagged(kernel: str, tag: str):
    from perfguard.baselines.store import Baseline
    from perfguard.sim.stats import Stats

    return Baseline(
        kernel=kernel,
        target="x86_64",
        family=None,
        params={"pad": "x" * 4000},
        simulator="qemu",
        content_hash="0" * 64,
        stats=Stats(insts=1),
        predicted_time_s=1.0,
        model_id="m",
        commit=None,
        created=tag,
        toolchain={},
    )


def _write_rounds(root: str, writer: int, rounds: int) -> None:
    from perfguard.baselines.store import BaselineStore

    store = BaselineStore(Path(root))
    for r in range(rounds):
        store.write_all([_tagged(k, f"{writer}-{r}") for k in _KERNELS])
        time.sleep(0.001)  # let the others in


def _read_until(root: str, stop, results) -> None:
    """Read the five files, alternately without the lock (each file must be whole) and under it
    (the five must then come from one update: writers never interleave)."""
    from perfguard.baselines.lock import baselines_lock
    from perfguard.baselines.store import BaselineStore
    from perfguard.errors import PerfguardError

    store, reads, unreadable, mixed, locked = BaselineStore(Path(root)), 0, 0, 0, False
    while not stop.is_set():
        tags = set()
        with baselines_lock(Path(root), notify=lambda message: None) if locked else contextlib.nullcontext():
            for k in _KERNELS:
                try:
                    tags.add(store.read("x86_64", k).created)
                    reads += 1
                except PerfguardError:
                    unreadable += 1
        mixed += locked and len(tags) > 1
        locked = not locked
    results.put((reads, unreadable, mixed))


def concurrent_writers(root: Path, writers: int = 3, rounds: int = 15) -> dict:
    """`writers` processes each replacing the same five baselines `rounds` times, one process
    reading them all the while: how many reads, how many failed, how many locked reads saw two
    updates mixed, how many writers' files the folder holds at the end (1: the last update,
    whole), what is left over."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    _write_rounds(str(root), -1, 1)  # the folder starts with one complete update
    stop, results = context.Event(), context.Queue()
    reader = context.Process(target=_read_until, args=(str(root), stop, results))
    reader.start()
    procs = [context.Process(target=_write_rounds, args=(str(root), w, rounds)) for w in range(writers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    stop.set()
    reads, unreadable, mixed = results.get(timeout=60)
    reader.join()
    finals = {json.loads((root / "x86_64" / f"{k}.json").read_text())["created"].split("-")[0] for k in _KERNELS}
    return {
        "writes": writers * rounds,
        "reads": reads,
        "unreadable": unreadable,
        "mixed": mixed,
        "failed_writers": sum(1 for p in procs if p.exitcode != 0),
        "final_writers": len(finals),
        "leftover": sorted(p.name for p in root.rglob(".*")),
    }
