"""What the classification figures share: finding the curve to draw in what the caller holds
(a prediction with its labels, the curve, a Report, a result document) and laying out a
figure on the caller's axes or a new one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from uqcore._validation import UQValidationError
from uqcore.plots._base import Display, find_curve

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["CurveDisplay", "is_prediction", "new_figure", "no_options", "num", "source_curve"]


def num(value: float | None, digits: int = 3) -> str:
    """A value for a legend (``undefined`` for None)."""
    return "undefined" if value is None else f"{value:.{digits}f}"


def new_figure(
    ax: Any, n: int, figsize: tuple[float, float], grid: Callable[[Figure], list[Axes]]
) -> tuple[Figure, list[Axes]]:
    """The caller's axes (one, or ``n``), or a new figure laid out by ``grid``."""
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize, layout="constrained")
        return fig, grid(fig)
    axes = list(ax) if isinstance(ax, Sequence) else [ax]
    if len(axes) not in (1, n):
        raise ValueError(f"draws on 1 or {n} axes, {len(axes)} given")
    return axes[0].figure, axes


class CurveDisplay(Display):
    """A Display of one curve object (``curve``)."""

    curve: Any

    def to_dict(self) -> dict[str, Any]:
        from uqcore.curves import curve_to_json

        return {"curve": curve_to_json(self.curve)}


def is_prediction(source: Any) -> bool:
    return getattr(source, "task", None) in ("classification", "regression") and hasattr(
        source, "capabilities"
    )


def source_curve(
    plot: str,
    key: str,
    source: Any,
    y: Any,
    estimator: str | None,
    compute: Callable[[], Any],
) -> Any:
    """The curve ``key``: computed from a prediction and ``y``, or found in ``source``."""
    if is_prediction(source):
        if y is None:
            raise UQValidationError(
                f"{plot}: a prediction needs its labels, {plot}(prediction, y)", argument="y"
            )
        return compute()
    if y is not None:
        raise UQValidationError(
            f"{plot}: y applies to a prediction only, found a {type(source).__name__}",
            argument="y",
        )
    curve = find_curve(source, key)
    held = getattr(curve, "estimator", None)
    if estimator is not None and held is not None and held != estimator:
        raise UQValidationError(
            f"{plot}: the {key} held was computed with estimator {held!r}, not {estimator!r} "
            "(pass the prediction and its labels to draw another estimator)",
            argument="estimator",
        )
    return curve


def no_options(plot: str, options: Mapping[str, Any]) -> None:
    if options:
        raise TypeError(f"{plot}() got unexpected option(s): {', '.join(sorted(options))}")
