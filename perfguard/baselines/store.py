"""Committed baselines: baselines/<target>/<kernel>.json, raw statistics first.

A baseline keeps the raw Stats, not only a predicted time, so a recalibrated model re-scores
old baselines without re-simulating. Files are written whole (temp file, then rename), an
update as one change under the folder's lock (perfguard.baselines.lock), and read strictly: a
damaged file is an input error naming it, and is never rewritten by a check.
"""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard import __version__, jsonfile
from perfguard.atomic import atomic_write_many
from perfguard.baselines.lock import baselines_lock
from perfguard.compile.loops import LOOPS_VERSION, LoopNest
from perfguard.errors import InputError, NewerFormat, newer_format
from perfguard.predict.store import ModelFiles
from perfguard.sim.stats import Stats

# The baseline format's versions. Bump it on any change a previous perfguard could not read (it then
# refuses the file with "upgrade perfguard" instead of taking it for damage), and say what it added:
#   1  the statistics (perfguard 0.1.0, the first baselines)
#   2  "stats" may carry the block profile ("blocks")
#   3  "loops": the build's loop nest (compile.loops version 1; perfguard 0.1.0 also wrote version 2
#      under this label, which a schema-3 reader of version 1 takes for damage)
#   4  "loops" is a version-2 nest (each loop's "stores", the "code" ranges) (perfguard 0.2.0)
#   5  "inputs": the kernel's configured inputs ({} for none), "source": a user kernel's entry
#      function (null for a family's or a [[model]]'s kernel): a report names their change
# Every older schema is read (upgraded as read: what it lacks is None, "not recorded"), every newer one refused.
SCHEMA_VERSION = 5
_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": int,
    "kernel": str,
    "target": str,
    "family": (str, type(None)),
    "params": dict,
    "simulator": str,
    "content_hash": str,
    "stats": dict,
    "predicted_time_s": (int, float),
    "model_id": str,
    "perfguard_version": str,
    "commit": (str, type(None)),
    "created": str,
    "toolchain": dict,
}
# each key's type, and the schema that added it (from which on it is read): a file of an older schema has none (None)
_OPTIONAL = {"loops": (dict, type(None)), "inputs": (dict, type(None)), "source": (str, type(None))}
_ADDED = {"inputs": 5, "source": 5}


@dataclass(frozen=True)
class Baseline:
    kernel: str
    target: str
    family: str | None
    params: dict[str, Any]
    simulator: str
    content_hash: str
    stats: Stats
    predicted_time_s: float
    model_id: str
    commit: str | None
    created: str
    toolchain: dict[str, str] = field(default_factory=dict)
    perfguard_version: str = __version__
    schema: int = SCHEMA_VERSION
    loops: dict | None = None  # the build's loop nest (compile.loops): names loops in attribution; None before schema 3
    # the configured inputs (compile.inputs.recorded_inputs, {} for none) and a user kernel's entry
    # function: the change a report names beside the params'; None before schema 5 (not recorded)
    inputs: dict[str, dict] | None = None
    source: str | None = None

    def to_json(self) -> str:
        data = {
            "schema": self.schema,
            "kernel": self.kernel,
            "target": self.target,
            "family": self.family,
            "params": self.params,
            "simulator": self.simulator,
            "content_hash": self.content_hash,
            "stats": self.stats.to_record(),
            "predicted_time_s": self.predicted_time_s,
            "model_id": self.model_id,
            "perfguard_version": self.perfguard_version,
            "commit": self.commit,
            "created": self.created,
            "toolchain": self.toolchain,
            "loops": self.loops,
        }
        if self.schema >= 5:  # an older schema's file, as read, has not recorded them: not written as if it had
            data.update(inputs=self.inputs, source=self.source)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def baseline_path(root: Path, target: str, kernel: str) -> Path:
    for what, name in (("target", target), ("kernel", kernel)):
        if not _SAFE.fullmatch(name):
            raise InputError(f"{what} name '{name}' cannot be a baseline file name")
    return Path(root) / target / f"{kernel}.json"


