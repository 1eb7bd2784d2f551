"""Prediction kinds: validated containers that give what metrics need."""

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
    "Gaussian",
    "Laplace",
    "Mixture",
    "PointUncertainty",
    "Quantiles",
    "RegressionPrediction",
    "Samples",
    "StudentT",
]
