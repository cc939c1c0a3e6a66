"""gem5's config.ini / config.json: the CPUs with their model and clock, each CPU's L1I/L1D and
the L2 behind them, with size, associativity and line size."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from perfguard import jsonfile
from perfguard.errors import InputError
from perfguard.sim.gem5.stats_txt import read_source


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
    text, name = read_source(path, "config")
    if path.suffix == ".json":
        sections = _flatten_json(jsonfile.loads(text, name, "not valid JSON"), name)
    else:
        sections = _parse_ini(text, name)
    return config_from_sections(sections, name)
