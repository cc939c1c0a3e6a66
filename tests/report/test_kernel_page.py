"""A kernel page's account of a change, from the golden report of this repository's failing check
(tests/report/golden/repo: gemm_256 with tile_k 4 -> 1): the icicle keyed and topped by the model that
gave the verdict, no change that rounds to nothing listed as one, both sides of a changed block aligned
instruction by instruction, and a link to a folded block opening it in headless Chromium."""

from __future__ import annotations

import re

import pytest

from perfguard.document.report import read_report
from perfguard.document.result import InsnCycles
from perfguard.report import disassembly
from perfguard.report.html import OPEN_BLOCKS, kernel_file, render_kernel, write_html
from tests.report import golden


@pytest.fixture(scope="module")
def report():
    return read_report(golden.REPOSITORY)


def sections(page: str) -> dict[str, str]:
    """Each target's section of a kernel page, by target."""
    parts = re.split(r'<section class="target" id="t-', page)[1:]
    return {p.split('"')[0]: p for p in parts}


def test_blocks_whose_change_rounds_to_nothing_are_not_listed_nor_linked(report):
    page = sections(render_kernel(report, "gemm_256"))
    x86 = next(r for r in report.results if r.kernel == "gemm_256" and r.target == "x86_64")
    assert round(x86.blocks[-1].delta_cycles) == 0 and len(x86.blocks) == 12
    listed = re.findall(r'<details class="block"[^>]*>\s*<summary>([^<]*)</summary>', page["x86_64"])
    assert len(listed) == 11 and not any(s.startswith(("+0 cycles", "-0 cycles", "0 cycles")) for s in listed)
    ids = set(re.findall(r'<div class="asm" id="([^"]+)"', page["x86_64"]))
    links = set(re.findall(r'<a href="#([^"]+)">', page["x86_64"]))
    assert links <= ids and len(ids) == 11  # the icicle links only blocks that are listed


def test_the_icicle_is_keyed_and_topped_by_the_verdicts_model(report):
    page = sections(render_kernel(report, "gemm_256"))
    # x86_64's verdict came from the calibrated model; the rows are the pipeline model's cycles
    top = re.search(r'id="s0-flame-all"><title>([^<]*)</title>', page["x86_64"]).group(1)
    assert top.startswith(
        "the verdict&#x27;s calibrated model: 419.191 us \u2192 821.874 us (+402.684 us); placed by "
        "the pipeline model: 1,511,800 \u2192 2,784,278 cycles per call"
    )
    aarch64 = re.search(r'-flame-all"><title>([^<]*)</title>', page["aarch64"]).group(1)
    assert aarch64.startswith("pipeline model: ")  # the pipeline model gave that verdict itself
    assert (
        "removed: code only the baseline had" in page["x86_64"] and "added: code only this build has" in page["x86_64"]
    )
    # riscv64: the k_1 loop the new schedule has no more is drawn as removed code, not as faster code
    assert re.search(
        r"<title>loop k_1: [\d,]+ \u2192 0 cycles per call; code only the baseline had \(removed\)", page["riscv64"]
    )


def test_the_statistics_table_has_no_empty_effect_column(report):
    page = sections(render_kernel(report, "gemm_256"))
    assert "effect on predicted time" not in page["x86_64"]  # the pipeline and calibrated models price no counter
    assert "does not price counters one by one" in page["x86_64"]
    tiny = read_report(golden.TINY)  # the analytical model does
    assert "effect on predicted time" in render_kernel(tiny, "gemm_16")


