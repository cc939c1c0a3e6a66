"""One kernel x target job, start to end: kernel -> compile -> sim -> check output -> predict.

Jobs are independent and picklable, so any executor can run them. Each stage looks in the
content-addressed cache first, so an unchanged kernel is neither rebuilt nor re-simulated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import shutil
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfguard import flopcount
from perfguard.compile.build import build, build_toolchain, plan
from perfguard.compile.cache import BuildCache
from perfguard.compile.inputs import TensorSpec, decode_outputs, generate, recorded_inputs
from perfguard.compile.lower import LoweredKernel, inspect_module, inspect_text, with_inputs
from perfguard.compile.toolchain import (
    check_tensor_types,
    find_cc,
)
from perfguard.config import KernelSpec
from perfguard.errors import InfraError, InputError, PerfguardError
from perfguard.executors import Executor
from perfguard.fingerprints import digest, tool_environment, tool_identity, worker_identity
from perfguard.job.verify import Reference, check_key, check_outputs, reference_outputs, resolve_reference
from perfguard.judging import Judgement
from perfguard.kernels import FAMILY_NAMES, get_family
from perfguard.kernels.base import SCHEDULE_ENTRIES, check_params
from perfguard.kernels.models import origin
from perfguard.signals import interruptible, log
from perfguard.sim.base import get_simulator, profile_tools
from perfguard.sim.mca import LLVM_MCA, McaTarget, block_timings
from perfguard.sim.mca_tools import timing_cache_dir
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile
from perfguard.timings import Span, cpu_seconds, measured
from perfguard.user_code.imports import callable_parts, load_callable
from perfguard.user_code.reads import changed, depend_on, recording, unchanged, user_code


@dataclass(frozen=True)
class Shipped:
    """A user kernel as the submitting machine resolved it (`ship`): everything a worker would
    otherwise import the project's code for, so that a worker needs nothing of the project on
    its disk. Its keys are the ones a local run computes (the same IR hash, the reference's same
    identity), so a shipped job builds, simulates and checks exactly what a local one does."""

    ir: str  # the scheduled module's TVMScript
    symbol: str
    # name, shape, dtype, output, index, fill, values, values_file (compile.inputs.TensorSpec)
    tensors: tuple[tuple[str, tuple[int, ...], str, bool, int, tuple | None, bytes | None, str | None], ...]
    ir_hash: str
    params: dict[str, Any]  # the kernel's full params (a family's defaults filled in)
    family: str | None  # a built-in family whose entry the kernel uses (perfguard has it on every worker)
    flops: int | None
    # the kernel's own numpy reference, run here: its kind and identity (verify.Reference) and its
    # outputs (an .npz); None when the worker resolves the reference itself (a family's, or "self")
    reference: tuple[str, str] | None
    expected: bytes | None
    depends: tuple[tuple[str, ...], ...]  # the project's inputs read here (user_code.Dependencies.digests)
    source: str | None = None  # the entry function's lines (entry_source), recorded in the baseline

    def lowered(self, where: str) -> LoweredKernel:
        tensors = [
            TensorSpec(n, tuple(shape), dtype, output, index, fill, values, values_file)
            for n, shape, dtype, output, index, fill, values, values_file in self.tensors
        ]
        lowered = LoweredKernel(None, self.symbol, tensors, self.ir_hash, load=lambda: _parse_ir(self.ir, where))
        lowered.source = self.source
        return lowered

    def expected_outputs(self) -> list[np.ndarray]:
        with np.load(io.BytesIO(self.expected or b""), allow_pickle=False) as saved:
            return [saved[f"out{i}"] for i in range(len(saved.files))]


@dataclass(frozen=True)
class Job:
    kernel: KernelSpec
    profile: TargetProfile
    root: Path  # where user kernel modules are imported from
    cache_dir: Path
    simulator: str
    timeout: float
    reps: int
    warmup: int
    require_reference: bool = False
    warm_pipeline: bool = True  # schedule the blocks with llvm-mca after simulating (not for model = "analytical")
    # bytes of padding linked before the kernel's code: the same code at another address (how far
    # code placement alone moves native time and the models: benchmarks/layout.py)
    code_offset: int = 0
    # ignore every cache (build, simulation, output check, llvm-mca) and write each anew: what
    # `--recompute` and the reuse canary (`--verify-reuse`) run
    recompute: bool = False
    shipped: Shipped | None = None  # the user's code resolved by the submitting machine (`ship`)
    # how its result is judged (limits.Judging.resolve, once per kernel x target): what its result
    # record is keyed by and judge.decide applies; not an input of the job's own record
    judgement: Judgement | None = None

    @property
    def label(self) -> str:
        return f"{self.kernel.name}[{self.profile.name}]"

    @property
    def where(self) -> str:
        spec = self.kernel
        return f"kernel '{spec.name}'{origin(spec.params) if spec.ir is not None else ''} on {self.profile.name}"


@dataclass
class JobResult:
    kernel: str
    target: str
    family: str | None
    params: dict[str, Any]
    simulator: str
    ok: bool
    error: str | None = None
    exit_code: int = 0
    stats: Stats | None = None  # per kernel call
    content_hash: str | None = None  # the build key: lowered IR + target + toolchain
    binary_hash: str | None = None
    toolchain: dict[str, str] = field(default_factory=dict)
    rebuilt: bool = False
    resimulated: bool = False
    seconds: float = 0.0
    max_error: float | None = None  # worst output difference against the reference
    reference: str | None = None  # what checked the outputs: numpy | family | self (verify.REFERENCE_KINDS)
    rechecked: bool = False  # the output check ran (its cache key was new)
    flops: int | None = None  # floating-point operations of one call (a family's count or the kernel's `flops`)
    tensor_bytes: int | None = None  # bytes of all tensors: the compulsory memory traffic
    loops: dict | None = (
        None  # the kernel's loop nest as compiled (compile.loops, plain JSON): names loops in attribution
    )
    mismatch: dict | None = None  # a wrong output: its worst element (errors.WrongResult, verify.mismatch_error)
    # where the job's time went (perfguard.timings.JOB_STAGES -> wall and CPU seconds, children included)
    timings: dict[str, Span] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # the whole job's CPU (this process and the programs it ran)
    # the project's files that lowering and checking read, [[path, sha256], ...] (user_code.recording):
    # what its record (perfguard.job.record) is reused under
    depends: list[list[str]] | None = None
    reused: bool = False  # taken from its record: nothing ran
    worker: str | None = None  # the Dask worker that ran it (None: this machine)
    inputs: dict[str, dict] = field(default_factory=dict)  # configured inputs (compile.inputs.recorded_inputs)
    source: str | None = None  # a user kernel's entry function (entry_source): recorded in its baseline

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stats"] = None if self.stats is None else self.stats.to_dict()
        return data


def run_job(job: Job) -> JobResult:
    """Never raises: failures come back as a result with ok=False and the exit code class."""
    started, started_cpu = time.monotonic(), cpu_seconds()
    spec = job.kernel
    result = JobResult(spec.name, job.profile.name, spec.family, dict(spec.params), job.simulator, ok=False)
    with failure_into(result, job.label):
        with interruptible():  # in a pool worker too: an interrupted worker kills its simulator first
            with measured(result.timings, "imports"):  # once per process: the pool's cost, not the job's
                import tvm  # noqa: F401
            with recording(job.root, exclude=(job.cache_dir,), whole=False) as deps:
                _run(job, result)
            depends = deps.digests()
            moved = changed(job.root, depends)  # each input hashed again: as when it was read?
            if moved is None:
                shipped = [list(item) for item in job.shipped.depends] if job.shipped is not None else []
                result.depends = sorted(shipped + [d for d in depends if d not in shipped])
            else:  # ccache's "too new": what was read is not what is there now, so nothing is recorded
                log(f"{job.label}: {moved} changed while the job ran: its result is not recorded")
        result.ok = True
    result.seconds = time.monotonic() - started
    result.cpu_seconds = cpu_seconds() - started_cpu
    return result


@contextlib.contextmanager
def failure_into(result: JobResult, label: str) -> Iterator[None]:
    """A failure inside the block becomes the result's error and exit code class."""
    try:
        yield
    except PerfguardError as exc:
        result.error, result.exit_code = exc.message, exc.exit_code
        result.mismatch = getattr(exc, "mismatch", None)
    except OSError as exc:  # the cache's disk is full, a folder is not writable, ...
        where = f"{exc.filename}: " if exc.filename else ""
        result.error = f"{label}: {where}{exc.strerror or exc}"
        result.exit_code = InfraError.exit_code
    except Exception as exc:  # a bug or an unexpected library failure: still a clear line
        last = traceback.extract_tb(exc.__traceback__)[-1]
        message = " ".join(str(exc).split())
        result.error = (
            f"{label}: internal error {type(exc).__name__}: {message} (at {Path(last.filename).name}:{last.lineno})"
        )
        result.exit_code = InfraError.exit_code


