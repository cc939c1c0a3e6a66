"""Property tests of every reader of files a user, a simulator or a pull request can hand perfguard.

The property is the same everywhere: any input either parses into valid values, or raises
one of perfguard's own errors (a PerfguardError subclass, with a one-line message). Never
another exception: a stray KeyError or OverflowError would crash a check with exit 1, which
the CLI contract reserves for "a regression was found".

Inputs come from two sources per reader: raw text or bytes, and a valid document that a
strategy edits (values replaced by arbitrary JSON or TOML values, keys dropped or added,
lines cut, duplicated or rewritten), which reaches the checks behind the syntax. Runs are
bounded and deterministic (`derandomize=True`), so CI sees the same examples every time.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from perfguard.baselines.store import Baseline, parse_baseline
from perfguard.config import Config, load_config
from perfguard.document.report import read_report
from perfguard.errors import PerfguardError
from perfguard.predict.dataset import Dataset, Row, load_dataset
from perfguard.predict.features import matrix
from perfguard.predict.registry import PREDICTORS
from perfguard.predict.store import load_model
from perfguard.sim import cachegrind, gem5
from perfguard.sim.qemu import OUTPUT_HEADER, parse_plugin_output
from perfguard.sim.stats import STAT_FIELDS, Stats
from tests import captured
from tests.captured import synthetic_stats

pytestmark = pytest.mark.slow  # hundreds of examples per reader; tests/input/test_bad_input.py is the quick pass

EXAMPLES = 200  # per property: the suite stays quick and CI sees the same inputs every run
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
COUNT_LIMIT = 1 << 64

_WORK = Path(tempfile.mkdtemp(prefix="perfguard-fuzz-"))


def scratch(name: str, data: bytes | str) -> Path:
    path = _WORK / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


# name -> (strategies, property): benchmarks/hardening.py runs the same properties longer and counts
PROPERTIES: dict[str, tuple[tuple, Callable]] = {}
OUTCOMES: list[str] = []  # per example, what each reader call did: "parsed" or "rejected"


def fuzz(name: str, *strategies: st.SearchStrategy):
    def register(test: Callable) -> Callable:
        PROPERTIES[name] = (strategies, test)
        return FUZZ(given(*strategies)(test))

    return register


def rejects_or_returns(fn, *args, **kwargs):
    """fn(...)'s value, or None when it raised a PerfguardError (with a one-line message)."""
    try:
        value = fn(*args, **kwargs)
    except PerfguardError as exc:
        assert exc.message and "\n" not in exc.message, repr(exc.message)
        OUTCOMES.append("rejected")
        return None
    OUTCOMES.append("parsed")
    return value


def valid_stats(stats: Stats) -> None:
    for name in STAT_FIELDS:
        value = getattr(stats, name)
        assert value is None or (type(value) is int and 0 <= value < COUNT_LIMIT), (name, value)


# -- value strategies -------------------------------------------------------------------------------

edgy_ints = st.one_of(st.integers(-3, 70), st.sampled_from([-(1 << 63), (1 << 63) - 1, 1 << 64, 10**30]), st.integers())
edgy_floats = st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 1e-300, 1e308, math.inf, -math.inf, math.nan]))
edgy_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "../..",
            "/etc/passwd",
            "a:b",
            "a;rm -rf /",
            "<script>x</script>",
            "x86_64",
            "qemu",
            "gemm",
            "perfguard.kernels.gemm:gemm",
            "m:f",
            "..m:f",
            "a/b:c",
            "NaN",
            "\u00e9",
            "\x00",
            "\ud800",
        ]
    ),
)
json_scalars = st.one_of(st.none(), st.booleans(), edgy_ints, edgy_floats, edgy_text)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(edgy_text, inner, max_size=4)),
    max_leaves=12,
)


def mutated_json(
    document: dict, values: st.SearchStrategy | None = None, keys: st.SearchStrategy | None = None
) -> st.SearchStrategy:
    """The document with some of its (nested) values replaced, keys dropped or keys added."""
    values = json_values if values is None else values
    keys = edgy_text if keys is None else keys

    @st.composite
    def build(draw):
        doc = json.loads(json.dumps(document))
        for _ in range(draw(st.integers(1, 4))):
            target, path = doc, []
            while isinstance(target, (dict, list)) and target and draw(st.integers(0, 3)):  # mostly deeper
                key = draw(st.sampled_from(sorted(target) if isinstance(target, dict) else range(len(target))))
                path.append((target, key))
                target = target[key]
            if not path:
                if not draw(st.integers(0, 3)):
                    doc[draw(keys)] = draw(values)
                continue
            parent, key = path[-1]
            action = draw(st.sampled_from(["replace", "drop", "add"]))
            if action == "drop" and isinstance(parent, dict):
                del parent[key]
            elif action == "add" and isinstance(parent, dict):
                parent[draw(keys)] = draw(values)
            else:
                parent[key] = draw(values)
        return doc

    return build()


