"""One stats.txt dump to Stats (gem5's own view of the counts), and what a gem5 run reports:
perfguard's definitions where gem5 has the count, null where it counts something else."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfguard.errors import InputError, PerfguardError
from perfguard.sim.gem5.config_ini import Gem5Config, read_config
from perfguard.sim.gem5.stats_txt import Number, parse_stats
from perfguard.sim.stats import STAT_FIELDS, Stats
from perfguard.sim.two_runs import kernel_counts

# (scheme name, group regex: prefix = the CPU, marker = a stat the group always prints,
#  field -> stat name inside the group)
_COUNT_FIELDS = (
    "insts",
    "loads",
    "stores",
    "branches",
    "cond_branches",
    "indirect_branches",
    "calls",
    "returns",
    "fp_insts",
    "vec_insts",
)
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
            group, sub = key[len(cache) + 1 :].split("::", 1)
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
        fields = next(mapping for name, _, mapping in _SCHEMES if name == scheme)
        for field in _COUNT_FIELDS:
            if field not in fields:
                continue
            for prefix in prefixes:
                key = prefix + fields[field]
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
        for info in config.cpus:
            for level, caches in (("l1i", [info.l1i]), ("l1d", [info.l1d]), ("l2", list(info.l2))):
                for cache in caches:
                    if cache is not None:
                        users[level].setdefault(cache.path, set()).add(info.path)
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
    requestors = [cpu[len(root) + 1 :] if cpu.startswith(root + ".") else cpu for cpu in selected]
    for level, stats in (
        ("l1i", ("accesses", "misses")),
        ("l1d", ("accesses", "misses", "writebacks")),
        ("l2", ("accesses", "misses", "writebacks")),
    ):
        # with a subset of CPUs, every cache of the level counts, but only the selected CPUs'
        # requests (a switched-in CPU uses the caches of the CPU it replaced)
        present = {c: u for c, u in users[level].items() if _present(dump, c)}
        paths = list(present)
        if not paths:
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
                chosen, wanted = paths, (requestors if subset else None)
            for cache_path in chosen:
                value, used = _cache_value(dump, cache_path, stat, wanted)
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

    def refuse(field: str, a: int, b: int) -> PerfguardError:
        return error(
            f"gem5: {field} fell from {b} to {a} between the {what}: statistics were reset in between "
            f"(m5 resetstats) or they come from different programs"
        )

    counts: dict[str, Any] = kernel_counts(later.to_dict(), earlier.to_dict(), STAT_FIELDS, ("insts",), refuse)
    return Stats(**counts)


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


# Arm (aarch64), measured one instruction at a time (a loop of the instruction, 1000 vs 2000 trips;
# benchmarks/RESULTS.md, "gem5 on aarch64"): gem5 counts the micro-ops its decoder splits an
# instruction into, the plugin (QEMU) counts instructions for loads and stores and QEMU's memory
# accesses for l1d_accesses. No gem5 statistic gives either per instruction, so neither is mapped.
NULL_FIELDS_ARM = {
    "loads": "gem5's Arm numLoadInsts counts load micro-ops: ldp q is two, ld1/ld2/ld3/ld4 of n registers "
    "n; the plugin counts one per instruction",
    "stores": "gem5's Arm numStoreInsts counts store micro-ops: str q and stp x are two, stp q four, st1 of n "
    "registers n; the plugin counts one per instruction",
    "l1d_accesses": "gem5 makes one cache access per Arm memory micro-op (ld4 of four q registers: 4), QEMU one "
    "per access its translation makes (a q register: two 8-byte halves, ld4 of four: 16 "
    "elements): neither is one per instruction",
}
_WHOLE_LINE_RE = re.compile(r"\.l2(cache)?\.InvalidateReq\.(accesses|misses)::total$")


def whole_line_writes(dump: Mapping[str, Number]) -> tuple[int, int]:
    """(accesses, misses) of the L2 for L1D misses of whole-line writes (Arm's dc zva, which glibc's
    memset uses): gem5's L1D fetches nothing for them and sends the L2 an InvalidateReq, which its
    overall accesses and misses leave out; the plugin, like any L1D miss, counts an L2 access."""
    got = {"accesses": 0, "misses": 0}
    for key, value in dump.items():
        match = _WHOLE_LINE_RE.search(key)
        if match:
            got[match.group(2)] += _count(value) or 0
    return got["accesses"], got["misses"]


MAPPING_VERSION = 3  # in the fingerprint: cached results of an older mapping are not reused
# per ISA where the mapping changed since (aarch64: NULL_FIELDS_ARM, whole_line_writes), so the other ISAs' stored
# results (benchmarks/verdicts-gem5-x86_64v1.json) stay valid
MAPPING_VERSIONS = {"aarch64": 4}


def mapping_version(isa: str) -> int:
    return MAPPING_VERSIONS.get(isa, MAPPING_VERSION)


def reported_stats(stats: Stats, isa: str) -> Stats:
    """A gem5 run's statistics in perfguard's definitions: indirect branches without returns
    (gem5 flags every return IsIndirectControl), the fields gem5 counts differently null."""
    values: dict[str, Any] = stats.to_dict()
    if values["indirect_branches"] is not None and values["returns"] is not None:
        values["indirect_branches"] = max(0, values["indirect_branches"] - values["returns"])
    for name in NULL_FIELDS:
        values[name] = None
    for name in {"x86_64": NULL_FIELDS_X86, "aarch64": NULL_FIELDS_ARM}.get(isa, {}):
        values[name] = None
    return Stats(**values)