def needs_shipping(spec: KernelSpec) -> bool:
    """Whether a job of `spec` runs code of the user's (its entry, reference or flops function):
    a worker elsewhere has perfguard and the toolchains, not the project."""
    if spec.ir is not None:  # a [[model]]'s kernel already travels as its TVMScript
        return False
    named = [spec.entry, spec.reference or ""] + ([spec.flops] if spec.flops and callable_parts(spec.flops) else [])
    return any(n and n.partition(":")[0].split(".")[0] != "perfguard" for n in named)


def ship(job: Job) -> Job:
    """The job with the user's code resolved here (`Shipped`): its kernel lowered, its flops
    counted, its numpy reference run on the inputs the harness generates. Raises what running
    the job locally would raise for that code (an InputError naming the kernel)."""
    spec = job.kernel
    if job.shipped is not None or not needs_shipping(spec):
        return job
    with recording(job.root, exclude=(job.cache_dir,), whole=False) as deps:
        lowered, params, family = resolve_kernel(spec, job.root, job.where, job.cache_dir)
        flops = (
            kernel_flops(spec, job.root, job.where)
            if spec.flops is not None
            else int(family.flops(**spec.params))
            if family is not None
            else None
        )
        reference, expected = None, None
        if spec.reference:
            ref = resolve_reference(spec, job.root, lowered, family, job.where)
            inputs = [generate(t) for t in lowered.tensors if not t.output]
            outputs = reference_outputs(spec, ref, lowered, inputs, job.where)
            buffer = io.BytesIO()
            arrays: dict[str, Any] = {f"out{i}": o for i, o in enumerate(outputs)}
            np.savez(buffer, **arrays)
            reference, expected = (ref.kind, ref.identity), buffer.getvalue()
    shipped = Shipped(
        lowered.mod.script(),
        lowered.symbol,
        tuple(
            (t.name, tuple(t.shape), t.dtype, t.output, t.index, t.fill, t.values, t.values_file)
            for t in lowered.tensors
        ),
        lowered.ir_hash,
        params,
        family.name if family is not None else None,
        flops,
        reference,
        expected,
        tuple(tuple(item) for item in deps.digests()),
        lowered.source,
    )
    return dataclasses.replace(job, shipped=shipped)


