"""Calibration datasets: one row per kernel variant with its statistics and native time.

Stored as JSON (baselines/datasets/<target>/<family>.json), committed so that models can be
retrained and re-evaluated by anyone, and read strictly: a damaged file is an input error
naming it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfguard import __version__, jsonfile
from perfguard.atomic import atomic_write_text
from perfguard.errors import InputError
from perfguard.sim.stats import Stats

DATASET_SCHEMA = 1


@dataclass(frozen=True)
class Row:
    group: str  # the problem shape, e.g. "M=128,N=128,K=128"
    params: dict[str, Any]
    stats: Stats
    native_s: float  # median of a steady batch
    native: dict[str, Any]  # min_s, cv, samples, attempts, steady
    machine: dict[str, str]  # cpu, kernel, machine, date

    def to_dict(self) -> dict:
        return {"group": self.group, "params": self.params, "stats": self.stats.to_dict(),
                "native_s": self.native_s, "native": self.native, "machine": self.machine}


@dataclass
class Dataset:
    target: str
    family: str
    simulator: str
    simulator_fingerprint: str
    rows: list[Row] = field(default_factory=list)

    def digest(self) -> str:
        text = json.dumps([r.to_dict() for r in self.rows], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def arrays(self) -> tuple[list[Stats], np.ndarray, np.ndarray]:
        return ([r.stats for r in self.rows], np.array([r.native_s for r in self.rows]),
                np.array([r.group for r in self.rows]))

    def groups(self) -> list[str]:
        return sorted({r.group for r in self.rows})

    def machines(self) -> list[dict]:
        seen = []
        for r in self.rows:
            m = {k: r.machine.get(k) for k in ("cpu", "kernel", "machine")}
            if m not in seen:
                seen.append(m)
        return seen

    def to_json(self) -> str:
        return json.dumps({
            "schema": DATASET_SCHEMA, "perfguard_version": __version__, "target": self.target,
            "family": self.family, "simulator": self.simulator,
            "simulator_fingerprint": self.simulator_fingerprint, "rows": [r.to_dict() for r in self.rows],
        }, sort_keys=True, indent=1) + "\n"

    def save(self, path: Path) -> Path:
        atomic_write_text(path, self.to_json())
        return path


def dataset_path(root: Path, target: str, family: str) -> Path:
    return Path(root) / "datasets" / target / f"{family}.json"


def load_dataset(path: Path) -> Dataset:
    source = str(path)
    try:
        data = jsonfile.read(path, "corrupted dataset")
    except FileNotFoundError:
        raise InputError(f"{source}: no calibration dataset (run 'perfguard calibrate collect')") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise InputError(f"{source}: corrupted dataset (no 'rows' list)")
    if type(data.get("schema")) is not int or data["schema"] != DATASET_SCHEMA:
        raise InputError(f"{source}: dataset schema {data.get('schema')!r} is not {DATASET_SCHEMA}")
    for key in ("target", "family", "simulator", "simulator_fingerprint"):
        if not isinstance(data.get(key), str):
            raise InputError(f"{source}: corrupted dataset (missing '{key}')")
    rows = []
    for i, raw in enumerate(data["rows"]):
        where = f"{source}: row {i}"
        if not isinstance(raw, dict):
            raise InputError(f"{where}: corrupted dataset row (not an object)")
        for key, kind in (("group", str), ("params", dict), ("stats", dict), ("native_s", (int, float)),
                          ("native", dict), ("machine", dict)):
            if not isinstance(raw.get(key), kind) or isinstance(raw[key], bool):
                raise InputError(f"{where}: corrupted dataset row ('{key}' missing or of the wrong type)")
        if not raw["native_s"] > 0:
            raise InputError(f"{where}: native_s must be a positive number")
        rows.append(Row(raw["group"], raw["params"], Stats.from_dict(raw["stats"], where), float(raw["native_s"]),
                        raw["native"], raw["machine"]))
    return Dataset(data["target"], data["family"], data["simulator"], data["simulator_fingerprint"], rows)
