"""Classification UQ: aggregators, decompositions and metrics; importing this package registers
the metrics in :mod:`uqcore.registry` (task ``"classification"``)."""

from uqcore.classification import (
    accuracy,
    aggregators,
    aleatoric,
    calibration,
    corp,
    decomposition,
    ood,
    selective,
    sets,
    skill,
    smooth,
)
from uqcore.classification.aggregators import AGGREGATORS, DEFAULT_ESTIMATOR
from uqcore.classification.aleatoric import RankCorrMatrix, rank_corr_matrix
from uqcore.classification.calibration import ReliabilityDiagram, reliability_diagram
from uqcore.classification.decomposition import Decomposition, decompose_bregman, decompose_it

__all__ = [
    "AGGREGATORS",
    "DEFAULT_ESTIMATOR",
    "Decomposition",
    "RankCorrMatrix",
    "ReliabilityDiagram",
    "accuracy",
    "aggregators",
    "aleatoric",
    "calibration",
    "corp",
    "decompose_bregman",
    "decompose_it",
    "decomposition",
    "ood",
    "rank_corr_matrix",
    "reliability_diagram",
    "selective",
    "sets",
    "skill",
    "smooth",
]
