"""gem5 back end: read gem5's stats.txt and config.ini/config.json, map them to Stats, run gem5.

Reading
-------
`parse_stats` turns a stats.txt into one dict per "Begin Simulation Statistics" dump, names
kept whole (`system.cpu.dcache.overallMisses::total`), values int or float (`nan`, `inf`
included). `read_config` reads config.ini (or config.json) into a `Gem5Config`: the CPUs with
their model and clock, each CPU's L1I/L1D (the caches its icache_port/dcache_port reach) and
the L2 (the cache behind the bus the L1s feed), with size, associativity and line size.

Mapping (`stats_from_gem5`), per CPU, from the stat group the dump holds; gem5 >= 23
`<cpu>.commitStats0.*` (every CPU model) / gem5 21-22 `<cpu>.exec_context.thread_0.*`
(SimpleCPUs) / gem5 <= 20, snake_case, `<cpu>.*` (SimpleCPUs):

  insts              numInsts / numInsts / committedInsts
  loads, stores      numLoadInsts, numStoreInsts / the same / num_load_insts, num_store_insts
  branches           committedControl::IsControl / numBranches / Branches
  cond_branches      committedControl::IsCondControl / numCondCtrlInsts / num_conditional_control_insts
  indirect_branches  committedControl::IsIndirectControl / - / -
  calls, returns     committedControl::IsCall, ::IsReturn / - / - (older gem5 has only the sum
                     of both, numCallsReturns or num_func_calls: both fields stay None)
  fp_insts           numFpInsts / numFpInsts / num_fp_insts
  vec_insts          numVecInsts / numVecInsts / num_vec_insts

Threads (commitStats1, thread_1, ...) are summed. vec_fp_insts: gem5 has no such count (None).
This is gem5's own view of a file a user hands in. What a gem5 *run* reports (`Gem5Simulator`)
is `reported_stats`: the plugin's definitions where gem5 has the count (indirect branches
without returns, fp arithmetic by op class), null with the reason in NULL_FIELDS /
NULL_FIELDS_X86 where gem5 counts something else (micro-ops, fetches, dirty-ownership moves). If no CPU group is found,
insts falls back to `simInsts` / `sim_insts` (the whole system; note gem5 never resets it,
while per-CPU stats are reset by `m5 resetstats`, which is why the per-CPU count comes first).

Caches, camelCase (>= 21) or snake_case names: accesses `overallAccesses::total` /
`overall_accesses::total`, misses `overallMisses::total` / `overall_misses::total`, writebacks
`writebacks::total`. gem5 flags these `nozero`: it leaves a zero out of the file. So a cache
that is in the dump (some `<cache>.` line) but has no such line counted 0; a cache or CPU
group that is not in the dump leaves its fields None, never 0. Cache names come from the
config when given (whatever they are called); without one, `<cpu>.icache`, `<cpu>.dcache`
and `l2` / `l2cache` next to the CPUs or under the root object.

Several CPUs (full-system files, idle second cores): every field is summed over the CPUs
(private L1s summed, a shared L2 counted once). `cpus=[...]` selects CPUs instead: cache
accesses and misses then come from the caches' per-requestor entries (`::cpu0.data`,
`::cpu0.inst`, `::cpu0.mmu.dtb_walker`, ...; a switched-in CPU uses the caches of the CPU it
replaced), and writebacks, which gem5 does not attribute to a requestor, only from caches
private to the selected CPUs (a shared L2's stay None).

Several dumps: `stats_from_gem5(dumps[-1])` for the last, `base=dumps[i]` for the
difference (region of interest between two `m5 dumpstats`); `stats_from_file` does both.
A difference that shrinks (stats reset in between) is refused, see `subtract_stats`.

Errors: reading a file a user gave raises InputError (exit 2). `Gem5Simulator.run` turns
every problem with a file its own gem5 run wrote (missing, empty, truncated, unreadable,
unexpected CPU model or geometry) into InfraError (exit 3), since the run is at fault.

Running (`Gem5Simulator`): the gem5 binary for an ISA comes from PERFGUARD_GEM5_X86 /
PERFGUARD_GEM5_ARM / PERFGUARD_GEM5_RISCV, or PERFGUARD_GEM5 (a build/ALL binary), or an
explicit mapping. Kernel-only statistics by difference of two runs of the harness
(`harness REPS WARMUP`): stats(REPS=R) - stats(REPS=0), same WARMUP, = R kernel calls.
Each run works in a fresh directory under <cache_dir>/gem5/ (the generated script, m5out/,
the guest's stdout/stderr, perfguard's status file); it is deleted after success (kept with
keep_outputs=True) and kept after a failure, so the file an error names can be read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfguard import jsonfile
from perfguard.errors import InfraError, InputError, PerfguardError
from perfguard.signals import die_with_parent
from perfguard.sim.base import SimResult, Simulator
from perfguard.sim.gem5_config import (
    CPU_TYPES,
    DEFAULT_MEM_SIZE,
    GEM5_BUILD_DIR,
    NO_CPU_MODEL_EXIT,
    SCRIPT_NAME,
    STATUS_NAME,
    WRONG_ISA_EXIT,
    check_decodable,
    clock_string,
    generate_se_config,
)
from perfguard.sim.stats import STAT_FIELDS, Stats
from perfguard.targets import TargetProfile

Number = int | float
Dump = dict[str, Number]

BEGIN_MARK = "Begin Simulation Statistics"
END_MARK = "End Simulation Statistics"
_MARK_RE = re.compile(r"^-+\s*(Begin|End) Simulation Statistics\s*-+$")
_INT_RE = re.compile(r"^[+-]?\d+$")

# ---------------------------------------------------------------------------------------------
# stats.txt


def _read_source(source: str | Path | bytes, what: str) -> tuple[str, str]:
    """(text, name for messages) from a path, a text or bytes."""
    if isinstance(source, bytes):
        data, name = source, f"<{what}>"
    elif isinstance(source, Path) or ("\n" not in source and source and os.path.exists(source)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        name = str(path)
    else:
        return source, f"<{what}>"
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError:
        raise InputError(f"{name}: not a text file (not UTF-8)") from None


def _number(token: str) -> Number | None:
    if _INT_RE.match(token):
        return int(token)
    try:
        return float(token)  # also nan, inf, -inf, 1e+10
    except ValueError:
        return None


def parse_stats(text_or_path: str | Path | bytes) -> list[Dump]:
    """Every dump of a gem5 stats.txt, in file order, as {stat name: number}.

    A Path (or a string naming an existing file) is read; any other string is the text itself.
    InputError (naming the file and line) for: no dump, a dump without its end line
    (truncated), a line that is not `NAME VALUE [...]`, a name twice in one dump, text outside
    a dump.
    """
    text, name = _read_source(text_or_path, "stats text")
    dumps: list[Dump] = []
    current: Dump | None = None
    begin_line = 0
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        mark = _MARK_RE.match(line)
        if mark:
            if mark.group(1) == "Begin":
                if current is not None:
                    raise InputError(f"{name}:{number}: dump {len(dumps) + 1} (line {begin_line}) has no end line")
                current, begin_line = {}, number
            else:
                if current is None:
                    raise InputError(f"{name}:{number}: end of a dump that never began")
                if not current:
                    raise InputError(f"{name}:{number}: dump {len(dumps) + 1} is empty")
                dumps.append(current)
                current = None
            continue
        if current is None:
            raise InputError(f"{name}:{number}: text outside a statistics dump: {line[:60]!r}")
        tokens = line.split()
        value = _number(tokens[1]) if len(tokens) >= 2 else None
        if value is None:
            if not any(END_MARK in later for later in lines[number:]):  # cut off mid-line
                raise InputError(
                    f"{name}: truncated: dump {len(dumps) + 1} (line {begin_line}) ends in a partial line"
                )
            raise InputError(f"{name}:{number}: not a 'NAME VALUE' statistics line: {line[:60]!r}")
        if tokens[0] in current:
            raise InputError(f"{name}:{number}: '{tokens[0]}' appears twice in dump {len(dumps) + 1}")
        current[tokens[0]] = value
    if current is not None:
        raise InputError(f"{name}: truncated: dump {len(dumps) + 1} (line {begin_line}) has no '{END_MARK}' line")
    if not dumps:
        raise InputError(f"{name}: no gem5 statistics ('{BEGIN_MARK}' not found)")
    return dumps


# ---------------------------------------------------------------------------------------------
# config.ini / config.json


@dataclass(frozen=True)
class CacheInfo:
    path: str
    size: int | None  # bytes
    assoc: int | None
    line: int | None  # bytes


@dataclass(frozen=True)
class CpuInfo:
    path: str
    type: str  # gem5's SimObject type, e.g. BaseAtomicSimpleCPU
    model: str  # atomic | timing | o3 | minor | kvm | unknown
    clock_period: int | None  # ticks
    clock_hz: float | None
    l1i: CacheInfo | None
    l1d: CacheInfo | None
    l2: tuple[CacheInfo, ...]  # the caches behind this CPU's L1s


@dataclass(frozen=True)
class Gem5Config:
    source: str
    cpus: tuple[CpuInfo, ...]
    caches: tuple[CacheInfo, ...]  # every Cache object
    cache_line_size: int | None
    full_system: bool | None
    mem_mode: str | None
    workload_cmd: tuple[str, ...] | None  # the first CPU's SE process

    def cpu(self, path: str) -> CpuInfo | None:
        return next((cpu for cpu in self.cpus if cpu.path == path), None)

    @property
    def l2(self) -> tuple[CacheInfo, ...]:
        seen: dict[str, CacheInfo] = {}
        for cpu in self.cpus:
            for cache in cpu.l2:
                seen.setdefault(cache.path, cache)
        return tuple(seen.values())


def cpu_model(type_name: str) -> str:
    """atomic | timing | o3 | minor | kvm | unknown from a CPU SimObject type name."""
    for needle, model in (
        ("AtomicSimpleCPU", "atomic"),
        ("TimingSimpleCPU", "timing"),
        ("O3CPU", "o3"),
        ("MinorCPU", "minor"),
        ("KvmCPU", "kvm"),
    ):
        if needle in type_name:
            return model
    return "unknown"


def _parse_ini(text: str, name: str) -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
        elif "=" in line and current is not None:
            key, value = line.split("=", 1)
            current[key.strip()] = value.strip()
        else:
            raise InputError(f"{name}:{number}: not a gem5 config.ini line: {line[:60]!r}")
    if "root" not in sections:
        raise InputError(f"{name}: not a gem5 config.ini (no [root] section)")
    return sections


def _ini_value(value: object) -> str:
    """A config.json scalar written the way config.ini writes it."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "Null"
    return str(value)


