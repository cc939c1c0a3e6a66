"""The pull request the Action and workflow tests run on, measured once per session."""

from __future__ import annotations

import pytest

from tests.projects import PullRequest, config_text, pull_request, with_cache


@pytest.fixture(scope="session")
def measured_pull_request(tmp_path_factory, cache_dir) -> PullRequest:
    """gemm_a and gemm_b on x86_64, main's baselines committed, branch faster-gemm regressing gemm_a
    (tests/projects.py). Read only: a test that changes it works on `.copy(tmp_path / ...)`."""
    root = tmp_path_factory.mktemp("pull-request") / "ws"
    root.mkdir()
    config = root / "perfguard.toml"
    config.write_text(with_cache(config_text(["x86_64"]), cache_dir))
    return pull_request(root, config)
