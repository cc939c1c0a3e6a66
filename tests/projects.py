"""Projects shared by tests in several folders: two small gemm kernels (one build and simulation
cache for the action, shard, compare and --base tests) and real git repositories in temp dirs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

GOOD = "M = 32, N = 32, K = 32, tile_m = 8, tile_n = 16, tile_k = 8, vector = 8"
# Whole-matrix tiles without vectorization: ~24 % slower on x86_64 under the analytical model.
WORSE = "M = 32, N = 32, K = 32, tile_m = 32, tile_n = 32, tile_k = 32, vector = 1"

KERNELS = f"""
[[kernel]]
name = "gemm_a"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ {GOOD} }}

[[kernel]]
name = "gemm_b"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = {{ M = 16, N = 16, K = 16 }}
"""


# One gemm on x86_64 at a 1 % threshold: the calibration tests' project (their dataset's family).
ONE_GEMM = """
[perfguard]
targets = ["x86_64"]
threshold = 1.0

[[kernel]]
name = "g"
entry = "perfguard.kernels.gemm:gemm"
family = "gemm"
params = { M = 32, N = 32, K = 32, tile_m = 8, tile_n = 16, tile_k = 8, vector = 8 }
"""


def config_text(targets: list[str], more_kernels: str = "") -> str:
    return f"[perfguard]\ntargets = {json.dumps(targets)}\n{KERNELS}{more_kernels}"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def init_repo(root: Path) -> None:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "dev")
    git(root, "config", "commit.gpgsign", "false")


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def pr_event(number: int, base_ref: str, base_sha: str, head_sha: str) -> dict:
    """A pull_request 'synchronize' payload, trimmed to the fields GitHub always sends that matter here."""
    return {
        "action": "synchronize", "number": number,
        "pull_request": {
            "number": number, "state": "open", "title": "Faster GEMM", "user": {"login": "contributor"},
            "head": {"ref": "faster-gemm", "sha": head_sha, "repo": {"full_name": "fork/kernels", "fork": True}},
            "base": {"ref": base_ref, "sha": base_sha, "repo": {"full_name": "octo/kernels"}},
        },
        "repository": {"full_name": "octo/kernels"}, "sender": {"login": "contributor"},
    }
