"""One result of a report (a kernel x target's verdict and everything that explains it) as typed
objects: document/report.py's Report holds a list of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfguard.document.codec import absent_if

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
# Joins the nests of a loop that nests of one shape share (judge.attribution: its blocks fit that
# variable in each nest, and nothing told them apart): `best.v0.rf or nest best.v0`
EITHER_NEST = " or nest "


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


def _listed(names: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


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
    vectorized: list[str] = absent_if([])  # loops TVM vectorised whose lanes are in its blocks (in it or in `unrolled`)
    located: bool = absent_if(False)  # other loops fit the count too: the object's debug information told them apart
    ordered: bool = absent_if(
        False
    )  # other loops fit the count too: where the nests lie in the function told them apart
    approximate: bool = absent_if(False)  # no plain way fits the count: per_execution is its average
    nest_name: str = absent_if("")  # the buffers its nest stores to (`scores`): the nest's name across builds
    nest_index: int = absent_if(0)  # which of the kernel's nests (1: the first outermost loop); 0: not known

    @property
    def nest(self) -> str:
        """`i_0[8] > j_0[8] > k_1[4]`; a kind other than serial is named (`i_0[8 parallel]`), and so is a
        loop LLVM unrolled completely (`k_0[4 unrolled by LLVM]`)."""
        return " > ".join(
            f"{s.var}[{'?' if s.extent is None else s.extent}"
            f"{'' if s.kind == 'serial' else ' ' + s.kind}"
            f"{' unrolled by LLVM' if s.llvm_unrolled else ''}]"
            for s in self.path
        )

    def llvm_notes(self) -> list[str]:
        """What LLVM did to the loop, and the loops TVM vectorised into it, in words (empty: nothing seen)."""
        notes = []
        if self.approximate:
            notes.append(
                f"about {self.per_execution} iteration{'s' if self.per_execution > 1 else ''} per "
                "execution: rewritten by LLVM"
            )
        elif self.per_execution > 1:
            notes.append(f"{self.per_execution} iterations per execution: unrolled or vectorised by LLVM")
        if self.peeled:
            notes.append(f"{self.peeled} iteration{'s' if self.peeled > 1 else ''} peeled off by LLVM")
        if self.path and self.path[-1].llvm_unrolled:  # the block is the loop's own code in each copy
            copies = "" if self.path[-1].extent is None else f" {self.path[-1].extent}"
            notes.append(f"its own code in each of the{copies} copies LLVM unrolled")
        if self.unrolled:
            notes.append(f"{_listed(self.unrolled)} unrolled or vectorised into it by LLVM")
        if self.vectorized:
            notes.append(f"{_listed(self.vectorized)} vectorised into it by TVM")
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
    # a calibrated model's training data: "intel-6-167's native runs" (a profile's model), or the CPUs
    # the project's dataset was timed on ("native runs on AMD EPYC")
    trained_on: str = absent_if("")
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
