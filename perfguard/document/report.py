"""The report of one run (reports/perfguard.json) as typed objects, and its JSON form.

One place for the format: the dataclasses below are the report's schema in code
(docs/report.schema.json says the same in JSON Schema), `Report.to_json`/`Report.from_json`
convert, `read_report`/`write_report` handle files, and UPGRADES turns an older schema's
document into this one before it is read. runs/ builds a Report (runs.report_build), judge/ merges shards' (judge.merge);
report/ renders it (HTML, Markdown, terminal) and never sees the JSON.

Reading is strict about types (a wrong one is an input error naming the key) and lenient about
absence: a report written by an older perfguard, merged from shards or made by hand may lack
optional keys, and a reader ignores keys it does not know (the top level and each result keep
them in `extra`, so re-writing a report loses nothing).

To add a field: add it to its dataclass with a default; `absent_if(value)` keeps it out of the
JSON while it has that value (an optional addition within the schema).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard import jsonfile
from perfguard.atomic import atomic_write_text
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
_ABSENT_IF = "absent_if"


def absent_if(value: Any) -> Any:
    """A field left out of the JSON while it equals `value` (its default; an empty list or dict
    is made afresh for each object)."""
    if isinstance(value, (list, dict)):
        return field(default_factory=type(value), metadata={_ABSENT_IF: value})
    return field(default=value, metadata={_ABSENT_IF: value})


# -- one result's parts -------------------------------------------------------------------------

@dataclass
class StatDelta:
    """One counter, baseline against current (judge.verdicts.stat_deltas)."""
    baseline: int | None
    current: int | None
    delta_pct: float | None = None


@dataclass
class LimitBreach:
    """A per-metric limit (perfguard.limits) the current run went over."""
    baseline: int
    current: int
    delta: int
    delta_pct: float | None
    limit: str


@dataclass
class ToolchainDifference:
    """One tool whose version differs from the baseline's."""
    baseline: str | None
    current: str | None


@dataclass
class Energy:
    """An estimate for one call, in joules (judge.analysis.energy)."""
    core_j: float
    l1_j: float
    l2_j: float
    dram_j: float
    total_j: float


# A kernel below this fraction of its roof is latency-bound (perfguard.judge.analysis), and the
# roofline charts draw the line at it.
ROOF_FRACTION = 0.5


@dataclass
class Metrics:
    """One side (baseline or current) of a result: every derived number, None where unknown."""
    time_s: float | None
    compute_s: float
    memory_s: float
    dram_bytes: int | None = None
    intensity: float | None = None
    gflops: float | None = None
    peak_pct: float | None = None
    bandwidth_gbs: float | None = None
    bandwidth_pct: float | None = None
    roof_pct: float | None = None
    bound: str | None = None
    vector_fp_share_pct: float | None = None
    flops_per_fp_inst: float | None = None
    energy: Energy | None = None


@dataclass
class Driver:
    """One counter's part in a change of predicted time (judge.analysis.drivers)."""
    stat: str
    baseline: int
    current: int
    delta_pct: float | None
    time_s: float
    share_pct: float | None = None


@dataclass
class Analysis:
    """What a result means on its target (judge.analysis)."""
    current: Metrics
    baseline: Metrics | None = None
    drivers: list[Driver] = field(default_factory=list)
    phase_model: str = "analytical"


@dataclass
class HistoryPoint:
    commit: str
    date: str
    subject: str
    time_s: float


@dataclass
class ChangePoint:
    index: int
    commit: str
    before_s: float
    after_s: float
    step_pct: float | None = None


@dataclass
class History:
    """The baseline's committed versions re-scored with this run's model (judge.history)."""
    points: list[HistoryPoint] = field(default_factory=list)
    omitted: int = 0
    min_step_pct: float | None = None
    change_points: list[ChangePoint] = field(default_factory=list)


@dataclass
class Calibration:
    """Hold-out metrics and predicted-vs-native points of the calibrated model that scored a result."""
    metrics: dict[str, Any] = field(default_factory=dict)
    points: list[list[float]] | None = absent_if(None)
    points_label: str | None = absent_if(None)


