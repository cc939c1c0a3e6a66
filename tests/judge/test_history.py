"""Baseline history from a real git repository, and change points in it."""

from __future__ import annotations

import random
import statistics

import git
import pytest

from perfguard.baselines.store import Baseline, BaselineStore
from perfguard.document.report import Report, Summary
from perfguard.document.result import Result
from perfguard.judge.changepoint import detect
from perfguard.judge.history import BaselineHistory, kernel_history
from perfguard.predict.analytical import AnalyticalModel
from perfguard.report.html import render_kernel
from perfguard.report.markdown import render_markdown
from perfguard.sim.stats import Stats
from perfguard.targets import BUILTIN

PROFILE = BUILTIN["x86_64"]
MODEL = AnalyticalModel(PROFILE)


def score(b: Baseline) -> float:
    return float(MODEL.predict_stats([b.stats])[0])


def baseline(insts: int, kernel: str = "k", simulator: str = "qemu") -> Baseline:
    stats = Stats(
        insts=insts,
        loads=insts // 4,
        stores=insts // 10,
        branches=insts // 20,
        fp_insts=0,
        vec_insts=insts // 3,
        vec_fp_insts=insts // 8,
        l1i_misses=2,
        l1d_misses=insts // 50,
        l2_misses=3,
    )
    return Baseline(
        kernel=kernel,
        target="x86_64",
        family="gemm",
        params={},
        simulator=simulator,
        content_hash="h",
        stats=stats,
        predicted_time_s=0.0,
        model_id="m",
        commit=None,
        created="2026-01-01T00:00:00+00:00",
    )


@pytest.fixture
def repo(tmp_path):
    r = git.Repo.init(tmp_path / "proj")
    with r.config_writer() as cw:
        cw.set_value("user", "name", "perfguard tests")
        cw.set_value("user", "email", "tests@perfguard.invalid")
    return r


def commit_baseline(repo, b: Baseline, message: str) -> str:
    store = BaselineStore(repo.working_tree_dir + "/baselines")
    path = store.write(b)
    repo.index.add([str(path)])
    return repo.index.commit(message).hexsha


# Five flat commits (noise well under 1 %), then a 25 % step that stays: one change point.
LEVELS = [100_000, 100_150, 99_900, 100_050, 100_100, 125_000, 125_200, 124_900, 125_100]


def test_history_of_a_real_repository_finds_the_one_step(repo):
    shas = [
        commit_baseline(repo, baseline(n), f"tune <b>kernel</b> step {i} <script>x()</script>")
        for i, n in enumerate(LEVELS)
    ]
    # Commits that do not touch this baseline are not points of its history.
    other = BaselineStore(repo.working_tree_dir + "/baselines").write(baseline(5, kernel="other"))
    repo.index.add([str(other)])
    repo.index.commit("another kernel")

    history = BaselineHistory(repo.working_tree_dir + "/baselines")
    assert history.head == repo.head.commit.hexsha
    h = kernel_history(history, "x86_64", "k", "qemu", score, min_step_pct=2.0)
    assert [p.commit for p in h.points] == shas
    assert h.points[0].subject == "tune <b>kernel</b> step 0 <script>x()</script>"  # raw: renderers escape
    assert h.points[0].time_s == pytest.approx(score(baseline(LEVELS[0])))
    assert len(h.change_points) == 1
    change = h.change_points[0]
    assert change.index == 5 and change.commit == shas[5]
    # the levels are the medians of each side's predicted times (the model is monotonic in the counts)
    before, after = score(baseline(100_050)), 0.5 * (score(baseline(125_000)) + score(baseline(125_100)))
    assert (change.before_s, change.after_s) == (before, after)
    assert change.step_pct == 100.0 * (after - before) / before and 24.0 < change.step_pct < 26.0
    assert h.omitted == 0
    assert len(kernel_history(history, "x86_64", "other", "qemu", score, 2.0).points) == 1


