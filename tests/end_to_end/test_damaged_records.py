"""Damaged records are recomputed, never trusted, never fatal (issue 36), and the reuse canary
finds a record whose key missed an input.

Real TVM, cross compiler and QEMU on two small kernels with a private cache: after one check has
recorded everything (builds, simulations, output checks, llvm-mca timings, loop nests, job,
result and check records), random damage to a random cache file (random bytes, a cut, a deleted
file, or one value changed so that the file still parses) must leave the check's answer exactly
that of a check on an empty cache, however often it is repeated.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfguard import sealed
from perfguard.shells.cli import main
from tests.conftest import write_project

pytestmark = [pytest.mark.xdist_group("damaged-records")]

TOML = """
[perfguard]
targets = ["x86_64"]
cache_dir = "{cache}"

[[kernel]]
name = "a"
entry = "kern:scaled"
params = {{ n = 64 }}
reference = "kern:reference"

[[kernel]]
name = "b"
entry = "kern:scaled"
params = {{ n = 96 }}
reference = "kern:reference"
"""

KERNEL = """
import tvm
from tvm import te


def scaled(n):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})


def reference(inputs, n):
    return [inputs[0] * 2.0 + 1.0]
"""


def check(config: Path, *extra: str) -> tuple:
    """A check's answer: the exit code and each result's verdict, delta and predicted time."""
    code = main(["check", "--config", str(config), "-j", "1", *extra])
    report = json.loads((config.parent / "reports" / "perfguard.json").read_text())
    return code, sorted(
        (r["kernel"], r["verdict"], r["delta_pct"], r["current_time_s"], r["max_error"]) for r in report["results"]
    )


@pytest.fixture(scope="module")
def damaged_project(tmp_path_factory):
    base = tmp_path_factory.mktemp("damage")
    cache = base / "cache"
    config = write_project(base / "proj", TOML.format(cache=cache), {"kern.py": KERNEL})
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    baseline = config.parent / "baselines" / "x86_64" / "a.json"
    data = json.loads(baseline.read_text())
    data["stats"]["insts"] = data["stats"]["insts"] // 2  # a regresses against this baseline
    data["stats"]["blocks"] = None
    baseline.write_text(json.dumps(data))
    truth = check(config, "--recompute")  # nothing reused: what an empty cache gives
    assert truth[0] == 1 and [r[1] for r in truth[1]] == ["regression", "unchanged"]
    assert check(config) == truth  # and now everything is recorded
    return config, cache, truth


def _records(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file() and "tmp" not in p.relative_to(cache).parts)


def _change_one_value(path: Path, rng: random.Random) -> bool:
    """One number (or string) inside a JSON file changed; the file still parses. False if none."""
    try:
        data = json.loads(path.read_bytes())
    except ValueError:
        return False
    leaves = []

    def walk(node, parent, key):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, node, k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, node, i)
        elif isinstance(node, (int, float, str)) and not isinstance(node, bool) and key not in ("sha256", "key"):
            leaves.append((parent, key))

    walk(data, None, None)
    if not leaves:
        return False
    parent, key = rng.choice(leaves)
    value = parent[key]
    parent[key] = value + 1 if isinstance(value, (int, float)) else value + "x"
    path.write_text(json.dumps(data))
    return True


def damage(path: Path, how: str, rng: random.Random) -> None:
    data = path.read_bytes()
    if how == "delete":
        path.unlink()
    elif how == "cut":
        path.write_bytes(data[: rng.randrange(len(data))] if data else b"")
    elif how == "value" and _change_one_value(path, rng):
        pass
    else:  # random bytes at a random place
        at = rng.randrange(len(data) + 1)
        path.write_bytes(data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at + 1 :])


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["bytes", "cut", "delete", "value"]))
def test_a_damaged_record_gives_the_answer_of_an_empty_cache(damaged_project, seed, how):
    config, cache, truth = damaged_project
    rng = random.Random(seed)
    victim = rng.choice(_records(cache))
    damage(victim, how, rng)
    assert check(config) == truth, (victim, how)
    assert check(config) == truth, (victim, how)  # and the next run too (the record was replaced, or reads as absent)


def test_the_named_damages_of_issue_36(damaged_project):
    config, cache, truth = damaged_project
    builds = sorted((cache / "builds").glob("*/*/harness"))
    builds[0].write_bytes(builds[0].read_bytes()[:1000])  # a truncated harness: rebuilt, not "killed by SIGBUS"
    (builds[-1].parent / "DONE").unlink(missing_ok=True)  # a deleted marker: rebuilt, not "Directory not empty"
    for memo in cache.rglob("version-*.txt"):
        memo.write_bytes(bytes(range(256)))  # random bytes: no UnicodeDecodeError
    for record in (cache / "check-records").rglob("record.json"):  # exit_code 1 -> 0 in a record that parses
        text = record.read_text()
        record.write_text(text.replace('"exit_code": 1', '"exit_code": 0'))
    assert check(config) == truth
    assert check(config) == truth


def test_the_reuse_canary_names_a_record_whose_key_missed_an_input(damaged_project, capsys):
    """A job record sealed afresh with another answer (what a key missing an input would give):
    a plain check trusts it; --verify-reuse runs the job again, fails naming it, and the fresh
    answer replaces the record."""
    config, cache, truth = damaged_project
    check(config)
    for path in (cache / "jobs").rglob("*.json"):
        record = json.loads(path.read_text())
        payload = record["payload"]
        if payload["result"]["kernel"] == "b":
            payload["result"]["max_error"] = 0.25
            path.write_bytes(sealed.seal("job", record["key"], payload))
    shutil.rmtree(cache / "check-records")
    shutil.rmtree(cache / "results")
    stale = check(config)
    assert stale != truth  # the record's answer: what the canary exists to catch
    plugins = list(cache.rglob("perfguard_plugin.so"))
    assert plugins
    for plugin in plugins:  # a damaged QEMU plugin too: built again for the runs below, not a SIGSEGV
        plugin.write_bytes(plugin.read_bytes()[:2000])
    capsys.readouterr()
    code = main(["check", "--config", str(config), "-j", "1", "--verify-reuse"])
    out = capsys.readouterr().out
    assert code == 3 and "b[x86_64]" in out and "max_error" in out and "misses an input" in out
    assert check(config) == truth  # the fresh answer was recorded
    capsys.readouterr()
    assert main(["check", "--config", str(config), "-j", "1", "--verify-reuse=1"]) == 1  # nothing differs now
    assert "run again from scratch: each the same" in capsys.readouterr().out
