"""The calibrated predictors by name; adding one is one new module and one line here.

Imported lazily (perfguard.registry): scikit-learn and XGBoost cost a second or two to import,
which every command and every pytest collection would otherwise pay.
"""

from __future__ import annotations

from perfguard.registry import Registry

PREDICTORS = Registry(
    "predictor",
    {
        "mlr": "perfguard.predict.mlr:MultipleLinearRegression",
        "dnn": "perfguard.predict.dnn:NeuralNetwork",
        "gp": "perfguard.predict.gp:GaussianProcess",
        "xgboost": "perfguard.predict.xgb:XGBoostPredictor",
    },
)

PREDICTOR_NAMES = PREDICTORS.names
predictor_class = PREDICTORS.load
