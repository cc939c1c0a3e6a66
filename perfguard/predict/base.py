"""The predictor interfaces: Stats in, predicted seconds out.

Two kinds of object:
- `Predictor`: what judge/, runs/ and report/ use. `predict_stats(stats)` gives seconds; it carries
  `model_id` (recorded with every result, so that a verdict never compares numbers from two
  models), `calibrated` (reports show it) and `needs_blocks` (it cannot score statistics without
  a block profile). The analytical and pipeline models are Predictors directly.
- `CalibratedPredictor`: a scikit-learn estimator (BaseEstimator, RegressorMixin) on feature
  matrices (perfguard.predict.features): parameters in the constructor and nothing else there,
  `get_params`/`set_params`/`sklearn.base.clone` work, learnt state only in attributes with a
  trailing underscore, set by `fit` (or by `from_payload`, which restores a fitted one).
  It lives in perfguard.predict.estimator, so that scoring with the pipeline or analytical model
  (every check whose kernels have no calibrated model) never imports scikit-learn.
  `perfguard.predict.calibrated.CalibratedModel` binds a fitted one to a target profile.
Calibrated predictors persist as plain JSON (`to_payload` / `from_payload`): no pickle, so a
model file in a pull request cannot run code.
"""

from __future__ import annotations

import abc

import numpy as np

from perfguard.sim.stats import Stats


class Predictor(abc.ABC):
    name: str = ""
    model_id: str = ""
    calibrated: bool = False
    needs_blocks: bool = False  # scores only statistics that carry a block profile

    @abc.abstractmethod
    def predict_stats(self, stats: list[Stats]) -> np.ndarray:
        """Predicted seconds per call, one per Stats."""
