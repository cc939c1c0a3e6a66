"""The rules that turn a change into a verdict, at their edges, on hand-made statistics:

- a kernel: `delta > threshold` is a regression, `delta < -threshold` an improvement, anything in
  between (the threshold itself included) unchanged; the threshold is the command line's, else the
  kernel's, else the config's;
- a per-metric limit: over `baseline + allowance` is a regression, at it is not;
- a [[model]]'s total: the same rule as a kernel's, on the same numbers the same answer.

The predictor here gives the instruction count as seconds: the rule under test is the comparison,
not a timing model (those have their own tests), and integer counts make every percentage exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfguard.baselines.store import Baseline
from perfguard.config import load_config
from perfguard.document.report import ModelKernel
from perfguard.document.verdicts import IMPROVEMENT, NEW, REGRESSION, TOOLCHAIN, UNCHANGED
from perfguard.errors import InputError
from perfguard.judge.model_totals import total
from perfguard.judge.verdicts import judge
from perfguard.judging import Limit
from perfguard.predict.base import Predictor
from perfguard.sim.stats import Stats


class CountAsSeconds(Predictor):
    """time = insts seconds, or the time `times` gives for that count."""

    name = "count"
    model_id = "count-as-seconds"

    def __init__(self, times: dict[int, float] | None = None):
        self.times = times or {}

    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        return np.array([self.times.get(s.insts, float(s.insts)) for s in stats], dtype=np.float64)


MODEL = CountAsSeconds()


def stats(insts: int, loads: int = 1000) -> Stats:
    return Stats(insts=insts, loads=loads)


def baseline(insts: int, loads: int = 1000, toolchain: dict | None = None) -> Baseline:
    return Baseline(
        kernel="k",
        target="x86_64",
        family=None,
        params={},
        simulator="qemu",
        content_hash="h",
        stats=stats(insts, loads),
        predicted_time_s=float(insts),
        model_id=MODEL.model_id,
        commit=None,
        created="2026-01-01T00:00:00+00:00",
        toolchain=toolchain or {},
    )


# -- the time threshold -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "base, current, threshold, verdict, delta",
    [
        (100, 102, 2.0, UNCHANGED, 2.0),  # exactly at the threshold: passes
        (1_000_000, 1_020_001, 2.0, REGRESSION, 2.0001),  # just over it
        (1_000_000, 1_019_999, 2.0, UNCHANGED, 1.9999),  # just under it
        (100, 98, 2.0, UNCHANGED, -2.0),  # exactly at the improvement side's threshold
        (1_000_000, 979_999, 2.0, IMPROVEMENT, -2.0001),
        (1_000_000, 980_001, 2.0, UNCHANGED, -1.9999),
        (100, 100, 0.0, UNCHANGED, 0.0),  # threshold 0: no change is no regression ...
        (1_000_000, 1_000_001, 0.0, REGRESSION, 0.0001),  # ... and any change is one
        (1_000_000, 999_999, 0.0, IMPROVEMENT, -0.0001),
        (100, 150, 50.0, UNCHANGED, 50.0),
        (100, 151, 50.0, REGRESSION, 51.0),
    ],
)
def test_the_threshold_at_just_over_and_just_under(base, current, threshold, verdict, delta):
    v = judge(stats(current), baseline(base), MODEL, threshold)
    assert (v.verdict, v.threshold_pct, v.current_time_s, v.baseline_time_s) == (
        verdict,
        threshold,
        float(current),
        float(base),
    )
    assert v.delta_pct == pytest.approx(delta, rel=1e-12, abs=1e-12)


def test_exactly_at_the_threshold_is_exactly_at_it():
    # the boundary rows above only mean something if the delta is the threshold itself, not 2 +- 1 ulp
    assert judge(stats(102), baseline(100), MODEL, 2.0).delta_pct == 2.0
    assert judge(stats(98), baseline(100), MODEL, 2.0).delta_pct == -2.0


def test_no_baseline_is_new_and_equal_times_are_no_change():
    v = judge(stats(7), None, MODEL, 2.0)
    assert (v.verdict, v.current_time_s, v.baseline_time_s, v.delta_pct) == (NEW, 7.0, None, None)
    zero = CountAsSeconds({5: 0.0})
    v = judge(stats(5), baseline(5), zero, 2.0)  # 0 s against 0 s: unchanged, not a division by zero
    assert (v.verdict, v.delta_pct) == (UNCHANGED, 0.0)


def test_a_baseline_scoring_zero_against_a_nonzero_run_cannot_be_judged():
    with pytest.raises(InputError) as info:
        judge(stats(6), baseline(5), CountAsSeconds({5: 0.0}), 2.0, source="baselines/x86_64/k.json")
    assert info.value.message.startswith(
        "baselines/x86_64/k.json: the baseline's statistics score 0 s under "
        "count-as-seconds: no relative change can be computed"
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_a_model_that_gives_no_time_is_an_error_not_unchanged(bad):
    # a NaN delta is neither above nor below a threshold: without the check it would pass as unchanged
    for current, base in ((5, 6), (6, 5)):
        with pytest.raises(InputError, match=r"model count-as-seconds scores .* as .* s, not a time"):
            judge(stats(current), baseline(base), CountAsSeconds({5: bad}), 2.0)


def test_a_toolchain_change_beyond_the_threshold_is_not_judged_and_within_it_is_unchanged():
    tools = {"cc": "gcc 12"}
    over = judge(stats(103), baseline(100, toolchain=tools), MODEL, 2.0, {"cc": "gcc 13"})
    assert over.verdict == TOOLCHAIN and over.toolchain_changed == {"cc": {"baseline": "gcc 12", "current": "gcc 13"}}
    under = judge(stats(97), baseline(100, toolchain=tools), MODEL, 2.0, {"cc": "gcc 13"})
    assert under.verdict == TOOLCHAIN
    at = judge(stats(102), baseline(100, toolchain=tools), MODEL, 2.0, {"cc": "gcc 13"})
    assert at.verdict == UNCHANGED and at.toolchain_changed  # said, but nothing to excuse
    same = judge(stats(103), baseline(100, toolchain=tools), MODEL, 2.0, {"cc": "gcc 12"})
    assert same.verdict == REGRESSION and same.toolchain_changed == {}


# -- per kernel: which threshold --------------------------------------------------------------------

CONFIG = """\
[perfguard]
targets = ["x86_64"]
threshold = 2.0
limits = { insts = 1.0, loads = "50 count" }

