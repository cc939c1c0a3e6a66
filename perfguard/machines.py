"""Machine profiles: a real CPU's calibration, committed as one file per CPU.

A prediction stands for a machine: the core llvm-mca schedules blocks for (a target's
`pipeline_cpu`) and, where one applies, the calibration profile of a real CPU on which the verdict
pairs (benchmarks/verdict_pairs.py) were timed natively. A profile is keyed by that CPU's identity
(vendor, family, model, model name) and holds, per ISA it has native runs on, the interval
quantiles of each model from its residuals on that CPU's pairs (perfguard.predict.intervals), the
number of pairs and where the timings came from. `[target.NAME] machine = "<profile>"` chooses one;
without it a target's results are the generic pipeline model's, uncalibrated.

A profile may also carry calibrated models trained on that CPU's own native runs (`perfguard
calibrate collect` and `train` with `--root benchmarks/profiles/<name>`): one file per ISA and
kernel family under perfguard/machine_profiles/<name>/<isa>/<family>.json, each named in the
profile with its sha256, so the profile's digest (which keys every result judged with it) covers
them, and a model file that does not match is refused, naming it.

The files are perfguard/machine_profiles/<name>.json, written by benchmarks/verdicts.py
--machine-profile (with --machine-models, the models it scored are copied in). Each new CPU a
developer times the verdict pairs on adds one.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard import jsonfile
from perfguard.atomic import atomic_write_text
from perfguard.errors import InputError, newer_format

MACHINES_DIR = Path(__file__).with_name("machine_profiles")
MACHINE_SCHEMA = 2  # 2: an ISA's section may name calibrated models; 1 had none, and still reads
KINDS = ("pipeline", "analytical", "calibrated")
# What a result without native truth on its ISA says instead of an interval.
NO_NATIVE_RUNS = "no native runs on this ISA"
NO_PROFILE = "no machine profile chosen"
_ID = re.compile(r"^(\S+) cpu family (\d+) model (\d+)\b")


@dataclass(frozen=True)
class CpuIdentity:
    """What /proc/cpuinfo says a CPU is: the key of its profile."""

    vendor: str  # GenuineIntel, AuthenticAMD
    family: int
    model: int
    model_name: str  # "Intel(R) Xeon(R) Processor"

    def describe(self) -> str:
        return f"{self.model_name} ({self.vendor} family {self.family} model {self.model})"

    @classmethod
    def parse(cls, cpu_id: str, model_name: str) -> CpuIdentity:
        """From perfguard.job.native.this_machine's `cpu_id` ("GenuineIntel cpu family 6 model 167 ...")."""
        m = _ID.match(cpu_id)
        if m is None:
            raise InputError(f"CPU identity {cpu_id!r}: not 'VENDOR cpu family F model M ...'")
        return cls(m.group(1), int(m.group(2)), int(m.group(3)), model_name)


@dataclass(frozen=True)
class IsaCalibration:
    """One ISA's native truth on the profile's CPU: its pairs and each model's interval quantile."""

    isa: str
    pairs: int
    entries: tuple[dict[str, Any], ...]  # {target, model_id, kind, pairs, quantile}
    source: dict[str, Any]  # command, native timings file, stat
    # family -> {file (relative to the profiles folder), sha256, model_id}: models trained on this CPU
    models: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class MachineProfile:
    name: str
    cpu: CpuIdentity
    date: str  # when its native timings were taken (the latest)
    level: float
    scale: float
    isas: dict[str, IsaCalibration]
    sha256: str  # of the file: results judged with it are keyed on it

    folder: Path = MACHINES_DIR

    def describe(self) -> str:
        """`intel-6-167: Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167), 2026-12-02`."""
        return f"{self.name}: {self.cpu.describe()}, {self.date}"

    def model_file(self, isa: str, family: str) -> Path | None:
        """The calibrated model this CPU's runs trained for `family` on `isa` (None: it has none)."""
        section = self.isas.get(isa)
        entry = None if section is None else section.models.get(family)
        return None if entry is None else self.folder / entry["file"]


_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def profile_name(cpu: CpuIdentity) -> str:
    """The file name a CPU's profile gets: vendor, family and model (`intel-6-167`, `amd-23-1`)."""
    vendor = _VENDORS.get(cpu.vendor, re.sub(r"[^a-z0-9]+", "", cpu.vendor.lower()) or "cpu")
    return f"{vendor}-{cpu.family}-{cpu.model}"


def names(folder: Path = MACHINES_DIR) -> list[str]:
    return sorted(p.stem for p in Path(folder).glob("*.json"))


def path_of(name: str, folder: Path = MACHINES_DIR) -> Path:
    return Path(folder) / f"{name}.json"


_CACHE: dict[tuple[str, int], MachineProfile] = {}


