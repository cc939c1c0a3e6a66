"""perfguard's simulators as a MetaSchedule builder and runner (tvm.s_tir.meta_schedule).

`SimBuilder` cross-compiles every candidate module for the target profile and links
perfguard's C harness (through the build cache, in parallel on the executor); `SimRunner`
runs the binaries in parallel simulators, checks their outputs against the family's
reference and returns the predicted run time as the measurement. A candidate that fails to
build comes back as a BuilderResult error, one that crashes or computes a wrong result as a
RunnerResult error: MetaSchedule never sees a score for it. Both follow MetaSchedule's
PyBuilder / PyRunner interfaces, so any search strategy and cost model works with them.

MetaSchedule's default measure callbacks delete each artifact's folder after it ran, so
the builder's artifact is a small file in a scratch folder of its own naming the candidate;
the binaries stay in perfguard's content-addressed cache.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import logging
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from perfguard.config import KernelSpec
from perfguard.job.run import run_job
from perfguard.tune.apply import compute_module, plain
from perfguard.tune.measure import Measurer, Trial, build_job, native_check_job

STRATEGIES = {"evolutionary": "evolutionary", "replay": "replay-trace"}
_LOGGER = "tvm.s_tir.meta_schedule"


def _fast_stack(context: int = 1) -> list:
    """inspect.stack() with source context for the three innermost frames only.

    TVMScript's parser calls inspect.stack() for every @T.prim_func, and each call looks up
    source lines for every frame; importing MetaSchedule's ~250 tensor intrinsics that way
    takes 20-60 s (longer the more modules are loaded). The parser reads the context of the
    third frame alone, so the result is the same.
    """
    frame: FrameType | None = sys._getframe(1)
    frames: list[inspect.FrameInfo] = []
    while frame is not None:
        if len(frames) < 3:
            frames.append(inspect.FrameInfo(frame, *inspect.getframeinfo(frame, context)))
        else:
            frames.append(
                inspect.FrameInfo(frame, frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, None, None)
            )
        frame = frame.f_back
    return frames


# The tensor intrinsics of the CPUs perfguard targets: what MetaSchedule's schedule rules for an
# llvm target can tensorize with.
CPU_INTRINSICS = ("x86", "arm_cpu", "riscv_cpu")


def import_meta_schedule():
    """tvm.s_tir.meta_schedule with the CPU tensor intrinsics loaded (quickly, see _fast_stack).

    TuneContext imports the package tvm.s_tir.tensor_intrin, whose __init__ also parses the GPU,
    ROCm and Hexagon intrinsics (most of its ~250 TVMScript functions: ~7 CPU-s, for targets
    perfguard never builds). The package is entered without running its __init__ and only the CPU
    modules are imported; any other module of it still imports on first use."""
    if "tvm.s_tir.tensor_intrin" not in sys.modules:
        import tvm.s_tir

        spec = importlib.util.find_spec("tvm.s_tir.tensor_intrin")
        assert spec is not None  # tvm.s_tir was just imported
        package = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = package
        saved = inspect.stack
        inspect.stack = _fast_stack
        try:
            for name in CPU_INTRINSICS:
                importlib.import_module(f"{spec.name}.{name}")
        except BaseException:
            del sys.modules[spec.name]
            raise
        finally:
            inspect.stack = saved
        tvm.s_tir.tensor_intrin = package
    from tvm.s_tir import meta_schedule

    return meta_schedule


@contextmanager
def quiet_and_seeded(seed: int) -> Iterator[None]:
    """MetaSchedule logs every iteration to stdout (perfguard shows its own progress), and its
    XGBoost cost model scores candidates with numpy's global generator until it has data: seed
    that too, or the same --seed would not give the same trials."""
    logger = logging.getLogger(_LOGGER)
    saved_level, saved_state = logger.level, np.random.get_state()
    logger.setLevel(logging.ERROR)
    np.random.seed(seed)
    try:
        yield
    finally:
        logger.setLevel(saved_level)
        np.random.set_state(saved_state)


def _classes():
    """The builder, runner and future classes (defined on first use: they need TVM)."""
    ms = import_meta_schedule()
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerResult

    @derived_object
    class SimBuilder(PyBuilder):
        """Builds candidates with perfguard's toolchain: TVM object + C harness, linked."""

        def __init__(self, session: CandidateSession):
            super().__init__()
            self.session = session

        def build(self, build_inputs: list) -> list:
            s = self.session
            specs, artifacts = [], []
            for build_input in build_inputs:
                spec, artifact = s.stage(build_input.mod)
                specs.append(spec)
                artifacts.append(artifact)
            results = s.measurer.executor.map(build_job, [s.measurer.job(spec) for spec in specs])
            out = []
            for spec, artifact, result in zip(specs, artifacts, results):
                if result.ok:
                    out.append(BuilderResult(str(artifact), None))
                else:
                    s.build_failed(spec, result)
                    out.append(BuilderResult(None, result.error))
            return out

    @derived_object
    class SimRunnerFuture(PyRunnerFuture):
        def __init__(self, session: CandidateSession, pending: dict):
            super().__init__()
            self.session, self.pending = session, pending

        def done(self) -> bool:
            return self.session.done(self.pending)

        def result(self) -> Any:
            trial = self.session.finish(self.pending)
            return RunnerResult([trial.predicted_s], None) if trial.ok else RunnerResult(None, trial.error)

    @derived_object
    class SimRunner(PyRunner):
        """Runs candidates in parallel simulators; the measurement is the predicted time."""

        def __init__(self, session: CandidateSession):
            super().__init__()
            self.session = session

        def run(self, runner_inputs: list) -> list:
            s = self.session
            pendings = [s.submit(Path(runner_input.artifact_path)) for runner_input in runner_inputs]
            if s.measurer.measure_kind == "native":  # timings one at a time, the pool idle
                s.measure_native(pendings)
            return [SimRunnerFuture(s, pending) for pending in pendings]

    return ms, SimBuilder, SimRunner


