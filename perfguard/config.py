"""perfguard.toml (or [tool.perfguard] in pyproject.toml) -> validated dataclasses.

Every error names the file and the key; unknown keys are errors, not silently ignored,
because a misspelt threshold that quietly falls back to the default is a gate that lies.

The [perfguard] table is read in sections (perfguard.sections), each a frozen dataclass owned by
the layer that uses it: `Simulation` (sim/settings.py), `Judging` (judging.py), and here `Storage`
(the folders, resolved against the config's) and `DriftLimits` (`calibrate drift`, runs/calibration.py,
which sits above this module). `Config` keeps what every layer shares: the file, its targets and
profiles, the kernels and models, `jobs` and `require_reference`.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from perfguard import flopcount, jsonfile, machines
from perfguard.compile.inputs import parse_inputs
from perfguard.errors import InputError, did_you_mean
from perfguard.judging import Judging, Limit, parse_limits
from perfguard.sections import KeyDocs, Table, flag, number, string_list
from perfguard.sim.settings import Simulation
from perfguard.targets import BUILTIN, TargetProfile, profile_from_config
from perfguard.user_code.imports import callable_hint, callable_parts

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def default_cache_dir() -> Path:
    env = os.environ.get("PERFGUARD_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfguard"


@dataclass(frozen=True)
class Storage:
    """The folders perfguard reads and writes, absolute (a relative path starts at the config's folder)."""

    baseline_dir: Path
    report_dir: Path
    cache_dir: Path

    KEYS: ClassVar[KeyDocs] = {
        "baseline_dir": ("path", '"baselines"', "the committed baselines (and calibrated models, datasets)"),
        "report_dir": ("path", '"reports"', "where perfguard.json, index.html and summary.md are written"),
        "cache_dir": (
            "path",
            "`$PERFGUARD_CACHE_DIR`, else `~/.cache/perfguard`",
            "the content-addressed build and simulation cache",
        ),
    }

    @classmethod
    def parse(cls, table: Table) -> Storage:
        def folder(key: str, default: str) -> Path:
            value = table.get(key, default)
            if not isinstance(value, str) or not value or "\x00" in value:
                raise InputError(f"{table.where(key)}: must be a path string")
            # A relative path may not climb out: a baseline folder elsewhere is written out in full.
            if not os.path.isabs(value) and os.path.normpath(value).split(os.sep)[0] == os.pardir:
                raise InputError(
                    f"{table.where(key)}: '{value}' leads outside the config's folder {table.root} "
                    f"(write an absolute path to mean a folder elsewhere)"
                )
            return (table.root / value).resolve()

        cache_dir = folder("cache_dir", ".") if "cache_dir" in table else default_cache_dir()
        return cls(folder("baseline_dir", "baselines"), folder("report_dir", "reports"), cache_dir)


@dataclass(frozen=True)
class DriftLimits:
    """When `calibrate drift` says a calibrated model must be trained again (runs/calibration_models.drift)."""

    mape: float = 15.0  # percent: a model whose error on fresh native runs exceeds it has drifted
    spearman: float = 0.9  # ... or whose rank correlation falls below it

    KEYS: ClassVar[KeyDocs] = {
        "drift_mape": (
            "number, percent",
            "15.0",
            "`calibrate drift`: a calibrated model whose error on fresh native runs exceeds this has drifted",
        ),
        "drift_spearman": ("number", "0.9", "`calibrate drift`: ... or whose rank correlation falls below this"),
    }

    @classmethod
    def parse(cls, table: Table) -> DriftLimits:
        return cls(
            number(table.get("drift_mape", cls.mape), table.where("drift_mape")),
            number(table.get("drift_spearman", cls.spearman), table.where("drift_spearman")),
        )


# The keys Config reads itself; each section declares its own. Together they are [perfguard]'s keys.
_OWN_KEYS: KeyDocs = {
    "targets": (
        "list of target names",
        '["x86_64", "aarch64", "riscv64"]',
        "the target ISAs every kernel is built for and simulated on (built-in or `[target.NAME]`)",
    ),
    "jobs": (
        "integer >= 1",
        "one per 4 jobs to run, up to the CPU count (tune: the CPU count)",
        "kernels built and simulated in parallel",
    ),
    "require_reference": (
        "boolean",
        "false",
        "every kernel must name a numpy `reference` (no self-consistency check only)",
    ),
}
SECTIONS = (Simulation, Judging, Storage, DriftLimits)  # in the order they are parsed and documented
_TOP_KEYS = {*_OWN_KEYS, *(key for section in SECTIONS for key in section.KEYS)}

# The configuration reference: table -> key -> (type, default, meaning), and the one list of the keys
# [[kernel]] and [[model]] accept (_KERNEL_KEYS, _MODEL_KEYS below are its keys): a key cannot be
# added without its documentation. docs/configuration.md is generated from it (scripts/docs_reference.py).
KEY_DOCS: dict[str, KeyDocs] = {
    "perfguard": {
        "targets": _OWN_KEYS["targets"],
        **{key: doc for section in SECTIONS for key, doc in section.KEYS.items()},
        **_OWN_KEYS,
    },
    "kernel": {
        "name": ("string, required", "", "the kernel's name: its baseline file and report rows"),
        "entry": (
            "`module:function`, required",
            "",
            "called with `params`, returns a TVM IRModule whose PrimFunc `main` takes the inputs, then the "
            "outputs; imported from the config's folder",
        ),
        "family": (
            "string",
            "none",
            "a built-in family (see Kernel families): its knobs, reference and flop count; "
            "`entry` must be that family's (else the kernel is refused). Another name "
            "only labels the kernel",
        ),
        "params": ("table", "{}", "the keywords `entry` is called with (a family's knobs)"),
        "threshold": ("number, percent", "`[perfguard].threshold`", "this kernel's own threshold"),
        "reference": (
            "`module:function`",
            "the family's, else the kernel built for the host",
            "numpy `reference(inputs, **params)` returning the outputs",
        ),
        "targets": ("list of target names", "every target", "only these of `[perfguard].targets`"),
        "outputs": ("integer >= 1", "1 (a family's count)", "how many trailing arguments of `main` are outputs"),
        "rtol": (
            "number in [0, 1)",
            "per dtype: 1e-5 float32, 1e-12 float64, exact integers",
            "the output check's relative tolerance",
        ),
        "atol": ("number >= 0", "rtol's default x max abs(reference)", "the output check's absolute tolerance"),
        "flops": (
            "expression or `module:function`",
            "the family's count, else none",
            'floating-point operations per call, over params (`"2 * M * N * K"`): GFLOP/s, roofline',
        ),
        "limits": (
            "table metric -> limit",
            "`[perfguard].limits`",
            "this kernel's per-metric limits (replace the global one per metric)",
        ),
        "inputs": (
            "table input name -> { low, high, seed } or { file }",
            "floats uniform in [-1, 1), integers in [-8, 7]",
            "an input's values: uniform in [low, high) (integers low..high-1), its own `seed`, or "
            "a `.npy` file's (path from the config's folder; its shape and dtype the input's); the kernel "
            "and its reference see the same values",
        ),
    },
    "model": {
        "name": ("string, required", "", "the model's name; its kernels are `<name>.<operator>.<digest>`"),
        "source": (
            "`module:function` or `.onnx` path, required",
            "",
            "a function returning a Relax IRModule (or `(IRModule, params)`), or an ONNX file",
        ),
        "inputs": ("table name -> shape or { shape, dtype }", "{}", "shapes of inputs the source leaves symbolic"),
        "params": ("table", "{}", "keywords for a `module:function` source"),
        "threshold": ("number, percent", "`[perfguard].threshold`", "the model total's threshold"),
        "kernel_threshold": ("number, percent", "`[perfguard].threshold`", "each of its kernels' threshold"),
        "targets": ("list of target names", "every target", "only these of `[perfguard].targets`"),
        "database": ("path", "none", "a MetaSchedule JSON database folder: its tuned schedules are built"),
        "schedule": (
            '`"default"` or `"none"`',
            '`"default"`',
            "a kernel without a database record: TVM's default CPU schedule rules, or TVM's unscheduled loops",
        ),
        "skip": (
            "list of graph node or kernel names",
            "none",
            "calls not guarded (not built, not simulated, in no total), each said so",
        ),
    },
}
_KERNEL_KEYS = frozenset(KEY_DOCS["kernel"])
_MODEL_KEYS = frozenset(KEY_DOCS["model"])


@dataclass(frozen=True)
class KernelSpec:
    name: str
    entry: str  # "module:function"
    family: str | None
    params: dict[str, Any]
    threshold: float | None = None
    reference: str | None = None
    targets: tuple[str, ...] | None = None
    outputs: int | None = None
    rtol: float | None = None
    atol: float | None = None
    flops: str | None = None  # an expression over params or "module:function" (perfguard.flopcount)
    limits: dict[str, Limit] = field(default_factory=dict)  # its own per-metric limits: metric -> Limit
    # A kernel extracted from a [[model]] carries its PrimFunc as TVMScript
    # (the job rebuilds the module from it) and the model's name (the model total groups by it).
    ir: str | None = None
    model: str | None = None
    positions: tuple[int, ...] | None = None  # a model kernel: where its calls are in the model's call order
    # input name -> {"low", "high", "seed"} (parse_inputs): how its values are drawn; None: the defaults
    inputs: dict[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class ModelSpec:
    """A [[model]] entry: a Relax model whose every fused kernel is guarded, and its total."""

    name: str
    source: str  # "module:function" returning a Relax IRModule, or a path to an .onnx file
    inputs: dict[str, tuple[tuple[int, ...], str | None]]  # input name -> (shape, dtype or None: the file's)
    params: dict[str, Any]  # keywords for a "module:function" source
    threshold: float | None = None  # the model total's threshold (default: the global one)
    kernel_threshold: float | None = None  # each kernel's (default: the global one)
    targets: tuple[str, ...] | None = None
    database: str | None = None  # a MetaSchedule JSON database folder: its tuned schedules apply
    skip: tuple[str, ...] = ()  # graph nodes or kernel names whose calls are not guarded (kernels.models)
    schedule: str = "default"  # without a database record: "default" (kernels.model_schedule) | "none"

    @property
    def is_file(self) -> bool:
        return not callable_parts(self.source)


@dataclass(frozen=True)
class Config:
    path: Path
    root: Path  # the config file's folder: relative paths and user modules start here
    targets: tuple[str, ...]
    profiles: dict[str, TargetProfile]
    kernels: tuple[KernelSpec, ...]
    simulation: Simulation
    judging: Judging
    storage: Storage
    drift: DriftLimits = DriftLimits()
    jobs: int | None = None
    require_reference: bool = False  # every kernel must name a numpy reference (pipeline.py enforces it)
    models: tuple[ModelSpec, ...] = ()  # [[model]] entries; their kernels join `kernels` in runs.check.select
    # target -> the machine profile (perfguard.machines) its `[target.NAME] machine` chose; a target
    # without one is predicted by the generic pipeline model, uncalibrated
    machines: dict[str, str] = field(default_factory=dict)

    # A name from the command line is not the config's fault: `where` names the option instead.
    def kernel(self, name: str, where: str = "") -> KernelSpec:
        for spec in self.kernels:
            if spec.name == name:
                return spec
        raise InputError(
            f"{where + ': ' if where else ''}unknown kernel '{name}'"
            f"{did_you_mean(name, [k.name for k in self.kernels])} "
            f"(configured in {self.path}: {', '.join(k.name for k in self.kernels)})"
        )

    def profile(self, name: str, where: str = "") -> TargetProfile:
        if name not in self.profiles:
            raise InputError(
                f"{where + ': ' if where else ''}unknown target '{name}'"
                f"{did_you_mean(name, self.profiles)} (known: {', '.join(sorted(self.profiles))})"
            )
        return self.profiles[name]

    def with_cache_dir(self, cache_dir: Path) -> Config:
        """The same config over another cache (a revision's config measured into the caller's cache)."""
        return replace(self, storage=replace(self.storage, cache_dir=Path(cache_dir)))


def find_config(start: Path) -> Path:
    """perfguard.toml, else a pyproject.toml with [tool.perfguard], in `start` or a parent."""
    for folder in [start, *start.parents]:
        candidate = folder / "perfguard.toml"
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and "[tool.perfguard" in pyproject.read_text(errors="replace"):
            return pyproject
    raise InputError(f"no perfguard.toml found in {start} or its parents (use --config FILE)")


def load_config(path: Path | None = None, cwd: Path | None = None) -> Config:
    cwd = Path(cwd or Path.cwd())
    if path is None:
        path = find_config(cwd)
    path = Path(path)
    if not path.is_absolute():
        path = cwd / path
    if not path.is_file():
        raise InputError(f"{path}: config file not found")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: TOML syntax error: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        section = tool.get("perfguard") if isinstance(tool, dict) else None
        if not isinstance(section, dict):
            raise InputError(f"{path}: no [tool.perfguard] table")
        data = section
        top, kernels, targets = dict(data), data.get("kernel", []), data.get("target", {})
        top.pop("kernel", None)
        top.pop("target", None)
        # [[tool.perfguard.model]] shares its key with `model = "auto"` (the predictor): a list is the former
        data = {"model": top.pop("model") if isinstance(top.get("model"), list) else []}
        prefix = "tool.perfguard"
    else:
        unknown = sorted(set(data) - {"perfguard", "kernel", "target", "model"})
        if unknown:
            raise InputError(
                f"{path}: unknown key '{unknown[0]}'"
                f"{did_you_mean(unknown[0], ('perfguard', 'kernel', 'target', 'model'))} (expected "
                f"[perfguard], [[kernel]], [[model]], [target.NAME])"
            )
        top, kernels, targets = data.get("perfguard", {}), data.get("kernel", []), data.get("target", {})
        data = {"model": data.get("model", [])}
        prefix = "perfguard"
    models = data.get("model", [])
    config = _build(path, top, kernels, targets, prefix)
    return replace(config, models=_models(path, models, config))


def _build(path: Path, top: dict, kernels: Any, targets: Any, prefix: str) -> Config:
    if not isinstance(top, dict):
        raise InputError(f"{path}: [{prefix}] must be a table")
    unknown = sorted(set(top) - _TOP_KEYS)
    if unknown:
        raise InputError(f"{path}: unknown key '{prefix}.{unknown[0]}'{did_you_mean(unknown[0], _TOP_KEYS)}")
    table = Table(top, path, prefix)

    profiles = dict(BUILTIN)
    machine_names: dict[str, str] = {}
    if not isinstance(targets, dict):
        raise InputError(f"{path}: 'target' must be a table of [target.NAME] tables")
    for name, target in targets.items():
        if not isinstance(target, dict):
            raise InputError(f"{path}: target.{name} must be a table")
        if not _NAME.fullmatch(name):
            raise InputError(f"{path}: target name {name!r} has characters outside [A-Za-z0-9_.+-]")
        target = dict(target)
        # not a field of the profile: it chooses a calibration, never the code built or its statistics
        machine = target.pop("machine", None)
        profiles[name] = profile_from_config(name, target, f"{path}: target.{name}")
        if machine is not None:
            machine_names[name] = machines.check_choice(machine, profiles[name].isa, f"{path}: target.{name}.machine")

    target_names = string_list(top.get("targets", ["x86_64", "aarch64", "riscv64"]), table.where("targets"))
    for name in target_names:
        if name not in profiles:
            raise InputError(
                f"{table.where('targets')}: unknown target '{name}'{did_you_mean(name, profiles)} "
                f"(known: {', '.join(sorted(profiles))})"
            )
    simulation, judging, storage, drift = (
        Simulation.parse(table),
        Judging.parse(table),
        Storage.parse(table),
        DriftLimits.parse(table),
    )
    jobs = top.get("jobs")
    if jobs is not None:
        jobs = number(jobs, table.where("jobs"), 1, integer=True)
    require_reference = flag(top.get("require_reference", False), table.where("require_reference"))

    if not isinstance(kernels, list):
        raise InputError(f"{path}: 'kernel' must be an array of [[kernel]] tables")
    specs: list[KernelSpec] = []
    seen: set[str] = set()
    for i, kernel in enumerate(kernels):
        spec = parse_kernel(path, i, kernel, profiles)
        if spec.name in seen:
            raise InputError(f"{path}: kernel[{i}]: duplicate kernel name '{spec.name}'")
        seen.add(spec.name)
        specs.append(spec)

    return Config(
        path=path,
        root=path.parent,
        targets=target_names,
        profiles=profiles,
        kernels=tuple(specs),
        simulation=simulation,
        judging=judging,
        storage=storage,
        drift=drift,
        jobs=jobs,
        require_reference=require_reference,
        machines=machine_names,
    )


def _check_table(where: str, table: Any, keys: frozenset[str], required: tuple[str, ...]) -> None:
    """A [[kernel]] or [[model]] table: no unknown key, the required strings present."""
    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table")
    unknown = sorted(set(table) - keys)
    if unknown:
        raise InputError(
            f"{where}: unknown key '{unknown[0]}'"
            f"{did_you_mean(unknown[0], keys) or ' (known: ' + ', '.join(sorted(keys)) + ')'}"
        )
    for key in required:
        if not isinstance(table.get(key), str) or not table[key]:
            raise InputError(f"{where}: missing or empty '{key}'")


def parse_kernel(path: Path, i: int, table: Any, profiles: dict) -> KernelSpec:
    _check_table(f"{path}: kernel[{i}]", table, _KERNEL_KEYS, ("name", "entry"))
    name = table["name"]
    where = f"{path}: kernel '{name}'"
    if not _NAME.fullmatch(name):
        raise InputError(f"{path}: kernel {name!r}: name has characters outside [A-Za-z0-9_.+-]")  # one line
    entry = table["entry"]
    if not callable_parts(entry):
        raise InputError(f"{where}: entry '{entry}' must be 'module:function'{callable_hint(entry)}")
    family = table.get("family")
    if family is not None and (not isinstance(family, str) or not _NAME.fullmatch(family)):
        raise InputError(f"{where}: family must be a simple name, got {family!r}")
    params = table.get("params", {})
    if not isinstance(params, dict):
        raise InputError(f"{where}: params must be a table")
    jsonfile.check_plain(params, f"{where}: params")  # they go into baselines and reports as JSON
    reference = table.get("reference")
    if reference is not None and (not isinstance(reference, str) or not callable_parts(reference)):
        hint = callable_hint(reference) if isinstance(reference, str) else ""
        raise InputError(f"{where}: reference must be 'module:function'{hint}, got {reference!r}")
    targets = table.get("targets")
    if targets is not None:
        targets = string_list(targets, f"{where}: targets")
        for t in targets:
            if t not in profiles:
                raise InputError(
                    f"{where}: targets: unknown target '{t}'{did_you_mean(t, profiles)} "
                    f"(known: {', '.join(sorted(profiles))})"
                )
    outputs = table.get("outputs")
    if outputs is not None:
        outputs = number(outputs, f"{where}: outputs", 1, integer=True)
    threshold = table.get("threshold")
    if threshold is not None:
        threshold = number(threshold, f"{where}: threshold")
    rtol, atol = table.get("rtol"), table.get("atol")
    rtol = None if rtol is None else number(rtol, f"{where}: rtol")
    if rtol is not None and rtol >= 1.0:  # 100 % off would pass: no check at all
        raise InputError(f"{where}: rtol: must be < 1 (a relative tolerance; 1e-5 is 0.001 %), got {rtol!r}")
    atol = None if atol is None else number(atol, f"{where}: atol")
    flops = table.get("flops")
    if flops is not None:
        flops = flopcount.parse(flops, params, f"{where}: flops")
    limits = parse_limits(table["limits"], f"{where}: limits") if "limits" in table else {}
    inputs = parse_inputs(table["inputs"], f"{where}: inputs") if "inputs" in table else None
    return KernelSpec(
        name, entry, family, params, threshold, reference, targets, outputs, rtol, atol, flops, limits, inputs=inputs
    )


# -- [[model]] entries: whole models ----------------------------------------------------------------
MODEL_SCHEDULES = ("default", "none")


def _models(path: Path, tables: Any, config: Config) -> tuple[ModelSpec, ...]:
    if not isinstance(tables, list):
        raise InputError(f"{path}: 'model' must be an array of [[model]] tables")
    kernel_names = {k.name for k in config.kernels}
    specs: list[ModelSpec] = []
    for i, table in enumerate(tables):
        spec = _model(path, i, table, config)
        # Its kernels are named "<model>.<operator>.<shape digest>": no configured kernel may look like one.
        clash = sorted(n for n in kernel_names if n == spec.name or n.startswith(spec.name + "."))
        if clash:
            raise InputError(
                f"{path}: model '{spec.name}': kernel '{clash[0]}' has the model's name or its prefix "
                f"'{spec.name}.' (the model's kernels are named so): rename one"
            )
        if any(s.name == spec.name for s in specs):
            raise InputError(f"{path}: model[{i}]: duplicate model name '{spec.name}'")
        specs.append(spec)
    return tuple(specs)


def _model(path: Path, i: int, table: Any, config: Config) -> ModelSpec:
    _check_table(f"{path}: model[{i}]", table, _MODEL_KEYS, ("name", "source"))
    name = table["name"]
    where = f"{path}: model '{name}'"
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]*", name):  # no dot: it separates the model from its kernels
        raise InputError(f"{path}: model {name!r}: name has characters outside [A-Za-z0-9_-]")  # one line
    source = table["source"]
    if not callable_parts(source):
        if not source.endswith(".onnx"):
            raise InputError(f"{where}: source '{source}' must be 'module:function' or a path to an .onnx file")
        if "\x00" in source or (not os.path.isabs(source) and os.path.normpath(source).split(os.sep)[0] == os.pardir):
            raise InputError(f"{where}: source '{source}' leads outside the config's folder {path.parent}")
    inputs = table.get("inputs", {})
    if not isinstance(inputs, dict):
        raise InputError(
            f"{where}: inputs must be a table of input name -> shape (a list of integers) "
            f'or {{ shape = [...], dtype = "float32" }}'
        )
    parsed = {}
    for key, value in inputs.items():
        shape, dtype = (value.get("shape"), value.get("dtype")) if isinstance(value, dict) else (value, None)
        if isinstance(value, dict) and sorted(set(value) - {"shape", "dtype"}):
            raise InputError(f"{where}: inputs.{key}: unknown key '{sorted(set(value) - {'shape', 'dtype'})[0]}'")
        if (
            not isinstance(shape, list)
            or not shape
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape)
        ):
            raise InputError(
                f"{where}: inputs.{key}: shape must be a non-empty list of positive integers, got {shape!r}"
            )
        if dtype is not None and (not isinstance(dtype, str) or not re.fullmatch(r"[a-z]+[0-9]*", dtype)):
            raise InputError(f'{where}: inputs.{key}: dtype must be a name like "float32", got {dtype!r}')
        parsed[key] = (tuple(shape), dtype)
    params = table.get("params", {})
    if not isinstance(params, dict):
        raise InputError(f"{where}: params must be a table")
    jsonfile.check_plain(params, f"{where}: params")
    if params and not callable_parts(source):
        raise InputError(f"{where}: params are for a 'module:function' source, not an ONNX file")
    thresholds = {}
    for key in ("threshold", "kernel_threshold"):
        thresholds[key] = None if table.get(key) is None else number(table[key], f"{where}: {key}")
    targets = table.get("targets")
    if targets is not None:
        targets = string_list(targets, f"{where}: targets")
        for t in targets:
            config.profile(t, f"{where}: targets")
    database = table.get("database")
    if database is not None and (not isinstance(database, str) or not database):
        raise InputError(f"{where}: database must be the path of a MetaSchedule database folder")
    skip = string_list(table["skip"], f"{where}: skip") if "skip" in table else ()  # checked against the graph
    schedule = table.get("schedule", "default")
    if schedule not in MODEL_SCHEDULES:
        raise InputError(f"{where}: schedule {schedule!r} is not one of {', '.join(map(repr, MODEL_SCHEDULES))}")
    return ModelSpec(
        name,
        source,
        parsed,
        params,
        thresholds["threshold"],
        thresholds["kernel_threshold"],
        targets,
        database,
        skip,
        schedule,
    )