def test_both_sides_of_a_block_are_aligned_instruction_by_instruction():
    rows = disassembly.aligned(
        ["mov %rax, %rbx", "vfmadd231ps %ymm1, %ymm2, %ymm3", "add $4, %r15", "jne -40"],
        ["mov %rax, %rbx", "vfmadd231ps %ymm5, %ymm2, %ymm3", "jne -52", "ret"],
    )
    assert [(r.kind, r.baseline, r.current) for r in rows] == [
        ("same", "mov %rax, %rbx", "mov %rax, %rbx"),
        ("changed", "vfmadd231ps %ymm1, %ymm2, %ymm3", "vfmadd231ps %ymm5, %ymm2, %ymm3"),
        ("only-baseline", "add $4, %r15", ""),
        ("changed", "jne -40", "jne -52"),
        ("only-current", "", "ret"),
    ]
    assert disassembly.aligned([], ["ret"]) == [disassembly.Row("only-current", "", "ret")]
    # llvm-mca's cycles go with their instruction, wherever the alignment puts it
    cyc = lambda lat, rt: InsnCycles(lat, rt, 1)  # noqa: E731
    rows = disassembly.aligned(
        ["mov %rax, %rbx", "add $4, %r15", "jne -40"],
        ["mov %rax, %rbx", "jne -52", "ret"],
        [cyc(1, 0.25), cyc(1, 0.5), cyc(1, 0.5)],
        [cyc(1, 0.25), cyc(2, 0.5), cyc(5, 1.0)],
    )
    assert [(r.kind, r.baseline_cycles, r.current_cycles) for r in rows] == [
        ("same", "1/0.25", "1/0.25"),
        ("only-baseline", "1/0.5", ""),
        ("changed", "1/0.5", "2/0.5"),
        ("only-current", "", "5/1"),
    ]
    assert rows[3].current_title == "latency 5 cycles, reciprocal throughput 1 cycles, 1 micro-op"
    # a side whose cycles do not match its lines one for one shows none
    assert all(r.baseline_cycles == "" for r in disassembly.aligned(["ret", "nop"], ["ret"], [cyc(1, 1.0)]))


def test_the_changed_blocks_show_llvm_mcas_cycles_beside_each_instruction(report):
    """From this repository's failing check (gemm_256's tile_k 4 -> 1): every changed block side the
    pipeline model scored carries one llvm-mca cost per instruction, and the page shows each beside
    its line, in both panes, for the row the alignment put it in."""
    x86 = next(r for r in report.results if r.kernel == "gemm_256" and r.target == "x86_64")
    sides = [s for b in x86.blocks for s in (b.baseline, b.current) if s is not None]
    assert sides and all(len(s.insn_cycles) == len(s.asm) for s in sides)
    assert all(c.latency >= 0 and c.rthroughput >= 0 and c.uops >= 0 for s in sides for c in s.insn_cycles)
    assert any(c.latency >= 4 for s in sides for c in s.insn_cycles)  # a load or an FMA is among them
    page = sections(render_kernel(report, "gemm_256"))["x86_64"]
    first = next(b for b in x86.blocks if round(b.delta_cycles))
    rows = disassembly.aligned(
        first.baseline.asm if first.baseline else [],
        first.current.asm if first.current else [],
        first.baseline.insn_cycles if first.baseline else [],
        first.current.insn_cycles if first.current else [],
    )
    table = page[page.index('id="s0-b') :]
    table = table[: table.index("</table>")]
    assert table.count('<tr class="asm-') == len(rows) and '<th class="cyc"' in table
    for row in rows:
        cells = (
            f'<td class="cyc" title="{row.baseline_title}">{row.baseline_cycles}</td>' if row.baseline_cycles else ""
        )
        assert cells in table


@pytest.mark.slow
def test_a_link_to_a_folded_block_opens_it_in_headless_chromium(report, tmp_path):
    write_html(report, tmp_path)
    page = tmp_path / kernel_file("gemm_256")
    folded = f"s0-b{OPEN_BLOCKS + 2}"  # in the folded "more changed blocks", closed as written
    text = page.read_text()
    block = text[text.rindex("<details", 0, text.index(f'id="{folded}"')) : text.index(f'id="{folded}"')]
    assert " open" not in block.split(">")[0]
    dom, requests = browse_fragment(page, folded, tmp_path / "nav")
    assert requests == []
    at = dom.index(f'id="{folded}"')
    opened = re.findall(r"<details[^>]*>", dom[:at])
    assert 'open=""' in opened[-1] and any("more-blocks" in d and 'open=""' in d for d in opened)


def browse_fragment(page, fragment: str, work):
    """Chromium on `page#fragment`, as a click on a link to it lands."""
    from tests.report import test_report_browser as browser

    class Located(type(page)):  # a path whose URI carries the fragment
        def as_uri(self):
            return super().as_uri() + "#" + fragment

    return browser.browse(Located(page), work, "--dump-dom")