def _flatten_json(data: object, name: str) -> dict[str, dict[str, str]]:
    if not isinstance(data, dict) or data.get("type") != "Root":
        raise InputError(f"{name}: not a gem5 config.json (no Root object)")
    sections: dict[str, dict[str, str]] = {}

    def is_object(value: object) -> bool:
        return isinstance(value, dict) and "path" in value and "type" in value

    def walk(obj: dict) -> None:
        section = sections.setdefault(str(obj["path"]), {})
        children = []
        for key, value in obj.items():
            if key in ("path", "name", "cxx_class"):
                continue
            if is_object(value):
                children.append(key)
                walk(value)
            elif isinstance(value, list) and value and all(is_object(v) for v in value):
                children.append(key)
                for item in value:
                    walk(item)
            elif isinstance(value, dict) and "peer" in value:  # a port
                peer = value["peer"]
                section[key] = " ".join(map(_ini_value, peer)) if isinstance(peer, list) else _ini_value(peer)
            elif isinstance(value, list):
                section[key] = " ".join(_ini_value(v) for v in value)
            elif isinstance(value, dict):
                section[key] = json.dumps(value, sort_keys=True)
            else:
                section[key] = _ini_value(value)
        if children:
            section["children"] = " ".join(children)

    root = dict(data, path=str(data.get("path", "root")))
    try:
        walk(root)
    except RecursionError:
        raise InputError(f"{name}: not a gem5 config.json (objects nested too deeply)") from None
    sections["root"] = sections.pop(root["path"], sections.get("root", {}))
    return sections


