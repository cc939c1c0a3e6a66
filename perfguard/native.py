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
import errno
import hashlib
import os
import platform
import resource
import statistics
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from perfguard import process
from perfguard.compile.toolchain import LINK_TIMEOUT, ffi_include_dir
from perfguard.errors import InfraError
from perfguard.process import last_lines
from perfguard.targets import TargetProfile

DEFAULT_CV_BOUND = 0.03  # a batch whose spread is above 3 % is measured again
BATCH_SECONDS = 0.15  # aim each batch at this much kernel time
# Separate processes per timing (calibrate collect, the verdict benchmark): where the kernel's
# pages land in physical memory (cache sets, huge pages) is fixed per process and moved medians by
# up to 18 % between processes on a Zen 3 VM, so one process is one sample of that layout.
PROCESSES = 3


@dataclass(frozen=True)
class Machine:
    cpu: str
    kernel: str
    machine: str
    date: str
    # Vendor, family, model, stepping and a digest of the ISA flags: the model name alone ("AMD
    # EPYC" in a VM) names both a Zen 3 and an AVX-512 Zen 4, whose timings must not be mixed.
    cpu_id: str = ""
    # How the harness's calls are timed here: CLOCK_MONOTONIC per call; and whether this kernel
    # exposes a hardware cycle counter to perf_event_open ("cycles" or why not).
    cycle_counter: str = ""

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
                   _dt.datetime.now(_dt.timezone.utc).date().isoformat(), cpu_id, cycle_counter())


# perf_event_open(2): the syscall number per host ISA, and the attribute struct's first 64 bytes
# (PERF_ATTR_SIZE_VER0): type, size, config, sample period, sample type, read format, flags.
_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "riscv64": 241}
_PERF_TYPE_HARDWARE, _PERF_COUNT_HW_CPU_CYCLES = 0, 0
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6


def cycle_counter() -> str:
    """"cycles" when this kernel lets a process count its own core cycles (perf_event_open with
    PERF_COUNT_HW_CPU_CYCLES, user space only), else why not: VMs often expose no PMU (ENOENT),
    and perf_event_paranoid may forbid it (EACCES)."""
    number = _PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        return f"not probed: no perf_event_open number known for {platform.machine()}"
    attr = struct.pack("=IIQQQQQ", _PERF_TYPE_HARDWARE, 64, _PERF_COUNT_HW_CPU_CYCLES, 0, 0, 0,
                       _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV) + bytes(8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(ctypes.c_long(number), buf, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1),
                      ctypes.c_ulong(0))
    if fd >= 0:
        os.close(fd)
        return "cycles"
    code = ctypes.get_errno()
    why = {errno.ENOENT: "the kernel exposes no hardware cycle event (no PMU: common in VMs)",
           errno.EOPNOTSUPP: "the kernel exposes no hardware cycle event (no PMU: common in VMs)",
           errno.EACCES: "forbidden by kernel.perf_event_paranoid", errno.EPERM: "forbidden by kernel.perf_event_paranoid",
           errno.ENOSYS: "perf_event_open is not available"}.get(code, os.strerror(code))
    return f"not exposed: {why} (errno {errno.errorcode.get(code, code)})"


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    cv: float  # robust coefficient of variation of the accepted batch: 1.4826 x MAD / median
    samples: int
    attempts: int  # batches measured (1 = the first batch was steady enough)
    steady: bool  # False: every attempt stayed above the CV bound
    processes: int = 1  # separate processes per attempt (each one batch)
    process_spread: float = 0.0  # (max - min) / median of their medians, in the accepted attempt
    preempted: int = 0  # involuntary context switches during the accepted attempt

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


@dataclass(frozen=True)
class ProcessRun:
    """One harness process in timing mode: its calls, and how often other work took its core."""

    calls: tuple[float, ...]  # seconds per call
    preempted: int  # involuntary context switches of the process

    @property
    def min_s(self) -> float:
        return min(self.calls)

    @property
    def median_s(self) -> float:
        return statistics.median(self.calls)


def time_process(binary: Path, reps: int, warmup: int, cpu: int, timeout: float, where: str) -> ProcessRun:
    """`time_calls`, with the process's involuntary context switches (from the rusage of waited
    children: the timing loops run one child at a time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nivcsw
    calls = time_calls(binary, reps, warmup, cpu, timeout, where)
    return ProcessRun(tuple(calls), resource.getrusage(resource.RUSAGE_CHILDREN).ru_nivcsw - before)


def process_spread(medians: list[float]) -> float:
    """(largest - smallest) / median of the per-process medians: how far apart the layouts put them."""
    middle = statistics.median(medians)
    return (max(medians) - min(medians)) / middle if middle > 0 else float("inf")


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
                attempts: int = 5, timeout: float = 600.0, cpu: int | None = None, processes: int = 1) -> Timing:
    """One binary's steady median call (`time_interleaved` of it alone)."""
    return time_interleaved([binary], profile, [where], cv_bound, attempts, timeout, cpu, processes)[0]


def time_interleaved(binaries: list[Path], profile: TargetProfile, where: list[str],
                     cv_bound: float = DEFAULT_CV_BOUND, attempts: int = 5, timeout: float = 600.0,
                     cpu: int | None = None, processes: int = 1) -> list[Timing]:
    """Each binary's median call after warm-up, from `processes` separate harness runs per attempt,
    interleaved: the first process of every binary, then the second of every binary in reverse
    order, ... (a machine whose speed drifts slows them alike). An attempt is steady when every
    process's batch has a robust CV within `cv_bound` and the processes' medians lie within
    `cv_bound` of each other; its time is the median of their medians. Binaries not steady are
    timed again (only they, interleaved again); after `attempts`, each keeps its steadiest attempt
    with steady False."""
    check_native(profile)
    cpu = pick_cpu() if cpu is None else cpu
    reps = []
    for binary, label in zip(binaries, where):
        probe = time_calls(binary, 3, 1, cpu, timeout, label)
        reps.append(int(min(2000, max(15, BATCH_SECONDS / max(min(probe), 1e-7)))))
    best: dict[int, Timing] = {}
    pending = list(range(len(binaries)))
    for attempt in range(1, attempts + 1):
        if not pending:
            break
        runs: dict[int, list[ProcessRun]] = {i: [] for i in pending}
        for k in range(processes):
            for i in (pending if k % 2 == 0 else pending[::-1]):
                runs[i].append(time_process(binaries[i], reps[i], 3, cpu, timeout, where[i]))
        for i in pending:
            medians = [r.median_s for r in runs[i]]
            cv = max(robust_cv(list(r.calls)) for r in runs[i])
            spread = process_spread(medians) if processes > 1 else 0.0
            timing = Timing(statistics.median(medians), min(r.min_s for r in runs[i]), cv,
                            sum(len(r.calls) for r in runs[i]), attempt, cv <= cv_bound and spread <= cv_bound,
                            processes, spread, sum(r.preempted for r in runs[i]))
            old = best.get(i)
            if timing.steady or old is None or max(timing.cv, timing.process_spread) < max(old.cv, old.process_spread):
                best[i] = timing
        pending = [i for i in pending if not best[i].steady]
    return [best[i] if best[i].steady else replace(best[i], attempts=attempts) for i in range(len(binaries))]


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
