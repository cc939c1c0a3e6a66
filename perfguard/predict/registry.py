"""The calibrated predictors by name; adding one is one new module and one line here.

Imported lazily: scikit-learn and XGBoost cost a second or two to import, which every
command and every pytest collection would otherwise pay.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from perfguard.errors import InputError

_PREDICTORS = {
    "mlr": "perfguard.predict.mlr:MultipleLinearRegression",
    "dnn": "perfguard.predict.dnn:NeuralNetwork",
    "gp": "perfguard.predict.gp:GaussianProcess",
    "xgboost": "perfguard.predict.xgb:XGBoostPredictor",
}

PREDICTOR_NAMES = tuple(_PREDICTORS)


def predictor_class(name: str):
    if name not in _PREDICTORS:
        raise InputError(f"unknown predictor '{name}' (one of {', '.join(_PREDICTORS)})")
    module, _, cls = _PREDICTORS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


class _Registry(Mapping):
    """PREDICTORS[name] -> the class, imported on first use."""

    def __getitem__(self, name):
        if name not in _PREDICTORS:
            raise KeyError(name)
        return predictor_class(name)

    def __iter__(self):
        return iter(_PREDICTORS)

    def __len__(self):
        return len(_PREDICTORS)


PREDICTORS: Mapping = _Registry()
