"""The charts' axes: where values land, which ticks an axis shows, how tick labels read."""

from __future__ import annotations

import pytest

from perfguard.report.scales import Linear, Log, compact, linear_ticks, log_ticks, signed_pct, time_labels


def test_linear_scale_maps_ends_and_middle_and_runs_either_way():
    x = Linear(-10.0, 30.0, 100.0, 500.0)
    assert (x(-10.0), x(10.0), x(30.0)) == (100.0, 300.0, 500.0)
    y = Linear(0.0, 2.0, 300.0, 30.0)  # SVG's y grows downwards: the bottom of the plot is the low end
    assert (y(0.0), y(0.5), y(2.0)) == (300.0, 232.5, 30.0)
    flat = Linear(5.0, 5.0, 0.0, 100.0)  # one value only: still a usable scale, not a division by zero
    assert flat(5.0) == 0.0 and flat.hi > flat.lo


def test_log_scale_puts_each_decade_the_same_distance_apart():
    x = Log(0.01, 100.0, 0.0, 400.0)
    assert [round(x(v), 9) for v in (0.01, 0.1, 1.0, 10.0, 100.0)] == [0.0, 100.0, 200.0, 300.0, 400.0]
    assert x(2.0) == pytest.approx(200.0 + 100.0 * 0.30103, abs=1e-3)
    with pytest.raises(ValueError, match="positive lower limit"):
        Log(0.0, 1.0, 0.0, 1.0)


@pytest.mark.parametrize(
    "lo, hi, most, expected",
    [
        (0.0, 1.5, 5, [0.0, 0.5, 1.0, 1.5]),
        (0.0, 1.0, 5, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (-11.5, 11.5, 5, [-10.0, -5.0, 0.0, 5.0, 10.0]),  # a symmetric span gets symmetric ticks
        (0.0, 7.5e-6, 5, [0.0, 2e-6, 4e-6, 6e-6]),
        (98.0, 102.0, 5, [98.0, 99.0, 100.0, 101.0, 102.0]),
        (0.0, 10.0, 4, [0.0, 2.5, 5.0, 7.5, 10.0]),
        (3.0, 3.0, 5, [3.0]),
    ],
)
def test_linear_ticks_are_round_and_few(lo, hi, most, expected):
    ticks = linear_ticks(lo, hi, most)
    assert ticks == expected
    assert all(lo <= t <= hi for t in ticks) and len(ticks) <= most + 1


def test_log_ticks_are_decades_thinned_to_a_handful():
    assert log_ticks(0.05, 30.0) == [0.1, 1.0, 10.0]
    assert log_ticks(1e-3, 1e12) == [1e-2, 1.0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12]  # 16 decades: every second
    # fewer than two decades inside: 1-2-5 steps, never a single lonely tick
    assert log_ticks(2e-6, 4e-5) == [2e-6, 5e-6, 1e-5, 2e-5]
    assert log_ticks(1.5e-6, 9e-6) == [2e-6, 5e-6]
    assert log_ticks(1.1, 1.9) == [1.2, 1.4, 1.6, 1.8]  # not even a 2: linear steps


def test_tick_labels():
    assert [compact(v) for v in (0.01, 1.0, 10.0, 1000.0, 1e5, 1e6, 2.5e9)] == [
        "0.01",
        "1",
        "10",
        "1k",
        "100k",
        "1M",
        "2.5G",
    ]
    assert [signed_pct(v) for v in (-10.0, 0.0, 2.5)] == ["-10 %", "0", "+2.5 %"]
    # one unit for the axis, the decimals that tell the ticks apart
    assert time_labels([0.0, 2e-6, 4e-6, 6e-6]) == ["0", "2 us", "4 us", "6 us"]
    assert time_labels([0.0, 5e-4, 1e-3, 1.5e-3]) == ["0", "0.5 ms", "1.0 ms", "1.5 ms"]
    assert time_labels([1.002e-3, 1.004e-3]) == ["1.002 ms", "1.004 ms"]
    # a log axis: each tick in its own right
    assert time_labels([1e-7, 1e-6, 1e-5]) == ["0.1 us", "1 us", "10 us"]
