"""Attribution on real builds: a loop-order edit of one nest of a user kernel (an attention head: its
scores' reduction made innermost), checked with `perfguard check` on every ISA. The edit moves the
code after it and the C library's exp: none of that is ever named, and the where line names the
edited nest's loop, the same in the terminal, the JSON, the Markdown and the kernel page."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from perfguard.document.report import Report
from perfguard.report import where
from perfguard.report.text import what_changed_most
from perfguard.shells.cli import main
from perfguard.targets import BUILTIN
from tests.conftest import REPO
from tests.projects import kernel_table

ISAS = ["x86_64", "aarch64", "riscv64"]

TOML = '[perfguard]\ntargets = ["x86_64", "aarch64", "riscv64"]\nthreshold = 0.0\n' + kernel_table(
    "attention",
    "examples.kernels.attention:attention",
    'S = 32, D = 16, vector = 4, qk_order = "idj"',
    reference='"examples.kernels.attention:reference"',
    flops='"examples.kernels.attention:flops"',
)


def _exp_blocks(stats: dict) -> set[int]:
    """Start addresses of the C library's exp blocks (the symbol differs by ISA and C library)."""
    return {row[0] for row in stats["blocks"]["blocks"] if "exp" in row[5]}


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n.children)


@pytest.mark.slow
def test_a_loop_order_edit_names_the_edited_loop_on_every_isa_and_never_the_moved_libm_call(project, capsys):
    missing = [tool for t in ISAS for tool in (BUILTIN[t].cc, BUILTIN[t].qemu) if shutil.which(tool) is None]
    if missing or shutil.which("llvm-mca-19") is None:
        pytest.skip(f"missing {', '.join(missing) or 'llvm-mca-19'}")
    config = project(TOML)
    (config.parent / "examples").symlink_to(REPO / "examples")  # the user kernels, as a project would have them
    assert main(["baseline", "update", "--config", str(config)]) == 0
    config.write_text(config.read_text().replace('qk_order = "idj"', 'qk_order = "ijd"'))
    capsys.readouterr()
    assert main(["check", "--config", str(config)]) in (0, 1)
    out = capsys.readouterr().out
    reports = config.parent / "reports"
    report = Report.from_json(json.loads((reports / "perfguard.json").read_text()), "perfguard.json")
    summary = (reports / "summary.md").read_text()
    page = next((reports / "kernels").glob("attention*.html")).read_text()
    assert len(report.results) == 3
    for r in report.results:
        a = r.attribution
        assert r.verdict in ("regression", "improvement") and a is not None, r.label  # threshold 0: any change
        baseline = json.loads((config.parent / "baselines" / r.target / "attention.json").read_text())
        # the edit moved the C library's exp (its blocks in the view are at this run's addresses) ...
        exp_nodes = [n for n in _walk(a.nodes) if n.kind == "function" and "exp" in n.name]
        after = {int(b.name, 16) for n in exp_nodes for b in n.children if b.kind == "block"}
        before = _exp_blocks(baseline["stats"])
        assert before and after and not before & after, r.label
        # ... which is never a change, a changed block or a place
        assert all(n.unchanged and n.delta_cycles == 0 for n in exp_nodes), r.label
        assert not any("exp" in (s.symbol or "") for c in r.blocks for s in (c.baseline, c.current) if s)
        assert all("exp" not in where.name(p) for p in where.places(a))
        # the harness around the kernel is the same code too
        assert all(n.unchanged for n in a.nodes if n.name.startswith("perfguard_") or n.name == "main")
        # the top place is a loop of the edited nest (the scores' d or j: the reordered ones)
        top = where.places(a)[0]
        assert top.node.kind == "loop" and top.of("nest").name == "scores", where.name(top)
        assert top.node.name in ("d", "j") and top.node.loop.nest_name == "scores"
        # the whole change splits exactly, and the shares add up to 100 %
        assert a.code_cycles + a.stall_cycles + a.moved_cycles == pytest.approx(a.change_cycles)
        shares = [n.share_pct for n in a.nodes] + [a.share(a.stall_cycles), a.share(a.moved_cycles)]
        assert sum(shares) == pytest.approx(100.0)
        assert a.change_cycles / a.clock_hz == pytest.approx(r.current_time_s - r.baseline_time_s, rel=1e-9)
        # one where line everywhere: the terminal, the Markdown, the kernel page
        line = what_changed_most(r)
        assert line.startswith(f"loop {top.node.name} of nest scores in ")
        assert f"where {r.label}: {line}" in " ".join(out.split())
        lines, _ = where.top_lines(a)
        assert lines[0].split(":")[0] == line.split(":")[0]
        assert re.sub(r"\\(.)", r"\1", summary).count(lines[0].split(" [")[0]) >= 1
    assert page.count('<svg class="flame"') == 3
