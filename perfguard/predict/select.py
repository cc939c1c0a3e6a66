"""Which predictor scores a target and kernel family.

The calibrated model in baselines/models/<target>/<family>.json when there is one and `calibrate
train` found it better than the pipeline model on shapes it was not selected on (auto_uses); otherwise
the pipeline model (llvm-mca cycles per executed block) for simulators that record a block
profile (QEMU), the count-based analytical model for the others. `model` (perfguard.toml's
`model`) names one instead: "pipeline" or "analytical" ("auto" is the rule above). A model file that exists but cannot be used (corrupted, another
schema, trained for another profile or simulator) is an error naming it, not a silent
fall-back to the analytical model: a gate must not quietly change its yardstick. So is a model
whose pipeline features were computed by another pipeline model than this perfguard's (the
pipeline model changed: retrain, one command).

A target whose `machine` profile carries a model for the family (one trained on that CPU's own
native runs, perfguard.machines) is scored with it when the project has none of its own: the
project's baselines/models are what it trained itself, on purpose, and come first.
"""

from __future__ import annotations

from pathlib import Path

from perfguard.config import default_cache_dir
from perfguard.errors import InputError
from perfguard.judging import MODEL_NAMES
from perfguard.machines import MachineProfile
from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.predict.calibrated import CalibratedModel
from perfguard.predict.pipeline import PipelineModel
from perfguard.predict.store import ModelFiles, StoredModel, load_model, model_path
from perfguard.sim.base import block_profile_simulators, records_blocks
from perfguard.sim.mca_tools import timing_cache_dir
from perfguard.targets import TargetProfile

_LOADED: dict[tuple[str, float], StoredModel] = {}


def stored_model(
    baseline_dir: Path, target: str, family: str | None, source: ModelFiles | None = None
) -> StoredModel | None:
    """The model for a target and family; `source` reads it from a revision (None: the working tree)."""
    if family is None:
        return None
    path = model_path(baseline_dir, target, family)
    if source is not None:
        found = source.read_file(path.relative_to(baseline_dir).as_posix())
        return None if found is None else load_model(path, text=found[0], source=found[1])
    return _loaded(path)


def machine_model(machine: MachineProfile | None, isa: str, family: str | None) -> StoredModel | None:
    """The model a machine profile carries for `family` on `isa` (its file checked at load)."""
    path = None if machine is None or family is None else machine.model_file(isa, family)
    return None if path is None else _loaded(path)


def calibrated_model(
    baseline_dir: Path | None,
    profile: TargetProfile,
    family: str | None,
    source: ModelFiles | None = None,
    machine: MachineProfile | None = None,
) -> tuple[StoredModel | None, bool]:
    """The project's own model of the family, else the one the target's machine profile carries,
    whether or not `auto` uses it; and whether it is the machine's."""
    own = None if baseline_dir is None else stored_model(baseline_dir, profile.name, family, source)
    return (own, False) if own is not None else (machine_model(machine, profile.isa, family), True)


def _loaded(path: Path) -> StoredModel | None:
    """A model file of the working tree, read once per modification (None: there is none)."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    key = (str(path), mtime)
    if key not in _LOADED:
        _LOADED[key] = load_model(path)
    return _LOADED[key]


def predictor_for(
    profile: TargetProfile,
    family: str | None,
    simulator: str = "qemu",
    baseline_dir: Path | None = None,
    source: ModelFiles | None = None,
    cache_dir: Path | None = None,
    model: str = "auto",
    params: dict | None = None,
    machine: MachineProfile | None = None,
) -> Predictor:
    """The predictor that scores a kernel of `family` on `profile`. With the kernel's `params`, a
    calibrated model is used only for a dtype it was trained on (a float32 model says nothing
    about float16 code): other kernels get what a target without a model gets."""
    cache_dir = default_cache_dir() if cache_dir is None else cache_dir
    if model == "analytical":
        return AnalyticalModel(profile)
    if model == "pipeline":
        if not records_blocks(simulator):
            use = " or ".join(f'simulator = "{name}"' for name in block_profile_simulators())
            raise InputError(
                f'model = "pipeline" needs a block profile, which the {simulator} simulator '
                f'does not record (use {use} or model = "analytical")'
            )
        return _pipeline(profile, cache_dir)
    if model != "auto":
        raise InputError(f"unknown model '{model}' (one of {', '.join(MODEL_NAMES)})")
    stored, from_machine = calibrated_model(baseline_dir, profile, family, source, machine)
    if stored is not None and params is not None and kernel_dtype(params) not in trained_dtypes(stored.meta):
        stored = None
    if stored is not None and not auto_uses(stored.meta):
        stored = None  # it did not beat the pipeline model on shapes it was not selected on
    if stored is None:
        if records_blocks(simulator):
            return _pipeline(profile, cache_dir)
        return AnalyticalModel(profile)
    meta = stored.meta
    # a machine's model was trained under its collector's target name: the fingerprint below is what must match
    if (meta["target"] != profile.name and not from_machine) or meta["family"] != family:
        raise InputError(
            f"{stored.path}: model is for {meta['family']} on {meta['target']}, not {family} on {profile.name}"
        )
    if meta["simulator"] != simulator:
        raise InputError(
            f"{stored.path}: model was trained on {meta['simulator']} statistics, this run uses {simulator}"
        )
    if meta.get("profile_fingerprint") != profile.fingerprint():
        raise InputError(
            f"{stored.path}: model was trained for a different '{profile.name}' profile "
            f"(codegen or cache geometry changed); retrain with 'perfguard calibrate train'"
        )
    calibrated = CalibratedModel(stored.predictor, profile, cache_dir, meta)
    if calibrated.needs_blocks and meta.get("pipeline_model_id") != calibrated.featurizer.pipeline_id:
        raise InputError(
            f"{stored.path}: model's pipeline features came from {meta.get('pipeline_model_id')}, this "
            f"perfguard's pipeline model is {calibrated.featurizer.pipeline_id}; retrain with "
            f"'perfguard calibrate train --target {profile.name}'"
        )
    return calibrated


def auto_uses(meta: dict) -> bool:
    """Whether `model = "auto"` scores with a stored model: `calibrate train` records whether it beat
    the pipeline model on held-out shapes (meta["auto"]); files written before that are used."""
    decision = meta.get("auto")
    return not isinstance(decision, dict) or decision.get("use") is not False


def kernel_dtype(params: dict) -> str:
    """The dtype a kernel computes in (its `dtype` parameter; the families' default is float32)."""
    return str(params.get("dtype", "float32"))


def trained_dtypes(meta: dict) -> list[str]:
    """The dtypes of the rows a model was trained on; files written before models recorded them
    come from float32 datasets (the only dtype `calibrate collect` sampled then)."""
    return list(meta.get("dtypes", ["float32"]))


def _pipeline(profile: TargetProfile, cache_dir: Path) -> Predictor:
    return PipelineModel(profile, timing_cache_dir(cache_dir))