def as_json_text(doc) -> str:
    return json.dumps(doc)  # NaN and Infinity included, as a hand edit or another writer could put them


def raw_inputs(seed_text: str) -> st.SearchStrategy:
    """Raw text and bytes, and the seed cut at any point or with a slice of it repeated."""
    cut = st.integers(0, len(seed_text)).map(lambda i: seed_text[:i])
    repeated = st.tuples(st.integers(0, len(seed_text)), st.integers(0, len(seed_text))).map(
        lambda ij: seed_text[: max(ij)] + seed_text[min(ij) :]
    )
    return st.one_of(st.text(), st.binary(), cut, repeated)


def edited_lines(seed_text: str, tokens: st.SearchStrategy) -> st.SearchStrategy:
    """The seed with some lines dropped, duplicated, swapped or with a word rewritten."""
    lines = seed_text.split("\n")

    @st.composite
    def build(draw):
        out = list(lines)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1)) if out else 0
            action = draw(st.sampled_from(["drop", "dup", "swap", "word", "insert"]))
            if not out:
                out.append(draw(tokens))
            elif action == "drop":
                del out[i]
            elif action == "dup":
                out.insert(i, out[i])
            elif action == "swap":
                j = draw(st.integers(0, len(out) - 1))
                out[i], out[j] = out[j], out[i]
            elif action == "word":
                words = out[i].split(" ")
                words[draw(st.integers(0, len(words) - 1))] = draw(tokens)
                out[i] = " ".join(words)
            else:
                out.insert(i, draw(tokens))
        return "\n".join(out)

    return build()


count_tokens = st.one_of(
    edgy_text,
    edgy_ints.map(str),
    edgy_floats.map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "0x10", "１２", "1_000", "+5", " "]),
)


# -- config -------------------------------------------------------------------------------------------


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


toml_scalars = st.one_of(
    st.booleans(),
    edgy_ints.filter(lambda i: -(1 << 63) <= i < (1 << 63)),
    edgy_floats,
    edgy_text.filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF or c == "\x00" for c in s)),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["size", "assoc", "line", "M", "x", "kind"]), inner, max_size=3),
    ),
    max_leaves=8,
)
GOOD_CONFIG = {
    "perfguard": {
        "targets": ["x86_64", "aarch64"],
        "simulator": "qemu",
        "threshold": 2.0,
        "baseline_dir": "baselines",
        "report_dir": "reports",
        "jobs": 2,
        "timeout": 600,
        "reps": 1,
        "warmup": 1,
        "drift_mape": 15.0,
    },
    "kernel": [
        {
            "name": "k",
            "entry": "perfguard.kernels.gemm:gemm",
            "family": "gemm",
            "params": {"M": 16},
            "threshold": 1.0,
            "targets": ["x86_64"],
            "outputs": 1,
            "rtol": 1e-4,
        },
        {"name": "u", "entry": "mykernels.ops:f", "reference": "mykernels.ops:ref"},
    ],
    "target": {
        "aarch64": {"l1d": {"size": 65536, "assoc": 4}, "clock_hz": 2e9},
        "myrv": {"base": "riscv64", "cflags": ["-O2"], "cost": {"inst": 0.5}},
    },
}


