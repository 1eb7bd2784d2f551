"""The plot names: :data:`PLOTS` maps each to its function and says what it is drawn from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from uqcore.plots._base import Display

__all__ = ["PLOTS", "PlotSpec", "register_plot"]


@dataclass(frozen=True)
class PlotSpec:
    """A registered plot.

    Attributes
    ----------
    name : str
        The plot's name (the service's ``plots/{name}``).
    function : callable
        ``function(source, y=None, *, ax=None, **options) -> Display``.
    scope : {"submission", "comparison", "leaderboard"}
        What it shows: one submission, a comparison's result, a benchmark's leaderboard.
    task : {"regression", "classification"} or None
        A submission plot's task (None: both, or not a submission plot).
    curves : tuple of str
        The :mod:`uqcore.curves` it draws (computed from the prediction and its targets).
        Empty for a plot drawn from a result document's own fields instead.
    result_field : str or None
        The result document's field it is drawn from (``"stability"``, ``"by_estimator"``),
        for a plot with no curves.
    title : str
        One line: what it shows.
    """

    name: str
    function: Callable[..., Display]
    scope: Literal["submission", "comparison", "leaderboard"]
    task: Literal["regression", "classification"] | None
    curves: tuple[str, ...] = ()
    result_field: str | None = None
    title: str = ""


PLOTS: dict[str, PlotSpec] = {}


def register_plot(spec: PlotSpec) -> PlotSpec:
    """Add ``spec`` to :data:`PLOTS` (a name is registered once)."""
    if spec.name in PLOTS:
        raise ValueError(f"plot {spec.name!r} is registered twice")
    PLOTS[spec.name] = spec
    return spec
