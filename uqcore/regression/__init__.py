"""Regression UQ metrics; importing this package registers them in :mod:`uqcore.registry`."""

from uqcore.regression import (
    accuracy,
    calibration,
    decomposition,
    group_calibration,
    intervals,
    ranking,
    recalibration,
    scoring,
    skill,
    stratified,
)

__all__ = [
    "accuracy",
    "calibration",
    "decomposition",
    "group_calibration",
    "intervals",
    "ranking",
    "recalibration",
    "scoring",
    "skill",
    "stratified",
]
