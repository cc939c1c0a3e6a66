"""Baseline format versions: files written by earlier commits of this repository are read (and
upgraded as read), files of a newer format are refused with "upgrade perfguard", naming the file
and the perfguard that wrote them, and never written over.

The fixtures are committed baselines of gemm_256 as three commits wrote them (`git show
<commit>:baselines/<target>/gemm_256.json`): ed7dcc1 (the first day: schema 1, no block profile),
81ac9d1 (schema 3, a version-1 loop nest) and a14f59e (schema 3 over a version-2 loop nest, the
unlabelled change of issue 40), and a14f59e's call order of the mlp model.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from perfguard import __version__
from perfguard.baselines.store import (
    SCHEMA_VERSION,
    BaselineStore,
    graph_path,
    parse_baseline,
    parse_graph,
    same_record,
)
from perfguard.compile.loops import LOOPS_VERSION, LoopNest
from perfguard.errors import EXIT_USAGE, InputError, NewerFormat
from perfguard.shells.cli import main

FIXTURES = Path(__file__).parent / "fixtures"

# (commit, target): (schema, loop nest version, has a block profile, predicted_time_s, harness)
WRITTEN = {
    ("ed7dcc1", "aarch64"): (1, None, False, 0.007415733638888889, None),
    ("ed7dcc1", "x86_64"): (1, None, False, 0.00038164182760568104, None),
    ("81ac9d1", "aarch64"): (3, 1, True, 0.0029212380065212714, "harness 3, template 9c05e39152cb, build recipe 1"),
    ("81ac9d1", "x86_64"): (3, 1, True, 0.0004228208075826919, "harness 3, template 9c05e39152cb, build recipe 1"),
    ("a14f59e", "aarch64"): (3, 2, True, 0.002921196409299049, "harness 4, template 95644c68a139, build recipe 1"),
    ("a14f59e", "x86_64"): (3, 2, True, 0.0004191907854495633, "harness 4, template 95644c68a139, build recipe 1"),
}


def fixture(commit: str, target: str) -> Path:
    return FIXTURES / f"{commit}-{target}-gemm_256.json"


def newer(data: dict, **change) -> bytes:
    return json.dumps({**data, **change}).encode()


@pytest.mark.parametrize("commit,target", sorted(WRITTEN))
def test_files_of_earlier_commits_are_read(commit, target):
    schema, loops, blocks, seconds, harness = WRITTEN[commit, target]
    path = fixture(commit, target)
    b = parse_baseline(path.read_bytes(), str(path))
    assert (b.kernel, b.target, b.family, b.schema) == ("gemm_256", target, "gemm", schema)
    assert b.predicted_time_s == seconds and b.params["vector"] == 8 and b.stats.insts > 10**5
    assert (b.stats.blocks is not None) == blocks
    assert b.toolchain.get("harness") == harness and b.perfguard_version == "0.1.0"
    # before schema 5 neither inputs nor the entry's source were recorded: None, not "none configured"
    assert b.inputs is None and b.source is None
    if loops is None:
        assert b.loops is None  # schema 1 had none: upgraded as read, no loop is named
    else:
        assert b.loops["version"] == loops
        nest = LoopNest.from_dict(b.loops, str(path))
        assert len(nest.loops) >= 3 and any(loop.stores for loop in nest.loops) == (loops == 2)


@pytest.mark.parametrize("commit", ["ed7dcc1", "81ac9d1", "a14f59e"])
def test_rewritten_by_this_perfguard_as_the_current_schema(commit, tmp_path):
    """An update over an older file writes the current schema (a file whose statistics did not change
    is still no `same_record`: its label would stay one an old reader misreads); nothing else moves."""
    path = fixture(commit, "aarch64")
    old = parse_baseline(path.read_bytes(), str(path))
    new = dataclasses.replace(old, schema=SCHEMA_VERSION)
    assert not same_record(old, new)
    store = BaselineStore(tmp_path)
    written = store.write(new)
    again = parse_baseline(written.read_bytes(), str(written))
    assert again == new and json.loads(written.read_text())["schema"] == SCHEMA_VERSION == 5
    assert {k: v for k, v in json.loads(written.read_text()).items() if k != "schema"} == {
        k: v for k, v in json.loads(path.read_text()).items() if k != "schema"
    } | {"loops": old.loops, "inputs": None, "source": None}


def test_schema_5_records_inputs_and_source_and_an_older_file_may_not_claim_them(tmp_path):
    """Schema 5 adds the configured inputs and a user kernel's entry function; a file labelled
    schema 3 has not recorded them, whatever keys it holds (read as not recorded)."""
    path = fixture("a14f59e", "x86_64")
    old = parse_baseline(path.read_bytes(), str(path))
    inputs = {"idx": {"low": 0, "high": 4096, "seed": 3}, "table": {"file": "data/t.npy", "sha256": "ab" * 32}}
    new = dataclasses.replace(old, schema=SCHEMA_VERSION, inputs=inputs, source="def k(n=4):\n    return n\n")
    written = BaselineStore(tmp_path).write(new)
    again = parse_baseline(written.read_bytes(), str(written))
    assert again.inputs == inputs and again.source == "def k(n=4):\n    return n\n" and again == new
    data = json.loads(path.read_text())
    labelled = parse_baseline(newer(data, inputs={"idx": {"low": 0, "high": 4}}, source="def k(): pass"), "v.json")
    assert labelled.schema == 3 and labelled.inputs is None and labelled.source is None
    with pytest.raises(InputError, match=r"'inputs' values must be tables"):
        parse_baseline(newer(data, schema=5, inputs={"idx": 3}), "v.json")


def test_a_newer_schema_is_refused_naming_the_file_and_the_writer():
    path = fixture("a14f59e", "aarch64")
    data = json.loads(path.read_text())
    del data["stats"]  # a newer format may drop a key or add one: it is refused as newer, not as damage
    text = newer(data, schema=SCHEMA_VERSION + 1, perfguard_version="9.1.0", energy={"joules": 1.0})
    with pytest.raises(NewerFormat) as caught:
        parse_baseline(text, "baselines/aarch64/gemm_256.json")
    assert str(caught.value) == (
        f"baselines/aarch64/gemm_256.json: baseline schema 6, written by perfguard 9.1.0; "
        f"this is perfguard {__version__} (reads up to baseline schema 5): upgrade perfguard"
    )
    assert caught.value.exit_code == EXIT_USAGE == 2


def test_a_newer_loop_nest_is_refused_naming_the_writer():
    path = fixture("a14f59e", "aarch64")
    data = json.loads(path.read_text())
    text = newer(
        data,
        schema=SCHEMA_VERSION,
        perfguard_version="0.9.0",
        loops={**data["loops"], "version": LOOPS_VERSION + 1, "calls": []},
    )
    with pytest.raises(
        NewerFormat,
        match=rf"^v\.json: loop nest version {LOOPS_VERSION + 1}, written by perfguard 0\.9\.0; this is "
        rf"perfguard .* \(reads up to loop nest version {LOOPS_VERSION}\): upgrade perfguard$",
    ):
        parse_baseline(text, "v.json")
    with pytest.raises(
        NewerFormat, match=rf"^x: loop nest version {LOOPS_VERSION + 1}, written by a newer perfguard; .*upgrade"
    ):
        LoopNest.from_dict({**data["loops"], "version": LOOPS_VERSION + 1}, "x")


def test_damage_is_still_damage():
    path = fixture("a14f59e", "aarch64")
    data = json.loads(path.read_text())
    for schema, message in (
        (0, r"corrupted baseline \(schema 0\)"),
        ("4", r"'schema' has the wrong type"),
        (True, r"'schema' has the wrong type"),
        (None, r"missing 'schema'"),
    ):
        with pytest.raises(InputError, match=message) as caught:
            parse_baseline(
                newer(data, schema=schema)
                if schema is not None
                else json.dumps({k: v for k, v in data.items() if k != "schema"}),
                "v.json",
            )
        assert not isinstance(caught.value, NewerFormat)


def test_update_over_a_newer_file_refuses_and_writes_nothing(tmp_path):
    """A perfguard that knows of versions refuses to turn a newer file back into its own format:
    neither that file nor any other of the change is written."""
    store = BaselineStore(tmp_path)
    path = fixture("a14f59e", "aarch64")
    current = dataclasses.replace(parse_baseline(path.read_bytes(), str(path)), schema=SCHEMA_VERSION)
    other = dataclasses.replace(current, kernel="gemm_other")
    target = store.path("aarch64", "gemm_256")
    target.parent.mkdir(parents=True)
    written_by_newer = newer(json.loads(current.to_json()), schema=SCHEMA_VERSION + 1, perfguard_version="9.1.0")
    target.write_bytes(written_by_newer)
    with pytest.raises(NewerFormat, match="gemm_256.json: baseline schema 6, written by perfguard 9.1.0"):
        store.write_all([other, current])
    assert target.read_bytes() == written_by_newer and not store.path("aarch64", "gemm_other").exists()
    target.write_text("{damaged")  # damage is rewritten, as before
    assert store.write_all([current]) == [target] and store.read("aarch64", "gemm_256") == current


def test_model_graphs_of_a_newer_schema_are_refused_and_kept(tmp_path):
    path = FIXTURES / "a14f59e-aarch64-graphs-mlp.json"
    assert parse_graph(path.read_bytes(), str(path), "mlp", "aarch64") == {
        "mlp.matmul_add_relu.6142ed": [0],
        "mlp.matmul_add.2d43f3": [1],
    }
    text = path.read_text().replace('"schema": 1', '"schema": 2')
    with pytest.raises(
        NewerFormat,
        match=r"mlp\.json: model graph schema 2, written by a newer perfguard; .*"
        r"\(reads up to model graph schema 1\): upgrade perfguard$",
    ):
        parse_graph(text, "mlp.json", "mlp", "aarch64")
    store = BaselineStore(tmp_path)
    graph = graph_path(tmp_path, "aarch64", "mlp")
    graph.parent.mkdir(parents=True)
    graph.write_text(text)
    with pytest.raises(NewerFormat):
        store.write_all([], {graph: path.read_text()})
    assert graph.read_text() == text


def test_baseline_update_refuses_before_measuring(tmp_path, capsys):
    """`perfguard baseline update` over a baseline a newer perfguard wrote: exit 2 and the one line,
    before any kernel is measured."""
    (tmp_path / "perfguard.toml").write_text(
        '[perfguard]\ntargets = ["aarch64"]\n\n[[kernel]]\nname = "gemm_256"\n'
        'entry = "perfguard.kernels.gemm:gemm"\nfamily = "gemm"\n'
    )
    folder = tmp_path / "baselines" / "aarch64"
    folder.mkdir(parents=True)
    data = json.loads(fixture("a14f59e", "aarch64").read_text())
    text = newer(data, schema=SCHEMA_VERSION + 1, perfguard_version="9.1.0")
    (folder / "gemm_256.json").write_bytes(text)
    assert main(["baseline", "update", "--config", str(tmp_path / "perfguard.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.endswith(
            f"gemm_256.json: baseline schema 6, written by perfguard 9.1.0; this is perfguard "
            f"{__version__} (reads up to baseline schema 5): upgrade perfguard"
        )
        and "\n" not in err
    )
    assert (folder / "gemm_256.json").read_bytes() == text


def test_doctor_says_which_perfguard_and_formats_wrote_the_baselines(tmp_path, capsys):
    """Baselines of three commits and one of a newer perfguard: doctor names each writer and format,
    the refusal, and how old ones become current; its exit code stays about tools."""
    (tmp_path / "perfguard.toml").write_text(
        '[perfguard]\ntargets = ["aarch64", "x86_64"]\n\n[[kernel]]\n'
        'name = "gemm_256"\nentry = "perfguard.kernels.gemm:gemm"\n'
        'family = "gemm"\n'
    )
    for commit, target in (("81ac9d1", "aarch64"), ("ed7dcc1", "x86_64")):
        (tmp_path / "baselines" / target).mkdir(parents=True)
        (tmp_path / "baselines" / target / "gemm_256.json").write_bytes(fixture(commit, target).read_bytes())
    data = json.loads(fixture("a14f59e", "x86_64").read_text())
    (tmp_path / "baselines" / "x86_64" / "gemm_b.json").write_text(json.dumps({**data, "kernel": "gemm_b"}))
    (tmp_path / "baselines" / "x86_64" / "gemm_c.json").write_bytes(
        newer(data, kernel="gemm_c", schema=6, perfguard_version="9.1.0")
    )
    main(["doctor", "--config", str(tmp_path / "perfguard.toml")])
    out = " ".join(capsys.readouterr().out.split())
    assert (
        f"perfguard {__version__} (writes baseline schema 5 with loop nest version {LOOPS_VERSION}; reads baseline "
        "schema 1 to 5)" in out
    )
    assert "baselines written by perfguard 0.1.0 as baseline schema 1: 1 on x86_64" in out
    assert "baselines written by perfguard 0.1.0 as baseline schema 3 with loop nest version 1: 1 on aarch64" in out
    assert "baselines written by perfguard 0.1.0 as baseline schema 3 with loop nest version 2: 1 on x86_64" in out
    assert "the next `perfguard baseline update` writes them as schema 5" in out
    assert (
        f"newer {tmp_path}/baselines/x86_64/gemm_c.json: baseline schema 6, written by perfguard 9.1.0; this is "
        f"perfguard {__version__} (reads up to baseline schema 5): upgrade perfguard"
    ) in out
    assert "toolchain toolchain" not in out