def toml_string(text: str) -> str:
    """A TOML basic string: control characters escaped, everything else as it is."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_string(key)


def toml_document(doc: dict) -> str:
    """TOML text for a document: top-level tables as [name], arrays of tables as [[name]]."""
    head, tail = [], []
    for key, value in doc.items():
        name = toml_key(key)
        if isinstance(value, dict):
            tail.append(f"[{name}]")
            tail += [f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                tail.append(f"[[{name}]]")
                tail += [f"{toml_key(k)} = {toml_value(v)}" for k, v in item.items()]
        else:
            head.append(f"{name} = {toml_value(value)}")
    return "\n".join(head + tail) + "\n"


def config_documents() -> st.SearchStrategy:
    return mutated_json(
        GOOD_CONFIG,
        toml_values,
        st.sampled_from(["targets", "threshold", "name", "entry", "params", "base", "size", "colour", "../x", "<b>"]),
    ).map(toml_document)


def check_config(config: Config) -> None:
    root = config.path.parent
    assert config.targets and all(t in config.profiles for t in config.targets)
    assert math.isfinite(config.judging.threshold) and config.judging.threshold >= 0
    assert math.isfinite(config.simulation.timeout) and config.simulation.timeout >= 1
    sim = config.simulation
    assert type(sim.reps) is int and sim.reps >= 1 and type(sim.warmup) is int and sim.warmup >= 0
    assert config.jobs is None or (type(config.jobs) is int and config.jobs >= 1)
    assert math.isfinite(config.drift.mape) and math.isfinite(config.drift.spearman)
    for folder in (config.storage.baseline_dir, config.storage.report_dir):
        assert folder.is_relative_to(root.resolve()), folder
    names = [k.name for k in config.kernels]
    assert len(names) == len(set(names))
    for spec in config.kernels:
        json.dumps(spec.params, allow_nan=False)  # reports and baselines can hold them
        for value in (spec.threshold, spec.rtol, spec.atol):
            assert value is None or (math.isfinite(value) and value >= 0)
    for profile in config.profiles.values():
        for level in (profile.l1i, profile.l1d, profile.l2):
            assert level.size > 0 and level.assoc > 0 and level.line > 0
        for value in (profile.clock_hz, profile.peak_gflops, profile.peak_bandwidth_gbs):
            assert math.isfinite(value) and value > 0


@fuzz(
    "config loader: perfguard.toml (perfguard.config.load_config)",
    st.one_of(
        config_documents(),
        raw_inputs('[perfguard]\ntargets = ["x86_64"]\nthreshold = 2.0\n\n[[kernel]]\nname = "k"\nentry = "m:f"\n'),
    ),
)
def test_config_loader(text):
    path = scratch("proj/perfguard.toml", text)
    config = rejects_or_returns(load_config, path)
    if config is not None:
        check_config(config)


@fuzz(
    "config loader: pyproject.toml [tool.perfguard]",
    st.one_of(
        config_documents().map(
            lambda t: (
                t.replace("[perfguard]", "[tool.perfguard]")
                .replace("[[kernel]]", "[[tool.perfguard.kernel]]")
                .replace("[target]", "[tool.perfguard.target]")
            )
        ),
        st.sampled_from(
            [
                "tool = 1\n",
                "[tool]\nperfguard = 3\n",
                "[tool.perfguard]\nkernel = 1\n",
                "[tool.perfguard]\ntarget = []\n",
            ]
        ),
        raw_inputs('[project]\nname = "x"\n[tool.perfguard]\ntargets = ["riscv64"]\n'),
    ),
)
def test_config_loader_pyproject(text):
    path = scratch("pyproj/pyproject.toml", text)
    config = rejects_or_returns(load_config, path)
    if config is not None:
        check_config(config)


# -- simulator statistics -----------------------------------------------------------------------------

PLUGIN_OUTPUT = (
    OUTPUT_HEADER
    + "\n"
    + "".join(f"{k} {i * 1000 + 7}\n" for i, k in enumerate(STAT_FIELDS))
    + "roi_count 1\ntotal_insts 123456\n"
)


@fuzz(
    "QEMU plugin statistics (perfguard.sim.qemu.parse_plugin_output)",
    st.one_of(raw_inputs(PLUGIN_OUTPUT), edited_lines(PLUGIN_OUTPUT, count_tokens)),
)
def test_qemu_plugin_output_parser(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    parsed = rejects_or_returns(parse_plugin_output, text, "plugin output")
    if parsed is not None:
        stats, roi_count, total_insts = parsed
        valid_stats(stats)
        assert 0 <= roi_count < COUNT_LIMIT and 0 <= total_insts < COUNT_LIMIT


GEM5_STATS = """
---------- Begin Simulation Statistics ----------
simSeconds                                   0.001000                       # Number of seconds simulated (Second)
simInsts                                      3000
system.cpu.commitStats0.numInsts              2000                       # Number of instructions committed
system.cpu.commitStats0.numOps                2100
system.cpu.commitStats0.numLoadInsts           500
system.cpu.commitStats0.numStoreInsts          200
system.cpu.commitStats0.numFpInsts              50
system.cpu.commitStats0.numVecInsts            300
system.cpu.commitStats0.committedControl::IsControl 100
system.cpu.commitStats0.committedControl::IsCondControl 80
system.cpu.dcache.overallAccesses::total        700
system.cpu.dcache.overallMisses::total           30
system.cpu.dcache.writebacks::total               5
system.cpu.icache.overallAccesses::total       2000
system.cpu.icache.overallMisses::total           12
system.l2.overallAccesses::total                 42
system.l2.overallMisses::total                   20
---------- End Simulation Statistics   ----------
"""
GEM5_INI = """[root]
type=Root
children=system
full_system=false

