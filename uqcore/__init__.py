"""uqcore — exact, fast uncertainty-quantification metrics.

>>> import numpy as np
>>> from uqcore import evaluate, metric, predictions as P
>>> pred = P.Gaussian(mean=np.zeros(4), std=np.ones(4))
>>> round(metric("mae", pred, np.array([1.0, -1.0, 2.0, 0.0])), 6)
1.0
"""

from uqcore import predictions
from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError
from uqcore.batch import Batch, reusing_batches
from uqcore.registry import UndefinedMetricWarning
from uqcore.report import Report, evaluate, metric
from uqcore.skill import skill, skill_from_values

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "Report",
    "UQValidationError",
    "UndefinedMetricWarning",
    "__version__",
    "evaluate",
    "metric",
    "predictions",
    "reusing_batches",
    "skill",
    "skill_from_values",
    "to_numpy",
]

# Register the metric catalogue on import.
from uqcore import classification as _classification  # noqa: F401
from uqcore import regression as _regression  # noqa: F401