def check_schema(data: dict, source: str) -> int:
    """The file's schema, when this perfguard reads it: a newer one (of the file, or of the loop nest
    it carries) is refused naming the perfguard that wrote it; one below 1 is damage."""
    schema = data.get("schema")
    if type(schema) is not int:
        raise InputError(
            f"{source}: corrupted baseline ("
            + ("missing 'schema')" if schema is None else "'schema' has the wrong type)")
        )
    if schema < 1:
        raise InputError(f"{source}: corrupted baseline (schema {schema})")
    if schema > SCHEMA_VERSION:
        raise newer_format(source, "baseline schema", schema, SCHEMA_VERSION, data.get("perfguard_version"))
    loops = data.get("loops")
    if isinstance(loops, dict) and type(loops.get("version")) is int and loops["version"] > LOOPS_VERSION:
        raise newer_format(source, "loop nest version", loops["version"], LOOPS_VERSION, data.get("perfguard_version"))
    return schema


def parse_baseline(text: str | bytes, source: str) -> Baseline:
    data = jsonfile.loads(text, source, "corrupted baseline")
    if not isinstance(data, dict):
        raise InputError(f"{source}: corrupted baseline (not a JSON object)")
    check_schema(data, source)  # first: a newer file may lack a key or have one this perfguard does not know
    for key, kind in _REQUIRED.items():
        if key not in data:
            raise InputError(f"{source}: corrupted baseline (missing '{key}')")
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            raise InputError(f"{source}: corrupted baseline ('{key}' has the wrong type)")
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise InputError(f"{source}: corrupted baseline (unknown key '{unknown[0]}')")
    for key, kind in _OPTIONAL.items():
        if not isinstance(data.get(key), kind):
            raise InputError(f"{source}: corrupted baseline ('{key}' has the wrong type)")
    inputs = data.get("inputs")
    if inputs is not None and not all(isinstance(v, dict) for v in inputs.values()):
        raise InputError(f"{source}: corrupted baseline ('inputs' values must be tables)")
    loops = data.get("loops")
    if loops is not None:
        LoopNest.from_dict(loops, source)
    if data["predicted_time_s"] < 0:
        raise InputError(f"{source}: corrupted baseline (negative predicted_time_s)")
    if not all(isinstance(v, str) for v in data["toolchain"].values()):
        raise InputError(f"{source}: corrupted baseline ('toolchain' values must be strings)")
    return Baseline(
        kernel=data["kernel"],
        target=data["target"],
        family=data["family"],
        params=data["params"],
        simulator=data["simulator"],
        content_hash=data["content_hash"],
        stats=Stats.from_dict(data["stats"], source),
        predicted_time_s=float(data["predicted_time_s"]),
        model_id=data["model_id"],
        commit=data["commit"],
        created=data["created"],
        toolchain=data["toolchain"],
        perfguard_version=data["perfguard_version"],
        schema=data["schema"],
        # a file labelled older than the schema that added a key has not recorded it, whatever it holds
        # (a hand-made or hand-downgraded file): read as not recorded, as the label says
        loops=loops,
        inputs=inputs if data["schema"] >= _ADDED["inputs"] else None,
        source=data.get("source") if data["schema"] >= _ADDED["source"] else None,
    )


# -- a [[model]]'s call order: baselines/<target>/graphs/<model>.json -------------------------------
# The kernels of a model, one line per call in model order, as of its last `baseline update`. A
# kernel's own baseline records what the kernel is (params) but not where its calls are: an edit
# elsewhere in the model moves them, and must not rewrite every kernel file (judge.model_changes
# aligns this order with the current one).

GRAPH_SCHEMA = 1
GRAPHS = "graphs"


def graph_path(root: Path, target: str, model: str) -> Path:
    baseline_path(root, target, model)  # the same name rules
    return Path(root) / target / GRAPHS / f"{model}.json"