def candidate_spec(base: KernelSpec, family: str, shape: dict[str, Any], name: str, ir: str) -> KernelSpec:
    """A candidate as a kernel: its module travels as TVM JSON, the family's reference checks it."""
    return KernelSpec(
        name,
        "perfguard.tune.apply:candidate",
        family,
        {"ir": ir, "family": family, "shape": shape},
        reference="perfguard.tune.apply:reference",
        outputs=base.outputs,
        rtol=base.rtol,
        atol=base.atol,
    )


class CandidateSession:
    """What the builder and runner share: the measurer, the scratch folder, the candidates."""

    def __init__(self, measurer: Measurer, base: KernelSpec, shape: dict[str, Any], work_dir: Path):
        self.measurer, self.base, self.shape = measurer, base, shape
        self.work_dir = work_dir
        self.count = 0

    def stage(self, mod) -> tuple[KernelSpec, Path]:
        """A candidate module -> its kernel spec and a scratch artifact naming it."""
        import tvm

        self.count += 1
        spec = self.spec_of(f"{self.base.name}-ms{self.count}", tvm.ir.save_json(mod))
        folder = self.work_dir / "artifacts" / uuid.uuid4().hex
        folder.mkdir(parents=True)
        artifact = folder / "candidate.json"
        artifact.write_text(json.dumps({"name": spec.name, "ir": spec.params["ir"]}))
        return spec, artifact

    def spec_of(self, name: str, ir: str) -> KernelSpec:
        return candidate_spec(self.base, self.measurer.family, self.shape, name, ir)

    def build_failed(self, spec: KernelSpec, result) -> None:
        self.measurer.fail(self.measurer.new_trial(spec.name), "build", result.error, result.seconds)

    def submit(self, artifact: Path) -> dict:
        data = json.loads(artifact.read_text())
        spec = self.spec_of(data["name"], data["ir"])
        trial = self.measurer.new_trial(spec.name)
        pending = {"trial": trial, "spec": spec, "handle": None, "finished": False}
        if self.measurer.measure_kind == "sim":
            pending["handle"] = self.measurer.executor.submit(run_job, self.measurer.job(spec))
        return pending

    def measure_native(self, pendings: list[dict]) -> None:
        m = self.measurer
        results = m.executor.map(native_check_job, [m.job(p["spec"]) for p in pendings])
        for pending, result in zip(pendings, results):
            m.time(pending["trial"], result)
            pending["finished"] = True

    def done(self, pending: dict) -> bool:
        return pending["finished"] or pending["handle"].done()

    def finish(self, pending: dict) -> Trial:
        if not pending["finished"]:
            pending["finished"] = True
            self.measurer.score(pending["trial"], pending["handle"].result())
        return pending["trial"]


def target_for(profile) -> Any:
    """The profile's TVM target as MetaSchedule wants it (num-cores: the harness is single-threaded)."""
    import tvm

    return tvm.target.Target({**profile.tvm_target, "num-cores": 1})


def tune(
    measurer: Measurer,
    base: KernelSpec,
    shape: dict[str, Any],
    strategy: str,
    trials: int,
    batch: int,
    seed: int = 0,
    work_dir: Path | None = None,
) -> tuple[list[Trial], list | None]:
    """MetaSchedule over the family's unscheduled compute; (trials, best trace as JSON or None)."""
    ms, SimBuilder, SimRunner = _classes()
    mod = compute_module(measurer.family, shape)
    target = target_for(measurer.profile)
    with tempfile.TemporaryDirectory(prefix="perfguard-tune-", dir=work_dir) as scratch:
        session = CandidateSession(measurer, base, shape, Path(scratch))
        with quiet_and_seeded(seed):
            database = ms.tune_tir(
                mod,
                target,
                scratch,
                max_trials_global=trials,
                num_trials_per_iter=batch,
                builder=SimBuilder(session),
                runner=SimRunner(session),
                database="memory",
                cost_model="xgb",
                strategy=STRATEGIES[strategy],
                num_tuning_cores=1,
                seed=seed,
            )
        # MetaSchedule files a failed candidate at 1e10 s: only real measurements compete
        scored = [
            (float(r.run_secs[0]), i, r)
            for i, r in enumerate(database.get_all_tuning_records())
            if r.run_secs and float(r.run_secs[0]) < 1e9
        ]
    trace = plain(min(scored, key=lambda x: x[:2])[2].trace.as_json()) if scored else None
    return measurer.trials, trace
