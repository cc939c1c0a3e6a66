"""perfguard check --shard i/n and perfguard merge: the union of the shards is the whole run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfguard.errors import EXIT_INFRA, EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
from perfguard.judge.merge import combined_exit_code
from perfguard.shells.cli import main
from tests.conftest import write_project
from tests.projects import GOOD, WORSE, config_text

TOML = config_text(
    ["x86_64", "aarch64"],
    """
[[kernel]]
name = "gemv_c"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = { M = 32, K = 64 }
""",
)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def pairs(data: dict) -> dict[tuple[str, str], str]:
    return {(r["kernel"], r["target"]): r["verdict"] for r in data["results"]}


@pytest.fixture(scope="module")
def regressed(tmp_path_factory, cache_dir):
    """Baselines for every kernel, then gemm_a made slower: 6 pairs, some of them regressions.
    Made once: the tests only check it (each into its own report folder or JSON file)."""
    config = write_project(
        tmp_path_factory.mktemp("shard"), TOML.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache_dir}"\n', 1)
    )
    assert main(["baseline", "update", "--config", str(config), "-j", "1"]) == 0
    config.write_text(config.read_text().replace(GOOD, WORSE))
    return config


@pytest.mark.slow
def test_shards_partition_the_run_and_merge_to_the_same_verdict(regressed, tmp_path, capsys):
    config = regressed
    whole = tmp_path / "whole.json"
    full_code = main(["check", "--config", str(config), "-j", "1", "--json", str(whole)])
    full = load(whole)
    assert full_code == EXIT_REGRESSION and len(full["results"]) == 6

    n = 4  # 6 pairs in 4 shards: uneven slices, as in CI
    files = []
    for i in range(1, n + 1):
        out_dir = tmp_path / f"shard-{i}"
        files.append(out_dir / "perfguard.json")
        code = main(
            [
                "check",
                "--config",
                str(config),
                "-j",
                "1",
                "--shard",
                f"{i}/{n}",
                "--report-dir",
                str(out_dir),
                "--json",
                str(tmp_path / f"shard-{i}.json"),
            ]
        )
        shard = load(files[-1])
        assert shard["shard"] == {"index": i, "count": n}
        assert load(tmp_path / f"shard-{i}.json")["results"] == shard["results"]
        assert code == (EXIT_REGRESSION if shard["summary"]["regression"] else EXIT_OK)
    seen = [key for f in files for key in pairs(load(f))]
    assert len(seen) == len(set(seen)), "a pair ran in two shards"
    assert set(seen) == set(pairs(full)), "the shards lost or invented a pair"
    # Each shard's report stayed its own: no shard overwrote another's file.
    assert sorted(len(load(f)["results"]) for f in files) == [1, 1, 2, 2]

    capsys.readouterr()
    merged_dir = tmp_path / "merged"
    assert main(["merge", *map(str, files), "--report-dir", str(merged_dir)]) == full_code
    merged = load(merged_dir / "perfguard.json")
    assert pairs(merged) == pairs(full)
    assert merged["summary"] == full["summary"]
    assert [(r["kernel"], r["target"]) for r in merged["results"]] == [
        (r["kernel"], r["target"]) for r in full["results"]
    ]
    assert (merged_dir / "index.html").is_file()
    assert "regression" in capsys.readouterr().out


@pytest.mark.slow
def test_a_shard_beyond_the_pairs_is_empty_and_ok(regressed, tmp_path):
    assert (
        main(
            ["check", "--config", str(regressed), "-j", "1", "--shard", "8/8", "--report-dir", str(tmp_path / "empty")]
        )
        == EXIT_OK
    )
    assert load(tmp_path / "empty" / "perfguard.json")["results"] == []


def _report(path: Path, results: list[dict], code: int = 0, shard: tuple[int, int] | None = None) -> Path:
    data = {
        "schema": 1,
        "perfguard_version": "0",
        "created": "2026-01-01T00:00:00+00:00",
        "config": None,
        "summary": {"exit_code": code},
        "results": results,
    }
    if shard:
        data["shard"] = {"index": shard[0], "count": shard[1]}
    path.write_text(json.dumps(data))
    return path


def _result(kernel: str, target: str = "x86_64", verdict: str = "unchanged") -> dict:
    return {
        "kernel": kernel,
        "target": target,
        "verdict": verdict,
        "delta_pct": 0.0,
        "threshold_pct": 2.0,
        "current_time_s": 1e-6,
        "baseline_time_s": 1e-6,
        "model_id": "analytical",
        "calibrated": False,
        "error": None,
    }


@pytest.mark.parametrize(
    "setup, needle",
    [
        (
            lambda d: [
                _report(d / "a.json", [_result("k")], shard=(1, 3)),
                _report(d / "b.json", [_result("j")], shard=(2, 3)),
            ],
            "shard 3/3 is missing",
        ),
        (
            lambda d: [
                _report(d / "a.json", [_result("k")], shard=(1, 2)),
                _report(d / "b.json", [_result("j")], shard=(1, 2)),
            ],
            "shard 1/2 is also in",
        ),
        (
            lambda d: [_report(d / "a.json", [_result("k")]), _report(d / "b.json", [_result("k")])],
            "k[x86_64] is also in",
        ),
        (
            lambda d: [_report(d / "a.json", [_result("k")], shard=(1, 2)), _report(d / "b.json", [_result("j")])],
            "cannot merge shards of different splits",
        ),
        (lambda d: [_report(d / "a.json", [_result("k", verdict="slower")])], "unknown verdict 'slower'"),
        (lambda d: [d / "missing.json"], "missing.json: report not found"),
        (lambda d: [(d / "bad.json", (d / "bad.json").write_text("{not json"))[0]], "bad.json: not a perfguard report"),
    ],
)
def test_merge_refuses_what_it_cannot_merge_honestly(tmp_path, capsys, setup, needle):
    files = setup(tmp_path)
    assert main(["merge", *map(str, files), "--report-dir", str(tmp_path / "out")]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "out" / "perfguard.json").exists()


def test_merged_exit_code_is_the_worst_of_the_shards(tmp_path):
    a = _report(tmp_path / "a.json", [_result("k", verdict="regression")], EXIT_REGRESSION, (1, 2))
    b = _report(tmp_path / "b.json", [_result("j", verdict="error")], EXIT_INFRA, (2, 2))
    assert main(["merge", str(a), str(b), "--report-dir", str(tmp_path / "out")]) == EXIT_INFRA
    assert combined_exit_code([0, 1, 2]) == EXIT_USAGE
    assert combined_exit_code([0, 1, 0]) == EXIT_REGRESSION and combined_exit_code([]) == EXIT_OK
