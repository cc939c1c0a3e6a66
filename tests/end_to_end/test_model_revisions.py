"""Whole models across revisions: `perfguard compare` states each [[model]]'s total of base vs head
(new, removed, renamed kernels and changed calls per inference each said), on a real git
repository with real TVM extraction, builds and QEMU runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfguard.shells.cli import main
from tests.end_to_end.test_models import NET, TOML
from tests.projects import commit_all, git, project_repository, with_cache

pytestmark = pytest.mark.slow  # every test measures real revisions


def _toml(cache_dir: Path, widths, repeat) -> str:
    return with_cache(TOML.format(widths=list(widths), repeat=repeat), cache_dir)


@pytest.fixture
def revisions(tmp_path, cache_dir):
    """proj/ in a repository: base has the net 16-32-8 with two 8x8 layers, head 16-24-8 with three."""
    config = project_repository(tmp_path, _toml(cache_dir, [16, 32, 8], 2), {"mymodels.py": NET})
    base = commit_all(tmp_path, "base")
    config.write_text(_toml(cache_dir, [16, 24, 8], 3))
    head = commit_all(tmp_path, "head: 32 -> 24, one more 8x8 layer")
    return config, base, head


def _report(config) -> dict:
    return json.loads((config.parent / "reports" / "perfguard.json").read_text())


def test_compare_states_the_model_total_of_base_and_head(revisions, cache_dir, capsys):
    config, base, head = revisions
    # `check` at each revision first (no baselines: its current total is that revision's), in this process:
    # compare's worker then finds every job recorded (measuring in the worker: tests/runs/test_compare.py)
    alone = {}
    for sha in (base, head):
        git(config.parent.parent, "checkout", "-q", sha)
        assert main(["check", "--config", str(config), "-j", "1"]) == 0
        (alone[sha],) = _report(config)["models"]
    git(config.parent.parent, "checkout", "-q", "main")

    assert main(["compare", base, "HEAD", "--config", str(config), "-j", "1"]) == 1
    data = _report(config)
    (view,) = data["models"]
    results = {r["kernel"]: r for r in data["results"]}
    assert all(r["verdict"] in ("unchanged", "new", "removed") for r in results.values())  # no kernel regressed
    assert sorted(r["verdict"] for r in results.values()) == ["new", "new", "removed", "removed", "unchanged"]
    assert (view["model"], view["target"], view["verdict"]) == ("m", "x86_64", "regression")

    rows = {k["kernel"]: k for k in view["kernels"]}
    assert set(rows) == set(results)
    eight = next(k for k in rows.values() if k["baseline_calls"] == 2)
    assert (eight["calls"], eight["verdict"]) == (3, "unchanged")
    for name, row in rows.items():  # each row is its kernel's result: time per call x calls per inference
        r = results[name]
        assert row["current_time_s"] == r["current_time_s"] and row["baseline_time_s"] == r["baseline_time_s"]
    head_total = sum(r["current_time_s"] * r["params"]["calls"] for r in results.values() if r["verdict"] != "removed")
    base_total = sum(k["baseline_time_s"] * k["baseline_calls"] for k in rows.values() if k["baseline_calls"])
    assert view["current_total_s"] == pytest.approx(head_total, rel=1e-12)
    assert view["baseline_total_s"] == pytest.approx(base_total, rel=1e-12)
    assert view["delta_pct"] == pytest.approx((head_total - base_total) / base_total * 100, rel=1e-9)
    changed = [line for line in view["changes"] if line.startswith("changed: ")]
    assert len(changed) == 2 and all("(m.matmul_add_relu." in line for line in changed)
    assert any("narrowed 32 -> 24 output features" in line for line in changed)
    assert any("narrowed 32 -> 24 input features" in line for line in changed)
    assert any(
        line.startswith("calls 2 -> 3: +more.2: ") and f"({eight['kernel']})" in line for line in view["changes"]
    )
    out = capsys.readouterr().out
    assert "model m [x86_64]: regression" in out and "1 model total(s) regressed" in out

    # the same totals as `check` at each revision
    for sha, key in ((base, "baseline_total_s"), (head, "current_total_s")):
        assert alone[sha]["verdict"] == "new" and alone[sha]["current_total_s"] == view[key]

    # --kernels takes the model's name: its kernels and its total; one of its kernels alone: no total
    assert main(["compare", base, "HEAD", "--config", str(config), "-j", "1", "--kernels", "m"]) == 1
    assert _report(config)["models"] == data["models"]
    assert main(["compare", base, "HEAD", "--config", str(config), "-j", "1", "--kernels", eight["kernel"]]) == 0
    only = _report(config)
    assert [r["kernel"] for r in only["results"]] == [eight["kernel"]] and "models" not in only

    # a revision without the [[model]]: its view says removed, with the old total as the baseline's (the
    # revision configures nothing else, so that only the base side runs: from its job records)
    config.write_text(with_cache('[perfguard]\ntargets = ["x86_64"]\n', cache_dir))
    commit_all(config.parent.parent, "drop the model")
    assert main(["compare", head, "HEAD", "--config", str(config), "-j", "1"]) == 0
    (gone,) = _report(config)["models"]
    assert (gone["verdict"], gone["current_total_s"]) == ("removed", None)
    assert gone["baseline_total_s"] == view["current_total_s"] and len(gone["kernels"]) == 3


def test_bisect_a_model_total(tmp_path, cache_dir, capsys):
    """Four commits: the third adds an 8x8 layer (no kernel slower, the total is): bisect finds it."""
    config = project_repository(tmp_path, _toml(cache_dir, [16, 32, 8], 2), {"mymodels.py": NET})
    shas = [commit_all(tmp_path, "c0")]
    (tmp_path / "NOTES").write_text("unrelated\n")
    shas.append(commit_all(tmp_path, "c1 unrelated"))
    config.write_text(_toml(cache_dir, [16, 32, 8], 3))
    shas.append(commit_all(tmp_path, "c2 one more layer"))
    (tmp_path / "NOTES").write_text("unrelated again\n")
    shas.append(commit_all(tmp_path, "c3 unrelated"))

    # `check` of the bad end (HEAD) first, in this process: its total is the one bisect gives that revision
    # (and bisect's worker finds those jobs recorded)
    assert main(["check", "--config", str(config), "-j", "1"]) == 0
    (at_bad,) = _report(config)["models"]

    out_json = tmp_path / "bisect.json"
    args = ["bisect", "--config", str(config), "--model", "m", "--target", "x86_64", "-j", "1"]
    capsys.readouterr()
    assert main([*args, "--good", shas[0], "--bad", shas[3], "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    data = json.loads(out_json.read_text())
    assert data["model"] == "m" and data["outcome"] == "found"
    assert data["bad"]["predicted_time_s"] == at_bad["current_total_s"]
    assert data["first_bad"]["commit"] == shas[2] and data["last_good"]["commit"] == shas[1]
    assert f"first bad commit: {shas[2]} c2 one more layer" in out
    (line,) = [c for c in data["changes"] if c.startswith("calls 2 -> 3: +more.2: ")]
    assert "(m.matmul_add_relu." in line
    # the visits' totals: equal at good and last good (nothing changed), one 8x8 call more at the first bad
    assert data["last_good"]["predicted_time_s"] == data["good"]["predicted_time_s"]
    assert data["first_bad"]["delta_pct"] == pytest.approx(data["step_delta_pct"], rel=1e-9)
    assert data["first_bad"]["delta_pct"] > data["threshold_pct"] == 1.0

    assert main([*args, "--good", shas[0], "--bad", shas[1]]) == 0  # nothing crossed
    assert "no crossing" in capsys.readouterr().out
    assert (
        main(
            [
                "bisect",
                "--config",
                str(config),
                "--model",
                "nope",
                "--target",
                "x86_64",
                "--good",
                shas[0],
                "--bad",
                shas[1],
            ]
        )
        == 2
    )
    assert "does not configure model 'nope'" in capsys.readouterr().err
