"""compare's and bisect's worker (runs/revisions.py) takes a job's record as `check` does: a revision
whose jobs were measured before with the same inputs is judged from their records, with no TVM
import and no pool (the records themselves are tested with `check`, tests/end_to_end/test_reuse.py)."""

from __future__ import annotations

from perfguard.baselines.store import BaselineStore
from perfguard.config import load_config
from perfguard.runs.revisions import Measurer, Project, load_side


def test_a_revision_measured_before_is_taken_from_its_records(measured_pull_request, tmp_path):
    """The pull request's `baseline update`s recorded gemm_a and gemm_b at main and gemm_a on the
    branch: measuring main in a worktree runs nothing, and gives main's statistics, not the branch's."""
    pr = measured_pull_request.copy(tmp_path / "ws")  # a worktree is registered in .git: a copy of our own
    project = Project.of(pr.config, "compare")
    kernels = ("gemm_a", "gemm_b")
    with project.worktree(pr.base) as tree, Measurer(load_config(pr.config).storage.cache_dir, None, None) as measurer:
        main = load_side(project, "main", pr.base, tree)
        measurer.measure(main, [(k, "x86_64") for k in kernels])
        at_main = {k: BaselineStore(tree / "baselines").read("x86_64", k).stats.to_dict() for k in kernels}
    on_branch = {k: BaselineStore(pr.root / "baselines").read("x86_64", k).stats.to_dict() for k in kernels}
    for k in kernels:
        result = main.results[(k, "x86_64")]
        assert result.ok and result.reused, result
        assert result.stats.to_dict() == at_main[k]
    assert (
        at_main["gemm_a"] != on_branch["gemm_a"] and at_main["gemm_b"] == on_branch["gemm_b"]
    )  # the branch's gemm_a is another job
