"""Which predictor scores a target and kernel family."""

from __future__ import annotations

from perfguard.predict.analytical import AnalyticalModel
from perfguard.predict.base import Predictor
from perfguard.targets import TargetProfile


def predictor_for(profile: TargetProfile, family: str | None) -> Predictor:
    """The analytical model until calibrated models exist for this target and family."""
    return AnalyticalModel(profile)
