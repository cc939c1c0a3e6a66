"""The report of one run (reports/perfguard.json) as typed objects, and its files.

One place for the format: the dataclasses here (the run: summary, targets, model totals, timings)
and in document/result.py (one result and its parts) are the report's schema in code
(docs/report.schema.json says the same in JSON Schema); document/codec.py converts them to and
from JSON; `read_report`/`write_report` handle files, and `upgrade` turns an older schema's
document into this one before it is read (UPGRADES). runs/ builds a Report (runs.report_build), judge/
merges shards' (judge.merge); report/ renders it (HTML, Markdown, terminal) and never sees the JSON.

Reading is strict about types (a wrong one is an input error naming the key) and lenient about
absence: a report written by an older perfguard, merged from shards or made by hand may lack
optional keys, and a reader ignores keys it does not know (the top level and each result keep
them in `extra`, so re-writing a report loses nothing).

To add a field: add it to its dataclass with a default; `absent_if(value)` keeps it out of the
JSON while it has that value (an optional addition within the schema).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard import jsonfile
from perfguard.atomic import atomic_write_text
from perfguard.document.codec import absent_if, from_json, to_json
from perfguard.document.result import Result, ToolchainDifference
from perfguard.document.verdicts import VERDICTS, summary_key
from perfguard.errors import EXIT_CODES, InputError, newer_format
from perfguard.sim.stats import STAT_FIELDS

# The statistics a result carries, in the order every output lists them (renderers read it here:
# they know the document, not the simulators)
STATISTICS = STAT_FIELDS

REPORT_SCHEMA = 2  # 2: a result's "machine" (the machine model its time stands for); no interval
# borrowed from another ISA's native truth; a block side's "insn_cycles". Within schema 1: "note", "blocks", "calibration", a block side's "loop" and "loop_candidates", a
# result's "interval", "gate", "mismatch", "orphaned", "attribution", "baseline_params" and
# "baseline_content_hash", "same_code", "inputs", "baseline_inputs", "source_diff", a block change's "paired",
# the summary's "wrong_result" and "timings" are optional additions within schema 1


# -- the run ------------------------------------------------------------------------------------


@dataclass
class EnergyCosts:
    """Per-event energies in picojoules, for estimates only."""

    inst: float
    l1_access: float
    l2_access: float
    dram_access: float


@dataclass
class TargetSummary:
    """The target profile numbers the reports use, so re-rendering never needs the config."""

    isa: str
    clock_hz: float
    peak_gflops: float
    peak_bandwidth_gbs: float
    ridge_intensity: float
    dram_line_bytes: int
    energy_pj: EnergyCosts


@dataclass
class ToolchainSummary:
    """The run's one statement about a toolchain other than the baselines' (judge.verdicts.toolchain_summary)."""

    tools: dict[str, list[ToolchainDifference]] = absent_if({})
    targets: list[str] = absent_if([])
    rebaseline: str = absent_if("")

    def __bool__(self) -> bool:
        return bool(self.tools)

    @classmethod
    def of(cls, changes: dict[str, Any]) -> ToolchainSummary:
        """From judge.verdicts.toolchain_summary's plain statement."""
        return cls(
            {
                tool: [ToolchainDifference(p["baseline"], p["current"]) for p in pairs]
                for tool, pairs in (changes.get("tools") or {}).items()
            },
            list(changes.get("targets") or []),
            changes.get("rebaseline") or "",
        )


@dataclass
class ModelKernel:
    """One kernel of a [[model]] on one target: its verdict, calls per inference and share."""

    kernel: str
    op: str | None
    verdict: str  # the kernel's verdict, or "removed" (a baseline the model no longer has)
    calls: int | None  # per inference, now (None: removed)
    baseline_calls: int | None  # per inference in the baseline (None: new)
    current_time_s: float | None  # per call
    baseline_time_s: float | None
    share_pct: float | None = None  # of the current total
    renamed_from: str | None = None  # `changed`: the baseline's kernel this one is, its shapes changed
    renamed_to: str | None = None  # the current kernel a removed one became
    current_total_s: float | None = None  # per inference (time x calls)
    baseline_total_s: float | None = None
    # What the kernel is in the model's terms (judge.model_changes), each side: its label
    # ("layer3.0.conv1 conv2d 1x256x8x8 -> 1x320x4x4 3x3/2"), its anchor layer (kernels.model_graph),
    # the anchor node of each call and where its calls are in the model's call order.
    label: str = absent_if("")
    baseline_label: str = absent_if("")
    layer: dict[str, Any] | None = absent_if(None)
    baseline_layer: dict[str, Any] | None = absent_if(None)
    nodes: list[str] = absent_if([])
    baseline_nodes: list[str] = absent_if([])
    positions: list[int] = absent_if([])
    baseline_positions: list[int] = absent_if([])
    change: str = absent_if("")  # a changed kernel's change: "widened 256 -> 320 channels"
    replaces: list[str] = absent_if([])  # a new kernel: the removed kernels at its place in the model
    schedule: str = absent_if("")  # what built its code now (kernels.models SCHEDULES)