[system]
type=System
cache_line_size=64
mem_mode=atomic
children=clk_domain cpu l2 tol2bus

[system.clk_domain]
type=SrcClockDomain
clock=333

[system.cpu]
type=BaseAtomicSimpleCPU
clk_domain=system.clk_domain
dcache_port=system.cpu.dcache.cpu_side
icache_port=system.cpu.icache.cpu_side

[system.cpu.dcache]
type=Cache
size=32768
assoc=8
tags=system.cpu.dcache.tags
mem_side=system.tol2bus.cpu_side_ports[1]

[system.cpu.dcache.tags]
type=BaseSetAssoc
block_size=64

[system.cpu.icache]
type=Cache
size=32768
assoc=8
mem_side=system.tol2bus.cpu_side_ports[0]

[system.tol2bus]
type=CoherentXBar
mem_side_ports=system.l2.cpu_side

[system.l2]
type=Cache
size=1048576
assoc=16
"""
gem5_tokens = st.one_of(
    count_tokens,
    st.sampled_from(
        [
            "---------- Begin Simulation Statistics ----------",
            "---------- End Simulation Statistics   ----------",
            "system.cpu.commitStats1.numOps",
            "system.cpu1.commitStats0.numOps",
            "[root]",
            "type=Root",
            "clock=",
            "clock=0",
            "init_perf_level=7",
            "clk_divider=0",
            "type=Cache",
            "mem_side=system.l2.cpu_side",
            "=",
        ]
    ),
)


@fuzz(
    "gem5 stats.txt + config.ini (perfguard.sim.gem5.parse_stats, stats_from_file)",
    st.one_of(
        raw_inputs(GEM5_STATS),
        edited_lines(GEM5_STATS, gem5_tokens),
        edited_lines(GEM5_STATS + GEM5_STATS, gem5_tokens),
    ),
    st.one_of(st.none(), st.just(GEM5_INI), edited_lines(GEM5_INI, gem5_tokens)),
)
def test_gem5_stats_and_config_parsers(stats_text, ini_text):
    folder = _WORK / "gem5"
    if folder.exists():
        for child in folder.iterdir():
            child.unlink()
    scratch("gem5/stats.txt", stats_text)
    if ini_text is not None:
        scratch("gem5/config.ini", ini_text)
    dumps = rejects_or_returns(gem5.parse_stats, folder / "stats.txt")
    if dumps is None:
        return
    assert dumps and all(isinstance(d, dict) and d for d in dumps)
    for kwargs in ({}, {"dump": -1, "base": 0}, {"config": False}, {"cpus": ["system.cpu"]}):
        stats = rejects_or_returns(gem5.stats_from_file, folder, **kwargs)
        if stats is not None:
            valid_stats(stats)


@example(
    {
        "type": "Root",
        "path": "root",
        "system": {
            "type": "System",
            "path": "system",
            "cpu": {  # found: peers
                "type": "BaseTimingSimpleCPU",
                "path": "system.cpu",
                "mem_side": {"peer": [{"qemu": None}]},
            },
        },
    }
)  # not strings
@fuzz(
    "gem5 config.json (perfguard.sim.gem5.read_config)",
    mutated_json(
        {
            "type": "Root",
            "path": "root",
            "full_system": False,
            "system": {
                "type": "System",
                "path": "system",
                "cache_line_size": 64,
                "cpu": [
                    {
                        "type": "BaseTimingSimpleCPU",
                        "path": "system.cpu",
                        "dcache_port": {"peer": "system.cpu.dcache.cpu_side"},
                        "dcache": {
                            "type": "Cache",
                            "path": "system.cpu.dcache",
                            "size": 32768,
                            "assoc": 8,
                            "mem_side": {"peer": ["system.membus.cpu_side_ports[1]"]},
                        },
                    }
                ],
            },
        }
    ),
)
def test_gem5_config_json_reader(doc):
    path = scratch("gem5json/config.json", as_json_text(doc))
    config = rejects_or_returns(gem5.read_config, path)
    if config is not None:
        assert all(c.clock_hz is None or (math.isfinite(c.clock_hz) and c.clock_hz > 0) for c in config.cpus)


CACHEGRIND_OUT = """desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         32768 B, 64 B, 8-way associative
desc: LL cache:         1048576 B, 64 B, 16-way associative
cmd: ./harness 1 1
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw Bc Bcm Bi Bim
fl=harness.c
fn=perfguard_roi_begin
1 5 1 1 2 0 0 1 0 0
fn=main
10 100 2 1 40 3 1 20 2 1 10 1 1 0
fl=???
fn=default_gemm
0 1000 3 2 300 30 10 100 5 2 50 3 0 0
summary: 1105 6 4 342 33 11 121 7 3 60 4 1 0
"""


@fuzz(
    "cachegrind.out (perfguard.sim.cachegrind.parse_cachegrind_out)",
    st.one_of(raw_inputs(CACHEGRIND_OUT), edited_lines(CACHEGRIND_OUT, count_tokens)),
)
def test_cachegrind_output_parser(data):
    parsed = rejects_or_returns(cachegrind.parse_cachegrind_out, data, "cachegrind.out")
    if parsed is None:
        return
    assert all(0 <= v < COUNT_LIMIT for v in parsed.totals.values())
    geometry = rejects_or_returns(parsed.cache_geometry, "cachegrind.out")
    assert geometry is None or all(isinstance(v.size, int) for v in geometry.values())
    stats = rejects_or_returns(cachegrind.stats_from_events, parsed.totals, "cachegrind.out")
    if stats is not None:
        valid_stats(stats)


# -- baselines, models, datasets, reports -----------------------------------------------------------------

BASELINE = json.loads(
    Baseline(
        kernel="g",
        target="x86_64",
        family="gemm",
        params={"M": 16},
        simulator="qemu",
        content_hash="ab" * 32,
        stats=Stats(**{k: 10 + i for i, k in enumerate(STAT_FIELDS)}),
        predicted_time_s=1.5e-6,
        model_id="analytical-v1-0123456789ab",
        commit=None,
        created="2026-01-01T00:00:00+00:00",
        toolchain={"cc": "gcc 12", "tvm": "0.27"},
    ).to_json()
)


@fuzz(
    "baseline reader (perfguard.baselines.store.parse_baseline)",
    st.one_of(
        mutated_json(BASELINE),
        mutated_json(BASELINE).map(as_json_text),
        raw_inputs(json.dumps(BASELINE, indent=1)),
        st.sampled_from(["[" * 5000 + "]" * 5000, '{"schema": 1e999}', "NaN", '"\\ud800"']),
    ),
)
def test_baseline_reader(doc):
    text = (
        doc
        if isinstance(doc, str)
        else as_json_text(doc)
        if not isinstance(doc, bytes)
        else doc.decode("utf-8", "replace")
    )
    baseline = rejects_or_returns(parse_baseline, text, "baselines/x86_64/g.json")
    if baseline is None:
        return
    valid_stats(baseline.stats)
    assert math.isfinite(baseline.predicted_time_s) and baseline.predicted_time_s >= 0
    for name in ("kernel", "target", "simulator", "content_hash", "model_id", "created", "perfguard_version"):
        assert isinstance(getattr(baseline, name), str)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in baseline.toolchain.items())
    json.dumps(baseline.params, allow_nan=False)


# Each predictor fitted on synthetic statistics, as save_model wrote it (tests/captured/models/: fitted
# once by tests/captured/regenerate.py, checked current by tests/runs/test_captured.py)
MODELS: dict[str, dict] = {}
PROBE = synthetic_stats(3)[0]


def model_cases() -> st.SearchStrategy:
    if not MODELS:
        MODELS.update({name: json.loads(captured.model_file(name).read_text()) for name in sorted(PREDICTORS)})
    return st.sampled_from(sorted(MODELS)).flatmap(
        lambda name: st.tuples(st.just(name), mutated_json(MODELS[name]), st.booleans())
    )


@fuzz(
    "model reader (perfguard.predict.store.load_model)",
    st.one_of(st.deferred(model_cases), raw_inputs('{"schema": 1, "predictor": "mlr", "payload": {}}')),
)
def test_model_reader(case):
    if isinstance(case, tuple):
        name, doc, consistent = case
        if consistent and isinstance(doc, dict) and isinstance(doc.get("payload"), dict):
            # a hand edit that also fixes model_id: the payload itself must then be checked
            try:
                doc["model_id"] = PREDICTORS[name].from_payload(doc["payload"]).model_id
            except Exception:
                pass
        text = as_json_text(doc)
    else:
        text = case if isinstance(case, str) else case.decode("utf-8", "replace")
    path = _WORK / "models" / "fuzzed.json"
    stored = rejects_or_returns(load_model, path, text=text, source=str(path))
    if stored is None:
        return
    for key in ("target", "family", "simulator", "model_id"):
        assert isinstance(stored.meta[key], str)
    # a model that loads can score statistics (pipeline columns as the pipeline model might give them)
    pipe = np.tile([5e5, 1e4, 2e5, 2e5, 5e4, 5e4, 0.0], (len(PROBE), 1))
    predicted = stored.predictor.predict(matrix(PROBE, stored.predictor.features, stored.predictor.view, pipe=pipe))
    assert np.all(np.isfinite(predicted)) and np.all(predicted > 0)


DATASET = json.loads(
    Dataset(
        "x86_64",
        "gemm",
        "qemu",
        "qemu 7.2",
        rows=[
            Row("M=16", {"M": 16, "tile_m": 4}, s, float(t), {"min_s": float(t), "cv": 0.01}, {"cpu": "test"})
            for s, t in zip(*synthetic_stats(2)[:2])
        ],
    ).to_json()
)


@fuzz(
    "dataset reader (perfguard.predict.dataset.load_dataset)",
    st.one_of(mutated_json(DATASET), raw_inputs(json.dumps(DATASET))),
)
def test_dataset_reader(doc):
    text = as_json_text(doc) if isinstance(doc, dict) else doc
    dataset = rejects_or_returns(load_dataset, scratch("datasets/x86_64/gemm.json", text))
    if dataset is None:
        return
    for key in ("target", "family", "simulator", "simulator_fingerprint"):
        assert isinstance(getattr(dataset, key), str)
    for row in dataset.rows:
        valid_stats(row.stats)
        assert isinstance(row.group, str) and math.isfinite(row.native_s) and row.native_s > 0
        assert isinstance(row.params, dict) and isinstance(row.native, dict) and isinstance(row.machine, dict)
    dataset.digest()  # the dataset can be hashed and written back
    dataset.to_json()


REPORT = {
    "schema": 1,
    "perfguard_version": "0.1.0",
    "created": "2026-01-01T00:00:00+00:00",
    "config": None,
    "summary": {"exit_code": 0, "regression": 0, "error": 0, "improvement": 0, "new": 0, "unchanged": 1},
    "results": [
        {
            "kernel": "g",
            "target": "x86_64",
            "verdict": "unchanged",
            "delta_pct": 0.0,
            "threshold_pct": 2.0,
            "stats": {"insts": 1},
            "error": None,
        }
    ],
}


@fuzz(
    "report reader (perfguard.document.report.read_report)",
    st.one_of(mutated_json(REPORT), raw_inputs(json.dumps(REPORT))),
)
def test_report_reader(doc):
    text = as_json_text(doc) if isinstance(doc, dict) else doc
    data = rejects_or_returns(read_report, scratch("reports/perfguard.json", text))
    if data is not None:
        assert isinstance(data.results, list) and data.summary.exit_code in (0, 1, 2, 3)
        assert type(data).from_json(data.to_json()) == data  # what was read writes back to the same report


@pytest.mark.parametrize(
    "text, message",
    [
        ("1e999", "number 1e999 is out of range"),
        ("[-1E+400]", "number -1E+400 is out of range"),
        ("[1" + "0" * 40 + "]", "has more than 40 digits"),
        ('"\\ud800"', "lone surrogate"),
        ('{"\\uDC00": 1}', "lone surrogate"),
        ('"\ud800"', "lone surrogate"),
        ("[NaN]", "non-finite number NaN"),
        ('{"a": [1, 2.5, "x", "\\ud83d\\ude00", 1e308, 1.5e-400, ' + "9" * 40 + "]}", None),
    ],
    ids=[
        "exponent",
        "capital-exponent",
        "digits",
        "escaped-surrogate",
        "escaped-surrogate-key",
        "raw-surrogate",
        "nan",
        "valid",
    ],
)
def test_strict_json_checks_every_text_the_same_way(text, message):
    """perfguard.jsonfile parses most texts with the json module alone and hands the rest to its
    checks: either way, what is out of range is refused and what is not reads as Python reads it."""
    from perfguard import jsonfile

    if message is None:
        assert jsonfile.loads(text, "f.json", "label") == json.loads(text)
        return
    with pytest.raises(PerfguardError, match=re.escape(message)):
        jsonfile.loads(text, "f.json", "label")
