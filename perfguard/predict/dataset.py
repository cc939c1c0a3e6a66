"""Calibration datasets: one row per kernel variant with its statistics and native time.

Stored as JSON (baselines/datasets/<target>/<family>.json), committed so that models can be
retrained and re-evaluated by anyone, and read strictly: a damaged file is an input error
naming it.

Schema 2 adds each row's block profile (what the pipeline features are computed from) and the
sha256 of the harness binary that was simulated and timed. Block profiles are stored compactly:
the file's `blocks` table holds every distinct block once ([addr, size, insns, code-hex,
symbol]); a row's `blocks` is a list of [index into that table, executions]. One row per line.
Schema 1 files (no block profiles) are still read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfguard import __version__, jsonfile
from perfguard.atomic import atomic_write_text
from perfguard.errors import InputError, newer_format
from perfguard.sim.blocks import Block, BlockProfile
from perfguard.sim.stats import Stats

DATASET_SCHEMA = 2
READABLE_SCHEMAS = (1, 2)


@dataclass(frozen=True)
class Row:
    group: str  # the problem shape, e.g. "M=128,N=128,K=128"
    params: dict[str, Any]
    stats: Stats
    native_s: float  # median of a steady batch
    native: dict[str, Any]  # min_s, cv, samples, attempts, steady
    machine: dict[str, str]  # cpu, kernel, machine, date
    binary: str | None = None  # sha256 of the harness binary simulated and timed

    def to_dict(self, block_index: dict | None = None) -> dict:
        """The row as stored; with `block_index` (the file's block table being built) its blocks as references."""
        data = {
            "group": self.group,
            "params": self.params,
            "stats": self.stats.to_dict(),
            "native_s": self.native_s,
            "native": self.native,
            "machine": self.machine,
        }
        if self.binary is not None:
            data["binary"] = self.binary
        if self.stats.blocks is not None and block_index is not None:
            data["blocks"] = [[block_index[_block_key(b)], b.count] for b in self.stats.blocks.blocks]
        return data


def _block_key(b: Block) -> tuple:
    return (b.addr, b.size, b.insns, b.code, b.symbol)


@dataclass
class Dataset:
    target: str
    family: str
    simulator: str
    simulator_fingerprint: str
    rows: list[Row] = field(default_factory=list)

    def digest(self) -> str:
        return hashlib.sha256(self._body().encode()).hexdigest()

    def arrays(self) -> tuple[list[Stats], np.ndarray, np.ndarray]:
        return (
            [r.stats for r in self.rows],
            np.array([r.native_s for r in self.rows]),
            np.array([r.group for r in self.rows]),
        )

    def groups(self) -> list[str]:
        return sorted({r.group for r in self.rows})

    def machines(self) -> list[dict]:
        seen = []
        for r in self.rows:
            m = {k: r.machine.get(k) for k in ("cpu", "kernel", "machine")}
            if r.machine.get("cpu_id"):
                m["cpu_id"] = r.machine["cpu_id"]
            if m not in seen:
                seen.append(m)
        return seen

    def cpu_ids(self) -> set[str]:
        """The CPUs the rows were timed on, where recorded (rows timed before perfguard recorded
        them carry only a model name)."""
        return {r.machine["cpu_id"] for r in self.rows if r.machine.get("cpu_id")}

    def _body(self) -> str:
        """The block table and the rows, as the file holds them (one row per line)."""
        keys = sorted({_block_key(b) for r in self.rows if r.stats.blocks is not None for b in r.stats.blocks.blocks})
        index = {key: i for i, key in enumerate(keys)}
        table = ",\n".join(json.dumps(list(key)) for key in keys)
        rows = ",\n".join(json.dumps(r.to_dict(index), sort_keys=True) for r in self.rows)
        return '"blocks": [\n' + table + '\n],\n"rows": [\n' + rows + "\n]"

    def to_json(self) -> str:
        head = json.dumps(
            {
                "schema": DATASET_SCHEMA,
                "perfguard_version": __version__,
                "target": self.target,
                "family": self.family,
                "simulator": self.simulator,
                "simulator_fingerprint": self.simulator_fingerprint,
            },
            sort_keys=True,
        )
        return head[:-1] + ",\n" + self._body() + "}\n"

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
    if type(data.get("schema")) is int and data["schema"] > DATASET_SCHEMA:
        raise newer_format(source, "dataset schema", data["schema"], DATASET_SCHEMA, data.get("perfguard_version"))
    if type(data.get("schema")) is not int or data["schema"] not in READABLE_SCHEMAS:
        raise InputError(
            f"{source}: dataset schema {data.get('schema')!r} is not one of {', '.join(map(str, READABLE_SCHEMAS))}"
        )
    table = _block_table(data.get("blocks", []), source)
    for key in ("target", "family", "simulator", "simulator_fingerprint"):
        if not isinstance(data.get(key), str):
            raise InputError(f"{source}: corrupted dataset (missing '{key}')")
    rows = []
    for i, raw in enumerate(data["rows"]):
        where = f"{source}: row {i}"
        if not isinstance(raw, dict):
            raise InputError(f"{where}: corrupted dataset row (not an object)")
        for key, kind in (
            ("group", str),
            ("params", dict),
            ("stats", dict),
            ("native_s", (int, float)),
            ("native", dict),
            ("machine", dict),
        ):
            if not isinstance(raw.get(key), kind) or isinstance(raw[key], bool):
                raise InputError(f"{where}: corrupted dataset row ('{key}' missing or of the wrong type)")
        if not raw["native_s"] > 0:
            raise InputError(f"{where}: native_s must be a positive number")
        if "blocks" in raw["stats"]:
            raise InputError(f"{where}: corrupted dataset row (blocks belong in the row, as table references)")
        stats = Stats.from_dict(raw["stats"], where)
        if "blocks" in raw:
            stats = dataclasses.replace(stats, blocks=_row_blocks(raw["blocks"], table, where))
        binary = raw.get("binary")
        if binary is not None and not (isinstance(binary, str) and len(binary) == 64):
            raise InputError(f"{where}: corrupted dataset row ('binary' must be a sha256 hex digest)")
        rows.append(
            Row(raw["group"], raw["params"], stats, float(raw["native_s"]), raw["native"], raw["machine"], binary)
        )
    return Dataset(data["target"], data["family"], data["simulator"], data["simulator_fingerprint"], rows)


def _block_table(raw: object, source: str) -> list[Block]:
    if not isinstance(raw, list):
        raise InputError(f"{source}: corrupted dataset ('blocks' must be a list)")
    # The block profile's own reader checks each block: give it the table with a count of 1.
    profile = (
        BlockProfile.from_dict(
            {"version": 1, "blocks": [[*b[:3], 1, *b[3:]] if isinstance(b, list) and len(b) == 5 else b for b in raw]},
            f"{source}: blocks table",
        )
        if raw
        else BlockProfile(())
    )
    return list(profile.blocks)


def _row_blocks(refs: object, table: list[Block], where: str) -> BlockProfile:
    bad = InputError(
        f"{where}: corrupted dataset row ('blocks' must be [[table index, executions], ...], sorted by index)"
    )
    if not isinstance(refs, list):
        raise bad
    blocks, last = [], -1
    for ref in refs:
        if not (
            isinstance(ref, list)
            and len(ref) == 2
            and all(type(v) is int for v in ref)
            and last < ref[0] < len(table)
            and ref[1] >= 1
        ):
            raise bad
        last = ref[0]
        b = table[ref[0]]
        blocks.append(Block(b.addr, b.size, b.insns, ref[1], b.code, b.symbol))
    return BlockProfile(tuple(blocks))
