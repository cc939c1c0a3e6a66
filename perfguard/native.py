"""Native timing of the very object code that is simulated (host ISA only).

Two ways in:
- `time_native(built, ...)`: runs the harness in its timing mode (`harness REPS WARMUP time`)
  pinned to one core, single-threaded, with an empty environment, and repeats batches until
  the coefficient of variation is small (or gives up and says so). Every run starts through
  perfguard/process.py, as the simulators do.
- `NativeKernel`: the same harness and kernel object linked as a shared library and loaded
  with ctypes, so an in-process timer (pytest-benchmark's fixture) can call one kernel
  invocation at a time without process start-up in the measurement.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import hashlib
import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from perfguard import process
from perfguard.compile.toolchain import LINK_TIMEOUT, ffi_include_dir
from perfguard.errors import InfraError
from perfguard.process import last_lines
from perfguard.targets import TargetProfile

DEFAULT_CV_BOUND = 0.03  # a batch whose spread is above 3 % is measured again
BATCH_SECONDS = 0.15  # aim each batch at this much kernel time


@dataclass(frozen=True)
class Machine:
    cpu: str
    kernel: str
    machine: str
    date: str
    # Vendor, family, model, stepping and a digest of the ISA flags: the model name alone ("AMD
    # EPYC" in a VM) names both a Zen 3 and an AVX-512 Zen 4, whose timings must not be mixed.
    cpu_id: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_identity(cpuinfo: str) -> tuple[str, str]:
    """(model name, cpu_id) from the text of /proc/cpuinfo (its first processor)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name", "")
    parts = [fields.get("vendor_id", "")] + [f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping")
                                             if k in fields]
    flags = fields.get("flags") or fields.get("Features") or fields.get("isa") or ""
    if flags:
        parts.append("flags " + hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:10])
    return name, " ".join(p for p in parts if p)


def this_machine() -> Machine:
    cpu, cpu_id = platform.processor() or "unknown", ""
    try:
        name, cpu_id = cpu_identity(Path("/proc/cpuinfo").read_text())
        cpu = name or cpu
    except OSError:
        pass
    return Machine(cpu, platform.release(), platform.machine(),
                   _dt.datetime.now(_dt.timezone.utc).date().isoformat(), cpu_id)


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    cv: float  # robust coefficient of variation of the accepted batch: 1.4826 x MAD / median
    samples: int
    attempts: int  # batches measured (1 = the first batch was steady enough)
    steady: bool  # False: every attempt stayed above the CV bound

    def to_dict(self) -> dict:
        return asdict(self)


_ADDR_NO_RANDOMIZE = 0x0040000


