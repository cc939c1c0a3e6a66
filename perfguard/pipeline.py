"""One kernel x target job, start to end: kernel -> build -> sim -> check output -> predict.

Jobs are independent and picklable, so any executor can run them. Each stage looks in the
content-addressed cache first, so an unchanged kernel is neither rebuilt nor re-simulated.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfguard import __version__
from perfguard.build.cache import BuildCache, digest, file_digest
from perfguard.build.harness import HARNESS_VERSION, render_harness, template_digest
from perfguard.build.inputs import decode_outputs, generate
from perfguard.build.lower import LoweredKernel, build_host, build_object, inspect_module
from perfguard.build.toolchain import cc_version, find_cc, link_harness
from perfguard.config import KernelSpec, load_callable
from perfguard.errors import InfraError, InputError, PerfguardError
from perfguard.signals import sigterm_interrupts
from perfguard.sim.base import get_simulator
from perfguard.sim.stats import Stats
from perfguard.targets import TargetProfile

# Part of every build key: bump when the build recipe (flags, layout) changes.
BUILD_RECIPE = 1


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

    @property
    def label(self) -> str:
        return f"{self.kernel.name}[{self.profile.name}]"


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
    flops: int | None = None  # floating-point operations of one call (built-in families)
    tensor_bytes: int | None = None  # bytes of all tensors: the compulsory memory traffic

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stats"] = None if self.stats is None else self.stats.to_dict()
        return data


def run_job(job: Job) -> JobResult:
    """Never raises: failures come back as a result with ok=False and the exit code class."""
    started = time.monotonic()
    spec = job.kernel
    result = JobResult(spec.name, job.profile.name, spec.family, dict(spec.params), job.simulator, ok=False)
    try:
        with sigterm_interrupts():  # in a pool worker too: a terminated worker kills its simulator first
            _run(job, result)
        result.ok = True
    except PerfguardError as exc:
        result.error, result.exit_code = exc.message, exc.exit_code
    except OSError as exc:  # the cache's disk is full, a folder is not writable, ...
        where = f"{exc.filename}: " if exc.filename else ""
        result.error = f"{job.label}: {where}{exc.strerror or exc}"
        result.exit_code = InfraError.exit_code
    except Exception as exc:  # a bug or an unexpected library failure: still a clear line
        last = traceback.extract_tb(exc.__traceback__)[-1]
        message = " ".join(str(exc).split())
        result.error = f"{job.label}: internal error {type(exc).__name__}: {message} (at {Path(last.filename).name}:{last.lineno})"
        result.exit_code = InfraError.exit_code
    result.seconds = time.monotonic() - started
    return result


def resolve_kernel(spec: KernelSpec, root: Path, where: str) -> tuple[LoweredKernel, dict[str, Any], Any]:
    """Call the kernel's entry and inspect the module; returns (lowered, full params, family)."""
    from perfguard.kernels import FAMILY_NAMES, get_family
    from perfguard.kernels.base import check_params

    entry = load_callable(spec.entry, root, where)
    family = get_family(spec.family) if spec.family in FAMILY_NAMES else None
    params = dict(spec.params)
    if family is not None and entry is family.entry:
        try:
            params = check_params(family.name, family.knobs, params)
        except InputError as exc:
            raise InputError(f"{where}: {exc.message}") from None
    try:
        mod = entry(**spec.params)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}") from None
    except Exception as exc:
        raise InputError(f"{where}: entry '{spec.entry}' raised {type(exc).__name__}: {exc}".splitlines()[0]) from None
    outputs = spec.outputs or (family.num_outputs if family is not None else 1)
    return inspect_module(mod, outputs, where), params, (family if family is not None and entry is family.entry else None)


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


def build_kernel(job: Job, result: JobResult) -> Built:
    """Lower, compile and link (or find it all in the cache); fills the build fields of result."""
    import tvm

    spec, profile = job.kernel, job.profile
    where = f"kernel '{spec.name}' on {profile.name}"
    lowered, params, family = resolve_kernel(spec, job.root, where)
    result.params = params
    result.tensor_bytes = sum(t.nbytes for t in lowered.tensors)
    if family is not None:
        result.flops = int(family.flops(**spec.params))
    cc = find_cc(profile)
    result.toolchain = {"cc": cc_version(cc), "tvm": tvm.__version__, "perfguard": __version__}
    cache = BuildCache(job.cache_dir)
    key = digest(lowered.ir_hash, profile.fingerprint(), result.toolchain["cc"], result.toolchain["tvm"],
                 str(HARNESS_VERSION), template_digest(), str(BUILD_RECIPE))
    result.content_hash = key
    build_dir = cache.lookup_build(key)
    if build_dir is None:
        staging = cache.staging_dir()
        try:
            build_object(lowered, profile.tvm_target, staging / "kernel.o", where)
            (staging / "harness.c").write_text(render_harness(lowered.symbol, lowered.tensors))
            link_harness(profile, staging / "harness.c", staging / "kernel.o", staging / "harness", where)
            build_dir = cache.publish_build(key, staging)
        except BaseException:  # a failed build leaves nothing behind in the cache
            shutil.rmtree(staging, ignore_errors=True)
            raise
        result.rebuilt = True
    result.binary_hash = file_digest(build_dir / "harness")
    return Built(build_dir, lowered, params, family, where)


