"""docs/kernels.md's cookbook, run: every recipe of examples/cookbook through `perfguard check` on
x86_64, aarch64 and riscv64 (one project, one baseline update, one check, then one check with an
edit to each scheduled recipe), and the page's code blocks are the recipes' files (issue 42)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from perfguard.document.codec import from_json
from perfguard.document.result import Result
from perfguard.report.text import what_changed_most
from perfguard.shells.cli import main
from tests.conftest import REPO

COOKBOOK = REPO / "examples" / "cookbook"
PAGE = REPO / "docs" / "kernels.md"
ISAS = ["x86_64", "aarch64", "riscv64"]
RECIPES = ["gather", "argmax", "stencil", "softmax", "qmatmul"]

# Schedule edits: (kernel, config text, edited text).
EDITS = [
    ("gather", "params = { V = 512, D = 32, N = 64, vector = 8 }", "params = { V = 512, D = 32, N = 64, vector = 1 }"),
    (
        "stencil",
        "params = { H = 32, W = 64, tile = 8, vector = 8 }",
        "params = { H = 32, W = 64, tile = 8, vector = 1 }",
    ),
    ("qmatmul", "params = { M = 16, N = 32, K = 64, vector = 16 }", "params = { M = 16, N = 32, K = 64, vector = 1 }"),
    (
        "argmax",
        'params = { R = 16, N = 256, split = 8, order = "ik" }',
        'params = { R = 16, N = 256, split = 8, order = "ki" }',
    ),
]


def test_every_recipe_file_is_on_the_page_and_the_page_shows_them_as_they_are():
    text = PAGE.read_text()
    blocks = re.findall(r"^```(?:python|toml)\n(# examples/cookbook/\S+)\n(.*?)^```", text, flags=re.S | re.M)
    shown = {}
    for header, body in blocks:
        shown.setdefault(header.split()[1], []).append(body)
    for recipe in RECIPES:
        path = f"examples/cookbook/recipes/{recipe}.py"
        assert path in shown, f"docs/kernels.md shows no block of {path}"
        for body in shown[path]:
            assert body in (REPO / path).read_text(), f"a block of {path} on docs/kernels.md is not in the file"
    config = (COOKBOOK / "perfguard.toml").read_text()
    for body in shown.get("examples/cookbook/perfguard.toml", []):
        assert body in config
    assert len(shown.get("examples/cookbook/perfguard.toml", [])) == len(RECIPES)
    # the TVM 0.27 names, where a user meets them
    for name in ("tvm.tirx", "tvm.s_tir.Schedule", "get_sblock", "module 'tvm' has no attribute 'tir'"):
        assert name in text


@pytest.mark.slow
def test_cookbook_recipes_check_on_every_target_and_edits_are_judged(tmp_path, cache_dir, capsys):
    project = tmp_path / "cookbook"
    shutil.copytree(COOKBOOK, project, ignore=shutil.ignore_patterns("__pycache__", "baselines", "reports"))
    config = project / "perfguard.toml"
    text = config.read_text()
    config.write_text(text.replace("threshold = 1.0", f'threshold = 1.0\ncache_dir = "{cache_dir}"'))
    assert main(["baseline", "update", "--config", str(config)]) == 0
    assert main(["check", "--config", str(config)]) == 0
    report = json.loads((project / "reports" / "perfguard.json").read_text())
    results = {(r["kernel"], r["target"]): r for r in report["results"]}
    assert sorted(results) == sorted((k, t) for k in RECIPES for t in ISAS)
    for (kernel, target), r in results.items():
        assert r["verdict"] == "unchanged" and r["reference"] == "numpy", (kernel, target, r["verdict"])
        assert r["max_error"] is not None and r["max_error"] <= 1e-5, (kernel, target, r["max_error"])
    for target in ISAS:  # integer outputs are compared exactly: the index of the max and the int32 matmul
        assert results[("argmax", target)]["max_error"] <= 1e-6
        assert results[("qmatmul", target)]["max_error"] == 0.0
    # a kernel without floating-point work is measured by its bytes, not told to add a flop count
    gather_page = (project / "reports" / "kernels" / "gather.html").read_text()
    assert "no floating-point work (flops = &#34;0&#34;), measured by the bytes it moves: 72.25 KiB" in gather_page
    assert "add <code>flops" not in gather_page
    assert results[("stencil", "x86_64")]["flops"] == 5 * 32 * 64

    edited = config.read_text()
    for _, before, after in EDITS:
        assert before in edited
        edited = edited.replace(before, after)
    config.write_text(edited)
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert "same machine code as the baseline: gather [aarch64, riscv64, x86_64]" in out, out
    report = json.loads((project / "reports" / "perfguard.json").read_text())
    results = {(r["kernel"], r["target"]): r for r in report["results"]}
    for target in ISAS:
        # the column loop's lanes dropped: scalar multiply-adds, slower everywhere
        assert results[("qmatmul", target)]["verdict"] == "regression", results[("qmatmul", target)]["verdict"]
        # the gather's dropped vectorise: LLVM vectorises the row copy itself, to the very same code
        gather = results[("gather", target)]
        assert gather["verdict"] == "unchanged" and gather["delta_pct"] == 0.0 and gather["same_code"] is True
        assert gather["content_hash"] != gather["baseline_content_hash"]  # the edit was picked up
        assert (
            results[("softmax", target)]["verdict"] == "unchanged" and "same_code" not in results[("softmax", target)]
        )
        # the arg-max's partial results' loops turned around: faster, and the where line names the loop
        # of the rfactor nest on every ISA (riscv64, which peels a chunk off, said "no loop named")
        argmax = from_json(Result, results[("argmax", target)], "perfguard.json")
        assert argmax.verdict == "improvement", (target, argmax.verdict)
        assert what_changed_most(argmax).startswith("loop k_1 of nest best.v0.rf, best.v1.rf in main_compute_"), (
            target,
            what_changed_most(argmax),
        )
    # the stencil without its vectorise: slower on riscv64 (rv64gc, no vectors: the eight lanes were
    # eight unrolled scalars), where x86_64 and aarch64 re-vectorise it
    assert results[("stencil", "riscv64")]["verdict"] == "regression"
    summary = (project / "reports" / "summary.md").read_text().replace("\\", "")  # without Markdown's escapes
    assert "Same machine code as the baseline: gather [aarch64, riscv64, x86_64]" in summary


@pytest.mark.parametrize(
    "recipe, before, after, said, page",
    [
        (
            "argmax",
            "tvm.tirx.Select(x[1] >= y[1], x[0], y[0])",
            "tvm.tir.Select(x[1] >= y[1], x[0], y[0])",
            "raised AttributeError: module 'tvm' has no attribute 'tir' (TVM 0.27 has no tvm.tir: expression helpers "
            "(Select, floormod, const) are tvm.tirx, schedules tvm.s_tir.Schedule)",
            "`AttributeError: module 'tvm' has no attribute 'tir'`",
        ),
        (
            "argmax",
            "return keep, tvm.tirx.Select(x[1] >= y[1], x[1], y[1])",
            "return keep, tvm.te.max(x[1], y[1])",
            "raised ScheduleError: ScheduleError: An error occurred in the schedule primitive 'rfactor'. Error message: "
            "No matched reducer for identity",
            "Error message: No matched reducer for identity",
        ),
        (
            "stencil",
            'sch.get_sblock("out")',
            'sch.get_block("out")',
            "raised AttributeError: 'Schedule' object has no attribute 'get_block' (TVM 0.27 finds blocks with "
            "sch.get_sblock)",
            "`AttributeError: 'Schedule' object has no attribute 'get_block'`",
        ),
    ],
)
def test_the_pages_tvm_mistakes_give_the_errors_it_lists(tmp_path, capsys, recipe, before, after, said, page):
    """Three rows of the page's table, made in a recipe: the kernel's error (exit 2) says what the page says."""
    project = tmp_path / "cookbook"
    shutil.copytree(COOKBOOK, project, ignore=shutil.ignore_patterns("__pycache__", "baselines", "reports"))
    source = project / "recipes" / f"{recipe}.py"
    assert before in source.read_text()
    source.write_text(source.read_text().replace(before, after))
    config = project / "perfguard.toml"
    config.write_text(
        config.read_text().replace(
            'targets = ["x86_64", "aarch64", "riscv64"]', f'targets = ["x86_64"]\ncache_dir = "{tmp_path / "cache"}"'
        )
    )
    assert main(["check", "--config", str(config), "--kernels", recipe]) == 2
    out = capsys.readouterr().out
    assert said in out, out
    assert page in PAGE.read_text()