def _pin(cpu: int):
    """In the child: one core, and no address-space randomisation, so every run lays out the
    stack and heap the same way (cache-set conflicts otherwise change from run to run)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def pin() -> None:
        os.sched_setaffinity(0, {cpu})
        libc.personality(_ADDR_NO_RANDOMIZE)

    return pin


def pick_cpu() -> int:
    """The last CPU this process may use: away from CPU 0, where interrupts tend to land."""
    return max(os.sched_getaffinity(0))


def time_calls(binary: Path, reps: int, warmup: int, cpu: int, timeout: float, where: str) -> list[float]:
    """One run of the harness: `warmup` untimed calls, then the seconds of each of `reps` calls."""
    # Like the simulators, run the binary from a fixed-length path (see process.fixed_path).
    with process.fixed_path(binary, "native") as guest:
        return _run_batch(guest, reps, warmup, cpu, timeout, where)


def run_harness(binary: Path, args: list[str], timeout: float, where: str,
                in_child: Callable[[], None] | None = None) -> bytes:
    """What the harness run natively as `binary args...` wrote to stdout; InfraError if it
    cannot start, times out or fails."""
    try:
        done = process.run([str(binary), *args], timeout, in_child=in_child)
    except OSError as exc:
        raise InfraError(f"{where}: cannot run natively: {exc}") from None
    if done.timed_out:
        raise InfraError(f"{where}: native run timed out after {timeout:.0f} s")
    if done.status != 0:
        raise InfraError(f"{where}: native run failed: {last_lines(done.stderr) or f'exit code {done.status}'}")
    return done.stdout


def _run_batch(binary: Path, reps: int, warmup: int, cpu: int, timeout: float, where: str) -> list[float]:
    stdout = run_harness(binary, [str(reps), str(warmup), "time"], timeout, where, _pin(cpu))
    try:
        values = [int(line) * 1e-9 for line in stdout.split()]
    except ValueError:
        raise InfraError(f"{where}: native run printed garbage instead of timings") from None
    if len(values) != reps:
        raise InfraError(f"{where}: native run gave {len(values)} timings, expected {reps}")
    return values


def robust_cv(values: list[float]) -> float:
    """Spread that a few interrupted calls cannot inflate (the MAD, scaled to a standard deviation)."""
    median = statistics.median(values)
    if median <= 0:
        return float("inf")
    return 1.4826 * statistics.median(abs(v - median) for v in values) / median


def check_native(profile: TargetProfile) -> None:
    if not profile.native():
        raise InfraError(f"target {profile.name}: cannot time natively on a {platform.machine()} machine")


def time_native(binary: Path, profile: TargetProfile, where: str, cv_bound: float = DEFAULT_CV_BOUND,
                attempts: int = 5, timeout: float = 600.0, cpu: int | None = None) -> Timing:
    """Median of a batch of single calls whose CV is below `cv_bound`, after warm-up."""
    check_native(profile)
    cpu = pick_cpu() if cpu is None else cpu
    probe = time_calls(binary, 3, 1, cpu, timeout, where)
    reps = int(min(2000, max(15, BATCH_SECONDS / max(min(probe), 1e-7))))
    best: list[float] | None = None
    best_cv = float("inf")
    for attempt in range(1, attempts + 1):
        values = time_calls(binary, reps, 3, cpu, timeout, where)
        cv = robust_cv(values)
        if cv < best_cv:
            best, best_cv = values, cv
        if cv <= cv_bound:
            return Timing(statistics.median(values), min(values), cv, len(values), attempt, True)
    assert best is not None
    return Timing(statistics.median(best), min(best), best_cv, len(best), attempts, False)


class NativeKernel:
    """The harness as a shared library: setup() once, then call() runs the kernel once."""

    def __init__(self, build_dir: Path, profile: TargetProfile, where: str):
        check_native(profile)
        self.where = where
        self.path = Path(build_dir) / "libharness.so"
        if not self.path.is_file():
            self._link(Path(build_dir), profile)
        self._lib = ctypes.CDLL(str(self.path))
        self._lib.perfguard_setup.restype = ctypes.c_int
        self._lib.perfguard_call.restype = ctypes.c_int
        if self._lib.perfguard_setup() != 0:
            raise InfraError(f"{where}: native set-up failed")

    def _link(self, build_dir: Path, profile: TargetProfile) -> None:
        tmp = build_dir / f".libharness.{os.getpid()}.so"
        cmd = ["gcc", "-O2", "-shared", "-fPIC", "-DPERFGUARD_LIBRARY", "-I", str(ffi_include_dir()),
               str(build_dir / "harness.c"), str(build_dir / "kernel.o"), "-o", str(tmp), "-lm"]
        done = process.run(cmd, LINK_TIMEOUT, env=os.environ)  # killed with its group on Ctrl-C
        if done.status != 0:
            tmp.unlink(missing_ok=True)
            last = "timed out" if done.timed_out else process.last_lines(done.stderr) or done.signal_name or "?"
            raise InfraError(f"{self.where}: linking the native library failed: {last}")
        os.replace(tmp, self.path)

    def call(self) -> None:
        if self._lib.perfguard_call() != 0:
            raise InfraError(f"{self.where}: kernel call failed natively")
