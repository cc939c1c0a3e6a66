"""The calibrated predictors by name; adding one is one new module and one line here."""

from __future__ import annotations

from perfguard.errors import InputError
from perfguard.predict.base import CalibratedPredictor
from perfguard.predict.dnn import NeuralNetwork
from perfguard.predict.gp import GaussianProcess
from perfguard.predict.mlr import MultipleLinearRegression
from perfguard.predict.xgb import XGBoostPredictor

PREDICTORS: dict[str, type[CalibratedPredictor]] = {
    cls.name: cls for cls in (MultipleLinearRegression, NeuralNetwork, GaussianProcess, XGBoostPredictor)
}


def predictor_class(name: str) -> type[CalibratedPredictor]:
    if name not in PREDICTORS:
        raise InputError(f"unknown predictor '{name}' (one of {', '.join(PREDICTORS)})")
    return PREDICTORS[name]