[[kernel]]
name = "a"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = { M = 16, K = 16 }

[[kernel]]
name = "b"
entry = "perfguard.kernels.gemv:gemv"
family = "gemv"
params = { M = 16, K = 32 }
threshold = 0.5
limits = { insts = 3.0 }
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "perfguard.toml"
    path.write_text(CONFIG)
    return load_config(path)


def test_a_kernels_threshold_replaces_the_configs_and_the_command_lines_replaces_both(config):
    a, b = config.kernels
    threshold_for = config.judging.threshold_for
    assert (threshold_for(a.threshold), threshold_for(b.threshold)) == (2.0, 0.5)
    assert (threshold_for(a.threshold, 7.0), threshold_for(b.threshold, 7.0)) == (7.0, 7.0)
    assert threshold_for(b.threshold, 0.0) == 0.0  # --threshold 0 is a threshold, not "unset"
    # the same 0.5 % change: within a's 2 %, exactly at b's 0.5 %, over it by 0.1 %
    verdicts = [
        judge(stats(current), baseline(1000), MODEL, config.judging.threshold_for(k.threshold)).verdict
        for k, current in ((a, 1005), (b, 1005), (b, 1006))
    ]
    assert verdicts == [UNCHANGED, UNCHANGED, REGRESSION]


# -- per metric: limits -------------------------------------------------------------------------------


def test_a_kernels_limit_replaces_the_global_one_on_its_metric_only(config):
    a, b = config.kernels
    limits_for = config.judging.limits_for
    assert limits_for(a.limits) == {"insts": Limit("insts", 1.0, True), "loads": Limit("loads", 50.0, False)}
    assert limits_for(b.limits) == {"insts": Limit("insts", 3.0, True), "loads": Limit("loads", 50.0, False)}


