"""Another revision's fresh measurements read as baselines: `perfguard compare`'s base revision, and
the base revision a check measures again after a toolchain change (runs/rebase.py). A backend of
BaselineSource beside the working tree's (store.py) and a git revision's (git_revision.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from perfguard.baselines.store import Baseline, BaselineSource
from perfguard.errors import InputError
from perfguard.job.run import JobResult
from perfguard.predict.store import ModelFiles


def baseline_of(result: JobResult, commit: str, predicted_time_s: float = 0.0, model_id: str = "") -> Baseline:
    """One revision's measurement in the shape the verdicts compare with (its time is re-scored by
    the judging model: the stored prediction is informational)."""
    assert result.stats is not None  # a measured result
    return Baseline(
        kernel=result.kernel,
        target=result.target,
        family=result.family,
        params=result.params,
        simulator=result.simulator,
        content_hash=result.content_hash or "",
        stats=result.stats,
        predicted_time_s=predicted_time_s,
        model_id=model_id,
        commit=commit,
        created="",
        toolchain=result.toolchain,
        loops=result.loops,
        inputs=dict(result.inputs),
        source=result.source,
    )


class TreeModelFiles:
    """Calibrated models read from a revision's checked-out tree (ModelFiles), named by its label."""

    def __init__(self, baseline_dir: Path, tree: Path, label: str):
        self.baseline_dir, self.tree, self.label = baseline_dir, tree, label

    def read_file(self, relative: str) -> tuple[str, str] | None:
        path = self.baseline_dir / relative
        if not path.is_file():
            return None
        label = f"{self.label}:{path.relative_to(self.tree).as_posix()}"
        try:
            return path.read_text(encoding="utf-8"), label
        except UnicodeDecodeError:
            raise InputError(f"{label}: not UTF-8 text") from None


class MeasuredBaselines(BaselineSource):
    """`results` ((kernel, target) -> JobResult) of the revision `label` at `commit`, read like
    committed baselines. `failed_as_missing`: a failed result reads as no baseline (otherwise the
    caller has already turned it into an error). `models` and `graph` say where calibrated models
    and a [[model]]'s call order come from; `model_kernels`: the (kernel, target) pairs the revision
    ran as part of a whole [[model]], among which the model view finds removed kernels."""

    def __init__(
        self,
        label: str,
        commit: str,
        results: Mapping[tuple[str, str], JobResult],
        *,
        failed_as_missing: bool = False,
        models: ModelFiles | None = None,
        graph: Callable[[str, str], dict[str, list[int]] | None] | None = None,
        model_kernels: Collection[tuple[str, str]] = frozenset(),
    ):
        self.label, self.commit, self.results = label, commit, results
        self.failed_as_missing = failed_as_missing
        self._models, self._graph, self.model_kernels = models, graph, model_kernels

    def path(self, target: str, kernel: str) -> str:
        return f"{self.label}:{kernel}[{target}]"

    def read(self, target: str, kernel: str) -> Baseline | None:
        result = self.results.get((kernel, target))
        if result is None or (self.failed_as_missing and not result.ok):
            return None
        return baseline_of(result, self.commit)

    def names(self, target: str) -> list[str]:
        """The revision's model kernels measured on `target`: the model view finds removed ones among them."""
        return sorted(k for k, t in self.results if t == target and (k, t) in self.model_kernels)

    def models(self) -> ModelFiles | None:
        return self._models

    def model_graph(self, target: str, model: str) -> dict[str, list[int]] | None:
        return self._graph(target, model) if self._graph is not None else None
