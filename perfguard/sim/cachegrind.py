"""cachegrind back end (x86_64 hosts, x86_64 targets only): the harness runs natively under
`valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes` with the target profile's
L1I / L1D / L2 geometry given as --I1 / --D1 / --LL, and perfguard reads the cachegrind.out
file it writes.

Region of interest: difference of two runs, as the gem5 back end does (perfguard/sim/two_runs.py:
`harness R WARMUP` minus `harness 0 WARMUP`). valgrind 3.19 has no client request that starts
or stops cachegrind's counting, and per-function attribution (the kernel's own fn= entries)
would add the warm-up calls and their cold misses to the kernel's, miss the harness's call
into the kernel, and book the libc helpers a kernel calls (memset, memcpy) to those helpers.
Both runs must call perfguard_roi_begin and perfguard_roi_end (seen in cachegrind's
per-function counts), so a harness that never reaches its region of interest is an error, not
an empty result. Miss counts may shrink by a few between the runs (two_runs.py says how many);
fewer executed instructions, reads or writes is an error.

Mapping to Stats (cachegrind events, both runs' difference):

  insts          Ir              instructions executed (a rep-prefixed string instruction
                                 counts once per iteration, as under QEMU)
  l1i_accesses   Ir              cachegrind makes one I1 reference per instruction, as the
                                 QEMU plugin counts one per instruction
  l1i_misses     I1mr
  l1d_misses     D1mr + D1mw     read and write misses (write-allocate)
  l2_accesses    I1mr+D1mr+D1mw  cachegrind references LL on every L1 miss, and only then
  l2_misses      ILmr+DLmr+DLmw
  everything else None:
  loads, stores  Dr / Dw count data references, not instructions: valgrind splits some
                 instructions into several references (`rep stosb` makes one per byte) and
                 merges a read-modify-write (`add %eax,(%rdx)`) into one read
  l1d_accesses   Dr + Dw is not the plugin's access count either, for the same reasons
  cond_branches  Bc also counts every iteration of a rep-prefixed string instruction (its
                 exit test): glibc's memset runs `rep stosb` above 2 KiB, and a kernel that
                 zeroes 128 KiB that way showed Bc 166095 for 34992 conditional branches
  branches, calls, returns, indirect_branches: cachegrind counts only conditional (Bc) and
                 indirect (Bi) branches, and Bi mixes returns with indirect jumps and calls
  fp_insts, vec_insts, vec_fp_insts: no instruction classes
  l1d_writebacks, l2_writebacks: cachegrind's caches keep no dirty bits

Where cachegrind's caches differ from the plugin's (same geometry, both LRU and
write-allocate): a reference that straddles two lines counts at most one miss (the plugin
counts each line it misses), and then references LL for both lines; no writebacks reach
LL (the plugin writes dirty L1D victims into its L2, which moves them to the front of
their set).

Determinism: the guest runs with an empty environment, a fixed main stack size, from a
fixed-length path (a hard link /tmp/perfguard-cachegrind-XXXXXXXX/harness, like the QEMU back
end) and in that directory, so no .valgrindrc or VALGRIND_OPTS applies. valgrind still adds
variables of its own to the guest's environment (LD_PRELOAD, LD_LIBRARY_PATH, PWD, which is
that directory): they change the guest's stack and heap layout, but the same way every time.
The CPUID valgrind shows the guest (and with it the memcpy/memset variants a static glibc
picks) follows the host's x86 extensions: those flags are part of the fingerprint.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perfguard import process
from perfguard.errors import InfraError, InputError
from perfguard.process import one_line
from perfguard.sim.base import SimResult, Simulator
from perfguard.sim.isa_support import check_emulated
from perfguard.sim.stats import Stats
from perfguard.sim.two_runs import ROI_METHOD, TwoRuns, kernel_counts
from perfguard.targets import CacheLevel, TargetProfile

VALGRIND = "valgrind"
HOST_ISA = "x86_64"
# Part of the fingerprint: bump when the way the harness is run or its counts are derived changes.
RUN_RECIPE = 1
MAIN_STACK_BYTES = 8 * 1024 * 1024
OUT_NAME = "cachegrind.out"
ROI_MARKERS = ("perfguard_roi_begin", "perfguard_roi_end")
# cachegrind refuses a line shorter than the widest data access (32-byte AVX registers).
MIN_LINE_BYTES = 32
# /proc/cpuinfo flags valgrind 3.19 reads to choose the CPUID it shows an amd64 guest.
_CPUID_FLAGS = (
    "pni",
    "ssse3",
    "sse4_2",
    "cx16",
    "avx",
    "avx2",
    "fma",
    "bmi1",
    "bmi2",
    "abm",
    "f16c",
    "rdrand",
    "rdseed",
    "rdtscp",
)

# The events the mapping reads, plus Dr and Dw for the sanity check of the difference.
EVENTS_NEEDED = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")
# Counts a longer run can never lower; the rest (misses) may move by a few, see the docstring.
_MONOTONE_EVENTS = frozenset({"Ir", "Dr", "Dw"})

# ---------------------------------------------------------------------------------------------
# cachegrind.out


@dataclass(frozen=True)
class CachegrindOutput:
    desc: tuple[str, ...]  # the text after each "desc: "
    command: str
    events: tuple[str, ...]
    totals: dict[str, int]  # the summary line, checked against the sum of every count line
    functions: dict[str, dict[str, int]]  # fn= name -> its counts summed over every file

    def cache_geometry(self, source: str) -> dict[str, CacheLevel]:
        """{"I1"|"D1"|"LL": geometry} from the desc: lines."""
        found: dict[str, CacheLevel] = {}
        for text in self.desc:
            match = _DESC_CACHE_RE.match(text)
            if match is None:
                continue
            name, size, line, ways = match.group("name", "size", "line", "ways")
            if name in found:
                raise InputError(f"{source}: the {name} cache is described twice")
            found[name] = CacheLevel(size=int(size), assoc=int(ways or 1), line=int(line))
        return found


# valgrind writes "%d B, %d B, %d-way associative", or "direct-mapped" for one way.
_DESC_CACHE_RE = re.compile(
    r"^(?P<name>I1|D1|LL) cache: +(?P<size>[0-9]{1,19}) B, (?P<line>[0-9]{1,19}) B, "
    r"(?:(?P<ways>[0-9]{1,19})-way associative|direct-mapped)$"
)
_EVENT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_COUNT_LIMIT = 1 << 64


def _counts(tokens: list[str], source: str, number: int) -> list[int]:
    values = []
    for token in tokens:
        if not (token.isascii() and token.isdigit()):
            raise InputError(f"{source}:{number}: count {token[:30]!r} is not a non-negative integer")
        value = int(token) if len(token) <= 20 else _COUNT_LIMIT
        if value >= _COUNT_LIMIT:
            raise InputError(f"{source}:{number}: count {token[:30]}... does not fit in 64 bits")
        values.append(value)
    return values


def parse_cachegrind_out(data: bytes | str, source: str = "cachegrind.out") -> CachegrindOutput:
    """Strictly parse a cachegrind.out file (valgrind 3.x format); InputError naming `source`
    and the line for anything else, including a file cut short anywhere (the summary line,
    which must end the file with its newline, has to equal the sum of every count line).

    Format: `desc: TEXT` lines, one `cmd: TEXT`, one `events: NAME...`, then `fl=FILE`,
    `fn=NAME` and `LINE COUNT...` lines (up to one count per event, missing trailing counts
    are 0), then `summary: COUNT...` with one count per event.
    """
    if isinstance(data, bytes):
        if b"\0" in data:
            raise InputError(f"{source}: binary data (NUL byte), not a cachegrind.out file")
        # File and function names are whatever bytes the binary's symbols hold.
        text = data.decode("utf-8", "surrogateescape")
    else:
        text = data
    if not text:
        raise InputError(f"{source}: empty")
    if not text.endswith("\n"):
        raise InputError(f"{source}: truncated: the last line has no newline")
    lines = text[:-1].split("\n")
    desc: list[str] = []
    number = 0
    while number < len(lines) and lines[number].startswith("desc: "):
        desc.append(lines[number][len("desc: ") :].strip())
        number += 1
    header = {}
    for key in ("cmd", "events"):
        if number >= len(lines) or not lines[number].startswith(f"{key}: "):
            got = lines[number][:60] if number < len(lines) else "end of file"
            raise InputError(f"{source}:{number + 1}: expected the '{key}:' line, got {got!r}")
        header[key] = lines[number][len(key) + 2 :]
        number += 1
    events = tuple(header["events"].split())
    if not events:
        raise InputError(f"{source}:{number}: 'events:' names no event")
    for name in events:
        if not _EVENT_NAME_RE.match(name):
            raise InputError(f"{source}:{number}: bad event name {name[:30]!r}")
    if len(set(events)) != len(events):
        raise InputError(f"{source}:{number}: an event is named twice in {header['events'][:80]!r}")

    width = len(events)
    sums = [0] * width
    functions: dict[str, list[int]] = {}
    current: list[int] | None = None
    seen_file = False
    summary: list[int] | None = None
    for index in range(number, len(lines)):
        line, here = lines[index], index + 1
        if summary is not None:
            raise InputError(f"{source}:{here}: text after the summary line: {line[:60]!r}")
        if line.startswith("fl="):
            if len(line) == 3:
                raise InputError(f"{source}:{here}: 'fl=' without a file name")
            seen_file, current = True, None
        elif line.startswith("fn="):
            if not seen_file:
                raise InputError(f"{source}:{here}: 'fn=' before any 'fl=' line")
            if len(line) == 3:
                raise InputError(f"{source}:{here}: 'fn=' without a function name")
            current = functions.setdefault(line[3:], [0] * width)
        elif line.startswith("summary: "):
            summary = _counts(line[len("summary: ") :].split(" "), source, here)
            if len(summary) != width:
                raise InputError(f"{source}:{here}: summary has {len(summary)} counts for {width} events")
        else:
            tokens = line.split(" ")
            if not tokens[0].isascii() or not tokens[0].isdigit():
                raise InputError(f"{source}:{here}: not a cachegrind.out line: {line[:60]!r}")
            if current is None:
                raise InputError(f"{source}:{here}: counts before any 'fn=' line")
            values = _counts(tokens[1:], source, here)
            if not values or len(values) > width:
                raise InputError(f"{source}:{here}: {len(values)} counts for {width} events")
            for column, value in enumerate(values):
                current[column] += value
                sums[column] += value
    if summary is None:
        raise InputError(f"{source}: truncated: no 'summary:' line")
    for name, total, counted in zip(events, summary, sums):
        if total != counted:
            raise InputError(f"{source}: summary {name} = {total}, but the count lines add up to {counted}")
    return CachegrindOutput(
        desc=tuple(desc),
        command=header["cmd"],
        events=events,
        totals=dict(zip(events, summary)),
        functions={name: dict(zip(events, values)) for name, values in functions.items()},
    )


def stats_from_events(counts: dict[str, int], source: str = "cachegrind") -> Stats:
    """Stats from cachegrind event counts (see the module docstring for the mapping)."""
    missing = [name for name in EVENTS_NEEDED if name not in counts]
    if missing:
        raise InputError(f"{source}: no '{missing[0]}' event (cachegrind needs --cache-sim=yes)")
    c = counts
    return Stats(
        insts=c["Ir"],
        l1i_accesses=c["Ir"],
        l1i_misses=c["I1mr"],
        l1d_misses=c["D1mr"] + c["D1mw"],
        l2_accesses=c["I1mr"] + c["D1mr"] + c["D1mw"],
        l2_misses=c["ILmr"] + c["DLmr"] + c["DLmw"],
    )


def event_difference(longer: dict[str, int], shorter: dict[str, int], what: str) -> dict[str, int]:
    """Kernel-only events: the REPS=R run's counts minus the REPS=0 run's (InfraError if the
    longer run counted clearly less, see the module docstring)."""

    def refuse(name: str, with_calls: int, without: int) -> InfraError:
        return InfraError(
            f"{what}: {name} is {with_calls} with the kernel calls and {without} "
            f"without them: the two runs did not execute the same program"
        )

    counts = kernel_counts(longer, shorter, EVENTS_NEEDED, _MONOTONE_EVENTS, refuse)
    return {name: value for name, value in counts.items() if value is not None}  # no count is None: none here


# ---------------------------------------------------------------------------------------------
# running


def geometry_args(target: TargetProfile) -> list[str]:
    return [
        f"--{flag}={c.size},{c.assoc},{c.line}"
        for flag, c in (("I1", target.l1i), ("D1", target.l1d), ("LL", target.l2))
    ]


def _last_message(stderr: bytes) -> str:
    """The last message on stderr, valgrind's "==PID== " / "--PID-- " prefixes removed and its
    indented continuation lines joined to the line they continue."""
    messages: list[str] = []
    for raw in stderr.decode("utf-8", "replace").splitlines():
        match = re.match(r"^(?:==|--)\d+(?:==|--) ?", raw)
        body = raw[match.end() :] if match else raw
        if not body.strip():
            continue
        if match and body[:1].isspace() and messages:
            messages[-1] += " " + body.strip()
        else:
            messages.append(body.strip())
    return one_line(messages[-1]) if messages else "(no stderr)"


def _host_cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return "unknown"
    for line in text.splitlines():
        if line.startswith("flags"):
            present = set(line.partition(":")[2].split())
            return ",".join(flag for flag in _CPUID_FLAGS if flag in present)
    return "unknown"


class CachegrindSimulator(Simulator):
    name = "cachegrind"

    @classmethod
    def programs(cls, target: TargetProfile) -> list[str]:
        return ["valgrind"]

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)
        self._version: str | None = None

    # -- availability --------------------------------------------------------------------

    def _valgrind(self) -> str:
        path = shutil.which(VALGRIND)
        if path is None:
            raise InfraError(
                "valgrind (the cachegrind back end) not found on PATH: install the Debian "
                "package valgrind (apt-get install valgrind)"
            )
        return path

    def check_target(self, target: TargetProfile) -> None:
        check_emulated(target, "valgrind 3.19", self.cache_dir)

    def check_available(self, target: TargetProfile) -> None:
        self.check_target(target)
        host = platform.machine()
        if host != HOST_ISA:
            raise InfraError(
                f"simulator cachegrind runs the harness natively and needs an {HOST_ISA} host; "
                f"this host is {host}: use --simulator qemu"
            )
        if target.isa != host:
            raise InfraError(
                f"simulator cachegrind cannot run target {target.name} ({target.isa} code) on this "
                f"{host} host: it runs {host} targets only; use --simulator qemu"
            )
        for level in ("l1i", "l1d", "l2"):
            line = getattr(target, level).line
            if line < MIN_LINE_BYTES:
                raise InfraError(
                    f"simulator cachegrind: target {target.name} {level} line of {line} B is shorter "
                    f"than the {MIN_LINE_BYTES} B cachegrind needs for 256-bit accesses"
                )
        self._valgrind()

    def version(self) -> str:
        if self._version is None:
            try:
                proc = subprocess.run(
                    [self._valgrind(), "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env={}
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise InfraError(f"valgrind --version failed: {one_line(str(exc))}") from None
            lines = proc.stdout.decode("utf-8", "replace").split()
            if proc.returncode != 0 or not lines:
                raise InfraError(f"valgrind --version failed: {_last_message(proc.stderr)}")
            self._version = lines[0]
        return self._version

    # -- interface -----------------------------------------------------------------------

    def fingerprint(self, target: TargetProfile) -> str:
        return json.dumps(
            {
                "simulator": "cachegrind",
                "valgrind": self.version(),
                "geometry": " ".join(geometry_args(target)),
                "run": RUN_RECIPE,
                "roi": ROI_METHOD,
                "host_cpu": _host_cpu_flags(),
            },
            sort_keys=True,
        )

    def run(self, binary: Path, target: TargetProfile, args: list[str], timeout: float) -> SimResult:
        runs = TwoRuns.start(args, timeout, "cachegrind")  # this back end runs nothing but REPS WARMUP
        self.check_available(target)
        binary = Path(binary)
        where = f"{binary} on target {target.name} (cachegrind)"
        if not binary.is_file():
            raise InfraError(f"{where}: harness binary does not exist")
        # The guest runs from a path of fixed length (see process.fixed_path).
        with process.fixed_path(binary, "cachegrind") as guest:
            kernel_run, stdout = self._run_once(guest, target, runs, runs.reps, where)
            empty_run, _ = self._run_once(guest, target, runs, 0, where)
        counts = event_difference(
            kernel_run.totals, empty_run.totals, f"{where}: runs with REPS={runs.reps} and REPS=0"
        )
        stats = stats_from_events(counts, where)
        return SimResult(stats=stats, stdout=stdout, roi_count=1, total_insts=kernel_run.totals["Ir"])

    def _run_once(
        self, guest: Path, target: TargetProfile, runs: TwoRuns, reps: int, where: str
    ) -> tuple[CachegrindOutput, bytes]:
        out = guest.parent / OUT_NAME
        out.unlink(missing_ok=True)
        # -q: valgrind's banner and summary stay off stderr, so its last line is the guest's or
        # valgrind's own complaint. Branch simulation is on as documented; nothing of it is mapped.
        command = [
            self._valgrind(),
            "-q",
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--branch-sim=yes",
            *geometry_args(target),
            f"--main-stacksize={MAIN_STACK_BYTES}",
            f"--cachegrind-out-file={out}",
            str(guest),
            *runs.argv(reps),
        ]
        label = f"{where}, REPS={reps}"
        try:
            done = process.run(command, runs.time_left(), cwd=guest.parent)
        except OSError as exc:
            raise InfraError(f"{label}: cannot start valgrind: {one_line(str(exc))}") from None
        stdout, stderr = done.stdout, done.stderr
        if done.timed_out:
            raise InfraError(f"{label}: timed out ({runs.timeout_note}); stderr: {_last_message(stderr)}")
        if done.signal is not None:
            raise InfraError(f"{label}: killed by {done.signal_name}; stderr: {_last_message(stderr)}")
        if done.status != 0:
            raise InfraError(f"{label}: exited with status {done.status}; stderr: {_last_message(stderr)}")
        try:
            parsed = parse_cachegrind_out(out.read_bytes(), f"cachegrind output ({label})")
        except FileNotFoundError:
            raise InfraError(f"{label}: cachegrind wrote no output file; stderr: {_last_message(stderr)}") from None
        except OSError as exc:
            raise InfraError(f"{label}: cannot read cachegrind's output file: {one_line(str(exc))}") from None
        except InputError as exc:
            raise InfraError(f"{exc.message} (garbage output); stderr: {_last_message(stderr)}") from None
        try:
            stats_from_events(parsed.totals, label)
        except InputError as exc:
            raise InfraError(exc.message) from None
        self._verify(parsed, target, label)
        return parsed, stdout

    @staticmethod
    def _verify(parsed: CachegrindOutput, target: TargetProfile, label: str) -> None:
        """The run used the geometry asked for and passed through both region markers."""
        try:
            geometry = parsed.cache_geometry(label)
        except InputError as exc:
            raise InfraError(exc.message) from None
        for name, wanted in (("I1", target.l1i), ("D1", target.l1d), ("LL", target.l2)):
            if geometry.get(name) != wanted:
                raise InfraError(
                    f"{label}: cachegrind simulated {name} as {geometry.get(name)}, not the target's {wanted}"
                )
        for marker in ROI_MARKERS:
            if parsed.functions.get(marker, {}).get("Ir", 0) == 0:
                raise InfraError(
                    f"{label}: the harness never ran {marker} (no region of interest; "
                    f"a stripped binary has no symbols to find it by)"
                )