def _owner(port: str) -> str:
    """'system.tol2bus.cpu_side_ports[1]' -> 'system.tol2bus'."""
    return port.rsplit(".", 1)[0] if "." in port else port


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _clock_period(sections: dict[str, dict[str, str]], domain: str | None, depth: int = 0) -> int | None:
    """Clock period in ticks of a SrcClockDomain (its perf level) or a DerivedClockDomain."""
    section = sections.get(domain or "")
    if section is None or depth > 8:
        return None
    if "clock" in section:  # SrcClockDomain: one period per DVFS performance level
        periods = [_int(v) for v in section["clock"].split()]
        level = _int(section.get("init_perf_level")) or 0
        period = periods[level] if 0 <= level < len(periods) else periods[0] if periods else None
        return period if period is not None and period > 0 else None
    divider = _int(section.get("clk_divider"))
    parent = _clock_period(sections, section.get("clk_domain"), depth + 1)
    return parent * divider if parent is not None and divider and divider > 0 else None


def config_from_sections(
    sections: dict[str, dict[str, str]], source: str, ticks_per_second: float = 1e12
) -> Gem5Config:
    """A Gem5Config from config.ini-style sections {object path: {param: value}}."""
    def type_of(path: str) -> str:
        return sections.get(path, {}).get("type", "")

    def is_cache(path: str) -> bool:
        kind = type_of(path)
        return kind.endswith("Cache") and "Noncoherent" not in kind

    cpu_paths = [path for path, section in sections.items() if section.get("type", "").endswith("CPU")]
    systems = [path for path, s in sections.items() if s.get("type", "").endswith("System")]
    cpu_roots = [path.split(".")[0] for path in cpu_paths]
    root_system = next((path for path in systems if path in cpu_roots), systems[0] if systems else None)
    system_line = _int(sections.get(root_system or "", {}).get("cache_line_size"))

    def cache_info(path: str) -> CacheInfo:
        section = sections[path]
        tags = sections.get(section.get("tags", path + ".tags"), {})
        line = _int(tags.get("block_size")) or system_line
        return CacheInfo(path=path, size=_int(section.get("size")), assoc=_int(section.get("assoc")), line=line)

    def cache_at(port_value: str | None) -> str | None:
        if not port_value:
            return None
        owner = _owner(port_value.split()[0])
        return owner if is_cache(owner) else None

    def next_level(cache: str) -> list[str]:
        peer = sections[cache].get("mem_side", "")
        found: list[str] = []
        for port in peer.split():
            owner = _owner(port)
            if is_cache(owner):
                found.append(owner)
                continue
            bus = sections.get(owner, {})
            for key in ("mem_side_ports", "master"):
                for downstream in bus.get(key, "").split():
                    target = _owner(downstream)
                    if is_cache(target) and target != cache and target not in found:
                        found.append(target)
        return found

    cpus = []
    for path in sorted(cpu_paths):
        section = sections[path]
        l1i = cache_at(section.get("icache_port"))
        l1d = cache_at(section.get("dcache_port"))
        l2_paths: list[str] = []
        for l1 in (l1d, l1i):
            if l1:
                for cache in next_level(l1):
                    if cache not in l2_paths and cache not in (l1i, l1d):
                        l2_paths.append(cache)
        period = _clock_period(sections, section.get("clk_domain"))
        cpus.append(
            CpuInfo(
                path=path,
                type=section.get("type", ""),
                model=cpu_model(section.get("type", "")),
                clock_period=period,
                clock_hz=(ticks_per_second / period) if period else None,
                l1i=cache_info(l1i) if l1i else None,
                l1d=cache_info(l1d) if l1d else None,
                l2=tuple(cache_info(p) for p in l2_paths),
            )
        )
    full_system = sections.get("root", {}).get("full_system")
    workload_cmd = None
    for cpu in cpus:
        workload = sections.get(sections[cpu.path].get("workload", "").split(" ")[0] or cpu.path + ".workload", {})
        if workload.get("type") == "Process":
            workload_cmd = tuple(workload.get("cmd", "").split())
            break
    return Gem5Config(
        source=source,
        cpus=tuple(cpus),
        caches=tuple(cache_info(p) for p in sorted(sections) if is_cache(p)),
        cache_line_size=system_line,
        full_system=None if full_system is None else full_system == "true",
        mem_mode=sections.get(root_system or "", {}).get("mem_mode"),
        workload_cmd=workload_cmd,
    )


def read_config(path: str | Path) -> Gem5Config | None:
    """A gem5 config.ini or config.json; a directory: its config.ini, else its config.json,
    else None. InputError if the file is not a gem5 configuration."""
    path = Path(path)
    if path.is_dir():
        for candidate in ("config.ini", "config.json"):
            if (path / candidate).is_file():
                return read_config(path / candidate)
        return None
    text, name = _read_source(path, "config")
    if path.suffix == ".json":
        sections = _flatten_json(jsonfile.loads(text, name, "not valid JSON"), name)
    else:
        sections = _parse_ini(text, name)
    return config_from_sections(sections, name)


# ---------------------------------------------------------------------------------------------
# mapping one dump to Stats

# (scheme name, group regex: prefix = the CPU, marker = a stat the group always prints,
#  field -> stat name inside the group)
_COUNT_FIELDS = ("insts", "loads", "stores", "branches", "cond_branches", "indirect_branches",
                 "calls", "returns", "fp_insts", "vec_insts")