def graph_text(model: str, target: str, calls: list[tuple[str, str]]) -> str:
    """The file: one [kernel, anchor node] per call, one per line, so that a diff reads as the edit."""
    lines = ",\n".join("    " + json.dumps(list(call)) for call in calls)
    return (
        f'{{\n  "schema": {GRAPH_SCHEMA},\n  "model": {json.dumps(model)},\n  "target": {json.dumps(target)},\n'
        f'  "calls": [\n{lines}\n  ]\n}}\n'
    )


def parse_graph(text: str | bytes, source: str, model: str, target: str) -> dict[str, list[int]]:
    """{kernel: its call positions}; an input error names the file."""
    data = jsonfile.loads(text, source, "corrupted model graph")
    schema = data.get("schema") if isinstance(data, dict) else None
    if type(schema) is int and schema > GRAPH_SCHEMA:
        raise newer_format(source, "model graph schema", schema, GRAPH_SCHEMA)
    calls = data.get("calls") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("schema") != GRAPH_SCHEMA
        or data.get("model") != model
        or data.get("target") != target
        or not isinstance(calls, list)
        or not all(isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c) for c in calls)
    ):
        raise InputError(
            f"{source}: corrupted model graph (expected schema {GRAPH_SCHEMA}, model '{model}', target "
            f"'{target}' and calls [[kernel, node], ...])"
        )
    out: dict[str, list[int]] = {}
    for i, (kernel, _) in enumerate(calls):
        out.setdefault(kernel, []).append(i)
    return out


@dataclass
class Provenance:
    """Who wrote a folder's baselines (`perfguard doctor`): files per (perfguard version, baseline
    schema, loop nest version or None), with their targets; the files of a newer format (the
    one-line refusals); the count of damaged ones."""

    written: dict[tuple[str, int, int | None], dict[str, int]] = field(default_factory=dict)
    newer: list[str] = field(default_factory=list)
    damaged: int = 0


def provenance(store: BaselineStore, targets: Sequence[str]) -> Provenance:
    found = Provenance()
    for target in targets:
        for name in store.names(target):
            try:
                b = store.read(target, name)
            except NewerFormat as exc:
                found.newer.append(exc.message)
                continue
            except InputError:
                found.damaged += 1
                continue
            if b is not None:
                loops = b.loops.get("version") if isinstance(b.loops, dict) else None
                by_target = found.written.setdefault((b.perfguard_version, b.schema, loops), {})
                by_target[target] = by_target.get(target, 0) + 1
    return found


def same_record(old: Baseline, new: Baseline) -> bool:
    """Whether writing `new` over `old` would change nothing but when and by whom it was recorded."""
    volatile = {"commit": None, "created": "", "perfguard_version": ""}
    return json.loads(old.to_json()) | volatile == json.loads(new.to_json()) | volatile


class BaselineSource(abc.ABC):
    """Where a check reads its baselines from: the working tree (BaselineStore), a git revision
    (GitBaselineStore, `check --base`) or the base revision's fresh measurements (`compare`)."""

    @abc.abstractmethod
    def path(self, target: str, kernel: str) -> Path | str:
        """Where the baseline of `kernel` on `target` is read from, for messages."""

    @abc.abstractmethod
    def read(self, target: str, kernel: str) -> Baseline | None:
        """The baseline, None when there is none; an input error when it cannot be used."""

    def models(self) -> ModelFiles | None:
        """Where calibrated models are read from: None for the working tree's files. A source at
        another revision reads them from that revision too, so a pull request cannot swap the
        yardstick both sides are measured with."""
        return None

    def model_graph(self, target: str, model: str) -> dict[str, list[int]] | None:
        """The baseline's call order of a [[model]] on `target`: {kernel: call positions}; None when
        unknown (recorded before perfguard kept it)."""
        return None


