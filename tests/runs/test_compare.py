"""perfguard compare A B and perfguard bisect, on real temporary git repositories.

Each revision is checked out into its own worktree and measured in its own process: the user
kernel module `mykernels/ops.py` has the same name on both sides and different code, and each
side must measure its own.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from perfguard.runs.revisions import Measurer, Project, load_side
from perfguard.shells.cli import main
from tests.conftest import REPO
from tests.projects import GOOD, WORSE, commit_all, git, kernel_table, project_repository, with_cache

pytestmark = pytest.mark.slow  # every test measures real revisions

SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())

OPS = """
import tvm
from tvm import te


def scale(n=64):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: {body}, name="B")
    return tvm.IRModule({{"main": te.create_prim_func([A, B])}})
"""
FAST, SLOW = "A[i] * 2.0", "A[i] * 2.0 + A[i] * A[i] * 3.0 + A[i] * A[i] * A[i]"


def toml(*kernels: str) -> str:
    return '[perfguard]\ntargets = ["x86_64"]\n' + "".join(kernels)


GEMM_GOOD = kernel_table("gemm_a", "perfguard.kernels.gemm:gemm", GOOD, "gemm")
GEMM_WORSE = kernel_table("gemm_a", "perfguard.kernels.gemm:gemm", WORSE, "gemm")
USER = kernel_table("user", "mykernels.ops:scale", "n = 64")
GONE = kernel_table("gone", "perfguard.kernels.gemv:gemv", "M = 16, K = 16", "gemv")
ADDED = kernel_table("added", "perfguard.kernels.gemv:gemv", "M = 16, K = 32", "gemv")


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def repo(tmp_path, cache_dir):
    """An empty repository with the project in proj/; write(...) then commit_all(...) to add revisions."""
    return project_repository(tmp_path, with_cache(toml(), cache_dir))


def report(config: Path) -> dict:
    return json.loads((config.parent / "reports" / "perfguard.json").read_text())


def test_compare_two_revisions_new_removed_and_user_modules_apart(repo, cache_dir, capsys):
    proj = repo.parent
    write(
        proj,
        {
            "perfguard.toml": with_cache(toml(GEMM_GOOD, USER, GONE), cache_dir),
            "mykernels/__init__.py": "",
            "mykernels/ops.py": OPS.format(body=FAST),
        },
    )
    base = commit_all(proj.parent, "base")
    write(
        proj,
        {
            "perfguard.toml": with_cache(toml(GEMM_WORSE, USER, ADDED), cache_dir),
            "mykernels/ops.py": OPS.format(body=SLOW),
        },
    )
    head = commit_all(proj.parent, "head")

    assert main(["compare", base, "HEAD", "--config", str(repo), "-j", "1"]) == 1
    out = capsys.readouterr().out
    assert f"comparing HEAD ({head[:12]}) against {base} ({base[:12]})" in out
    data = report(repo)
    jsonschema.validate(data, SCHEMA)
    verdicts = {r["kernel"]: r for r in data["results"]}
    assert {k: r["verdict"] for k, r in verdicts.items()} == {
        "gemm_a": "regression",
        "user": "regression",
        "added": "new",
        "gone": "removed",
    }
    assert verdicts["gemm_a"]["delta_pct"] > 2.0
    # Each side measured its own mykernels/ops.py: the head's kernel does more floating-point work.
    user = verdicts["user"]["stat_deltas"]
    assert user["vec_fp_insts"]["current"] > user["vec_fp_insts"]["baseline"] > 0, user
    assert verdicts["gone"]["baseline_time_s"] > 0 and verdicts["gone"]["current_time_s"] is None
    assert data["summary"]["removed"] == 1 and data["summary"]["new"] == 1 and data["summary"]["exit_code"] == 1
    assert data["base"] == {"ref": base, "commit": base} and data["compare"]["head"]["commit"] == head
    assert data["config"] == str(repo.resolve())
    summary = (proj / "reports" / "summary.md").read_text()
    assert "removed" in summary and "gone" in summary and f"HEAD `{head[:10]}` against" in summary
    index = (proj / "reports" / "index.html").read_text()
    assert "removed" in index and f"HEAD <code>{head[:12]}</code> against" in index
    # The user's working tree and branch are untouched, and no worktree is left behind.
    assert git(proj.parent, "rev-parse", "HEAD") == head and git(proj.parent, "status", "--porcelain") == ""
    assert len(git(proj.parent, "worktree", "list").splitlines()) == 1

    # The same revision on both sides: every kernel unchanged, nothing rebuilt or re-simulated.
    assert main(["compare", "HEAD", "HEAD", "--config", str(repo), "-j", "1", "--kernels", "gemm_a,user"]) == 0
    data = report(repo)
    assert {r["verdict"] for r in data["results"]} == {"unchanged"}
    assert not any(r["rebuilt"] or r["resimulated"] for r in data["results"])


def test_compare_with_a_base_that_has_no_config_reports_every_kernel_new(repo):
    proj = repo.parent
    config_text = repo.read_text()
    repo.unlink()
    write(proj.parent, {"README": "kernels to come\n"})
    base = commit_all(proj.parent, "no perfguard yet")
    repo.write_text(config_text + kernel_table("g", "perfguard.kernels.gemv:gemv", "M = 16, K = 16", "gemv"))
    commit_all(proj.parent, "adopt perfguard")
    assert main(["compare", base, "--config", str(repo), "-j", "1"]) == 0
    data = report(repo)
    assert [(r["kernel"], r["verdict"]) for r in data["results"]] == [("g", "new")]
    assert data["compare"]["base"]["has_config"] is False


# -- bisect ------------------------------------------------------------------------------------------

COMMITS = 17  # after the good one
REGRESSED_AT = 11  # the commit (1-based after good) that makes gemm_a slower


@pytest.fixture(scope="module")
def history(tmp_path_factory, cache_dir):
    """good, then COMMITS commits on main; the REGRESSED_AT-th swaps gemm_a's schedule for a slower one,
    one commit in between breaks the kernel (does not build), the others touch an unrelated file.
    Read only (bisect measures in worktrees of its own): the tests below share it."""
    config = project_repository(tmp_path_factory.mktemp("bisect"), with_cache(toml(GEMM_GOOD), cache_dir))
    proj, base = config.parent, config.read_text()
    shas = [commit_all(proj.parent, "good")]
    for i in range(1, COMMITS + 1):
        text = base if i < REGRESSED_AT else base.replace(GOOD, WORSE)
        if i == 6:  # a commit that cannot be measured: tile_n does not divide N
            text = text.replace("tile_n = 16", "tile_n = 7")
        write(proj, {"perfguard.toml": text, "notes.txt": f"change {i}\n"})
        shas.append(commit_all(proj.parent, f"change {i}" + (" (slower gemm)" if i == REGRESSED_AT else "")))
    return config, shas


def test_bisect_finds_the_injected_regression_then_costs_nothing_the_second_time(history, cache_dir, tmp_path, capsys):
    config, shas = history
    argv = [
        "bisect",
        "--good",
        shas[0],
        "--bad",
        "HEAD",
        "--kernel",
        "gemm_a",
        "--target",
        "x86_64",
        "--config",
        str(config),
        "-j",
        "1",
        "--json",
    ]
    assert main([*argv, str(tmp_path / "first.json")]) == 1
    out = capsys.readouterr().out
    first = json.loads((tmp_path / "first.json").read_text())
    assert first["outcome"] == "found" and first["commits"] == COMMITS
    assert first["first_bad"]["commit"] == shas[REGRESSED_AT]
    assert f"first bad commit: {shas[REGRESSED_AT]} change {REGRESSED_AT} (slower gemm)" in out
    assert first["first_bad"]["delta_pct"] > 2.0 and first["last_good"]["commit"] == shas[REGRESSED_AT - 1]
    assert first["changed_stats"] and first["changed_blocks"]  # the blocks whose code changed most
    assert all(" cycles" in line and "cyc/exec" in line for line in first["changed_blocks"])
    assert f"  block {first['changed_blocks'][0]}" in out
    # where, said as `perfguard check` says it: the loop of gemm's nest C whose cycles changed most
    assert first["where"].startswith("loop ") and " of nest C in " in first["where"], first["where"]
    assert f"  where {first['where']}" in out and first["where_top"][0].startswith(first["where"].split(":")[0])
    assert len(first["visits"]) <= math.ceil(math.log2(COMMITS)) + 2  # both ends, then the halvings

    assert main([*argv, str(tmp_path / "second.json")]) == 1
    second = json.loads((tmp_path / "second.json").read_text())
    assert second["first_bad"] == first["first_bad"]
    assert [v["commit"] for v in second["visits"]] == [v["commit"] for v in first["visits"]]
    assert not any(v["resimulated"] or v["rebuilt"] for v in second["visits"])  # the cache answered everything
    # ... from the job records: the first bad revision's job is taken from its record, nothing run
    project = Project.of(config, "test")
    with Measurer(cache_dir, None, 1) as measurer, project.worktree(shas[REGRESSED_AT]) as tree:
        side = load_side(project, "first bad", shas[REGRESSED_AT], tree)
        measurer.measure(side, [("gemm_a", "x86_64")])
    assert side.results[("gemm_a", "x86_64")].reused
    assert side.results[("gemm_a", "x86_64")].content_hash == first["first_bad"]["content_hash"]


def test_bisect_skips_a_revision_that_does_not_build(history, tmp_path, capsys):
    config, shas = history
    # From change 2 to change 11 the first midpoint is change 6, which does not build: the search goes around it.
    argv = [
        "bisect",
        "--good",
        shas[2],
        "--bad",
        shas[11],
        "--kernel",
        "gemm_a",
        "--target",
        "x86_64",
        "--config",
        str(config),
        "-j",
        "1",
        "--json",
        str(tmp_path / "b.json"),
    ]
    assert main(argv) == 1
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "b.json").read_text())
    skipped = [v for v in data["visits"] if v["skipped"]]
    assert [v["commit"] for v in skipped] == [shas[6]] and "tile_n" in skipped[0]["skipped"]
    assert f"skip  {shas[6][:12]}" in out and data["first_bad"]["commit"] == shas[REGRESSED_AT]


def test_bisect_range_without_a_crossing_exits_0(history, capsys):
    config, shas = history
    assert (
        main(
            [
                "bisect",
                "--good",
                shas[1],
                "--bad",
                shas[5],
                "--kernel",
                "gemm_a",
                "--target",
                "x86_64",
                "--config",
                str(config),
                "-j",
                "1",
            ]
        )
        == 0
    )
    assert "no crossing: --bad" in capsys.readouterr().out


# A kernel body that TVM builds but the harness cannot link (an external helper nobody defines),
# and one slower than SLOW by far more than the threshold.
UNLINKABLE = 'tvm.tirx.call_extern("float32", "perfguard_undefined_helper", A[i])'
SLOWER = SLOW + " + A[i] * A[i] * A[i] * A[i] * 5.0 + A[i] * A[i] * 7.0"


@pytest.fixture(scope="module")
def unbuildable_history(tmp_path_factory, cache_dir):
    """good, then: 1 does not link, 2 fast again, 3 slow, 4 does not link, 5 slower still (read only)."""
    config = project_repository(
        tmp_path_factory.mktemp("bisect-unbuildable"), with_cache(toml(USER), cache_dir), {"mykernels/__init__.py": ""}
    )
    proj = config.parent
    shas = []
    for i, body in enumerate([FAST, UNLINKABLE, FAST, SLOW, UNLINKABLE, SLOWER]):
        write(proj, {"mykernels/ops.py": OPS.format(body=body), "notes.txt": f"change {i}\n"})
        shas.append(commit_all(proj.parent, "good" if i == 0 else f"change {i}"))
    return config, shas


def bisect_json(config: Path, good: str, bad: str, out: Path) -> tuple[int, dict]:
    code = main(
        [
            "bisect",
            "--good",
            good,
            "--bad",
            bad,
            "--kernel",
            "user",
            "--target",
            "x86_64",
            "--config",
            str(config),
            "-j",
            "1",
            "--json",
            str(out),
        ]
    )
    return code, json.loads(out.read_text())


def test_bisect_skips_a_revision_that_does_not_compile(unbuildable_history, tmp_path, capsys):
    config, shas = unbuildable_history
    # good .. change 3: the first midpoint is change 1, which does not link; change 2 is measured instead
    code, data = bisect_json(config, shas[0], shas[3], tmp_path / "b.json")
    out = capsys.readouterr().out
    assert code == 1 and data["outcome"] == "found" and data["candidates"] == []
    assert [(v["commit"], v["skipped"] is not None) for v in data["visits"]] == [
        (shas[0], False),
        (shas[3], False),
        (shas[1], True),
        (shas[2], False),
    ]
    skipped = data["visits"][2]["skipped"]
    assert "linking the harness failed" in skipped and "undefined reference to `perfguard_undefined_helper'" in skipped
    assert data["first_bad"]["commit"] == shas[3] and data["last_good"]["commit"] == shas[2]
    assert f"skip  {shas[1][:12]}" in out and "4 revision(s) measured of 4, 1 skipped" in out


def test_bisect_names_every_candidate_when_the_revision_before_the_first_bad_one_does_not_compile(
    unbuildable_history, tmp_path, capsys
):
    config, shas = unbuildable_history
    # change 3 .. change 5: change 4 cannot be measured, so change 4 or change 5 made it slower
    code, data = bisect_json(config, shas[3], shas[5], tmp_path / "b.json")
    out = capsys.readouterr().out
    assert code == 1 and data["outcome"] == "ambiguous"
    assert data["candidates"] == [shas[4], shas[5]]
    assert data["first_bad"]["commit"] == shas[5] and data["last_good"]["commit"] == shas[3]
    assert [(v["commit"], v["skipped"] is not None) for v in data["visits"]] == [
        (shas[3], False),
        (shas[5], False),
        (shas[4], True),
    ]
    assert data["first_bad"]["delta_pct"] > 2.0 and data["first_bad"]["crossed"] is True
    assert f"the first bad commit is one of 2 (the others could not be measured): {shas[4][:12]}, {shas[5][:12]}" in out
