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
import math
import os
import platform
import resource
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from perfguard import process
from perfguard.compile.toolchain import LINK_TIMEOUT, ffi_include_dir
from perfguard.errors import InfraError, InputError
from perfguard.process import last_lines
from perfguard.targets import TargetProfile

DEFAULT_CV_BOUND = 0.03  # a batch whose spread is above 3 % is measured again
BATCH_SECONDS = 0.15  # aim each batch at this much kernel time
# Separate processes per timing (calibrate collect, the verdict benchmark): where the kernel's
# pages land in physical memory (cache sets, huge pages) is fixed per process and moved medians by
# up to 18 % between processes on a Zen 3 VM, so one process is one sample of that layout.
PROCESSES = 3
# A round (one process per binary per side, or one attempt of a group) is timed again when the
# other CPUs did more than this much work during it, in CPUs (non-idle seconds per wall second,
# summed over every CPU but the pinned one): a neighbour sharing the L3 and memory shifts a
# pair's ratio without widening its spread (re-timed beside a busy core of a 2-core EPYC VM,
# verdict ratios sat up to 43 points from their stored values with spreads under 3 %). One busy
# neighbour is 1.0; the bound leaves room for housekeeping and the jiffy resolution (0.02 CPUs
# on a 1 s round).
NEIGHBOUR_BOUND = 0.25
NEIGHBOUR_WAIT_S = 1.0  # pause before a rejected round is timed again: a burst of work may pass
NEIGHBOUR_RETRIES = 10  # tries of one round at most before the timing gives up as not quiet
NEIGHBOUR_BUDGET_S = 120.0  # wall seconds one timing (a pair, a group) may spend on rejected rounds


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


# Arm's /proc/cpuinfo names no vendor, family or model: its implementer code, architecture and part
# number stand for them; the names of the implementers and parts perfguard's runners meet.
_ARM_IMPLEMENTERS = {0x41: "ARM", 0x46: "Fujitsu", 0x48: "HiSilicon", 0x51: "Qualcomm", 0x61: "Apple", 0xC0: "Ampere"}
_ARM_PARTS = {
    (0x41, 0xD08): "Cortex-A72",
    (0x41, 0xD0B): "Cortex-A76",
    (0x41, 0xD0C): "Neoverse-N1",
    (0x41, 0xD40): "Neoverse-V1",
    (0x41, 0xD49): "Neoverse-N2",
    (0x41, 0xD4F): "Neoverse-V2",
    (0xC0, 0xAC3): "Ampere-1",
}


def _arm_identity(fields: dict[str, str]) -> tuple[list[str], str]:
    """(cpu_id parts, model name) of an Arm core: `ARM cpu family 8 model 3340 stepping 1`, where
    family is the architecture and model the part number (Neoverse N1: 0xd0c)."""
    try:
        implementer, part = int(fields["CPU implementer"], 16), int(fields["CPU part"], 16)
    except ValueError:
        return [], ""
    vendor = _ARM_IMPLEMENTERS.get(implementer, f"arm-implementer-{implementer:#x}")
    parts = [vendor, f"cpu family {fields.get('CPU architecture', '0').strip() or '0'}", f"model {part}"]
    if fields.get("CPU revision"):
        parts.append(f"stepping {fields['CPU revision']}")
    return parts, _ARM_PARTS.get((implementer, part), f"{vendor} part {part:#x}")


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
    parts = [fields.get("vendor_id", "")] + [
        f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping") if k in fields
    ]
    if not fields.get("vendor_id") and "CPU implementer" in fields and "CPU part" in fields:
        parts, name = _arm_identity(fields)
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
    return Machine(
        cpu,
        platform.release(),
        platform.machine(),
        _dt.datetime.now(_dt.UTC).date().isoformat(),
        cpu_id,
        cycle_counter(),
    )


# perf_event_open(2): the syscall number per host ISA, and the attribute struct's first 64 bytes
# (PERF_ATTR_SIZE_VER0): type, size, config, sample period, sample type, read format, flags.
_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "riscv64": 241}
_PERF_TYPE_HARDWARE, _PERF_COUNT_HW_CPU_CYCLES = 0, 0
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6


