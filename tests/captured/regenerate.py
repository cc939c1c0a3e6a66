"""Capture, from real runs, the statistics the judge and calibration tests read (tests/captured/).

    cd <repository root>
    PERFGUARD_CACHE_DIR=/tmp/golden-cache python -m tests.report.golden.regenerate --only captured

(`python -m tests.report.golden.regenerate` with no --only writes these and the golden reports.)
Run it when tests/runs/test_captured.py says a file is stale (a kernel, the harness, the
toolchain or the simulator changed), then review the diff and commit it. It writes:

- jobs/<name>.json: each of CAPTURES built by TVM, cross-compiled and simulated under QEMU
  (perfguard.job.run.run_job): statistics with the block profile, the loop nest, the build key.
- resnet.json: the kernels real TVM extracts from a small ResNet before and after each edit
  (tests/captured/resnet.py), for the model-change tests.
- models/<predictor>.json: each predictor fitted on synthetic statistics (captured.synthetic_stats),
  the documents the model reader's property tests (tests/input/test_fuzz.py) edit.
- calibration/x86_64-gemm.json: `calibrate collect` of gemm on x86_64, three shapes of six
  variants each, simulated and timed natively on this machine (no timing rejected as unsteady or
  beside busy CPUs: the tests recompute every figure from the rows, whatever the times are).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from perfguard.atomic import atomic_write_text
from tests.captured import CAPTURES, DATASET, model_file, record, synthetic_stats

GROUPS = [{"M": 32, "N": 32, "K": 32}, {"M": 64, "N": 32, "K": 32}, {"M": 32, "N": 64, "K": 64}]
VARIANTS = 6


def jobs(cache: Path) -> None:
    from perfguard.job.run import Job, run_job
    from perfguard.targets import BUILTIN

    root = Path(__file__).resolve().parents[2]
    for capture in CAPTURES.values():
        result = run_job(Job(capture.spec, BUILTIN[capture.target], root, cache, "qemu", 600, 1, 1))
        if not result.ok:
            raise SystemExit(f"{capture.name}: {result.error}")
        capture.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(capture.path, record(result))
        print(f"wrote {capture.path}")


def dataset(cache: Path) -> None:
    from perfguard.config import load_config
    from perfguard.job.native import QuietPolicy
    from perfguard.runs.calibration import collect

    with tempfile.TemporaryDirectory(prefix="captured-calibration-") as tmp:
        (Path(tmp) / "perfguard.toml").write_text(f'[perfguard]\ntargets = ["x86_64"]\ncache_dir = "{cache}"\n')
        config = load_config(Path(tmp) / "perfguard.toml")
        collected = collect(
            config,
            config.profile("x86_64"),
            "gemm",
            GROUPS,
            VARIANTS,
            workers=2,
            max_cv=100.0,
            quiet=QuietPolicy(bound=None),
        )
    if collected.failed or len(collected.dataset.rows) != len(GROUPS) * VARIANTS:
        raise SystemExit(f"the collection lost rows: {collected.failed}")
    DATASET.parent.mkdir(parents=True, exist_ok=True)
    collected.dataset.save(DATASET)
    print(f"wrote {DATASET}")


def models(cache: Path) -> None:
    from tests.captured import resnet

    atomic_write_text(
        resnet.CAPTURE, resnet.text({name: resnet.extract(edit, cache) for name, edit in resnet.EDITS.items()})
    )
    print(f"wrote {resnet.CAPTURE}")


def fitted() -> None:
    from perfguard.predict.features import matrix
    from perfguard.predict.registry import PREDICTORS
    from perfguard.predict.store import save_model

    stats, times, groups = synthetic_stats(24)
    for name in sorted(PREDICTORS):
        predictor = PREDICTORS[name]()
        predictor.fit(matrix(stats, "counts", predictor.view), times, groups)
        path = model_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_model(path, predictor, {"target": "x86_64", "family": "gemm", "simulator": "qemu", "features": []})
        print(f"wrote {path}")


def main(cache: Path) -> None:
    jobs(cache)
    models(cache)
    fitted()
    dataset(cache)
