"""Orphaned baselines (runs.orphans) and `baseline prune` / `baseline rename`, on real baseline files.

The baselines are copies of this repository's committed ones under other names: nothing is built
or simulated here (the bad-input catalogue runs `check` on a renamed kernel for real, and
tests/end_to_end/test_init.py the whole flow).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perfguard.baselines.git_revision import GitBaselineStore
from perfguard.baselines.store import BaselineStore, graph_path, graph_text
from perfguard.config import load_config
from perfguard.document.verdicts import REMOVED
from perfguard.errors import EXIT_USAGE, InputError
from perfguard.runs.check import CheckRun
from perfguard.runs.orphans import find_orphans, orphan_outcomes, scanned_targets, way_out
from perfguard.shells.cli import main
from tests.projects import copy_baseline as put  # a committed baseline under another name

CONFIG = """\
[perfguard]
targets = ["aarch64", "x86_64"]
cache_dir = "{cache}"

[[kernel]]
name = "attention"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = {{ M = 1024, K = 1024 }}

[[kernel]]
name = "layer_norm"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = {{ M = 1024, K = 1024 }}
targets = ["x86_64"]

[[model]]
name = "mlp"
source = "examples.relax_models:mlp"
inputs = {{ x = [1, 64] }}
"""


@pytest.fixture
def proj(tmp_path, cache_dir) -> Path:
    (tmp_path / "perfguard.toml").write_text(CONFIG.format(cache=cache_dir))
    put(tmp_path, "aarch64", "attention")  # configured
    put(tmp_path, "aarch64", "attentoin")  # a typo'd name's baseline: orphaned
    put(tmp_path, "aarch64", "layer_norm")  # configured on x86_64 only: orphaned on aarch64
    put(tmp_path, "aarch64", "mlp.dense_0")  # a [[model]]'s kernel: the model view's, not an orphan
    put(tmp_path, "riscv64", "attention")  # a target no longer configured: orphaned
    (tmp_path / "baselines" / "models" / "aarch64").mkdir(parents=True)  # calibrated models: not a target
    return tmp_path


def test_what_is_an_orphan_and_what_a_selection_can_orphan(proj):
    config = load_config(proj / "perfguard.toml")
    store = BaselineStore(config.storage.baseline_dir)
    assert scanned_targets(config, store) == ["aarch64", "x86_64", "riscv64"]
    assert [(o.target, o.kernel) for o in find_orphans(config, store)] == [
        ("aarch64", "attentoin"),
        ("aarch64", "layer_norm"),
        ("riscv64", "attention"),
    ]
    assert [(o.target, o.kernel) for o in find_orphans(config, store, ["x86_64"])] == []  # left out: not orphaned

    (proj / "perfguard.toml").write_text(
        CONFIG.format(cache=config.storage.cache_dir).split("[[model]]")[0]
    )  # model dropped
    config = load_config(proj / "perfguard.toml")
    dropped = [o for o in find_orphans(config, store) if o.kernel == "mlp.dense_0"]
    assert way_out(config, dropped[0]).startswith(
        "no kernel 'mlp.dense_0' and no [[model]] 'mlp' is configured in "
        "perfguard.toml: its committed baseline baselines/aarch64/mlp.dense_0"
    )


def test_each_orphan_is_removed_with_its_time_and_the_way_out_and_fails_the_check(proj):
    config = load_config(proj / "perfguard.toml")
    outcomes = orphan_outcomes(config, BaselineStore(config.storage.baseline_dir), ["aarch64"])
    notes = {o.result.kernel: o.note for o in outcomes}
    assert all(o.verdict.verdict == REMOVED and o.orphaned and o.verdict.baseline_time_s > 0 for o in outcomes)
    assert notes["attentoin"].startswith(
        "no kernel or [[model]] named 'attentoin' is configured in perfguard.toml: "
        "its committed baseline baselines/aarch64/attentoin.json is no "
        "longer checked (renamed to 'attention'? run 'perfguard baseline rename "
        "attentoin attention'; gone for good? run 'perfguard baseline prune --yes'"
    )
    assert notes["layer_norm"].startswith("kernel 'layer_norm' is not configured for target 'aarch64'")
    run = CheckRun(outcomes)
    run.allow_errors = True  # never hides a lost guard
    assert run.exit_code() == EXIT_USAGE


def test_under_base_a_baseline_the_change_removed_too_is_reported_but_passes(proj):
    def git(*args):
        subprocess.run(
            ["git", "-c", "user.email=a@b", "-c", "user.name=a", "-c", "commit.gpgsign=false", *args],
            cwd=proj,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    (proj / "baselines" / "aarch64" / "attentoin.json").unlink()  # this change removed it
    config = load_config(proj / "perfguard.toml")
    outcomes = {
        o.result.kernel: o
        for o in orphan_outcomes(config, GitBaselineStore(config.storage.baseline_dir, "HEAD"), ["aarch64"])
    }
    assert not outcomes["attentoin"].orphaned and "this change removed its baseline" in outcomes["attentoin"].note
    assert outcomes["layer_norm"].orphaned  # still in the working tree: fails


def test_prune_lists_then_deletes_with_yes(proj, capsys):
    config = ["--config", str(proj / "perfguard.toml")]
    for model in ("mlp", "gone"):  # model call orders: mlp's is configured, gone's goes with its kernels
        path = graph_path(proj / "baselines", "aarch64", model)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(graph_text(model, "aarch64", [(f"{model}.dense.abcdef", "fc")]))
    assert main(["baseline", "prune", *config]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "would remove baselines/aarch64/attentoin.json: no kernel or [[model]] named 'attentoin'" in out
    assert (
        "would remove baselines/aarch64/graphs/gone.json: the call order of [[model]] 'gone', which is not "
        "configured for target 'aarch64'"
    ) in out
    assert "4 orphaned baseline(s); delete them with: perfguard baseline prune --yes" in out
    assert (proj / "baselines/aarch64/attentoin.json").exists()
    assert main(["baseline", "prune", "--yes", *config]) == 0
    assert sorted(p.relative_to(proj / "baselines").as_posix() for p in (proj / "baselines").rglob("*.json")) == [
        "aarch64/attention.json",
        "aarch64/graphs/mlp.json",
        "aarch64/mlp.dense_0.json",
    ]
    assert main(["baseline", "prune", *config]) == 0
    assert "no orphaned baselines" in capsys.readouterr().out


def test_rename_moves_every_target_and_changes_only_the_name(proj, capsys):
    put(proj, "x86_64", "attentoin")
    before = json.loads((proj / "baselines/aarch64/attentoin.json").read_text())
    (proj / "baselines/aarch64/attention.json").unlink()
    assert main(["baseline", "rename", "attentoin", "attention", "--config", str(proj / "perfguard.toml")]) == 0
    assert not list((proj / "baselines").rglob("attentoin.json"))
    after = json.loads((proj / "baselines/aarch64/attention.json").read_text())
    assert after == {**before, "kernel": "attention"}
    assert json.loads((proj / "baselines/x86_64/attention.json").read_text())["kernel"] == "attention"
    assert BaselineStore(proj / "baselines").read("aarch64", "attention").kernel == "attention"


def test_rename_refuses_to_overwrite_and_leaves_every_file_as_it_was(proj):
    store = BaselineStore(proj / "baselines")
    put(proj, "x86_64", "attentoin")  # aarch64's attention exists: the whole rename is refused
    files = {p: p.read_bytes() for p in (proj / "baselines").rglob("*.json")}
    with pytest.raises(InputError, match="kernel 'attention' has a baseline on aarch64 already"):
        store.rename("attentoin", "attention", ["x86_64", "aarch64"])
    assert {p: p.read_bytes() for p in (proj / "baselines").rglob("*.json")} == files