@dataclass
class LoopStep:
    """One loop of a nest as TVM lowered it: its variable, iterations and kind."""
    var: str
    extent: int | None
    kind: str  # serial | parallel | vectorized | unrolled (compile.loops.KINDS)
    llvm_unrolled: bool = absent_if(False)  # LLVM unrolled it completely: what is inside runs in copies


@dataclass
class BlockLoop:
    """The TIR loop a block runs in: the one whose body runs as often per call as the block
    did (judge.attribution, compile.loops)."""
    var: str  # the loop variable, e.g. k_1
    path: list[LoopStep]  # the loops around it, outermost first, ending with this one
    trips: int  # how often the block runs per kernel call as this loop's body (of one copy of it)
    per_execution: int = absent_if(1)  # iterations per block execution (> 1: LLVM unrolled or vectorised it by this)
    peeled: int = absent_if(0)  # iterations LLVM peeled off the loop (run by other blocks)
    unrolled: list[str] = absent_if([])  # loops inside it without a block of their own: LLVM flattened them into it
    located: bool = absent_if(False)  # other loops fit the count too: the object's debug information told them apart
    ordered: bool = absent_if(False)  # other loops fit the count too: where the nests lie in the function told them apart
    approximate: bool = absent_if(False)  # no plain way fits the count: per_execution is its average
    nest_name: str = absent_if("")  # the buffers its nest stores to (`scores`): the nest's name across builds
    nest_index: int = absent_if(0)  # which of the kernel's nests (1: the first outermost loop); 0: not known

    @property
    def nest(self) -> str:
        """`i_0[8] > j_0[8] > k_1[4]`; a kind other than serial is named (`i_0[8 parallel]`), and so is a
        loop LLVM unrolled completely (`k_0[4 unrolled by LLVM]`)."""
        return " > ".join(f"{s.var}[{'?' if s.extent is None else s.extent}"
                          f"{'' if s.kind == 'serial' else ' ' + s.kind}"
                          f"{' unrolled by LLVM' if s.llvm_unrolled else ''}]" for s in self.path)

    def llvm_notes(self) -> list[str]:
        """What LLVM did to the loop, in words (empty: nothing seen)."""
        notes = []
        if self.approximate:
            notes.append(f"about {self.per_execution} iteration{'s' if self.per_execution > 1 else ''} per "
                         "execution: rewritten by LLVM")
        elif self.per_execution > 1:
            notes.append(f"{self.per_execution} iterations per execution: unrolled or vectorised by LLVM")
        if self.peeled:
            notes.append(f"{self.peeled} iteration{'s' if self.peeled > 1 else ''} peeled off by LLVM")
        if self.unrolled:
            notes.append(f"{' and '.join(self.unrolled)} unrolled or vectorised into it by LLVM")
        return notes

    def describe(self) -> str:
        """`loop k_1 (i_0[8] > ... > k_1[4])`, with what LLVM did to it and what named it."""
        notes = [self.nest, *self.llvm_notes()]
        if self.located:
            notes.append("told apart from loops of the same count by the debug information")
        if self.ordered:
            notes.append("told apart from loops of the same count by the order of the nests")
        return f"loop {self.var} ({'; '.join(notes)})"


@dataclass
class InsnCycles:
    """llvm-mca's cycles for one instruction of a block (sim.mca_insns: its instruction-info view)."""
    latency: int  # cycles from issue to its result
    rthroughput: float  # reciprocal throughput: cycles between two independent ones, at best
    uops: int


@dataclass
class BlockSide:
    """One side of a changed block (judge.attribution)."""
    start: int
    end: int
    insns: int
    executions: int
    cycles_per_execution: float
    cycles: float
    bound: str
    symbol: str | None = None
    asm: list[str] = field(default_factory=list)
    loop: BlockLoop | None = absent_if(None)  # the one loop that fits; absent: no nest recorded, or none or several fit
    loop_candidates: list[BlockLoop] = absent_if([])  # several loops fit equally: never one of them as the answer
    # llvm-mca's cycles per instruction, one per line of `asm` (absent: not asked, or llvm-mca could not read it)
    insn_cycles: list[InsnCycles] = absent_if([])

    @property
    def loop_text(self) -> str:
        """What the side says about its loop: the loop, the candidates, or "" (nothing known)."""
        if self.loop is not None:
            return self.loop.describe()
        if self.loop_candidates:
            return "ambiguous loop: " + " or ".join(c.describe() for c in self.loop_candidates)
        return ""