def run_jobs(
    executor: Executor, jobs: list[Job], on_result: Callable[[int, JobResult], None] | None = None
) -> list[JobResult]:
    """run_job over the jobs on `executor`, results in job order. An executor whose workers may
    lack the project (Executor.ships_work) gets each job `ship`ped first; a job whose user code
    fails here fails as it would have there, and a worker's failure names the worker."""
    if not executor.ships_work:
        return executor.map(run_job, jobs, on_result)
    tools = sorted({tool for job in jobs for tool in profile_tools([job.profile], job.simulator)})
    executor.admit(worker_identity, tools)
    results: list[JobResult | None] = [None] * len(jobs)
    sent: list[int] = []
    payloads: list[Job] = []
    for i, job in enumerate(jobs):
        failed = JobResult(
            job.kernel.name, job.profile.name, job.kernel.family, dict(job.kernel.params), job.simulator, ok=False
        )
        with failure_into(failed, job.label):
            payloads.append(ship(job))
            sent.append(i)
            continue
        results[i] = failed
        if on_result:
            on_result(i, failed)

    def landed(k: int, result: JobResult) -> None:
        i = sent[k]
        job = jobs[i]
        if result.worker and not result.ok and result.error:
            result.error = f"{result.error} (on worker {result.worker})"
        shipped = payloads[k].shipped
        if result.depends is not None and shipped is not None:
            moved = changed(job.root, [list(d) for d in shipped.depends])
            if moved is not None:  # edited while the cluster ran it: not recorded ("too new")
                log(f"{job.label}: {moved} changed while the job ran: its result is not recorded")
                result.depends = None
        results[i] = result
        if on_result:
            on_result(i, result)

    executor.map(run_job, payloads, landed)
    return results  # type: ignore[return-value]