@pytest.mark.parametrize(
    "kernel, insts, loads, breached",
    [
        ("a", 1010, 1050, {}),  # both exactly at their limits (1 % of 1000, 50 counts)
        (
            "a",
            1011,
            1050,
            {"insts": {"baseline": 1000, "current": 1011, "delta": 11, "delta_pct": 1.1, "limit": "1 %"}},
        ),
        (
            "a",
            1010,
            1051,
            {"loads": {"baseline": 1000, "current": 1051, "delta": 51, "delta_pct": 5.1, "limit": "50 count"}},
        ),
        ("b", 1030, 1000, {}),  # b's own 3 % on insts, at it
        (
            "b",
            1031,
            1000,
            {"insts": {"baseline": 1000, "current": 1031, "delta": 31, "delta_pct": 3.1, "limit": "3 %"}},
        ),
        ("a", 500, 10, {}),  # shrinking never breaches
    ],
)
def test_a_limit_at_and_just_over_through_the_verdict(config, kernel, insts, loads, breached):
    spec = config.kernel(kernel)
    # a 1000 % time threshold: only a limit can fail these
    v = judge(stats(insts, loads), baseline(1000), MODEL, 1000.0, limits=config.judging.limits_for(spec.limits))
    assert v.limit_breaches == breached  # delta_pct 1.1 is 100 x 11 / 1000 rounded once: equal to the literal
    assert v.verdict == (REGRESSION if breached else UNCHANGED)


def test_a_relative_limit_on_a_count_that_was_zero_breaches_on_any_growth():
    limits = {"loads": Limit("loads", 50.0, True)}
    assert judge(stats(1000, 0), baseline(1000, 0), MODEL, 2.0, limits=limits).verdict == UNCHANGED
    v = judge(stats(1000, 1), baseline(1000, 0), MODEL, 2.0, limits=limits)
    assert v.verdict == REGRESSION
    assert v.limit_breaches == {"loads": {"baseline": 0, "current": 1, "delta": 1, "delta_pct": None, "limit": "50 %"}}


def test_a_limit_breach_measured_with_another_toolchain_is_not_judged():
    v = judge(
        stats(1000, 2000),
        baseline(1000, 1000, {"cc": "gcc 12"}),
        MODEL,
        2.0,
        {"cc": "gcc 13"},
        limits={"loads": Limit("loads", 1.0, True)},
    )
    assert v.verdict == TOOLCHAIN and set(v.limit_breaches) == {"loads"}


# -- a model's total ----------------------------------------------------------------------------------


def row(
    name: str, base_s: float | None, current_s: float | None, calls: int = 1, verdict: str = UNCHANGED
) -> ModelKernel:
    return ModelKernel(
        name,
        "op",
        verdict,
        calls,
        calls if base_s is not None else None,
        current_s,
        base_s,
        current_total_s=None if current_s is None else current_s * calls,
        baseline_total_s=None if base_s is None else base_s * calls,
    )


@pytest.mark.parametrize(
    "rows, verdict, delta",
    [
        ([row("x", 60.0, 61.0), row("y", 40.0, 41.0)], UNCHANGED, 2.0),  # 100 -> 102 at 2 %: exactly at it
        ([row("x", 60.0, 61.0), row("y", 40.0, 41.5)], REGRESSION, 2.5),
        ([row("x", 60.0, 59.0), row("y", 40.0, 39.0)], UNCHANGED, -2.0),
        ([row("x", 60.0, 59.0), row("y", 40.0, 38.5)], IMPROVEMENT, -2.5),
        ([row("x", 30.0, 30.5, calls=2), row("y", 40.0, 41.0)], UNCHANGED, 2.0),  # calls per inference count
        ([row("x", 30.0, 30.5, calls=2), row("y", 40.0, 41.25)], REGRESSION, 2.25),
    ],
)
def test_a_models_total_at_and_over_its_threshold(rows, verdict, delta):
    t = total("net", "x86_64", 2.0, rows)
    assert (t.verdict, t.current_total_s, t.baseline_total_s) == (verdict, 100.0 + delta, 100.0)
    assert t.delta_pct == delta


# b and c with 100 (c - b) / b == 5.0 exactly, where (c - b) / b x 100 rounds to 5.000000000000001
ULP_BASE, ULP_CURRENT = 0.00039312367377272484, 0.0004127798574613611


def test_a_model_of_one_kernel_gets_its_kernels_verdict_on_the_same_numbers():
    kernel = judge(stats(2), baseline(1), CountAsSeconds({1: ULP_BASE, 2: ULP_CURRENT}), 5.0)
    assert (kernel.verdict, kernel.delta_pct) == (UNCHANGED, 5.0)
    model = total("net", "x86_64", 5.0, [row("k", ULP_BASE, ULP_CURRENT)])
    assert (model.verdict, model.delta_pct) == (kernel.verdict, kernel.delta_pct)