@dataclass
class BlockChange:
    """A block whose code changed (or that only one side ran), both sides (judge.attribution).
    Code that only moved is never one (judge.block_pairs)."""
    start: int
    delta_cycles: float
    share_pct: float | None = None  # of the whole change the attribution's model predicts (Attribution)
    baseline: BlockSide | None = None
    current: BlockSide | None = None
    paired: str = absent_if("")  # how its two sides were paired (judge.block_pairs: "same loop", ...)


@dataclass
class DiffNode:
    """One node of the differential view (judge.differential): a function, a loop nest, a loop,
    a group of blocks not placed in a loop, or a block, with what it cost on each side."""
    kind: str  # function | nest | loop | unplaced | block | more
    name: str  # a symbol, a nest's buffers, a loop variable, "not in a loop", a block's address, "3 more"
    baseline_cycles: float  # per call, every block under it (changed or not)
    current_cycles: float
    delta_cycles: float  # the change of its changed code: code that only moved is left out (Attribution.moved_cycles)
    share_pct: float | None = None  # delta_cycles of the whole change (Attribution); None when that is 0
    unchanged: bool = absent_if(False)  # every block under it is the same code on both sides
    loop: BlockLoop | None = absent_if(None)  # loop nodes: the loop as this run names it (else the baseline)
    block: int | None = absent_if(None)  # block nodes of a changed block: its index in Result.blocks
    folded: int = absent_if(0)  # "more" nodes: how many nodes it stands for
    children: list[DiffNode] = absent_if([])

    @property
    def moved_cycles(self) -> float:
        """Cycles its unchanged code gained or lost (scored differently where it now sits)."""
        return self.current_cycles - self.baseline_cycles - self.delta_cycles


@dataclass
class Attribution:
    """Where one result's predicted cycles per call changed, by function > loop nest > loop >
    block (judge.differential). `code_cycles + stall_cycles + moved_cycles` is the whole change
    `current_cycles - baseline_cycles` the model predicts, and the nodes' shares with the stalls'
    and the moved code's add up to 100 %."""
    model: str  # the model whose cycles these are (the pipeline model: it scores blocks)
    model_id: str
    clock_hz: float
    baseline_cycles: float  # the model's whole prediction per call, stalls included
    current_cycles: float
    code_cycles: float  # the change of the code that changed (the nodes' delta_cycles)
    stall_cycles: float  # the change of the cache-miss stalls (no block of their own)
    moved_cycles: float = 0.0  # the change of unchanged code scored differently where it now sits
    unchanged_blocks: int = 0  # block sites paired as the same code (never a change)
    nodes: list[DiffNode] = field(default_factory=list)

    @property
    def change_cycles(self) -> float:
        return self.current_cycles - self.baseline_cycles

    def share(self, cycles: float) -> float | None:
        change = self.change_cycles
        return 100.0 * cycles / change if change else None


@dataclass
class Mismatch:
    """Where a wrong output is furthest off its reference (verify.mismatch_error): its worst element."""
    output: str  # the output tensor's name
    index: list[int]  # the element, one index per dimension
    value: float | None  # what the kernel computed there (None: not a finite number, see `nonfinite`)
    expected: float  # what the reference computed
    tolerance: float  # allowed there: atol + rtol * |expected|
    rtol: float
    atol: float
    elements_off: int  # how many elements are beyond their tolerance
    elements: int  # of how many
    nonfinite: str | None = absent_if(None)  # 'nan', 'inf' or '-inf'