def _read_bytes(path: Path, what: str) -> bytes | None:
    """The file's bytes, None when it does not exist; an input error naming it when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


class BaselineStore(BaselineSource):
    """Baselines in a folder of the working tree."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, target: str, kernel: str) -> Path:
        return baseline_path(self.root, target, kernel)

    def read(self, target: str, kernel: str) -> Baseline | None:
        path = self.path(target, kernel)
        text = _read_bytes(path, "the baseline")
        if text is None:
            return None
        baseline = parse_baseline(text, str(path))
        if baseline.kernel != kernel or baseline.target != target:
            raise InputError(f"{path}: baseline is for {baseline.kernel}[{baseline.target}], not {kernel}[{target}]")
        return baseline

    def names(self, target: str) -> list[str]:
        """The kernels that have a baseline for `target` (the model view looks for removed kernels)."""
        folder = self.root / target
        return sorted(f.stem for f in folder.glob("*.json")) if folder.is_dir() else []

    def graph_files(self, target: str) -> list[Path]:
        """The model graphs (call orders) recorded for `target`."""
        folder = self.root / target / GRAPHS
        return sorted(folder.glob("*.json")) if folder.is_dir() else []

    def model_graph(self, target: str, model: str) -> dict[str, list[int]] | None:
        path = graph_path(self.root, target, model)
        text = _read_bytes(path, "the model graph")
        return None if text is None else parse_graph(text, str(path), model, target)

    def remove_all(self, paths: list[Path]) -> list[Path]:
        """Delete these baseline files under the folder's lock (`baseline prune`); gone ones are skipped."""
        removed = []
        with baselines_lock(self.root):
            for path in paths:
                try:
                    Path(path).unlink()
                except FileNotFoundError:
                    continue
                removed.append(Path(path))
        return removed

    def rename(self, old: str, new: str, targets: list[str]) -> list[tuple[Path, Path]]:
        """Every baseline of kernel `old` on `targets` becomes one of `new` (`baseline rename`), as one
        change under the folder's lock: each is read strictly, the new files are written whole (all
        or, on a write error, none), then the old ones removed. Only the kernel name changes."""
        with baselines_lock(self.root):
            files: dict[Path, bytes] = {}
            moves = []
            for target in targets:
                source, dest = self.path(target, old), self.path(target, new)
                if self.read(target, old) is None:
                    continue
                if dest.exists():
                    raise InputError(
                        f"{dest}: kernel '{new}' has a baseline on {target} already: remove it "
                        f"first (or rename '{old}' to another name)"
                    )
                data = json.loads(source.read_bytes())
                data["kernel"] = new
                files[dest] = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
                moves.append((source, dest))
            if not moves:
                raise InputError(f"{self.root}: kernel '{old}' has no baseline on {', '.join(targets) or 'any target'}")
            atomic_write_many(files)
            for source, _ in moves:
                source.unlink()
        return moves

    def write(self, baseline: Baseline) -> Path:
        return self.write_all([baseline])[0]

    def write_all(self, baselines: list[Baseline], graphs: dict[Path, str] | None = None) -> list[Path]:
        """Write them (and model graphs: path -> text) as one change, under the folder's lock: all of
        them, or (on any write error, e.g. a full disk) none, every old file left byte for byte as it was."""
        files = {self.path(b.target, b.kernel): b.to_json().encode() for b in baselines}
        files.update({path: text.encode() for path, text in (graphs or {}).items()})
        if not files:
            return []
        with baselines_lock(self.root):
            refuse_newer(list(files))
            atomic_write_many(files)
        return list(files)


def refuse_newer(paths: list[Path]) -> None:
    """Raise (NewerFormat) when any of these files, about to be written, holds a baseline or model
    graph of a format newer than this perfguard writes: an update by an older perfguard refuses
    rather than turn a newer file back into its own format. A damaged file is no obstacle (it is
    rewritten); one that cannot be read is left to the write to report."""
    for path in paths:
        path = Path(path)
        try:
            text = path.read_bytes()
        except OSError:
            continue
        try:
            if path.parent.name == GRAPHS:
                parse_graph(text, str(path), path.stem, path.parent.parent.name)
            else:
                data = jsonfile.loads(text, str(path), "corrupted baseline")
                if isinstance(data, dict):
                    check_schema(data, str(path))
        except NewerFormat:
            raise
        except InputError:
            continue