_SCHEMES = (
    (
        "commitStats",  # gem5 >= 23: every CPU model
        re.compile(r"^(?P<cpu>.+)\.(?P<group>commitStats\d+)\.numOps$"),
        {
            "insts": "numInsts",
            "loads": "numLoadInsts",
            "stores": "numStoreInsts",
            "branches": "committedControl::IsControl",
            "cond_branches": "committedControl::IsCondControl",
            "indirect_branches": "committedControl::IsIndirectControl",
            "calls": "committedControl::IsCall",
            "returns": "committedControl::IsReturn",
            "fp_insts": "numFpInsts",
            "vec_insts": "numVecInsts",
        },
    ),
    (
        "exec_context",  # gem5 21-22, SimpleCPU models
        re.compile(r"^(?P<cpu>.+)\.(?P<group>exec_context\.thread_\d+)\.numOps$"),
        {
            "insts": "numInsts",
            "loads": "numLoadInsts",
            "stores": "numStoreInsts",
            "branches": "numBranches",
            "cond_branches": "numCondCtrlInsts",
            "fp_insts": "numFpInsts",
            "vec_insts": "numVecInsts",
        },
    ),
    (
        "snake",  # gem5 <= 20, SimpleCPU models: stats directly under the CPU
        re.compile(r"^(?P<cpu>.+)\.(?P<group>)num_mem_refs$"),
        {
            "insts": "committedInsts",
            "loads": "num_load_insts",
            "stores": "num_store_insts",
            "branches": "Branches",
            "cond_branches": "num_conditional_control_insts",
            "fp_insts": "num_fp_insts",
            "vec_insts": "num_vec_insts",
        },
    ),
)
_CACHE_STATS = {
    "accesses": ("overallAccesses", "overall_accesses"),
    "misses": ("overallMisses", "overall_misses"),
    "writebacks": ("writebacks",),
}


