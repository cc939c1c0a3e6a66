"""The toolchain headline as a team upgrading from 81ac9d1 (harness 3) reads it: perfguard's
versions named first, each tool once (the plugin's hash is the same change on every target), a
value that names itself not named twice ("harness harness 3"), and no claim about the code."""

from __future__ import annotations

import json
from pathlib import Path

from perfguard.document.report import Summary, ToolchainSummary
from perfguard.judge.verdicts import toolchain_changes, toolchain_summary
from perfguard.report.text import headline, toolchain_differences

FIXTURES = Path(__file__).resolve().parents[1] / "baselines" / "fixtures"


def toolchain(commit: str, target: str, **change: str) -> dict[str, str]:
    return {**json.loads((FIXTURES / f"{commit}-{target}-gemm_256.json").read_text())["toolchain"], **change}


def summary_of(pairs) -> ToolchainSummary:
    return ToolchainSummary.of(toolchain_summary(pairs))


def test_an_upgrade_from_harness_3_names_perfguard_and_each_change_once():
    pairs = [
        (t, toolchain_changes(toolchain("81ac9d1", t), toolchain("a14f59e", t, perfguard="0.2.0")))
        for t in ("aarch64", "x86_64")
    ]
    assert set(pairs[0][1]) == {"harness", "perfguard", "simulator"}
    said = toolchain_differences(summary_of(pairs))
    assert said == (
        "perfguard 0.1.0 \u2192 0.2.0 and its toolchain differ from the baselines' "
        "(harness 3, template 9c05e39152cb \u2192 harness 4, template 95644c68a139; "
        "simulator plugin=d0bf293e9b8831be07a5 \u2192 plugin=2137aa98fa3ba0b0a03b)"
    )
    line = headline(Summary(exit_code=0, toolchain=1, toolchain_changed=summary_of(pairs)))
    assert line.startswith("no regressions among the judged kernels; perfguard 0.1.0 \u2192 0.2.0 and its toolchain")
    assert line.endswith(
        "1 kernel(s) moved but are not judged (measured with another toolchain than their "
        "baselines': an edit of them is not guarded until you re-baseline); re-baseline "
        "with: perfguard baseline update --targets aarch64,x86_64"
    )
    assert "not a change of the code" not in line


def test_perfguard_alone_is_no_change_and_a_tool_alone_names_no_perfguard():
    same = toolchain("a14f59e", "aarch64")
    assert toolchain_changes(same, {**same, "perfguard": "0.2.0"}) == {}
    cc = {**same, "cc": "aarch64-linux-gnu-gcc (Debian 13.2.0-1) 13.2.0"}
    assert toolchain_differences(summary_of([("aarch64", toolchain_changes(same, cc))])) == (
        "toolchain differs from the baselines' (cc aarch64-linux-gnu-gcc (Debian 12.2.0-14) 12.2.0 \u2192 "
        "aarch64-linux-gnu-gcc (Debian 13.2.0-1) 13.2.0)"
    )
    line = headline(
        Summary(exit_code=0, toolchain=0, toolchain_changed=summary_of([("aarch64", toolchain_changes(same, cc))]))
    )
    assert line.startswith("no regressions; toolchain differs") and "no kernel moved beyond its threshold" in line