@dataclass
class Interval:
    """The calibrated interval of a result's predicted change (predict.intervals): at `level`, the
    native change lies within [low_pct, high_pct] for changes like those it was calibrated on."""
    low_pct: float
    high_pct: float
    level: float
    basis: str  # the model, target and number of verdict pairs it was calibrated on
    exact: bool = True  # calibrated for the very model that scored the result, on its target
    straddles: bool = absent_if(False)  # a threshold (+ or -) lies inside: the verdict could go either way


@dataclass
class Machine:
    """The machine model a result's time stands for (perfguard.machines): the core llvm-mca
    scheduled its blocks for, and the calibration profile of a real CPU its interval comes from
    (none: the generic model, and `uncalibrated` says why there is no interval)."""
    model: str  # the kind of model that scored it: pipeline | analytical | calibrated
    mca_cpu: str = absent_if("")  # llvm-mca's -mcpu, where the model's time comes from llvm-mca
    profile: str = absent_if("")  # the `[target.NAME] machine` profile; "": none chosen
    cpu: str = absent_if("")  # the profile's CPU: "Intel(R) Xeon(R) Processor (GenuineIntel family 6 model 167)"
    date: str = absent_if("")  # when the profile's native timings were taken
    pairs: int = absent_if(0)  # verdict pairs timed natively on that CPU, on this result's ISA
    uncalibrated: str = absent_if("")  # why there is no interval: "no native runs on this ISA", ...
    recorded: bool = absent_if(True)  # False: read from a schema-1 report, which did not record it


@dataclass
class Result:
    """One kernel x target: what was measured, its verdict, and what it means."""
    kernel: str
    target: str
    verdict: str
    family: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    simulator: str = ""
    delta_pct: float | None = None
    threshold_pct: float | None = None
    current_time_s: float | None = None
    baseline_time_s: float | None = None
    baseline_commit: str | None = None
    model_id: str | None = None
    calibrated: bool = False
    stats: dict[str, Any] | None = None
    stat_deltas: dict[str, StatDelta] = field(default_factory=dict)
    error: str | None = None
    measured: bool | None = None  # False: no statistics (build, simulation or output check failed, or interrupted)
    toolchain_changed: dict[str, ToolchainDifference] = field(default_factory=dict)
    limit_breaches: dict[str, LimitBreach] = field(default_factory=dict)
    note: str | None = None
    blocks: list[BlockChange] | None = None
    attribution: Attribution | None = absent_if(None)  # the differential view (pipeline model)
    flops: float | None = None
    reference: str | None = None  # what checked the outputs: numpy | family | self (self-consistency only)
    max_error: float | None = None
    tensor_bytes: int | None = None
    content_hash: str | None = None
    toolchain: dict[str, Any] | None = None
    rebuilt: bool | None = None
    resimulated: bool | None = None
    seconds: float | None = None
    analysis: Analysis | None = None
    history: History | None = None
    calibration: Calibration | None = absent_if(None)
    interval: Interval | None = absent_if(None)
    machine: Machine | None = absent_if(None)  # what its time stands for (None: not scored by a model)
    gate: str = absent_if("estimate")  # what the regression gate compared: estimate | lower | upper (interval's end)
    mismatch: Mismatch | None = absent_if(None)  # verdict `wrong result`: where and by how much
    orphaned: bool = absent_if(False)  # `removed` by check: a committed baseline no kernel is configured for
    # What the baseline recorded of the build it was measured from: its params (the change is named as
    # their diff, "tile_k 4 -> 1") and its build key (equal to content_hash: the same machine code)
    baseline_params: dict[str, Any] | None = absent_if(None)
    baseline_content_hash: str | None = absent_if(None)
    # the configured inputs (compile.inputs.recorded_inputs) now and as the baseline recorded them
    # (None: not recorded, a baseline before schema 5), named in the change ("inputs.idx.high 16 -> 4096")
    inputs: dict[str, Any] | None = absent_if(None)
    baseline_inputs: dict[str, Any] | None = absent_if(None)
    # a user kernel's entry function against the baseline's: the unified diff's lines ([] when the
    # baseline recorded none or they are the same)
    source_diff: list[str] = absent_if([])
    # another build key than the baseline's (the kernel changed: an edit LLVM undid), but the code it
    # ran is the baseline's byte for byte: its block profile, every block's address, bytes and count
    same_code: bool = absent_if(False)
    # check: the baseline was measured with another toolchain, so the verdict is against this base
    # commit measured again with this run's (runs.rebase); toolchain_changed still says what differs
    base_remeasured: str | None = absent_if(None)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this perfguard does not know, kept as read

    @property
    def label(self) -> str:
        return f"{self.kernel}[{self.target}]"


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
        return cls({tool: [ToolchainDifference(p["baseline"], p["current"]) for p in pairs]
                    for tool, pairs in (changes.get("tools") or {}).items()},
                   list(changes.get("targets") or []), changes.get("rebaseline") or "")


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
        return _Reader(source).load(Report, _fill_summary(data), "")

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
            kind = ("calibrated" if r.get("calibrated") is True
                    else "pipeline" if r["model_id"].startswith("pipeline-") else "analytical")
            r = {**r, "machine": {"model": kind, "recorded": False}}
        results.append(r)
    return {**data, "results": results}


