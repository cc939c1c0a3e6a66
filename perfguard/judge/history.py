"""A kernel's predicted time over the commits that changed its baseline (git, via gitpython).

One `git log` over the baseline folder finds, for every baseline file, the commits that
touched it; each version of the file is read from the object database and re-scored with the
model that scores the current run, so the whole series (and the current run beside it) comes
from one model, like a verdict. Versions simulated with another simulator are left out: they
are not comparable. Change points come from perfguard.judge.changepoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perfguard.baselines.store import Baseline, parse_baseline
from perfguard.document.result import ChangePoint, History, HistoryPoint
from perfguard.errors import InputError
from perfguard.judge.changepoint import detect

MAX_POINTS = 100  # the most recent commits kept per kernel x target
_FIELD, _RECORD = "\x1f", "\x1e"


@dataclass(frozen=True)
class Revision:
    commit: str
    date: str  # committer date, ISO 8601
    subject: str  # first line of the commit message (untrusted text: renderers escape it)


class BaselineHistory:
    """The git history of one baseline folder; empty when it is not in a git work tree."""

    def __init__(self, baseline_dir: Path):
        self.baseline_dir = Path(baseline_dir).resolve()
        self.repo = None
        self.head: str | None = None
        self._log: dict[str, list[Revision]] | None = None
        try:
            import git

            self.repo = git.Repo(
                self.baseline_dir if self.baseline_dir.is_dir() else self.baseline_dir.parent,
                search_parent_directories=True,
            )
            self.head = self.repo.head.commit.hexsha
        except Exception:  # not a repository, no commit yet, git missing: no history, still a report
            self.repo = None

    def _prefix(self) -> str:
        assert self.repo is not None and self.repo.working_tree_dir is not None  # called only with a repository
        return self.baseline_dir.relative_to(Path(self.repo.working_tree_dir).resolve()).as_posix()

    def _path(self, target: str, kernel: str) -> str:
        """The kernel's baseline file on the target, as a path in the repository (a key of `log`)."""
        return f"{self._prefix()}/{target}/{kernel}.json".lstrip("/")

    def changes(self, target: str, kernel: str) -> list[Revision]:
        """The commits that changed the kernel's baseline file on the target, oldest first."""
        if self.repo is None:
            return []
        return self.log().get(self._path(target, kernel), [])

    def log(self) -> dict[str, list[Revision]]:
        """Repository path -> the commits that changed it, oldest first."""
        if self._log is not None:
            return self._log
        self._log = {}
        if self.repo is None:
            return self._log
        try:
            text = self.repo.git.log(
                f"--format={_RECORD}%H{_FIELD}%cI{_FIELD}%s",
                "--name-only",
                "--no-renames",
                "--reverse",
                "HEAD",
                "--",
                self._prefix() or ".",
            )
        except Exception:
            return self._log
        for record in text.split(_RECORD)[1:]:
            header, _, names = record.partition("\n")
            commit, date, subject = (header.split(_FIELD) + ["", ""])[:3]
            for name in names.split("\n"):
                if name.strip():
                    self._log.setdefault(name.strip(), []).append(Revision(commit, date, subject))
        return self._log

    def versions(self, target: str, kernel: str) -> list[tuple[Revision, Baseline]]:
        """Every committed version of baselines/<target>/<kernel>.json, oldest first."""
        if self.repo is None:
            return []
        path = self._path(target, kernel)
        out = []
        for rev in self.changes(target, kernel):
            try:
                blob = self.repo.commit(rev.commit).tree / path
                text = blob.data_stream.read().decode("utf-8")
                out.append((rev, parse_baseline(text, f"{rev.commit[:10]}:{path}")))
            except (KeyError, UnicodeDecodeError, InputError):  # deleted in that commit, or unreadable
                continue
        return out


def kernel_history(
    history: BaselineHistory,
    target: str,
    kernel: str,
    simulator: str,
    score: Callable[[Baseline], float],
    min_step_pct: float,
    usable: Callable[[Baseline], bool] = lambda b: True,
) -> History | None:
    """The history of a report's result, or None without committed versions;
    `usable` leaves out versions the model cannot score (no block profile for the pipeline model)."""
    versions = [(rev, b) for rev, b in history.versions(target, kernel) if b.simulator == simulator and usable(b)]
    if not versions:
        return None
    omitted = max(0, len(versions) - MAX_POINTS)
    versions = versions[omitted:]
    points = [HistoryPoint(rev.commit, rev.date, rev.subject, score(b)) for rev, b in versions]
    changes = detect([p.time_s for p in points], min_step_pct)
    return History(
        points,
        omitted,
        min_step_pct,
        [ChangePoint(c.index, points[c.index].commit, c.before, c.after, c.step_pct) for c in changes],
    )