def load(name: str, folder: Path = MACHINES_DIR) -> MachineProfile:
    """The committed profile `name`, read strictly: a damaged one is an input error naming its file."""
    path = path_of(name, folder)
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except FileNotFoundError:
        raise InputError(f"{path}: no machine profile '{name}' (known: {', '.join(names(folder)) or 'none'})") from None
    if key in _CACHE:
        return _CACHE[key]
    raw = path.read_bytes()
    data = jsonfile.read(path, "corrupted machine profile")
    bad = f"{path}: corrupted machine profile"
    if isinstance(data, dict) and type(data.get("schema")) is int and data["schema"] > MACHINE_SCHEMA:
        raise newer_format(str(path), "machine profile schema", data["schema"], MACHINE_SCHEMA)
    if not isinstance(data, dict) or data.get("schema") not in (1, MACHINE_SCHEMA):
        raise InputError(f"{bad} (schema must be 1 or {MACHINE_SCHEMA})")
    cpu = data.get("cpu")
    if not (
        isinstance(cpu, dict)
        and isinstance(cpu.get("vendor"), str)
        and isinstance(cpu.get("model_name"), str)
        and type(cpu.get("family")) is int
        and type(cpu.get("model")) is int
    ):
        raise InputError(f"{bad} ('cpu' needs vendor, family, model and model_name)")
    level, scale, date = data.get("level"), data.get("scale"), data.get("date")
    if not (
        isinstance(level, (int, float))
        and not isinstance(level, bool)
        and 0 < level < 1
        and isinstance(scale, (int, float))
        and not isinstance(scale, bool)
        and scale > 0
        and isinstance(date, str)
    ):
        raise InputError(f"{bad} ('level' in (0, 1), 'scale' above 0 and a 'date' string)")
    isas: dict[str, IsaCalibration] = {}
    raw_isas = data.get("isas")
    if not isinstance(raw_isas, dict) or not raw_isas:
        raise InputError(f"{bad} ('isas' must map an ISA to its calibration)")
    for isa, section in raw_isas.items():
        where = f"{bad} (isas.{isa}"
        if (
            not isinstance(section, dict)
            or type(section.get("pairs")) is not int
            or section["pairs"] <= 0
            or not isinstance(section.get("entries"), list)
        ):
            raise InputError(f"{where}: needs pairs > 0 and an 'entries' list)")
        for i, e in enumerate(section["entries"]):
            ok = (
                isinstance(e, dict)
                and set(e) == {"target", "model_id", "kind", "pairs", "quantile"}
                and all(isinstance(e[k], str) for k in ("target", "model_id", "kind"))
                and e["kind"] in KINDS
                and type(e["pairs"]) is int
                and e["pairs"] > 0
                and isinstance(e["quantile"], (int, float))
                and not isinstance(e["quantile"], bool)
                and math.isfinite(e["quantile"])
                and e["quantile"] >= 0
            )
            if not ok:
                raise InputError(
                    f"{where}.entries[{i}]: needs target, model_id, kind (one of {', '.join(KINDS)}), "
                    f"pairs > 0 and a finite quantile >= 0)"
                )
        source = section.get("source")
        models = _models(section.get("models", {}), Path(folder), f"{where}.models")
        isas[isa] = IsaCalibration(
            isa, section["pairs"], tuple(section["entries"]), source if isinstance(source, dict) else {}, models
        )
    profile = MachineProfile(
        name,
        CpuIdentity(cpu["vendor"], cpu["family"], cpu["model"], cpu["model_name"]),
        date,
        float(level),
        float(scale),
        isas,
        hashlib.sha256(raw).hexdigest(),
        Path(folder),
    )
    _CACHE[key] = profile
    return profile


def _models(raw: Any, folder: Path, where: str) -> dict[str, dict[str, str]]:
    """An ISA's `models` section, every file present and matching its sha256 (a damaged or edited
    model must not judge under the profile's name)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: must map a kernel family to its model)")
    out = {}
    for family, entry in raw.items():
        if not (
            isinstance(entry, dict)
            and set(entry) == {"file", "sha256", "model_id"}
            and all(isinstance(v, str) for v in entry.values())
        ):
            raise InputError(f"{where}.{family}: needs file, sha256 and model_id)")
        path = folder / entry["file"]
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            raise InputError(f"{path}: model file of the machine profile is missing") from None
        if digest != entry["sha256"]:
            raise InputError(f"{path}: model file does not match the sha256 its machine profile names (edited?)")
        out[family] = dict(entry)
    return out


def model_entry(folder: Path, file: Path, model_id: str) -> dict[str, str]:
    """How a profile names one of its model files (`file` inside `folder`)."""
    return {
        "file": file.relative_to(folder).as_posix(),
        "sha256": hashlib.sha256(file.read_bytes()).hexdigest(),
        "model_id": model_id,
    }


def to_json(cpu: CpuIdentity, date: str, level: float, scale: float, isas: dict[str, IsaCalibration]) -> str:
    doc = {
        "schema": MACHINE_SCHEMA,
        "cpu": {"vendor": cpu.vendor, "family": cpu.family, "model": cpu.model, "model_name": cpu.model_name},
        "date": date,
        "level": level,
        "scale": scale,
        "isas": {
            isa: {
                "pairs": s.pairs,
                "source": s.source,
                "entries": sorted(s.entries, key=lambda e: (e["target"], e["kind"], e["model_id"])),
                **({"models": dict(sorted(s.models.items()))} if s.models else {}),
            }
            for isa, s in sorted(isas.items())
        },
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def save(path: Path, text: str) -> Path:
    atomic_write_text(path, text)
    return path


def check_choice(name: Any, isa: str, where: str, folder: Path = MACHINES_DIR) -> str:
    """A `[target.NAME] machine` value: a committed profile with native runs on the target's ISA."""
    known = names(folder)
    if not isinstance(name, str) or name not in known:
        raise InputError(
            f"{where}: unknown machine profile {name!r} (known: {', '.join(known) or 'none'}; files in {folder})"
        )
    profile = load(name, folder)
    if isa not in profile.isas:
        raise InputError(
            f"{where}: machine profile '{name}' has no native runs on {isa} (it has {', '.join(sorted(profile.isas))})"
        )
    return name