def _family_of(spec: KernelSpec, entry: Callable, where: str) -> Any:
    """The built-in family a kernel names, refused when its entry builds something else: the
    family's knobs, reference, flop count and calibrated model would be another kernel's. Another
    name only labels a kernel of the user's own (none; reports group by it)."""
    if spec.family is None or spec.family not in FAMILY_NAMES:
        return None
    family = get_family(spec.family)
    if entry is family.entry or spec.entry in SCHEDULE_ENTRIES:
        return family
    own = f"{family.entry.__module__}:{family.entry.__name__}"
    raise InputError(
        f"{where}: entry '{spec.entry}' and family '{spec.family}' disagree (that family's entry is "
        f"'{own}'): name the family's entry, or leave `family` out for a kernel of your own"
    )


def resolve_kernel(
    spec: KernelSpec, root: Path, where: str, cache_dir: Path | None = None
) -> tuple[LoweredKernel, dict[str, Any], Any]:
    """Call the kernel's entry and inspect the module; returns (lowered, full params, family). A
    kernel given as TVMScript (a [[model]]'s) is parsed once per text with a `cache_dir`."""
    if spec.ir is not None:  # a kernel extracted from a [[model]]: its PrimFunc travels as TVMScript
        lowered = inspect_text(spec.ir, spec.outputs or 1, where, lambda text: _parse_ir(text, where), cache_dir)
        return lowered, dict(spec.params), None
    entry = load_callable(spec.entry, root, where)
    family = _family_of(spec, entry, where)
    params = dict(spec.params)
    if family is not None and entry is family.entry:
        try:
            params = check_params(family.name, family.knobs, params)
        except InputError as exc:
            raise InputError(f"{where}: {exc.message}") from None
    try:
        with user_code():
            mod = entry(**spec.params)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}") from None
    except Exception as exc:
        raise InputError(f"{where}: entry '{spec.entry}' raised {type(exc).__name__}: {_first_lines(exc)}") from None
    outputs = spec.outputs or (family.num_outputs if family is not None else 1)
    lowered = inspect_module(mod, outputs, where)
    with user_code():  # an input's `.npy` is the project's file the result depends on: its read is recorded
        lowered = with_inputs(lowered, spec.inputs, where, root)
    own = family is not None and entry is family.entry
    lowered.source = None if own else entry_source(entry)
    return lowered, params, (family if own else None)


def entry_source(entry: Callable) -> str | None:
    """A user kernel's entry function, its own lines (not its module's): what a baseline records so
    that a report can show the lines an edit changed; None when Python cannot give them."""
    try:
        return inspect.getsource(inspect.unwrap(entry))
    except (OSError, TypeError):
        return None


# What TVM 0.27 renamed, by the error a name of an older TVM gives (docs/kernels.md, "TVM 0.27:
# errors of common mistakes")
_RENAMED = {
    "module 'tvm' has no attribute 'tir'": "TVM 0.27 has no tvm.tir: expression helpers (Select, floormod, const) "
    "are tvm.tirx, schedules tvm.s_tir.Schedule",
    "'Schedule' object has no attribute 'get_block'": "TVM 0.27 finds blocks with sch.get_sblock",
}


def _first_lines(exc: Exception) -> str:
    """An exception's first line, and a TVM ScheduleError's "Error message:" line (the first says
    only which primitive failed: "An error occurred in the schedule primitive 'rfactor'."), or
    what TVM 0.27 calls a name of an older TVM."""
    lines = str(exc).splitlines() or [""]
    said = next((line.strip() for line in lines[1:] if line.startswith("Error message:")), None)
    renamed = next((f" ({hint})" for error, hint in _RENAMED.items() if error in lines[0]), "")
    return lines[0] + (f" {said[:300]}" if said else "") + renamed


def _parse_ir(text: str, where: str):
    import tvm

    try:
        return tvm.script.from_source(text)
    except Exception as exc:
        raise InputError(f"{where}: the extracted kernel's TVMScript does not parse: {exc}".splitlines()[0]) from None


@dataclass(frozen=True)
class Built:
    """A kernel built for a target: where its files are and what it was built from."""

    build_dir: Path
    lowered: LoweredKernel
    params: dict[str, Any]
    family: Any
    where: str

    @property
    def binary(self) -> Path:
        return self.build_dir / "harness"