def cycle_counter() -> str:
    """ "cycles" when this kernel lets a process count its own core cycles (perf_event_open with
    PERF_COUNT_HW_CPU_CYCLES, user space only), else why not: VMs often expose no PMU (ENOENT),
    and perf_event_paranoid may forbid it (EACCES)."""
    number = _PERF_EVENT_OPEN.get(platform.machine())
    if number is None:
        return f"not probed: no perf_event_open number known for {platform.machine()}"
    attr = struct.pack(
        "=IIQQQQQ",
        _PERF_TYPE_HARDWARE,
        64,
        _PERF_COUNT_HW_CPU_CYCLES,
        0,
        0,
        0,
        _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV,
    ) + bytes(8)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(
        ctypes.c_long(number), buf, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_ulong(0)
    )
    if fd >= 0:
        os.close(fd)
        return "cycles"
    code = ctypes.get_errno()
    why = {
        errno.ENOENT: "the kernel exposes no hardware cycle event (no PMU: common in VMs)",
        errno.EOPNOTSUPP: "the kernel exposes no hardware cycle event (no PMU: common in VMs)",
        errno.EACCES: "forbidden by kernel.perf_event_paranoid",
        errno.EPERM: "forbidden by kernel.perf_event_paranoid",
        errno.ENOSYS: "perf_event_open is not available",
    }.get(code, os.strerror(code))
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
    neighbour_load: float | None = None  # CPUs busy beside the pinned one during it (None: unknown)
    neighbour_rejected: int = 0  # attempts timed again because the other CPUs were busy
    quiet: bool = True  # False: busy neighbours cut the timing short (unsteady says how)
    unsteady: str = ""  # why steady is False

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


def run_harness(
    binary: Path, args: list[str], timeout: float, where: str, in_child: Callable[[], None] | None = None
) -> bytes:
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


# --- the neighbours: how busy the other CPUs were while a pinned round ran ---

PROC_STAT = Path("/proc/stat")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # jiffies per second in /proc/stat
# Of a cpuN line's fields (user nice system idle iowait irq softirq steal guest guest_nice): the
# idle ones, and how many to add up (guest and guest_nice are already inside user and nice).
_IDLE_FIELDS, _COUNTED_FIELDS = (3, 4), 8


