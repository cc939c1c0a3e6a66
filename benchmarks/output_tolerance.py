"""What the built-in families need of the output check's default tolerance, on every ISA.

For each kernel x target it simulates the kernel (checked loosely, so nothing fails here), reads
the raw outputs back from the cache and reports needed_tolerance: the smallest t
with |kernel - reference| <= t * |reference| + t * max|reference| everywhere. The default
(verify.DEFAULT_TOL) must stay well above the largest figure. Kernels: this repository's
perfguard.toml, and per family the first variants of its knob space (other loop orders, tiles,
vector widths: other summation orders) at a shape with a long reduction.

    python benchmarks/output_tolerance.py [--variants 3] [-j 2]
    python benchmarks/output_tolerance.py --fp16 [--variants 3] [-j 2]

--fp16 measures the float16 kernels instead (the config's, and gemm variants with K = 1024) on
x86_64, aarch64 and aarch64dot (riscv64's gcc 12 cannot build float16 harnesses).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from perfguard.compile.cache import BuildCache  # noqa: E402
from perfguard.compile.inputs import decode_outputs, generate  # noqa: E402
from perfguard.config import KernelSpec, load_config  # noqa: E402
from perfguard.executors import LocalExecutor  # noqa: E402
from perfguard.job.run import resolve_kernel, run_job, simulation_key  # noqa: E402
from perfguard.job.verify import DEFAULT_TOL, reference_outputs, resolve_reference  # noqa: E402
from perfguard.kernels import get_family  # noqa: E402
from perfguard.runs.check import make_jobs  # noqa: E402
from perfguard.sim.base import get_simulator  # noqa: E402

ISAS = ("x86_64", "aarch64", "riscv64")
# Long reductions, small outputs: K (gemm, gemv, dense_relu), C x R x S (conv2d), R x S (depthwise).
LONG = {
    "gemm": dict(M=16, N=16, K=2048),
    "gemv": dict(M=64, K=4096),
    "dense_relu": dict(B=4, I=2048, O=32),
    "conv2d": dict(C=128, H=8, W=8, F=16, R=3, S=3, stride=1, padding=1),
    "depthwise_conv2d": dict(C=16, H=16, W=16, R=7, S=7, padding=3),
}
LOOSE = dict(rtol=0.5, atol=1e30)  # nothing fails while measuring
HALF_ISAS = ("x86_64", "aarch64", "aarch64dot")
HALF_LONG = {"gemm": dict(M=16, N=32, K=1024, dtype="float16")}


def needed_tolerance(got: np.ndarray, want: np.ndarray) -> float:
    """The smallest t with |got - want| <= t * |want| + t * max|want| everywhere: what the default
    tolerance must be at least for this output to pass."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    largest = float(np.max(np.abs(want))) if want.size else 0.0
    denominator = np.abs(want) + (largest if largest > 0 else 1.0)
    return float(np.max(np.abs(got - want) / denominator)) if want.size else 0.0


def is_half(spec: KernelSpec) -> bool:
    return spec.params.get("dtype") == "float16"


def specs(config, variants: int, half: bool = False) -> list[KernelSpec]:
    out = [dataclasses.replace(k, **LOOSE) for k in config.kernels if is_half(k) == half]
    for family, shape in (HALF_LONG if half else LONG).items():
        fam = get_family(family)
        for i, params in enumerate(itertools.islice(fam.space(**shape), 0, None, 37)):
            if i >= variants:
                break
            out.append(
                KernelSpec(
                    f"{family}_long_{i}", f"{fam.entry.__module__}:{fam.entry.__name__}", family, params, **LOOSE
                )
            )
    return out


def needed(job, result) -> float:
    lowered, _, family = resolve_kernel(job.kernel, job.root, job.label)
    fingerprint = get_simulator(job.simulator, job.cache_dir).fingerprint(job.profile)
    raw = BuildCache(job.cache_dir).lookup_outputs(simulation_key(job, result.binary_hash, fingerprint))
    outputs = decode_outputs(raw, lowered.tensors)
    ref = resolve_reference(job.kernel, job.root, lowered, family, job.label)
    inputs = [generate(t) for t in lowered.tensors if not t.output]
    expected = reference_outputs(job.kernel, ref, lowered, inputs, job.label)
    return max(needed_tolerance(g, w) for g, w in zip(outputs, expected))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=3, help="knob-space variants per family")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--fp16", action="store_true", help="the float16 kernels, on x86_64, aarch64 and aarch64dot")
    args = ap.parse_args()
    isas, dtype = (HALF_ISAS, "float16") if args.fp16 else (ISAS, "float32")
    config = load_config(REPO / "perfguard.toml")
    config = dataclasses.replace(config, kernels=tuple(specs(config, args.variants, args.fp16)))
    jobs = make_jobs(config, [(k, t) for k in config.kernels for t in isas if k.targets is None or t in k.targets])
    with LocalExecutor(args.j) as executor:
        results = executor.map(run_job, jobs)
    rows, worst = [], {}
    for job, result in zip(jobs, results):
        if not result.ok:
            print(f"failed: {result.error}", file=sys.stderr)
            return 3
        t = needed(job, result)
        rows.append((job.kernel.name, job.profile.name, t))
        worst[job.profile.name] = max(worst.get(job.profile.name, 0.0), t)
    print("| kernel | " + " | ".join(isas) + " |")
    print("| --- |" + " ---: |" * len(isas))
    found = {(k, i): t for k, i, t in rows}
    for name in dict.fromkeys(r[0] for r in rows):
        cells = [f"{found[name, isa]:.2e}" if (name, isa) in found else "-" for isa in isas]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| **largest** | " + " | ".join(f"**{worst[i]:.2e}**" if i in worst else "-" for i in isas) + " |")
    print(
        f"\n{dtype} default tolerance: {DEFAULT_TOL[dtype]:.0e}, "
        f"{DEFAULT_TOL[dtype] / max(worst.values()):.0f}x the largest need"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