@dataclass
class ModelTotal:
    """A [[model]]'s total per inference on one target and its own verdict (judge.model_totals)."""

    model: str
    target: str
    verdict: str
    threshold_pct: float
    current_total_s: float | None
    baseline_total_s: float | None
    delta_pct: float | None
    kernels: list[ModelKernel] = field(default_factory=list)  # by share of the current total, largest first
    changes: list[str] = field(default_factory=list)  # one line per new / removed / changed kernel or calls
    schedule: str = absent_if("")  # what built the kernels' code (kernels.models SCHEDULES), in words
    skipped: list[str] = absent_if([])  # calls the model's `skip` leaves out of the total, one line each
    breakdown: str = absent_if("")  # why the kernels' rows do not add up to the total, when they do not


@dataclass
class ModelPart:
    """A shard's part of a [[model]] on one target (`check --shard`): the rows of the model's kernels
    this shard measured, and those of removed kernels (every shard has them; they are equal), from
    which `perfguard merge` computes the total an unsharded check gives (judge.model_totals.total)."""

    model: str
    target: str
    threshold_pct: float
    kernels: list[str]  # the model's kernels on this target in the whole run (every shard's)
    rows: list[ModelKernel] = field(default_factory=list)
    database: str | None = absent_if(None)  # the model's MetaSchedule database (for the schedule's words)
    skipped: list[str] = absent_if([])


@dataclass
class Summary:
    exit_code: int
    regression: int = 0
    error: int = 0
    toolchain: int = 0
    improvement: int = 0
    new: int = 0
    removed: int = 0
    unchanged: int = 0
    wrong_result: int = absent_if(0)
    orphaned: int = absent_if(0)  # `removed` results that are committed baselines no kernel is configured for
    model_regressions: int = absent_if(0)  # [[model]] totals that regressed
    # [[model]] kernels whose shapes changed (a new kernel paired with a removed one, judge.model_changes):
    # counted here once, not as one new and one removed
    changed: int = absent_if(0)
    not_measured: int | None = absent_if(None)
    toolchain_changed: ToolchainSummary = field(default_factory=ToolchainSummary)
    remeasured: int = absent_if(0)  # results judged against their base revision measured again with this toolchain
    interrupted: bool = absent_if(False)
    errors_allowed: bool = absent_if(False)

    def count(self, verdict: str) -> int:
        return getattr(self, summary_key(verdict))


@dataclass
class Revision:
    ref: str | None
    commit: str | None


@dataclass
class Shard:
    index: int
    count: int


@dataclass
class Seconds:
    """Wall and CPU seconds (CPU: the process and the programs it ran, perfguard.timings)."""

    wall_s: float
    cpu_s: float


@dataclass
class JobTimings:
    """One kernel x target job: its stages (perfguard.timings.JOB_STAGES) and its whole."""

    kernel: str
    target: str
    total: Seconds
    stages: dict[str, Seconds] = field(default_factory=dict)
    reused: bool = absent_if(False)  # from a job record (nothing changed that it depends on): nothing ran
    worker: str | None = absent_if(None)  # the Dask worker that ran it (none: this machine)


@dataclass
class WorkerCost:
    """What one Dask worker spent on a check: the jobs it ran and their CPU seconds."""

    worker: str
    jobs: int
    cpu_s: float


@dataclass
class Timings:
    """Where a check's time went: each stage (perfguard.timings.STAGES) and each job. Measured
    again by every check, so two reports of the same results differ here (and in `created`)."""

    total: Seconds
    stages: dict[str, Seconds] = field(default_factory=dict)
    jobs: list[JobTimings] = absent_if([])
    workers: int = 0  # pool processes started (0: none, every job was reused or ran inline)
    reused: bool = absent_if(False)  # the whole check was reused from its record: nothing was judged or rendered
    cluster: list[WorkerCost] = absent_if([])  # jobs run on Dask workers: each worker's share (CPU not in `total`)
    reruns: list[str] = absent_if([])  # jobs Dask ran again after losing the worker running them