def cpu_jiffies(text: str) -> dict[int, tuple[int, int]]:
    """CPU number -> (non-idle, idle) jiffies since boot, from the text of /proc/stat. Steal counts
    as non-idle: in a VM it is time the host gave the CPU's work to someone else."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        values = [int(v) for v in rest.split()[:_COUNTED_FIELDS]]
        idle = sum(values[i] for i in _IDLE_FIELDS if i < len(values))
        out[int(name[3:])] = (sum(values) - idle, idle)
    return out


def neighbour_load(
    before: dict[int, tuple[int, int]],
    after: dict[int, tuple[int, int]],
    cpu: int,
    wall_s: float,
    own_s: float = 0.0,
    hz: float = CLOCK_TICKS,
) -> float:
    """How many CPUs' worth of work ran beside `cpu` between two `cpu_jiffies` snapshots `wall_s`
    apart: the non-idle jiffies of every other CPU (those in both snapshots), as seconds, less
    `own_s` (this process's own CPU time: its bookkeeping between the timed runs is not a
    neighbour), per wall second. 0 with no other CPU. One jiffy per CPU at each end is the
    resolution (0.02 CPUs on a 1 s round at 100 Hz)."""
    others = (before.keys() & after.keys()) - {cpu}
    busy = sum(max(0, after[c][0] - before[c][0]) for c in others) / hz
    return max(0.0, busy - own_s) / max(wall_s, 1.0 / hz)


def read_cpu_jiffies() -> dict[int, tuple[int, int]] | None:
    """`cpu_jiffies` of this machine now; None when /proc/stat cannot be read or has no cpuN line."""
    try:
        return cpu_jiffies(PROC_STAT.read_text()) or None
    except (OSError, ValueError):
        return None


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system  # this process only: the timed children run on the pinned CPU


class NeighbourWatch:
    """Made before a round, read after it: the load of the other CPUs meanwhile (`neighbour_load`)."""

    def __init__(self, cpu: int):
        self.cpu = cpu
        self.start, self.started, self.own = read_cpu_jiffies(), time.monotonic(), _own_cpu_s()

    def load(self) -> float | None:
        """None when /proc/stat could not be read at either end."""
        end = read_cpu_jiffies()
        if self.start is None or end is None:
            return None
        return round(
            neighbour_load(self.start, end, self.cpu, time.monotonic() - self.started, _own_cpu_s() - self.own), 4
        )


@dataclass(frozen=True)
class QuietPolicy:
    """Which rounds count as quiet, and how long a timing may wait for them."""

    bound: float | None = NEIGHBOUR_BOUND  # CPUs busy beside the pinned one; None: keep every round
    wait_s: float = NEIGHBOUR_WAIT_S
    retries: int = NEIGHBOUR_RETRIES
    budget_s: float = NEIGHBOUR_BUDGET_S

    @classmethod
    def from_percent(
        cls, percent: float, budget_s: float = NEIGHBOUR_BUDGET_S, where: str = "--max-neighbour-busy"
    ) -> QuietPolicy:
        """The policy of a command-line bound in percent of one CPU (0 turns the check off)."""
        if not math.isfinite(percent) or percent < 0:
            raise InputError(f"{where} {percent:g}: must be a finite percentage, 0 (off) or above")
        if not math.isfinite(budget_s) or budget_s < 0:
            raise InputError(f"--quiet-budget {budget_s:g}: must be a finite number of seconds, 0 or above")
        return cls(bound=percent / 100 if percent > 0 else None, budget_s=budget_s)

    @classmethod
    def from_args(cls, args) -> QuietPolicy:
        """The policy of the options `add_quiet_options` added."""
        return cls.from_percent(args.max_neighbour_busy, args.quiet_budget)


def add_quiet_options(parser, round_name: str, timing_name: str, given_up: str) -> None:
    """--max-neighbour-busy and --quiet-budget, for every command that times natively; the names
    say what a round and a timing are there (a pair's round; a group's attempt)."""
    parser.add_argument(
        "--max-neighbour-busy",
        type=float,
        default=100 * NEIGHBOUR_BOUND,
        metavar="PCT",
        help=f"time {round_name} again while the other CPUs were busier than PCT %% of one CPU "
        f"during it (from /proc/stat; default {100 * NEIGHBOUR_BOUND:g}; 0: keep every one, "
        f"the load still recorded)",
    )
    parser.add_argument(
        "--quiet-budget",
        type=float,
        default=NEIGHBOUR_BUDGET_S,
        metavar="SECONDS",
        help=f"wall time {timing_name} may spend on rejected ones before {given_up} (default {NEIGHBOUR_BUDGET_S:g})",
    )


@dataclass
class QuietBudget:
    """Wall time one timing (a pair, a group) still may spend on rejected rounds and the waits after them."""

    seconds: float
    spent: float = 0.0

    @property
    def left(self) -> float:
        return self.seconds - self.spent


T = TypeVar("T")


@dataclass
class QuietRound(Generic[T]):
    kept: T | None  # the round's result; None when no try was quiet
    load: float | None  # the other CPUs' load during the kept try (None: unknown, or none kept)
    rejected: list[tuple[T, float]] = field(default_factory=list)  # each rejected try and its load
    not_quiet: str = ""  # why no try was kept ("" when one was)


def time_quietly(run: Callable[[], T], cpu: int, policy: QuietPolicy, budget: QuietBudget) -> QuietRound[T]:
    """`run()` (one round pinned to `cpu`) until the other CPUs stayed within the policy's bound
    during it: a rejected try is followed by a pause and another try, at most `policy.retries`
    tries and while `budget` has time for the pause. Where /proc/stat cannot be read the load is
    unknown: the round is kept with load None (the timing records it, the summaries count such
    rounds), as the timings before this check were."""
    out: QuietRound[T] = QuietRound(None, None)
    while True:
        started = time.monotonic()
        watch = NeighbourWatch(cpu)
        result = run()
        load = watch.load()
        if policy.bound is None or load is None or load <= policy.bound:
            out.kept, out.load = result, load
            return out
        out.rejected.append((result, load))
        budget.spent += time.monotonic() - started
        if len(out.rejected) >= policy.retries or budget.left <= policy.wait_s:
            break  # no time left to wait and try again
        time.sleep(policy.wait_s)
        budget.spent += policy.wait_s
    loads = [load for _, load in out.rejected]
    out.not_quiet = (
        f"the other CPUs stayed busy: {len(loads)} tries of a round rejected, their load "
        f"{min(loads):.2f} .. {max(loads):.2f} CPUs above the bound {policy.bound:.2f}; "
        + (
            f"{policy.retries} tries at most"
            if len(loads) >= policy.retries
            else f"the {budget.seconds:g} s budget for rejected rounds is spent"
        )
    )
    return out


def check_native(profile: TargetProfile) -> None:
    if not profile.native():
        raise InfraError(f"target {profile.name}: cannot time natively on a {platform.machine()} machine")


def time_native(
    binary: Path,
    profile: TargetProfile,
    where: str,
    cv_bound: float = DEFAULT_CV_BOUND,
    attempts: int = 5,
    timeout: float = 600.0,
    cpu: int | None = None,
    processes: int = 1,
    quiet: QuietPolicy = QuietPolicy(),
) -> Timing:
    """One binary's steady median call (`time_interleaved` of it alone)."""
    return time_interleaved([binary], profile, [where], cv_bound, attempts, timeout, cpu, processes, quiet)[0]


