"""Statistics captured from real runs (see regenerate.py), for the tests of the layers that read
them: the judge names loops from a job's block profile and loop nest, calibration evaluates and
trains on a collected dataset. Each file records what it was made with (the build key, the
simulator's fingerprint), so tests/runs/test_captured.py says when one is stale. Beside them, one
fitted model file per predictor (models/), which the model reader's property tests start from."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from perfguard.config import KernelSpec
from perfguard.job.run import JobResult
from perfguard.sim.stats import STAT_FIELDS, Stats

HERE = Path(__file__).resolve().parent
JOBS = HERE / "jobs"
DATASET = HERE / "calibration" / "x86_64-gemm.json"  # gemm on x86_64: 3 shapes x 6 variants, timed natively
MODELS = HERE / "models"  # <predictor>.json: each predictor fitted on synthetic_stats(24), as save_model writes it
REGENERATE = "PERFGUARD_CACHE_DIR=/tmp/golden-cache python -m tests.report.golden.regenerate --only captured"


@dataclass(frozen=True)
class Capture:
    """One kernel on one target, built and simulated under QEMU by regenerate.py."""

    name: str  # <kernel>-<target>
    target: str
    params: dict
    family: str | None = "gemm"
    entry: str | None = None  # a user kernel (family None): module:function from the repository's root
    reference: str | None = None
    outputs: int | None = None
    inputs: dict | None = None  # input name -> how it is drawn (a kernel's `inputs` key)

    @property
    def spec(self) -> KernelSpec:
        return KernelSpec(
            self.name.rsplit("-", 1)[0],
            self.entry or f"perfguard.kernels.{self.family}:{self.family}",
            self.family,
            dict(self.params),
            reference=self.reference,
            outputs=self.outputs,
            inputs=self.inputs,
        )

    @property
    def path(self) -> Path:
        return JOBS / f"{self.name}.json"


_ATTRIBUTION = dict(M=64, N=64, K=256, tile_m=16, tile_n=32, vector=8, unroll=0)
CAPTURES = {
    c.name: c
    for c in (
        # tests/judge/test_loop_attribution.py: the k_1 loop of tile_k 64, unrolled away at tile_k 16
        *(Capture(f"gemm_k{k}-{t}", t, {**_ATTRIBUTION, "tile_k": k}) for t in ("x86_64", "aarch64") for k in (64, 16)),
        # the zeroing and the product loops of one count (i_1_init and i_1)
        Capture(
            "gemm_init-x86_64", "x86_64", dict(M=512, N=64, K=128, tile_m=16, tile_n=64, tile_k=32, vector=8, unroll=16)
        ),
        # tests/predict/test_pipeline_model.py: scalar against 8-wide vector code
        *(
            Capture(f"{family}_v{v}-x86_64", "x86_64", {**shape, "vector": v}, family)
            for family, shape in (("dense_relu", dict(B=8, I=256, O=128)), ("gemv", dict(M=256, K=256)))
            for v in (8, 1)
        ),
        # tests/judge/test_loop_attribution.py: the cookbook's arg-max split in 8 and in 4 (LLVM unrolls
        # k_0[4], leaving the partial results' and the combining nest of one shape)
        *(
            Capture(
                f"argmax_s{split}-x86_64",
                "x86_64",
                dict(R=16, N=256, split=split, order="ik"),
                None,
                "examples.cookbook.recipes.argmax:argmax",
                "examples.cookbook.recipes.argmax:argmax_ref",
                2,
            )
            for split in (8, 4)
        ),
        # ... and a 2-D tiled stencil with its column lanes vectorised and not (tests/captured/kernels.py)
        *(
            Capture(
                f"stencil2d_v{v}-x86_64",
                "x86_64",
                dict(H=64, W=64, ti=8, tj=16, vector=v),
                None,
                "tests.captured.kernels:stencil2d",
                "tests.captured.kernels:stencil2d_ref",
            )
            for v in (8, 1)
        ),
        # ... the cookbook's stencil with its column lanes j_1 vectorised by TVM and not (LLVM then
        # vectorises the column loop itself)
        *(
            Capture(
                f"stencil_v{v}-x86_64",
                "x86_64",
                dict(H=32, W=64, tile=8, vector=v),
                None,
                "examples.cookbook.recipes.stencil:stencil",
                "examples.cookbook.recipes.stencil:stencil_ref",
            )
            for v in (8, 1)
        ),
        # ... and an embedding gather (int64 indices) whose column chunks j_0 are moved outside its
        # rows i: LLVM unrolls j_0, each of its 8 copies setting up a copy of i (a new user's regression)
        *(
            Capture(
                f"embed_{order}-x86_64",
                "x86_64",
                dict(V=1024, D=64, N=128, idx_dtype="int64", vector=8, order=order),
                None,
                "tests.captured.kernels:embed",
                "tests.captured.kernels:embed_ref",
                inputs={"idx": {"low": 0, "high": 1024, "seed": None}},
            )
            for order in ("ij", "ji")
        ),
    )
}


@cache
def _document(name: str) -> dict:
    return json.loads(CAPTURES[name].path.read_text())


def job(name: str) -> JobResult:
    """The captured result of a real run: its statistics with their block profile and its loop nest."""
    data = _document(name)
    return JobResult(
        data["kernel"],
        data["target"],
        data["family"],
        dict(data["params"]),
        data["simulator"],
        True,
        stats=Stats.from_dict(data["stats"], str(CAPTURES[name].path)),
        content_hash=data["content_hash"],
        binary_hash=data["binary_hash"],
        toolchain=dict(data["toolchain"]),
        loops=data["loops"],
    )


def record(result: JobResult) -> str:
    """What a capture file holds: the result's identity, its build and simulator, its statistics and loops."""
    data = {
        "kernel": result.kernel,
        "target": result.target,
        "family": result.family,
        "params": result.params,
        "simulator": result.simulator,
        "content_hash": result.content_hash,
        "binary_hash": result.binary_hash,
        "toolchain": result.toolchain,
        "stats": result.stats.to_record(),
        "loops": result.loops,
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def synthetic_stats(n: int) -> tuple[list[Stats], np.ndarray, np.ndarray]:
    """n statistics whose time follows a known law (instructions and L1 misses), in three groups."""
    rng = np.random.default_rng(1)
    stats, times = [], []
    for _ in range(n):
        insts = int(rng.uniform(1e5, 1e6))
        misses = int(insts * rng.uniform(0.001, 0.05))
        stats.append(
            Stats(
                **{
                    **{k: insts // 4 for k in STAT_FIELDS},
                    "insts": insts,
                    "l1d_misses": misses,
                    "l2_misses": misses // 4,
                }
            )
        )
        times.append(1e-9 * (0.3 * insts + 15 * misses))
    return stats, np.array(times), np.array([f"g{i % 3}" for i in range(n)])


def model_file(name: str) -> Path:
    return MODELS / f"{name}.json"