def run_toolchain(profile: TargetProfile, simulator_name: str, cache_dir: Path) -> dict[str, str]:
    """What a run of `profile` under `simulator_name` would record, without building anything
    (perfguard doctor compares it with the committed baselines')."""
    simulator = get_simulator(simulator_name, cache_dir)
    return {**build_toolchain(find_cc(profile)), "simulator": simulator.fingerprint(profile)}


def build_kernel(job: Job, result: JobResult) -> Built:
    """Lower, compile and link (or find it all in the cache); fills the build fields of result."""

    spec, profile, where = job.kernel, job.profile, job.where
    with measured(result.timings, "lower"):
        if job.shipped is not None:  # lowered by the submitting machine: nothing of the project is read here
            lowered, params = job.shipped.lowered(where), dict(job.shipped.params)
            family = get_family(job.shipped.family) if job.shipped.family else None
            result.flops = job.shipped.flops
        else:
            lowered, params, family = resolve_kernel(spec, job.root, where, job.cache_dir)
            if spec.flops is not None:
                result.flops = kernel_flops(spec, job.root, where)
            elif family is not None:
                result.flops = int(family.flops(**spec.params))
        result.params = params
        result.inputs = recorded_inputs(lowered.tensors)
        result.source = lowered.source
        result.tensor_bytes = sum(t.nbytes for t in lowered.tensors)
    check_tensor_types(profile, find_cc(profile), lowered.tensors, where)
    if family is not None and "check_target" in family.extra:
        family.extra["check_target"](profile.tvm_target, where, **spec.params)
    planned = plan(lowered, profile, job.code_offset)
    result.toolchain, result.content_hash = dict(planned.toolchain), planned.key
    made = build(planned, lowered, profile, job.cache_dir, where, job.code_offset, job.recompute, result.timings)
    result.binary_hash, result.rebuilt, result.loops = made.binary_hash, made.rebuilt, made.loops
    build_dir = made.build_dir
    return Built(build_dir, lowered, params, family, where)


def kernel_flops(spec: KernelSpec, root: Path, where: str) -> int:
    """A user kernel's `flops`: its expression over the params, or its function called with them."""
    flops = spec.flops
    assert flops is not None  # called for a kernel that has one
    if callable_parts(flops) is None:
        return flopcount.evaluate(flops, spec.params, f"{where}: flops")
    func = load_callable(flops, root, where, "flops")
    try:
        with user_code():
            value = func(**spec.params)
    except Exception as exc:
        raise InputError(f"{where}: flops '{spec.flops}' raised {type(exc).__name__}: {exc}".splitlines()[0]) from None
    return flopcount.count(value, f"{where}: flops '{spec.flops}'")


def _run(job: Job, result: JobResult) -> None:
    simulator = get_simulator(job.simulator, job.cache_dir)
    simulator.check_available(job.profile)
    built = build_kernel(job, result)
    fingerprint = simulator.fingerprint(job.profile)
    result.toolchain["simulator"] = fingerprint
    cache = BuildCache(job.cache_dir)
    assert result.binary_hash is not None  # build_kernel set it
    sim_key = simulation_key(job, result.binary_hash, fingerprint, simulator.programs(job.profile))
    found = None if job.recompute else cache.lookup_sim(sim_key)
    stats = None if found is None else _cached_stats(found[0], sim_key)
    raw = None if found is None else found[1]
    if raw is not None and len(raw) != sum(t.nbytes for t in built.lowered.tensors if t.output):
        raw = None  # not the outputs of these tensors: simulate again, as for a damaged record
    if stats is None or raw is None:
        with measured(result.timings, "simulate"):
            sim = simulator.run(built.binary, job.profile, [str(job.reps), str(job.warmup)], job.timeout)
        raw = sim.stdout
        record = {"stats": sim.stats.to_record(), "roi_count": sim.roi_count, "total_insts": sim.total_insts}
        _decode(raw, built, job.simulator)
        cache.store_sim(sim_key, record, raw)
        result.resimulated = True
        stats = Stats.from_dict(record["stats"], f"simulation cache entry {sim_key}")
    with measured(result.timings, "verify"):
        check_built(job, result, built, _decode(raw, built, job.simulator), sim_key)
    result.stats = stats if job.reps == 1 else stats.scaled(1.0 / job.reps)  # a wrong kernel gets no score
    if stats.blocks is not None and result.resimulated and job.warm_pipeline:
        with measured(result.timings, "timing_model"):
            _warm_block_timings(job, stats)