def _run(job: Job, result: JobResult) -> None:
    simulator = get_simulator(job.simulator, job.cache_dir)
    simulator.check_available(job.profile)
    built = build_kernel(job, result)
    result.toolchain["simulator"] = simulator.fingerprint(job.profile)
    cache = BuildCache(job.cache_dir)
    sim_key = digest(result.binary_hash, job.simulator, simulator.fingerprint(job.profile), str(job.reps),
                     str(job.warmup))
    record = cache.lookup_sim(sim_key)
    if record is None:
        sim = simulator.run(built.binary, job.profile, [str(job.reps), str(job.warmup)], job.timeout)
        try:
            outputs = decode_outputs(sim.stdout, built.lowered.tensors)
        except ValueError as exc:
            raise InfraError(f"{built.where}: harness printed garbage under {job.simulator}: {exc}") from None
        max_error = _check_outputs(job.kernel, job.root, built.lowered, built.params, built.family, outputs,
                                   built.where)
        record = {"stats": sim.stats.to_record(), "roi_count": sim.roi_count, "total_insts": sim.total_insts,
                  "max_error": max_error}
        cache.store_sim(sim_key, record)
        result.resimulated = True
    stats = Stats.from_dict(record["stats"], f"simulation cache entry {sim_key}")
    result.stats = stats if job.reps == 1 else stats.scaled(1.0 / job.reps)
    result.max_error = record["max_error"]
    if stats.blocks is not None and result.resimulated:
        _warm_block_timings(job, stats)


def _warm_block_timings(job: Job, stats: Stats) -> None:
    """Schedule the blocks with llvm-mca here, in the worker, so that the pipeline model (run
    serially when verdicts are judged) finds them cached. Best effort: when it cannot, the
    model itself reports why, naming the block and the tool."""
    from perfguard.predict.mca import LLVM_MCA, McaTarget, block_timings

    if shutil.which(LLVM_MCA) is None:
        return
    profile = job.profile
    try:
        block_timings(stats.blocks.blocks, McaTarget(profile.triple, profile.pipeline_cpu, profile.mattr), job.cache_dir)
    except PerfguardError:
        pass


def reference_outputs(spec: KernelSpec, root: Path, lowered: LoweredKernel, params: dict, family, inputs, where):
    if spec.reference:
        ref = load_callable(spec.reference, root, where)
        try:
            outputs = ref(inputs, **spec.params)
        except Exception as exc:
            raise InputError(f"{where}: reference '{spec.reference}' raised {type(exc).__name__}: {exc}".splitlines()[0]) from None
    elif family is not None:
        outputs = family.reference(inputs, **spec.params)
    else:
        outputs = _tvm_host_reference(lowered, inputs, where)
    if isinstance(outputs, np.ndarray):
        outputs = [outputs]
    return [np.asarray(o) for o in outputs]


def _tvm_host_reference(lowered: LoweredKernel, inputs: list[np.ndarray], where: str) -> list[np.ndarray]:
    import tvm

    lib = build_host(lowered, where)
    args = [tvm.runtime.tensor(a) for a in inputs]
    outs = [tvm.runtime.empty(t.shape, t.dtype) for t in lowered.tensors if t.output]
    lib[lowered.symbol.removeprefix("__tvm_ffi_")](*args, *outs)
    return [o.numpy() for o in outs]


def _check_outputs(spec, root, lowered, params, family, outputs, where) -> float:
    """A wrong kernel is an infrastructure error (exit 3), never a score."""
    inputs = [generate(t) for t in lowered.tensors if not t.output]
    expected = reference_outputs(spec, root, lowered, params, family, inputs, where)
    if len(expected) != len(outputs):
        raise InputError(f"{where}: reference returned {len(expected)} outputs, the kernel has {len(outputs)}")
    worst = 0.0
    for got, want, t in zip(outputs, expected, [t for t in lowered.tensors if t.output]):
        if tuple(want.shape) != tuple(got.shape):
            raise InputError(f"{where}: reference output '{t.name}' has shape {want.shape}, kernel {got.shape}")
        want = want.astype(np.float64)
        got64 = got.astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        default = 1e-4 if t.dtype == "float32" else 1e-10 if t.dtype == "float64" else 0.0
        rtol = spec.rtol if spec.rtol is not None else default
        atol = spec.atol if spec.atol is not None else default * scale
        if not np.all(np.isfinite(got64)):
            raise InfraError(f"{where}: wrong result: output '{t.name}' has non-finite values")
        diff = np.abs(got64 - want)
        bad = diff > atol + rtol * np.abs(want)
        if np.any(bad):
            idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
            raise InfraError(
                f"{where}: wrong result: output '{t.name}'{list(idx)} = {got64[idx]:.6g}, "
                f"reference {want[idx]:.6g} ({int(bad.sum())} of {bad.size} elements off)"
            )
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
    return worst


def job_summary(result: JobResult) -> str:
    return json.dumps(result.to_dict(), sort_keys=True)