def _count(value: Number | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return int(round(value))
    return int(value)


def _cpu_groups(dump: Mapping[str, Number]) -> dict[str, tuple[str, list[str]]]:
    """{cpu path: (scheme, [group prefixes])}, the first scheme that matches a CPU wins."""
    found: dict[str, dict[str, list[str]]] = {}
    for key in dump:
        for scheme, pattern, _ in _SCHEMES:
            match = pattern.match(key)
            if match:
                cpu = match.group("cpu")
                if scheme == "snake" and cpu.endswith(".commit"):
                    continue
                group = match.group("group")
                prefix = f"{cpu}.{group}." if group else f"{cpu}."
                found.setdefault(cpu, {}).setdefault(scheme, []).append(prefix)
    order = [scheme for scheme, _, _ in _SCHEMES]
    result = {}
    for cpu, schemes in found.items():
        scheme = min(schemes, key=order.index)
        result[cpu] = (scheme, sorted(schemes[scheme]))
    return result


def _present(dump: Mapping[str, Number], prefix: str) -> bool:
    prefix = prefix + "."
    return any(key.startswith(prefix) for key in dump)


def _cache_value(
    dump: Mapping[str, Number], cache: str, stat: str, requestors: Sequence[str] | None
) -> tuple[int, list[str]]:
    """One cache stat; `requestors` (names relative to the system) sums those entries instead
    of ::total. A missing entry of a present cache is 0 (gem5's nozero flag)."""
    names = _CACHE_STATS[stat]
    default = names[-1] if "sim_insts" in dump else names[0]  # snake_case file or camelCase
    style = next((n for n in names if any(k.startswith(f"{cache}.{n}::") for k in dump)), default)
    if requestors is None:
        key = f"{cache}.{style}::total"
        return _count(dump.get(key)) or 0, [key]
    total, used = 0, []
    for key, value in dump.items():
        if not key.startswith(f"{cache}.{style}::"):
            continue
        sub = key.split("::", 1)[1].lstrip(".")
        if any(sub.startswith(r + ".") for r in requestors):
            total += _count(value) or 0
            used.append(key)
    return total, used or [f"{cache}.{style}::<{'|'.join(requestors)}>.*"]


def _foreign_requests(dump: Mapping[str, Number], cache: str, requestors: Sequence[str]) -> bool:
    """Whether a cache served requestors other than these CPUs."""
    for key in dump:
        if key.startswith(f"{cache}.") and "::" in key:
            group, sub = key[len(cache) + 1:].split("::", 1)
            if group in _CACHE_STATS["accesses"]:
                sub = sub.lstrip(".")
                if sub != "total" and not any(sub.startswith(r + ".") for r in requestors):
                    return True
    return False


@dataclass(frozen=True)
class _Mapped:
    values: dict[str, int | None]
    sources: dict[str, tuple[str, ...]]


def _map(dump: Mapping[str, Number], config: Gem5Config | None, cpus: Sequence[str] | None) -> _Mapped:
    if not dump:
        raise InputError("gem5: empty statistics dump")
    groups = _cpu_groups(dump)
    if config is not None and config.cpus:
        known = [cpu.path for cpu in config.cpus if _present(dump, cpu.path)]
        if not known:
            names = ", ".join(c.path for c in config.cpus)
            raise InputError(f"{config.source}: none of its CPUs ({names}) is in the statistics")
    else:
        known = sorted(groups)
    if cpus is not None:
        missing = [cpu for cpu in cpus if cpu not in known]
        if missing:
            found = ", ".join(known) or "none"
            raise InputError(f"gem5: CPU '{missing[0]}' is not in the statistics (found: {found})")
        selected = list(cpus)
    else:
        selected = known

    values: dict[str, int | None] = {name: None for name in STAT_FIELDS}
    sources: dict[str, list[str]] = {name: [] for name in STAT_FIELDS}

    # instruction classes, summed over the selected CPUs and their threads
    for cpu in selected:
        if cpu not in groups:
            continue
        scheme, prefixes = groups[cpu]
        names = next(mapping for name, _, mapping in _SCHEMES if name == scheme)
        for field in _COUNT_FIELDS:
            if field not in names:
                continue
            for prefix in prefixes:
                key = prefix + names[field]
                values[field] = (values[field] or 0) + (_count(dump.get(key)) or 0)
                sources[field].append(key)
    if values["insts"] is None and cpus is None:
        for key in ("simInsts", "sim_insts"):
            if key in dump:
                values["insts"] = _count(dump[key])
                sources["insts"].append(key)
                break

    # caches: {level: {cache path: CPUs that reach it}}
    users: dict[str, dict[str, set[str]]] = {"l1i": {}, "l1d": {}, "l2": {}}
    if config is not None and config.cpus:
        for cpu in config.cpus:
            for level, caches in (("l1i", [cpu.l1i]), ("l1d", [cpu.l1d]), ("l2", list(cpu.l2))):
                for cache in caches:
                    if cache is not None:
                        users[level].setdefault(cache.path, set()).add(cpu.path)
    else:
        for cpu in known:
            for level, name in (("l1i", "icache"), ("l1d", "dcache")):
                users[level].setdefault(f"{cpu}.{name}", set()).add(cpu)
            parts = cpu.split(".")
            for depth in range(len(parts) - 1, 0, -1):
                for name in ("l2", "l2cache"):
                    users["l2"].setdefault(".".join(parts[:depth] + [name]), set()).add(cpu)
    subset = set(selected) != set(known)
    root = known[0].split(".")[0] if known else ""
    requestors = [cpu[len(root) + 1:] if cpu.startswith(root + ".") else cpu for cpu in selected]
    for level, stats in (("l1i", ("accesses", "misses")), ("l1d", ("accesses", "misses", "writebacks")),
                         ("l2", ("accesses", "misses", "writebacks"))):
        # with a subset of CPUs, every cache of the level counts, but only the selected CPUs'
        # requests (a switched-in CPU uses the caches of the CPU it replaced)
        present = {c: u for c, u in users[level].items() if _present(dump, c)}
        caches = list(present)
        if not caches:
            continue
        own = [c for c, u in present.items() if u & set(selected)]
        private = bool(own) and all(
            present[c] <= set(selected) and not _foreign_requests(dump, c, requestors) for c in own
        )
        for stat in stats:
            field = f"{level}_{stat}"
            if subset and stat == "writebacks":
                if not private:
                    continue  # gem5 does not say on whose behalf a shared cache writes back
                chosen, wanted = own, None
            else:
                chosen, wanted = caches, (requestors if subset else None)
            for cache in chosen:
                value, used = _cache_value(dump, cache, stat, wanted)
                values[field] = (values[field] or 0) + value
                sources[field] += used
    return _Mapped(values, {k: tuple(v) for k, v in sources.items()})


def stats_from_gem5(
    dump: Mapping[str, Number],
    config: Gem5Config | None = None,
    cpus: Sequence[str] | None = None,
    *,
    base: Mapping[str, Number] | None = None,
) -> Stats:
    """Stats of one dump (summed over every CPU, or over `cpus`); with `base`, the difference
    dump - base (both mapped the same way; see `subtract_stats`)."""
    stats = Stats.from_dict(_map(dump, config, cpus).values, source="gem5 statistics")
    if base is None:
        return stats
    return subtract_stats(stats, stats_from_gem5(base, config, cpus))


def gem5_stat_sources(
    dump: Mapping[str, Number], config: Gem5Config | None = None, cpus: Sequence[str] | None = None
) -> dict[str, tuple[str, ...]]:
    """Which stat names each Stats field was taken from (empty: the field is None)."""
    return _map(dump, config, cpus).sources


def subtract_stats(
    later: Stats, earlier: Stats, *, error: type[PerfguardError] = InputError, what: str = "dumps"
) -> Stats:
    """later - earlier, field by field (None if either is None).

    A count cannot shrink between a dump and a later one of the same run, or between a run
    and a longer run of the same program, except by a few cache misses that start-up code
    shifts: a negative difference within max(64, 0.5 % of the earlier value) becomes 0; a
    larger one (statistics reset between the dumps, or runs of different programs) raises
    `error`. So does fewer instructions at all.
    """
    values: dict[str, int | None] = {}
    for field in STAT_FIELDS:
        a, b = getattr(later, field), getattr(earlier, field)
        if a is None or b is None:
            values[field] = None
            continue
        diff = a - b
        if diff < 0:
            if field == "insts" or -diff > max(64, 0.005 * b):
                raise error(
                    f"gem5: {field} fell from {b} to {a} between the {what}: statistics were reset in between "
                    f"(m5 resetstats) or they come from different programs"
                )
            diff = 0
        values[field] = diff
    return Stats(**values)


def stats_from_file(
    path: str | Path,
    *,
    dump: int = -1,
    base: int | None = None,
    config: Gem5Config | str | Path | None | bool = True,
    cpus: Sequence[str] | None = None,
) -> Stats:
    """Stats from a stats.txt (or a directory holding one): dump `dump` (default the last),
    minus dump `base` if given. `config=True` reads config.ini/config.json beside the file."""
    path = Path(path)
    stats_path = path / "stats.txt" if path.is_dir() else path
    if not stats_path.is_file():
        raise InputError(f"{stats_path}: no such file")
    dumps = parse_stats(stats_path)
    try:
        chosen = dumps[dump]
        earlier = dumps[base] if base is not None else None
    except IndexError:
        wanted = dump if base is None else f"{dump} or {base}"
        raise InputError(f"{stats_path}: has {len(dumps)} dump(s), no dump {wanted}") from None
    if config is True:
        cfg = read_config(stats_path.parent)
    elif config is False or config is None:
        cfg = None
    elif isinstance(config, Gem5Config):
        cfg = config
    else:
        cfg = read_config(config)
    try:
        stats = stats_from_gem5(chosen, cfg, cpus)
        if earlier is None:
            return stats
        return subtract_stats(stats, stats_from_gem5(earlier, cfg, cpus))
    except InputError as exc:  # name the file the counts came from
        if exc.message.startswith(str(stats_path)):
            raise
        raise InputError(f"{stats_path}: {exc.message}") from None


# ---------------------------------------------------------------------------------------------
# what the back end reports: perfguard's definitions (those of the QEMU plugin), or null

# Fields a gem5 run reports as null, and why: gem5 counts something else under that name.
# Measured against the QEMU plugin on the same binaries (benchmarks/RESULTS.md).
NULL_FIELDS = {
    "l1i_accesses": "gem5's icache accesses are fetches of fetch-buffer-sized chunks (an x86 "
                    "instruction can take two, a run of short ones share one), not one per instruction",
    "l1d_writebacks": "gem5's classic caches hand dirty ownership up on a read (MOESI): a line any earlier "
                      "code dirtied comes back dirty into L1D and is written back when evicted, so "
                      "nearly every L1D miss of a kernel whose data was written at set-up is a write-back",
    "vec_insts": "gem5 classes SSE as floating point (numVecInsts is 0 on x86) and counts RISC-V and "
                 "Arm vector micro-ops",
}
NULL_FIELDS_X86 = {
    "loads": "gem5's x86 numLoadInsts counts load micro-ops: a 128-bit SSE access is two, a "
             "read-modify-write or a call/return adds one; gem5 has no per-instruction count",
    "stores": "gem5's x86 numStoreInsts counts store micro-ops (a 128-bit SSE store is two)",
    "l1d_accesses": "gem5 splits an x86 access that crosses a cache line into two cache accesses; "
                    "the plugin counts it once (and a miss per line)",
    "fp_insts": "gem5 executes x86 SSE as 64-bit micro-ops of the same op classes as scalar fp: "
                "scalar and packed arithmetic cannot be told apart per instruction",
}
# gem5 op classes of fp arithmetic in the plugin's sense (numFpInsts also counts fp loads,
# stores, moves and sign injections: FloatMemRead, FloatMemWrite, FloatMisc)
FP_ARITH_CLASSES = ("FloatAdd", "FloatCmp", "FloatCvt", "FloatMult", "FloatMultAcc", "FloatDiv", "FloatSqrt")
_FP_CLASS_RE = re.compile(r"\.commitStats\d+\.committedInstType::(" + "|".join(FP_ARITH_CLASSES) + r")$")


def fp_arith_insts(dump: Mapping[str, Number]) -> int | None:
    """Committed fp arithmetic instructions by op class (gem5 >= 23), None without those stats."""
    values = [_count(value) or 0 for key, value in dump.items() if _FP_CLASS_RE.search(key)]
    return sum(values) if values else None
MAPPING_VERSION = 3  # in the fingerprint: cached results of an older mapping are not reused


def reported_stats(stats: Stats, isa: str) -> Stats:
    """A gem5 run's statistics in perfguard's definitions: indirect branches without returns
    (gem5 flags every return IsIndirectControl), the fields gem5 counts differently null."""
    values = stats.to_dict()
    if values["indirect_branches"] is not None and values["returns"] is not None:
        values["indirect_branches"] = max(0, values["indirect_branches"] - values["returns"])
    for name in NULL_FIELDS:
        values[name] = None
    if isa == "x86_64":
        for name in NULL_FIELDS_X86:
            values[name] = None
    return Stats(**values)


# ---------------------------------------------------------------------------------------------
# checking a run's configuration against the target


def verify_config(config: Gem5Config, target: TargetProfile, cpu_type: str) -> list[str]:
    """What differs between the configuration gem5 ran and what perfguard asked for."""
    problems: list[str] = []
    if len(config.cpus) != 1:
        return [f"{len(config.cpus)} CPUs, expected 1"]
    cpu = config.cpus[0]
    if cpu.model != cpu_type:
        problems.append(f"CPU model is {cpu.type or 'missing'} ({cpu.model}), expected {cpu_type}")
    for level, have in (("l1i", cpu.l1i), ("l1d", cpu.l1d), ("l2", cpu.l2[0] if len(cpu.l2) == 1 else None)):
        want = getattr(target, level)
        if have is None:
            problems.append(f"no {level} cache found")
        elif (have.size, have.assoc, have.line) != (want.size, want.assoc, want.line):
            problems.append(
                f"{level} ({have.path}) is {have.size} B {have.assoc}-way {have.line} B lines, "
                f"expected {want.size} B {want.assoc}-way {want.line} B lines"
            )
    want_period = round(1e12 / target.clock_hz)
    if cpu.clock_period is None or abs(cpu.clock_period - want_period) > 1:
        problems.append(
            f"CPU clock period is {cpu.clock_period} ticks, expected {want_period} ({clock_string(target.clock_hz)})"
        )
    return problems


# ---------------------------------------------------------------------------------------------
# finding gem5

ENV_ALL = "PERFGUARD_GEM5"
ENV_BY_ISA = {"x86_64": "PERFGUARD_GEM5_X86", "aarch64": "PERFGUARD_GEM5_ARM", "riscv64": "PERFGUARD_GEM5_RISCV"}
_ISA_ALIASES = {
    "x86_64": "x86_64", "x86": "x86_64", "amd64": "x86_64",
    "aarch64": "aarch64", "arm": "aarch64", "arm64": "aarch64",
    "riscv64": "riscv64", "riscv": "riscv64",
}


def _normalise_isa(name: str) -> str | None:
    key = name.strip().lower()
    if key == "all":
        return "all"
    return _ISA_ALIASES.get(key)


def _candidates(
    isa: str, paths: Mapping[str, str | Path] | None, environ: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(path, where it came from), in order of precedence."""
    found: list[tuple[str, str]] = []
    explicit = {}
    for key, value in (paths or {}).items():
        norm = _normalise_isa(str(key))
        if norm is None:
            raise InputError(f"gem5 paths: unknown ISA key '{key}' (x86_64, aarch64, riscv64 or all)")
        explicit[norm] = value
    if isa in explicit:
        found.append((str(explicit[isa]), f"gem5 path for {isa}"))
    if environ.get(ENV_BY_ISA[isa]):
        found.append((environ[ENV_BY_ISA[isa]], ENV_BY_ISA[isa]))
    if "all" in explicit:
        found.append((str(explicit["all"]), "gem5 path for all ISAs"))
    if environ.get(ENV_ALL):
        found.append((environ[ENV_ALL], ENV_ALL))
    return found


def _usable(path: str) -> Path | None:
    candidate = Path(path).expanduser()
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate.resolve()
    return None


def find_gem5(
    isa: str, paths: Mapping[str, str | Path] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The gem5 binary for `isa` (x86_64 | aarch64 | riscv64), or None.

    Looks at, in order: `paths[isa]`, $PERFGUARD_GEM5_<X86|ARM|RISCV>, `paths["all"]`,
    $PERFGUARD_GEM5 (one binary built for ALL ISAs). The first that is set decides: a path
    that is not an executable file gives None (check_available says why)."""
    norm = _normalise_isa(isa)
    if norm not in ENV_BY_ISA:
        return None
    found = _candidates(norm, paths, os.environ if environ is None else environ)
    return _usable(found[0][0]) if found else None


def gem5_hint(isa: str) -> str:
    build = GEM5_BUILD_DIR.get(isa, "ALL")
    return (
        f"set {ENV_BY_ISA.get(isa, ENV_ALL)} (or {ENV_ALL} for a build/ALL binary) to a gem5 binary; "
        f"build one in a gem5 checkout with `scons build/{build}/gem5.opt -j$(nproc)` (takes hours)"
    )


# ---------------------------------------------------------------------------------------------
# running gem5

_ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "riscv64": 243}
_NORMAL_EXIT_CAUSE = "exiting with last active thread context"
_binary_hashes: dict[tuple[str, int, int], str] = {}


def _check_harness(binary: Path, isa: str) -> None:
    """SE mode runs only a static ELF of the target's ISA."""
    try:
        with open(binary, "rb") as handle:
            header = handle.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF":
                raise InfraError(f"{binary}: not an ELF executable")
            if header[4] != 2 or header[5] != 1:
                raise InfraError(f"{binary}: not a 64-bit little-endian ELF")
            machine = int.from_bytes(header[18:20], "little")
            if machine != _ELF_MACHINE[isa]:
                names = {v: k for k, v in _ELF_MACHINE.items()}
                raise InfraError(f"{binary}: built for {names.get(machine, f'ELF machine {machine}')}, not {isa}")
            phoff = int.from_bytes(header[32:40], "little")
            phentsize = int.from_bytes(header[54:56], "little")
            phnum = int.from_bytes(header[56:58], "little")
            handle.seek(phoff)
            table = handle.read(phentsize * phnum)
    except OSError as exc:
        raise InfraError(f"{binary}: cannot read the harness binary: {exc.strerror or exc}") from None
    for index in range(phnum):
        if int.from_bytes(table[index * phentsize:index * phentsize + 4], "little") == 3:  # PT_INTERP
            raise InfraError(f"{binary}: dynamically linked; gem5 SE mode needs a statically linked harness")


def _harness_args(args: Sequence[str]) -> tuple[int, str, list[str]]:
    if len(args) < 2:
        raise InputError(f"gem5: the harness needs 'REPS WARMUP' arguments, got {list(args)!r}")
    try:
        reps = int(str(args[0]))
        warmup = int(str(args[1]))
    except ValueError:
        raise InputError(f"gem5: harness arguments REPS WARMUP must be integers, got {list(args[:2])!r}") from None
    if reps < 1 or warmup < 0:
        raise InputError(f"gem5: need REPS >= 1 and WARMUP >= 0, got {reps} {warmup}")
    return reps, str(warmup), [str(a) for a in args[2:]]


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


# gem5 prints this banner first on every run; "gem5 version X" since v20
_BANNER = "gem5 Simulator System"
_VERSION_RE = re.compile(r"^gem5 version (\d+)\.(\d+)[\w.]*", re.MULTILINE)
OLDEST_GEM5 = (21, 0)  # the configuration's port names and SEWorkload, and the stat names it maps


def _check_banner(gem5: Path, stdout_path: Path, code: int, stderr_path: Path) -> None:
    """InfraError if the program that ran is not gem5, or a gem5 older than OLDEST_GEM5."""
    try:
        with open(stdout_path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        head = ""
    if _BANNER not in head:
        why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        last = _last_line(stderr_path) or _last_line(stdout_path) or "no output"
        raise InfraError(f"{gem5}: not gem5 (no '{_BANNER}' banner on its output; {why}: {last})")
    version = _VERSION_RE.search(head)
    if version and (int(version.group(1)), int(version.group(2))) < OLDEST_GEM5:
        raise InfraError(
            f"{gem5}: {version.group(0)} is older than {OLDEST_GEM5[0]}.{OLDEST_GEM5[1]}, the oldest whose "
            f"configuration API and statistics names perfguard runs; build a newer one (scripts/build-gem5.sh)"
        )


@dataclass(frozen=True)
class _RunOutput:
    stats: Stats
    stdout: bytes


class Gem5Simulator(Simulator):
    """gem5 in SE mode, one binary per ISA; kernel-only stats by difference of two runs."""

    name = "gem5"

    def __init__(
        self,
        cache_dir: Path,
        gem5_paths: Mapping[str, str | Path] | None = None,
        *,
        cpu_type: str = "atomic",
        mem_size: int = DEFAULT_MEM_SIZE,
        keep_outputs: bool = False,
    ):
        if cpu_type not in CPU_TYPES:
            raise InputError(f"gem5: unknown CPU type '{cpu_type}' (one of {', '.join(CPU_TYPES)})")
        self.cache_dir = Path(cache_dir)
        self.gem5_paths = dict(gem5_paths or {})
        self.cpu_type = cpu_type
        self.mem_size = mem_size
        self.keep_outputs = keep_outputs
        self.last_run_dir: Path | None = None

    # -- Simulator interface ------------------------------------------------------------------

    def gem5_binary(self, target: TargetProfile) -> Path:
        if target.isa not in ENV_BY_ISA:
            raise InputError(f"target '{target.name}': gem5 back end does not support ISA '{target.isa}'")
        found = _candidates(target.isa, self.gem5_paths, os.environ)
        if not found:
            raise InfraError(f"gem5 for {target.isa} not found: {gem5_hint(target.isa)}")
        path, where = found[0]
        usable = _usable(path)
        if usable is None:
            raise InfraError(
                f"gem5 for {target.isa}: {where}={path} is not an executable file; {gem5_hint(target.isa)}"
            )
        return usable

    def check_available(self, target: TargetProfile) -> None:
        check_decodable(target)
        self.gem5_binary(target)

    def fingerprint(self, target: TargetProfile) -> str:
        binary = self.gem5_binary(target)
        status = binary.stat()
        key = (str(binary), status.st_size, status.st_mtime_ns)
        if key not in _binary_hashes:
            digest = hashlib.sha256()
            with open(binary, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            _binary_hashes[key] = digest.hexdigest()
        script = generate_se_config(target, "BINARY", ["BINARY", "REPS", "WARMUP"], "/RUN",
                                    cpu_type=self.cpu_type, mem_size=self.mem_size)
        return json.dumps(
            {
                "simulator": "gem5",
                "gem5_sha256": _binary_hashes[key],
                "config_sha256": hashlib.sha256(script.encode()).hexdigest(),
                "cpu_type": self.cpu_type,
                "mapping": MAPPING_VERSION,
                "roi": "difference of REPS=R and REPS=0 runs",
            },
            sort_keys=True,
        )

    def run(self, binary: Path, target: TargetProfile, args: list[str], timeout: float) -> SimResult:
        check_decodable(target)
        gem5 = self.gem5_binary(target)
        reps, warmup, rest = _harness_args(args)
        binary = Path(binary).resolve()
        _check_harness(binary, target.isa)
        base_dir = self.cache_dir / "gem5"
        base_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="run-", dir=base_dir))
        self.last_run_dir = work
        # `timeout` bounds both runs together. On failure the directory stays, so the file an
        # error names can be read.
        deadline = time.monotonic() + timeout
        roi = self._run_once(gem5, binary, target, [str(reps), warmup, *rest], work / f"reps{reps}", deadline, timeout)
        empty = self._run_once(gem5, binary, target, ["0", warmup, *rest], work / "reps0", deadline, timeout)
        kernel = subtract_stats(roi.stats, empty.stats, error=InfraError,
                                what=f"REPS=0 and REPS={reps} runs ({work})")
        if not self.keep_outputs:
            shutil.rmtree(work, ignore_errors=True)
            self.last_run_dir = None
        return SimResult(stats=reported_stats(kernel, target.isa), stdout=roi.stdout, roi_count=1,
                         total_insts=roi.stats.insts)

    # -- one gem5 process -----------------------------------------------------------------------

    def _run_once(self, gem5: Path, binary: Path, target: TargetProfile, args: list[str], run_dir: Path,
                  deadline: float, timeout: float) -> _RunOutput:
        run_dir.mkdir(parents=True)
        outdir = run_dir / "m5out"
        script = run_dir / SCRIPT_NAME
        script.write_text(generate_se_config(target, binary, [str(binary), *args], run_dir,
                                             cpu_type=self.cpu_type, mem_size=self.mem_size))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        command = [str(gem5), f"--outdir={outdir}", "--listener-mode=off", str(script)]
        label = f"gem5 {target.isa} REPS={args[0]}"
        stderr_path = run_dir / "gem5.stderr"
        with open(run_dir / "gem5.stdout", "wb") as out, open(stderr_path, "wb") as err:
            try:
                process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                           cwd=run_dir, env=env, start_new_session=True,
                                           preexec_fn=die_with_parent)
            except OSError as exc:
                raise InfraError(f"{gem5}: cannot start gem5: {exc.strerror or exc}") from None
            try:
                code = process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
                raise InfraError(
                    f"{label}: timed out (both runs together have {timeout:g} s; outputs in {run_dir})"
                ) from None
        _check_banner(gem5, run_dir / "gem5.stdout", code, stderr_path)
        status_path = run_dir / STATUS_NAME
        status: dict = {}
        if status_path.is_file():
            try:
                status = json.loads(status_path.read_text())
            except (OSError, json.JSONDecodeError):
                status = {}
        if code == WRONG_ISA_EXIT or status.get("error") == "wrong-isa":
            built = ", ".join(status.get("built", [])) or "another ISA"
            raise InfraError(f"{gem5}: gem5 built for {built}, not {target.isa}: {gem5_hint(target.isa)}")
        if code == NO_CPU_MODEL_EXIT or status.get("error") == "no-cpu-model":
            wanted = ", ".join(status.get("wanted", []))
            raise InfraError(f"{gem5}: this gem5 build has no {self.cpu_type} CPU model ({wanted})")
        if code != 0:
            why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
            raise InfraError(f"{label}: gem5 {why}: {_last_line(stderr_path) or 'no message'} (see {stderr_path})")
        if not status:
            raise InfraError(f"{status_path}: gem5 ended without finishing the simulation (see {stderr_path})")
        if status.get("cause") != _NORMAL_EXIT_CAUSE:
            raise InfraError(f"{label}: simulation stopped early: {status.get('cause')!r} (see {stderr_path})")
        if status.get("code") != 0:
            guest_stderr = run_dir / "guest.stderr"
            raise InfraError(f"{label}: the harness exited with status {status.get('code')} (see {guest_stderr})")

        stats_path = outdir / "stats.txt"
        if not stats_path.is_file():
            raise InfraError(f"{stats_path}: gem5 wrote no statistics")
        if stats_path.stat().st_size == 0:
            raise InfraError(f"{stats_path}: empty")
        try:
            dumps = parse_stats(stats_path)
            config = read_config(outdir)
        except InputError as exc:
            raise InfraError(exc.message) from None
        if config is None:
            raise InfraError(f"{outdir / 'config.ini'}: gem5 wrote no config.ini or config.json")
        problems = verify_config(config, target, self.cpu_type)
        if problems:
            raise InfraError(f"{config.source}: {problems[0]}")
        try:
            stats = stats_from_gem5(dumps[-1], config)
        except InputError as exc:
            raise InfraError(f"{stats_path}: {exc.message}") from None
        stats = dataclasses.replace(stats, fp_insts=fp_arith_insts(dumps[-1]))
        if stats.insts is None:
            raise InfraError(f"{stats_path}: no instruction count in the statistics")
        try:
            stdout = (run_dir / "guest.stdout").read_bytes()
        except OSError:
            stdout = b""
        return _RunOutput(stats=stats, stdout=stdout)
