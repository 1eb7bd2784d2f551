"""Prediction kinds: validated containers that give what metrics need."""

from uqcore.predictions.classification import (
    ClassificationPrediction,
    Dirichlet,
    Ensemble,
    Logits,
    Probs,
)
from uqcore.predictions.regression import (
    KINDS,
    Gaussian,
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
    "Laplace",
    "Logits",
    "Mixture",
    "PointUncertainty",
    "Probs",
    "Quantiles",
    "RegressionPrediction",
    "Samples",
    "StudentT",
]
