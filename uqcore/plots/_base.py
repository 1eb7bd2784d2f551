"""What every figure of :mod:`uqcore.plots` shares: the :class:`Display` base class (data in,
figure out, as scikit-learn's ``*Display`` objects), the house style, and finding a curve in
whatever the caller holds.

Figures are :class:`matplotlib.figure.Figure` objects drawn on the Agg canvas, never through
``pyplot``: no global state, safe in a worker thread, and a notebook still shows them (a
Display has ``_repr_png_``; ``display.figure_`` is the figure, ``display.ax_`` its axes).
SVG output is deterministic (no date, a fixed hash salt), so equal data give equal bytes.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from uqcore._validation import UQValidationError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["COLORS", "STYLE", "Display", "ImageFormat", "find_curve", "require_matplotlib"]

ImageFormat = Literal["png", "svg"]

# One look for every figure: colour-blind-safe colours (Okabe–Ito), light grid, no top/right
# spines, the same sizes.
COLORS: dict[str, str] = {
    "model": "#0072B2",  # the submission / the model's curve
    "oracle": "#009E73",  # the best achievable
    "random": "#7F7F7F",  # chance / no information
    "ideal": "#000000",  # the diagonal of perfect calibration
    "gap": "#D55E00",  # what is wrong: miscalibration area, gaps, not separable
    "band": "#BBBBBB",  # reference bands (uniform PIT band, intervals)
    "second": "#E69F00",  # a second series
    "third": "#CC79A7",
}

STYLE: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.grid": True,
    "grid.color": "#E5E5E5",
    "grid.linewidth": 0.8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "legend.frameon": False,
    "legend.fontsize": 9,
    "lines.linewidth": 1.8,
    "svg.hashsalt": "uqcore",
    "svg.fonttype": "path",
}

FIGSIZE: tuple[float, float] = (5.0, 4.0)


def _rc() -> Any:
    """:data:`STYLE` as rc_context takes it (its stubs list the keys as literals)."""
    return STYLE


def require_matplotlib() -> None:
    """Raise an ImportError that names the extra when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise ImportError("uqcore.plots needs matplotlib: pip install 'uq-eval[plots]'") from exc


class Display:
    """A figure's data and its drawing.

    A subclass is a dataclass holding the data it draws (JSON-serialisable: :meth:`to_dict`)
    and implements :meth:`_draw` on ``n_axes`` axes. :meth:`plot` draws on the axes given (a
    notebook's own) or on a new figure; :meth:`to_bytes` renders PNG or SVG.

    Attributes
    ----------
    figure_ : matplotlib.figure.Figure or None
        After :meth:`plot`: the figure.
    ax_ : matplotlib.axes.Axes or None
        After :meth:`plot`: the (first) axes; ``axes_`` holds all of them.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    n_axes: ClassVar[int] = 1
    figsize: ClassVar[tuple[float, float]] = FIGSIZE

    figure_: Figure | None = None
    ax_: Axes | None = None
    axes_: list[Axes] | None = None

    def _draw(self, axes: list[Axes]) -> None:
        raise NotImplementedError

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Self:
        """Draw on ``ax`` (one axes, or ``n_axes`` of them) or on a new figure; return self."""
        require_matplotlib()
        import matplotlib

        with matplotlib.rc_context(_rc()):
            if ax is None:
                from matplotlib.figure import Figure

                w, h = self.figsize
                fig = Figure(figsize=(w * self.n_axes, h), layout="constrained")
                axes = list(fig.subplots(1, self.n_axes, squeeze=False)[0])
            else:
                axes = list(ax) if isinstance(ax, Sequence) else [ax]
                if len(axes) != self.n_axes:
                    raise ValueError(
                        f"{type(self).__name__} draws on {self.n_axes} axes, {len(axes)} given"
                    )
                fig = axes[0].figure
            self._draw(axes)
        self.figure_, self.ax_, self.axes_ = fig, axes[0], axes
        return self

    def to_bytes(self, format: ImageFormat = "png", *, dpi: int = 100) -> bytes:
        """The figure as PNG or SVG bytes (drawn first if :meth:`plot` was not called)."""
        if format not in ("png", "svg"):
            raise ValueError(f"format must be 'png' or 'svg', found {format!r}")
        if self.figure_ is None:
            self.plot()
        assert self.figure_ is not None
        import matplotlib

        buf = io.BytesIO()
        with matplotlib.rc_context(_rc()):
            metadata: dict[str, Any] = {"Date": None} if format == "svg" else {"Software": None}
            self.figure_.savefig(buf, format=format, dpi=dpi, metadata=metadata)
        return buf.getvalue()

    def _repr_png_(self) -> bytes:
        return self.to_bytes("png")

    def to_dict(self) -> dict[str, Any]:
        """The data drawn (JSON-serialisable)."""
        from uqcore.curves import curve_to_json

        return curve_to_json(
            {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        )


def find_curve(source: Any, key: str) -> Any:
    """The curve ``key`` that ``source`` holds, as a curve object.

    ``source`` may be the curve object itself (returned unchanged when it is an instance of
    the registered type), its JSON form, a :class:`uqcore.Report` computed with ``curves=``,
    a result document of the service (a mapping with ``"curves"``), or an object with a
    ``.raw`` result document (the ``uqeval`` client's ``Result``).
    """
    from uqcore.curves import CURVES, curve_from_json

    spec = CURVES.get(key)
    if spec is not None and isinstance(source, spec.type) and spec.type is not dict:
        return source
    raw = getattr(source, "raw", None)
    if isinstance(raw, Mapping):
        source = raw
    held = getattr(source, "curves", None)
    if isinstance(held, Mapping):
        if key not in held:
            raise UQValidationError(
                f"the report holds no {key!r} curve (evaluate(..., curves=True) computes the "
                f"curves that apply; it has: {', '.join(held) or 'none'})"
            )
        return find_curve(held[key], key)
    if isinstance(source, Mapping):
        if "curves" in source and isinstance(source["curves"], Mapping):
            inner = source["curves"]
            if key not in inner:
                raise UQValidationError(
                    f"the result holds no {key!r} curve (submit with analyses.curves = true; "
                    f"it has: {', '.join(inner) or 'none'})"
                )
            return curve_from_json(key, inner[key])
        return curve_from_json(key, source)
    raise UQValidationError(
        f"cannot find a {key!r} curve in a {type(source).__name__}: pass the curve, a Report "
        "computed with curves=True, a result document, or a prediction with its targets"
    )