def _warm_block_timings(job: Job, stats: Stats) -> None:
    """Schedule the blocks with llvm-mca here, in the worker, so that the pipeline model (run
    serially when verdicts are judged) finds them cached. Best effort: when it cannot, the
    model itself reports why, naming the block and the tool."""
    if shutil.which(LLVM_MCA) is None:
        return
    profile = job.profile
    assert stats.blocks is not None  # the caller checked
    try:
        block_timings(
            stats.blocks.blocks,
            McaTarget(profile.triple, profile.pipeline_cpu, profile.mattr),
            timing_cache_dir(job.cache_dir),
        )
    except PerfguardError:
        pass


def _cached_stats(record: dict | None, sim_key: str) -> Stats | None:
    """A cache record's statistics, or None when they do not validate (written by an older
    perfguard, or edited): that means simulating again, never an error."""
    if record is None:
        return None
    try:
        return Stats.from_dict(record["stats"], f"simulation cache entry {sim_key}")
    except InputError:
        return None


def simulation_key(job: Job, binary_hash: str, fingerprint: str, programs: Sequence[str] = ()) -> str:
    """Everything that decides a simulation's statistics and outputs: the simulator's programs by
    their bytes (not only the version text in its fingerprint) and the variables they read."""
    return digest(
        binary_hash,
        job.simulator,
        fingerprint,
        str(job.reps),
        str(job.warmup),
        *(tool_identity(p) for p in programs),
        tool_environment(),
    )


def _decode(raw: bytes, built: Built, simulator: str) -> list[np.ndarray]:
    try:
        return decode_outputs(raw, built.lowered.tensors)
    except ValueError as exc:
        raise InfraError(f"{built.where}: harness printed garbage under {simulator}: {exc}") from None


def check_built(job: Job, result: JobResult, built: Built, outputs: list[np.ndarray], outputs_key: str) -> None:
    """The output check, or its cached answer under a key holding everything that decides it
    (`outputs_key` stands for the outputs: the simulation's key, or the binary's hash natively)
    and reused only while what the reference read (the modules it and its module import, the
    files it loads, the variables it reads: recorded with the answer) is as it was."""
    spec = job.kernel
    shipped = job.shipped if job.shipped is not None and job.shipped.reference is not None else None
    with recording(job.root, exclude=(job.cache_dir,), whole=False) as read:
        if shipped is not None:  # run by the submitting machine: its outputs are part of the key
            assert (
                shipped.reference is not None and shipped.expected is not None
            )  # shipped with its reference's outputs
            kind, identity = shipped.reference
            ref = Reference(kind, None, digest(identity, "shipped outputs", digest(shipped.expected.hex())))
        else:
            ref = resolve_reference(spec, job.root, built.lowered, built.family, built.where)
        result.reference = ref.kind
        if ref.kind == "self" and job.require_reference:
            if spec.model is not None or spec.ir is not None:  # a model gives no numpy reference per kernel
                raise InputError(
                    f"{built.where}: a [[model]]'s kernels have no numpy reference, and "
                    f"require_reference = true refuses them: set require_reference = false to guard "
                    f"the model"
                )
            raise InputError(
                f"{built.where}: no numpy reference, and require_reference = true: add "
                f'reference = "module:function" to the kernel (docs/kernels.md, "Output check")'
            )
        cache = BuildCache(job.cache_dir)
        key = check_key(outputs_key, spec, ref, sum(t.output for t in built.lowered.tensors))
        checked = None if job.recompute else cache.lookup_check(key)
        if checked is not None and unchanged(job.root, checked.get("depends")):
            depend_on(job.root, checked["depends"])  # what the reference read is this job's input too
        else:
            expected = shipped.expected_outputs() if shipped is not None else None
            checked = {
                "max_error": check_outputs(spec, ref, built.lowered, outputs, built.where, job.cache_dir, expected)
            }
            result.rechecked = True
    if result.rechecked:
        checked["depends"] = read.digests()
        if changed(job.root, checked["depends"]) is None:
            cache.store_check(key, checked)
    result.max_error = checked["max_error"]