@dataclass
class Report:
    """Everything one check (or compare, merge, pytest session) found."""

    summary: Summary
    results: list[Result] = field(default_factory=list)
    schema: int = REPORT_SCHEMA
    perfguard_version: str = "?"
    created: str = ""
    config: str | None = None
    commit: str | None = None  # HEAD of the repository holding the baselines
    targets: dict[str, TargetSummary] = field(default_factory=dict)
    base: Revision | None = absent_if(None)  # check --base: where the baselines came from
    compare: dict[str, Any] | None = absent_if(None)  # `perfguard compare`: {base, head} side summaries
    shard: Shard | None = absent_if(None)
    merged_from: list[str] | None = absent_if(None)
    models: list[ModelTotal] = absent_if([])  # [[model]] entries: each model's total per target
    model_parts: list[ModelPart] = absent_if([])  # check --shard: what merge needs for the totals
    timings: Timings | None = absent_if(None)  # `perfguard check`: wall and CPU seconds per stage and job
    extra: dict[str, Any] = field(default_factory=dict)  # keys this perfguard does not know, kept as read

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Any, source: str = "report") -> Report:
        """Validate and build; an error names `source` and the key. Older schemas are upgraded first."""
        data = upgrade(data, source)
        return from_json(Report, _fill_summary(data), source)

    def worst_first(self) -> list[Result]:
        return worst_first(self.results)

    def compared(self) -> dict[str, dict[str, str]] | None:
        """`perfguard compare`'s two revisions as strings (a hand-edited report may hold anything)."""
        sides = self.compare
        if not isinstance(sides, dict) or not all(isinstance(sides.get(k), dict) for k in ("base", "head")):
            return None
        return {k: {"ref": str(sides[k].get("ref")), "commit": str(sides[k].get("commit"))} for k in ("base", "head")}


def worst_first(results: list[Result]) -> list[Result]:
    """Results as every renderer lists them: by verdict (regression first), then by the size of the
    change (a stable sort: ties keep their order)."""
    order = {name: i for i, name in enumerate(VERDICTS)}
    return sorted(results, key=lambda r: (order.get(r.verdict, len(order)), -abs(r.delta_pct or 0.0)))


# -- versions -----------------------------------------------------------------------------------


def _machine_unrecorded(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: a scored result's machine was not recorded; its model's kind is known from
    its model id (an interval it carries may have been calibrated on another ISA: its basis says)."""
    results = []
    for r in data["results"]:
        if isinstance(r, dict) and isinstance(r.get("model_id"), str) and "machine" not in r:
            kind = (
                "calibrated"
                if r.get("calibrated") is True
                else "pipeline"
                if r["model_id"].startswith("pipeline-")
                else "analytical"
            )
            r = {**r, "machine": {"model": kind, "recorded": False}}
        results.append(r)
    return {**data, "results": results}


# schema n -> the function that turns a schema-n document into schema n + 1. Upgrades run on the
# plain JSON before it is read.
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _machine_unrecorded}


def upgrade(data: Any, source: str) -> dict[str, Any]:
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("results"), list)
        or not isinstance(data.get("summary"), dict)
    ):
        raise InputError(f"{source}: not a perfguard report (no 'results' list and 'summary')")
    version = data.get("schema")
    if type(version) is int and version > REPORT_SCHEMA:
        raise newer_format(source, "report schema", version, REPORT_SCHEMA, data.get("perfguard_version"))
    if type(version) is not int or not (min(UPGRADES, default=REPORT_SCHEMA) <= version <= REPORT_SCHEMA):
        raise InputError(f"{source}: report schema {version!r} is not {REPORT_SCHEMA}")
    while version < REPORT_SCHEMA:
        data = UPGRADES[version](data)
        version = data["schema"] = version + 1
    return data


def _fill_summary(data: dict[str, Any]) -> dict[str, Any]:
    """A summary that lacks the verdict counts (a hand-made or shard-merged file) gets them from the results."""
    counts = {
        summary_key(v): sum(1 for r in data["results"] if isinstance(r, dict) and r.get("verdict") == v)
        for v in VERDICTS
    }
    return {**data, "summary": {**counts, **data["summary"]}}


def read_report(path: Path) -> Report:
    """A perfguard.json; an input error names the file and what is wrong."""
    path = Path(path)
    try:
        data = jsonfile.read(path, "not a perfguard report")
    except FileNotFoundError:
        raise InputError(f"{path}: report not found") from None
    report = Report.from_json(data, str(path))
    code = report.summary.exit_code
    if code not in EXIT_CODES:
        raise InputError(f"{path}: summary.exit_code {code!r} is not an exit code")
    for i, r in enumerate(report.results):
        if r.verdict not in VERDICTS:
            raise InputError(f"{path}: results[{i}]: unknown verdict {r.verdict!r}")
    return report


def report_text(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_report(report: Report, path: Path) -> Path:
    atomic_write_text(path, report_text(report))
    return path
