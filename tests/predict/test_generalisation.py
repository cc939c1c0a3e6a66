"""Whether `model = "auto"` may use a family's calibrated model (perfguard.runs.calibration.
generalisation): nested leave-one-group-out against the pipeline model, on feature matrices whose
answer is known, and the decision as predictor_for reads it from a model file."""

from __future__ import annotations

import numpy as np
import pytest

from perfguard.predict.features import feature_names
from perfguard.predict.select import auto_uses
from perfguard.runs import calibration_models
from perfguard.targets import BUILTIN

X86 = BUILTIN["x86_64"]


class Rows:
    """What generalisation() reads of a dataset's features: 4 shapes of 30 schedules each, the
    native times, and the pipeline model's cycles (pipe[:, 0] core, pipe[:, 1] stalls)."""

    features = "pipeline"

    def __init__(self, pipeline_tracks_native: bool, seed: int = 3):
        rng = np.random.default_rng(seed)
        n = 120
        self.groups = np.repeat([f"g{i}" for i in range(4)], 30)
        width = len(feature_names("pipeline", "raw"))
        self.raw = rng.uniform(1e3, 1e6, size=(n, width))
        # native time: a weighted sum of two of the counts, which mlr (a non-negative linear model) can learn
        self.native = (3.0 * self.raw[:, 0] + 1.0 * self.raw[:, 5]) * 1e-9
        cycles = self.native * X86.clock_hz
        if not pipeline_tracks_native:
            cycles = rng.permutation(cycles)  # the pipeline model ranks the schedules at random
        self.pipe = np.column_stack([cycles, np.zeros(n)])

    def X(self, view: str) -> np.ndarray:
        assert view == "raw"  # mlr reads the raw counts
        return self.raw


def test_auto_uses_a_model_only_where_it_beats_the_pipeline_model_on_held_out_shapes():
    wins = calibration_models.generalisation(Rows(pipeline_tracks_native=False), X86, ["mlr"])
    assert wins.use and wins.summary["gain"] >= calibration_models.MARGIN
    assert [r["group"] for r in wins.groups] == ["g0", "g1", "g2", "g3"]
    assert all(r["chosen"] == "mlr" and r["model"]["spearman"] > 0.99 for r in wins.groups)
    assert abs(wins.summary["pipeline_spearman"]) < 0.5

    # a pipeline model that already ranks every shape right leaves no room for the margin
    ties = calibration_models.generalisation(Rows(pipeline_tracks_native=True), X86, ["mlr"])
    assert ties.summary["pipeline_spearman"] == pytest.approx(1.0)
    assert not ties.use and ties.summary["gain"] < calibration_models.MARGIN
    assert "nested leave-one-group-out" in ties.summary["rule"]


def test_nested_evaluation_needs_three_shapes():
    rows = Rows(False)
    rows.groups = np.repeat(["a", "b"], 60)
    with pytest.raises(Exception, match="at least 3 groups"):
        calibration_models.generalisation(rows, X86, ["mlr"])


def test_the_decision_in_a_model_file_is_what_auto_follows():
    assert auto_uses({"auto": {"use": True}}) and not auto_uses({"auto": {"use": False}})
    assert auto_uses({})  # a file written before the decision existed is used, as it was
