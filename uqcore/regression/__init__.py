"""Regression UQ metrics; importing this package registers them in :mod:`uqcore.registry`."""

from uqcore.regression import (
    accuracy,
    calibration,
    group_calibration,
    intervals,
    ranking,
    recalibration,
    scoring,
    stratified,
)

__all__ = [
    "accuracy",
    "calibration",
    "group_calibration",
    "intervals",
    "ranking",
    "recalibration",
    "scoring",
    "stratified",
]