def time_interleaved(
    binaries: list[Path],
    profile: TargetProfile,
    where: list[str],
    cv_bound: float = DEFAULT_CV_BOUND,
    attempts: int = 5,
    timeout: float = 600.0,
    cpu: int | None = None,
    processes: int = 1,
    quiet: QuietPolicy = QuietPolicy(),
) -> list[Timing]:
    """Each binary's median call after warm-up, from `processes` separate harness runs per attempt,
    interleaved: the first process of every binary, then the second of every binary in reverse
    order, ... (a machine whose speed drifts slows them alike). An attempt is steady when every
    process's batch has a robust CV within `cv_bound` and the processes' medians lie within
    `cv_bound` of each other; its time is the median of their medians. Binaries not steady are
    timed again (only they, interleaved again); after `attempts`, each keeps its steadiest attempt
    with steady False.

    An attempt is a round of `time_quietly`: one during which the other CPUs were busier than
    `quiet` allows is timed again after a pause; when no quiet try comes within its limits, the
    binaries still pending keep their steadiest attempt (or the last rejected one) with steady
    False and the reason."""
    check_native(profile)
    cpu = pick_cpu() if cpu is None else cpu
    reps = []
    for binary, label in zip(binaries, where):
        probe = time_calls(binary, 3, 1, cpu, timeout, label)
        reps.append(int(min(2000, max(15, BATCH_SECONDS / max(min(probe), 1e-7)))))
    best: dict[int, Timing] = {}
    pending = list(range(len(binaries)))
    rejected = [0] * len(binaries)
    budget, not_quiet = QuietBudget(quiet.budget_s), ""

    def timing_of(runs: list[ProcessRun], attempt: int, load: float | None) -> Timing:
        medians = [r.median_s for r in runs]
        cv = max(robust_cv(list(r.calls)) for r in runs)
        spread = process_spread(medians) if processes > 1 else 0.0
        return Timing(
            statistics.median(medians),
            min(r.min_s for r in runs),
            cv,
            sum(len(r.calls) for r in runs),
            attempt,
            cv <= cv_bound and spread <= cv_bound,
            processes,
            spread,
            sum(r.preempted for r in runs),
            load,
        )

    def one_attempt(pending: list[int]) -> Callable[[], dict[int, list[ProcessRun]]]:
        def run() -> dict[int, list[ProcessRun]]:
            runs: dict[int, list[ProcessRun]] = {i: [] for i in pending}
            for k in range(processes):
                for i in pending if k % 2 == 0 else pending[::-1]:
                    runs[i].append(time_process(binaries[i], reps[i], 3, cpu, timeout, where[i]))
            return runs

        return run

    for attempt in range(1, attempts + 1):
        if not pending:
            break
        got = time_quietly(one_attempt(pending), cpu, quiet, budget)
        for i in pending:
            rejected[i] += len(got.rejected)
        if got.kept is None:
            not_quiet = got.not_quiet
            last, load = got.rejected[-1]
            for i in pending:
                best.setdefault(i, replace(timing_of(last[i], attempt, load), steady=False))
            break
        for i in pending:
            timing = timing_of(got.kept[i], attempt, got.load)
            old = best.get(i)
            if timing.steady or old is None or max(timing.cv, timing.process_spread) < max(old.cv, old.process_spread):
                best[i] = timing
        pending = [i for i in pending if not best[i].steady]
    out = []
    for i in range(len(binaries)):
        timing = replace(best[i], neighbour_rejected=rejected[i])
        if i in pending and not_quiet:
            timing = replace(timing, steady=False, quiet=False, unsteady=not_quiet)
        elif not timing.steady:
            timing = replace(
                timing,
                attempts=attempts,
                unsteady=f"spread {100 * max(timing.cv, timing.process_spread):.1f} % above the "
                f"{100 * cv_bound:g} % bound in each of {attempts} attempts",
            )
        out.append(timing)
    return out


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
        cmd = [
            "gcc",
            "-O2",
            "-shared",
            "-fPIC",
            "-DPERFGUARD_LIBRARY",
            "-I",
            str(ffi_include_dir()),
            str(build_dir / "harness.c"),
            str(build_dir / "kernel.o"),
            "-o",
            str(tmp),
            "-lm",
        ]
        done = process.run(cmd, LINK_TIMEOUT, env=os.environ)  # killed with its group on Ctrl-C
        if done.status != 0:
            tmp.unlink(missing_ok=True)
            last = "timed out" if done.timed_out else process.last_lines(done.stderr) or done.signal_name or "?"
            raise InfraError(f"{self.where}: linking the native library failed: {last}")
        os.replace(tmp, self.path)

    def call(self) -> None:
        if self._lib.perfguard_call() != 0:
            raise InfraError(f"{self.where}: kernel call failed natively")
