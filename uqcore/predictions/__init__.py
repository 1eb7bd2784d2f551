"""Prediction kinds: validated containers that give what metrics need."""

from uqcore.predictions.classification import (
    ClassificationPrediction,
    Dirichlet,
    Ensemble,
    Logits,
    PredictionSet,
    Probs,
)
from uqcore.predictions.regression import (
    KINDS,
    Gaussian,
    Interval,
    Laplace,
    Mixture,
    PointUncertainty,
    Quantiles,
    RegressionPrediction,
    Samples,
    StudentT,
)

__all__ = [
    "KINDS",
    "ClassificationPrediction",
    "Dirichlet",
    "Ensemble",
    "Gaussian",
    "Interval",
    "Laplace",
    "Logits",
    "Mixture",
    "PointUncertainty",
    "PredictionSet",
    "Probs",
    "Quantiles",
    "RegressionPrediction",
    "Samples",
    "StudentT",
]
