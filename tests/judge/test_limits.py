"""Per-metric limits: the syntax, and a real check that fails on one statistic while the time passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfguard.errors import InputError
from perfguard.judging import Limit, parse_limits
from tests.input.test_bad_input import BASELINE, invoke, seeded  # noqa: F401  (the seeded project fixture)


@pytest.mark.parametrize(
    "value, limit",
    [
        (1.0, Limit("insts", 1.0, True)),
        (0, Limit("insts", 0.0, True)),
        ("2.5 %", Limit("insts", 2.5, True)),
        ("2.5%", Limit("insts", 2.5, True)),
        ("500 count", Limit("insts", 500.0, False)),
        ("1 counts", Limit("insts", 1.0, False)),
        ("2k count", Limit("insts", 2000.0, False)),
        ("1.5 M count", Limit("insts", 1.5e6, False)),
        ("3G count", Limit("insts", 3e9, False)),
    ],
)
def test_limit_syntax(value, limit):
    assert parse_limits({"insts": value}, "perfguard.toml: perfguard.limits") == {"insts": limit}


@pytest.mark.parametrize(
    "table, message",
    [
        ({"l1d_mises": 5.0}, "perfguard.limits: unknown metric 'l1d_mises'"),
        ({"insts": -1.0}, "perfguard.limits.insts: must not be negative"),
        ({"insts": "-3 %"}, "perfguard.limits.insts: must not be negative"),
        ({"insts": float("nan")}, "perfguard.limits.insts: must be a finite number"),
        ({"insts": float("inf")}, "perfguard.limits.insts: must be a finite number"),
        ({"insts": "5 parsecs"}, "perfguard.limits.insts: must be a percentage"),
        ({"insts": "5"}, "perfguard.limits.insts: must be a percentage"),
        ({"insts": True}, "perfguard.limits.insts: must be a percentage"),
        ({"insts": [1]}, "perfguard.limits.insts: must be a percentage"),
    ],
)
def test_bad_limits_are_input_errors(table, message):
    with pytest.raises(InputError) as info:
        parse_limits(table, "perfguard.toml: perfguard.limits")
    assert message in info.value.message and info.value.exit_code == 2


@pytest.mark.parametrize(
    "limit, baseline, current, breached",
    [
        (Limit("insts", 5.0, True), 1000, 1050, False),  # exactly at the limit
        (Limit("insts", 5.0, True), 1000, 1051, True),
        (Limit("insts", 5.0, True), 0, 1, True),  # from zero, any growth breaches a relative limit
        (Limit("insts", 50.0, False), 1000, 1050, False),
        (Limit("insts", 50.0, False), 1000, 1051, True),
        (Limit("insts", 0.0, False), 1000, 900, False),  # shrinking never breaches
    ],
)
def test_limit_breach(limit, baseline, current, breached):
    assert (limit.breach(baseline, current) is not None) == breached


@pytest.mark.slow
def test_a_limit_fails_the_check_on_one_statistic_while_the_time_passes(seeded: Path, tmp_path: Path):  # noqa: F811
    """The baseline had 10 % fewer loads: within a 50 % time threshold, over a 5 % limit on loads."""
    project = tmp_path / "proj"
    shutil.copytree(seeded, project)
    path = project / BASELINE
    data = json.loads(path.read_text())
    measured = data["stats"]["loads"]
    assert measured > 20
    data["stats"]["loads"] = int(measured / 1.10)
    path.write_text(json.dumps(data))
    config = project / "perfguard.toml"
    text = config.read_text()
    config.write_text(text.replace("[perfguard]\n", "[perfguard]\nthreshold = 50.0\nlimits = { loads = 5.0 }\n"))

    outcome = invoke(["check"], project)
    assert outcome.code == 1, outcome.out
    result = outcome.report["results"][0]
    assert result["verdict"] == "regression" and abs(result["delta_pct"]) < 50.0
    breach = result["limit_breaches"]["loads"]
    assert breach["limit"] == "5 %" and breach["current"] == measured and breach["delta_pct"] > 5.0
    assert "limit breached: loads +" in outcome.out
    assert "limit breached: loads" in (project / "reports" / "summary.md").read_text()

    # A kernel's own limit replaces the global one on that metric: an absolute allowance above the change.
    config.write_text(
        config.read_text().replace(
            "params = { M = 16, K = 16 }", f'params = {{ M = 16, K = 16 }}\nlimits = {{ loads = "{measured} count" }}'
        )
    )
    outcome = invoke(["check"], project)
    assert outcome.code == 0, outcome.out
    assert outcome.report["results"][0]["limit_breaches"] == {}
