"""Uncertainty aggregators: second-order prediction -> one scalar uncertainty per sample.

The public home of the built-in aggregators: their catalogue (:data:`AGGREGATORS`, with each
one's formula and reference), the default estimator, and the functions that tell which apply
to a prediction and compute them. The computations live below the prediction kinds, in
:mod:`uqcore.predictions._aggregators` (notation and formulas there), so that a prediction's
``estimate(name)`` needs nothing from this package.
"""

from __future__ import annotations

from uqcore.predictions._aggregators import AGGREGATORS, DEFAULT_ESTIMATOR, Aggregator, entropy
from uqcore.predictions.classification import applicable, compute

__all__ = ["AGGREGATORS", "DEFAULT_ESTIMATOR", "Aggregator", "applicable", "compute", "entropy"]