def test_flat_history_has_no_change_point_and_other_simulators_are_left_out(repo):
    for i, n in enumerate([50_000, 50_020, 49_990, 50_010]):
        commit_baseline(repo, baseline(n), f"flat {i}")
    commit_baseline(repo, baseline(90_000, simulator="cachegrind"), "simulated elsewhere")
    history = BaselineHistory(repo.working_tree_dir + "/baselines")
    h = kernel_history(history, "x86_64", "k", "qemu", score, min_step_pct=1.0)
    assert len(h.points) == 4 and h.change_points == []
    assert kernel_history(history, "x86_64", "k", "gem5", score, 1.0) is None


def test_deleted_and_damaged_versions_are_skipped(repo):
    commit_baseline(repo, baseline(10_000), "first")
    path = BaselineStore(repo.working_tree_dir + "/baselines").path("x86_64", "k")
    path.write_text("{ not json")
    repo.index.add([str(path)])
    repo.index.commit("damaged")
    repo.index.remove([str(path)], working_tree=True)
    repo.index.commit("removed")
    commit_baseline(repo, baseline(10_000), "back")
    history = BaselineHistory(repo.working_tree_dir + "/baselines")
    h = kernel_history(history, "x86_64", "k", "qemu", score, 2.0)
    assert [p.subject for p in h.points] == ["first", "back"]


def test_no_repository_means_no_history(tmp_path):
    history = BaselineHistory(tmp_path / "baselines")
    assert history.head is None and history.log() == {}
    assert kernel_history(history, "x86_64", "k", "qemu", score, 2.0) is None


def test_history_commit_messages_are_escaped_in_the_kernel_page(repo):
    for i, n in enumerate(LEVELS):
        commit_baseline(repo, baseline(n), f"<img src=x onerror=alert({i})> & more")
    history = BaselineHistory(repo.working_tree_dir + "/baselines")
    h = kernel_history(history, "x86_64", "k", "qemu", score, 2.0)
    result = Result(
        kernel="k",
        target="x86_64",
        verdict="unchanged",
        delta_pct=0.0,
        threshold_pct=2.0,
        current_time_s=h.points[-1].time_s,
        baseline_time_s=h.points[-1].time_s,
        simulator="qemu",
        history=h,
    )
    data = Report(Summary(exit_code=0, unchanged=1), [result])
    page = render_kernel(data, "k", [result])
    assert "<img" not in page and "&lt;img src=x onerror=alert(3)&gt; &amp; more" in page
    assert "step +" in page  # the change point is marked in the commit table
    assert 'id="s0-history"' in page and page.count("<svg") == 1
    assert "<img" not in render_markdown(data)


@pytest.mark.parametrize(
    "values, expected",
    [
        ([1.0] * 6 + [1.3] * 6, [6]),  # one step up
        ([1.0] * 8, []),  # flat
        ([1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001], []),  # noise far below the step size
        ([1.0] * 5 + [1.5] + [1.0] * 5, [5, 6]),  # a regression that was reverted: two steps
        ([1.0] * 4 + [1.2] * 4 + [0.8] * 4, [4, 8]),  # up, then down below the start
        ([1.0] * 5 + [1.01] * 5, []),  # a 1 % step under a 2 % threshold is not a change point
        ([100.0] * 5 + [102.0] * 5, [5]),  # a step of exactly min_step is one (a step "of at least min_step")
        ([100.0] * 5 + [101.99] * 5, []),  # just under it is not
        ([100.0] * 5 + [98.0] * 5, [5]),  # the same downwards
        ([100.0] * 5 + [98.01] * 5, []),
        ([2.0, 1.0], [1]),  # the shortest series with a step
        ([1.0], []),
        ([], []),
    ],
)
def test_change_points(values, expected):
    assert [c.index for c in detect(values, min_step_pct=2.0)] == expected


def test_change_points_in_long_noisy_series():
    rng = random.Random(7)
    values = [1.0 + rng.uniform(-0.004, 0.004) for _ in range(60)] + [
        1.1 + rng.uniform(-0.004, 0.004) for _ in range(40)
    ]
    found = detect(values, min_step_pct=2.0)
    assert [c.index for c in found] == [60]
    before, after = statistics.median(values[:60]), statistics.median(values[60:])
    assert (found[0].before, found[0].after) == (before, after)
    assert found[0].step_pct == 100.0 * (after - before) / before