# schema n -> the function that turns a schema-n document into schema n + 1. Upgrades run on the
# plain JSON before it is read.
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _machine_unrecorded}


def upgrade(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("results"), list) \
            or not isinstance(data.get("summary"), dict):
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
    counts = {summary_key(v): sum(1 for r in data["results"] if isinstance(r, dict) and r.get("verdict") == v)
              for v in VERDICTS}
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


# -- the conversion, driven by the dataclasses' annotations -------------------------------------

def from_json(cls: type, data: Any, source: str) -> Any:
    """One part of a report (a Result, a TargetSummary, ...) from its JSON form; an error names `source`."""
    return _Reader(source).load(cls, data, "")


def to_json(value: Any) -> Any:
    """A report, or any part of one, as plain JSON data."""
    return _dump(value)


def _dump(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "extra" or (_ABSENT_IF in f.metadata and item == f.metadata[_ABSENT_IF]):
                continue
            out[f.name] = _dump(item)
        return {**getattr(value, "extra", {}), **out}
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


_KINDS: dict[Any, str] = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
                          list: "a list", dict: "an object"}


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, what: str, nullable: bool, value: Any) -> InputError:
        return InputError(f"{self.source}: {where}: must be {what}{' or null' if nullable else ''}, got {value!r}")

    def load(self, tp: Any, value: Any, where: str, nullable: bool = False) -> Any:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if tp is Any:
            return value
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            if value is None:
                if len(inner) < len(args):
                    return None
                raise self.fail(where, self.kind(inner[0]), False, value)
            return self.load(inner[0], value, where, nullable=len(inner) < len(args))
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.load_object(tp, value, where, nullable)
        if origin is list:
            if not isinstance(value, list):
                raise self.fail(where, self.kind(tp), nullable, value)
            return [self.load(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                raise self.fail(where, "an object", nullable, value)
            return {k: self.load(args[1], v, f"{where}.{k}") for k, v in value.items()}
        if tp is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, tp)
        if not ok:
            raise self.fail(where, self.kind(tp), nullable, value)
        return value

    def kind(self, tp: Any) -> str:
        if dataclasses.is_dataclass(tp):
            return "an object"
        if typing.get_origin(tp) is list and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            return "a list of objects"
        return _KINDS.get(typing.get_origin(tp) or tp, str(tp))

    def load_object(self, cls: type, value: Any, where: str, nullable: bool) -> Any:
        if not isinstance(value, dict):
            raise self.fail(where or "report", "an object", nullable, value)
        hints = _hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                kwargs["extra"] = {k: v for k, v in value.items() if k not in known or k == "extra"}
            elif f.name in value and value[f.name] is None and f.default_factory is not dataclasses.MISSING:
                kwargs[f.name] = f.default_factory()  # an empty list or object written as null
            elif f.name in value:
                kwargs[f.name] = self.load(hints[f.name], value[f.name], f"{where}.{f.name}" if where else f.name)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise self.fail(f"{where}.{f.name}" if where else f.name, self.kind(hints[f.name]), False, None)
        return cls(**kwargs)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
