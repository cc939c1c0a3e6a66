"""Baselines read from a git revision's tree instead of the working tree (`perfguard check --base REF`).

A pull request that makes a kernel slower and rewrites its baseline in the same change would
pass a check against its own working tree. Reading the baselines from the base of the pull
request (in CI the merge-base of HEAD and the target branch) closes that hole: the PR's
baseline edits are simply not looked at. Files are read from git's object database with
gitpython, so neither the working tree nor the index is touched.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from perfguard.baselines.store import Baseline, BaselineSource, baseline_path, graph_path, parse_baseline, parse_graph
from perfguard.errors import InputError


class GitBaselineStore(BaselineSource):
    """Read-only baselines/<target>/<kernel>.json as they are in `ref`; calibrated models too."""

    def __init__(self, baseline_dir: Path, ref: str):
        import git

        self.baseline_dir = Path(baseline_dir).resolve()
        self.ref = ref
        start = self.baseline_dir if self.baseline_dir.is_dir() else self.baseline_dir.parent
        while not start.exists() and start != start.parent:
            start = start.parent
        try:
            repo = git.Repo(start, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise InputError(f"--base {ref}: {self.baseline_dir} is not in a git repository") from None
        try:
            self.commit = repo.commit(ref)
        except (git.BadName, git.BadObject, ValueError):
            raise InputError(f"--base {ref}: unknown git revision in {repo.working_tree_dir}") from None
        assert repo.working_tree_dir is not None  # found from a folder: not a bare repository
        root = Path(repo.working_tree_dir).resolve()
        try:
            self.prefix = PurePosixPath(self.baseline_dir.relative_to(root).as_posix())
        except ValueError:
            raise InputError(
                f"--base {ref}: baseline folder {self.baseline_dir} is outside the repository {root}"
            ) from None

    @property
    def sha(self) -> str:
        return self.commit.hexsha

    def path(self, target: str, kernel: str) -> str:
        """Where a baseline is read from, for messages: '<ref> (<sha>):<path in the repository>'."""
        relative = baseline_path(Path(), target, kernel).as_posix()
        return f"{self.ref} ({self.sha[:12]}):{(self.prefix / relative).as_posix()}"

    def models(self) -> GitBaselineStore:
        return self

    def read_file(self, relative: str) -> tuple[str, str] | None:
        """(text, label) of baselines/<relative> at the revision, None when it has no such file."""
        label = f"{self.ref} ({self.sha[:12]}):{(self.prefix / relative).as_posix()}"
        try:
            blob = self.commit.tree / (self.prefix / relative).as_posix()
        except KeyError:
            return None
        if blob.type != "blob":
            raise InputError(f"{label}: not a file")
        try:
            return blob.data_stream.read().decode("utf-8"), label
        except UnicodeDecodeError:
            raise InputError(f"{label}: not UTF-8 text") from None

    def names(self, target: str) -> list[str]:
        """The kernels that have a baseline for `target` at the revision."""
        try:
            tree = self.commit.tree / (self.prefix / target).as_posix()
        except KeyError:
            return []
        return sorted(b.name[:-5] for b in tree.blobs if b.name.endswith(".json"))

    def model_graph(self, target: str, model: str) -> dict[str, list[int]] | None:
        found = self.read_file(graph_path(Path(), target, model).as_posix())
        return None if found is None else parse_graph(found[0], found[1], model, target)

    def read(self, target: str, kernel: str) -> Baseline | None:
        found = self.read_file(baseline_path(Path(), target, kernel).as_posix())
        if found is None:
            return None
        text, label = found
        baseline = parse_baseline(text, label)
        if baseline.kernel != kernel or baseline.target != target:
            raise InputError(f"{label}: baseline is for {baseline.kernel}[{baseline.target}], not {kernel}[{target}]")
        return baseline
