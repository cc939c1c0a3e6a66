"""Projects shared by tests in several folders: two small gemm kernels (one build and simulation
cache for the action, shard, compare and --base tests), real git repositories in temp dirs, and a
pull request's history on them; the one place tests write a project's config and set up its git."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

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


def kernel_table(name: str, entry: str, params: str, family: str | None = None, **keys: str) -> str:
    """One [[kernel]] table; `keys` are more TOML lines (reference = '"m:f"', targets = '["x86_64"]')."""
    lines = [f'name = "{name}"', f'entry = "{entry}"'] + ([f'family = "{family}"'] if family else [])
    lines += [f"{key} = {value}" for key, value in keys.items()] + [f"params = {{ {params} }}"]
    return "\n[[kernel]]\n" + "\n".join(lines) + "\n"


def with_cache(toml: str, cache_dir: Path | str) -> str:
    """The config with its cache_dir set (the session's shared cache), first in [perfguard]."""
    return toml.replace("[perfguard]\n", f'[perfguard]\ncache_dir = "{cache_dir}"\n', 1)


def repository_project(dest: Path, cache_dir: Path | str, replace: tuple[str, str] | None = None) -> Path:
    """This repository's perfguard.toml (with `replace` applied: (old, new), old must be there) and its
    committed baselines, copied to `dest`: the project's own kernels, checked against what was
    committed. Returns the config's path."""
    dest.mkdir(parents=True, exist_ok=True)
    text = with_cache((REPO / "perfguard.toml").read_text(), cache_dir)
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    (dest / "perfguard.toml").write_text(text)
    shutil.copytree(REPO / "baselines", dest / "baselines")
    return dest / "perfguard.toml"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def init_repo(root: Path) -> None:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "dev")
    git(root, "config", "commit.gpgsign", "false")


def project_repository(root: Path, toml: str, files: dict[str, str] | None = None, folder: str = "proj") -> Path:
    """A new git repository at `root` with a project in `folder` (its perfguard.toml and `files`),
    nothing committed yet, reports/ and __pycache__/ ignored. Returns the config's path."""
    proj = root / folder
    for name, text in {"perfguard.toml": toml, **(files or {})}.items():
        (proj / name).parent.mkdir(parents=True, exist_ok=True)
        (proj / name).write_text(text)
    init_repo(root)
    (root / ".gitignore").write_text("reports/\n__pycache__/\n")
    return proj / "perfguard.toml"


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def pr_event(number: int, base_ref: str, base_sha: str, head_sha: str) -> dict:
    """A pull_request 'synchronize' payload, trimmed to the fields GitHub always sends that matter here."""
    return {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "state": "open",
            "title": "Faster GEMM",
            "user": {"login": "contributor"},
            "head": {"ref": "faster-gemm", "sha": head_sha, "repo": {"full_name": "fork/kernels", "fork": True}},
            "base": {"ref": base_ref, "sha": base_sha, "repo": {"full_name": "octo/kernels"}},
        },
        "repository": {"full_name": "octo/kernels"},
        "sender": {"login": "contributor"},
    }


def copy_baseline(root: Path, target: str, kernel: str) -> Path:
    """A committed baseline of this repository (aarch64's gemv_1024) as `kernel`'s on `target` in
    the project at `root`: a baseline file without building or simulating anything."""
    data = json.loads((REPO / "baselines" / "aarch64" / "gemv_1024.json").read_text())
    data.update(kernel=kernel, target=target)
    path = root / "baselines" / target / f"{kernel}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


@dataclass
class PullRequest:
    """A repository with a pull request: main holds gemm_a's and gemm_b's baselines; the branch
    makes gemm_a slower (GOOD -> WORSE) and rewrites its baseline in the same commit."""

    root: Path  # the repository
    config: Path  # its perfguard.toml (in root or a folder of it)
    base: str  # main's commit
    head: str  # the pull request's
    branch: str

    def copy(self, dest: Path) -> PullRequest:
        """The whole repository (.git too) copied to `dest`, for a test to change."""
        shutil.copytree(self.root, dest, symlinks=True)
        return PullRequest(dest, dest / self.config.relative_to(self.root), self.base, self.head, self.branch)


def pull_request(
    root: Path, config: Path, branch: str = "faster-gemm", targets: list[str] | None = None
) -> PullRequest:
    """`config` (config_text's kernels) committed in a new repository at `root` with its baselines
    (of `targets` only, if given), then the branch that regresses gemm_a, checked out."""
    from perfguard.shells.cli import main

    only = ["--targets", ",".join(targets)] if targets else []
    init_repo(root)
    assert main(["baseline", "update", "--config", str(config), "-j", "1", *only]) == 0
    base = commit_all(root, "kernels")
    git(root, "checkout", "-q", "-b", branch)
    config.write_text(config.read_text().replace(GOOD, WORSE))
    assert main(["baseline", "update", "--config", str(config), "-j", "1", "--kernels", "gemm_a", *only]) == 0
    head = commit_all(root, "faster gemm")
    return PullRequest(root, config, base, head, branch)
