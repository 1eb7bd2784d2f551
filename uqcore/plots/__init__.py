"""Figures of every diagnostic, as Display objects (matplotlib, the ``plots`` extra).

Each function takes what the caller holds — a prediction with its targets, the curve object,
a :class:`uqcore.Report` computed with ``curves=True``, or a result document of the service
(``uqeval.Client().result(...)``) — and returns a :class:`~uqcore.plots.Display` already drawn
(``ax=`` draws on the caller's axes; ``display.figure_`` is the figure, ``to_bytes("svg")``
renders it). :data:`PLOTS` maps the plot names of the service
(``GET /v1/submissions/{id}/plots/{name}``) to these functions and says what each is drawn
from.

matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

from uqcore.plots._base import COLORS, STYLE, Display, ImageFormat, find_curve
from uqcore.plots._registry import PLOTS, PlotSpec

__all__ = ["COLORS", "PLOTS", "STYLE", "Display", "ImageFormat", "PlotSpec", "find_curve"]

# Registration (and the plot functions), on import of this package.
from uqcore.plots.classification import *  # noqa: F403
from uqcore.plots.classification import __all__ as _classification_all
from uqcore.plots.compare import *  # noqa: F403
from uqcore.plots.compare import __all__ as _compare_all
from uqcore.plots.regression import *  # noqa: F403
from uqcore.plots.regression import __all__ as _regression_all

__all__ += [*_regression_all, *_classification_all, *_compare_all]
