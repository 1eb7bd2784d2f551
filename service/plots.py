"""Which plots of :data:`uqcore.plots.PLOTS` a submission, a comparison or a leaderboard has,
and their URLs: the ``plots`` lists of the documents and the checks of the plot routes.

The rules, for a submission:

- a plot drawn from curves (``PlotSpec.curves``) applies when its task is the submission's and
  each of its curves applies to the prediction and the extra inputs present (``groups``,
  ``ood``; :meth:`uqcore.curves.CurveSpec.why_not`);
- a plot drawn from a result field (``PlotSpec.result_field``: ``stability``, ``by_estimator``)
  applies when its task matches and the result holds that field (not null, not empty);
- on a benchmark its targets are hidden. With the benchmark's setting ``curves: "coarse"``
  the result carries its curves on the coarse grid of :mod:`uqcore.coarse` (computed by the
  worker); a curve plot whose curves the result holds is listed and drawn from them, for
  every reader (admins too: one plot, the same for all). A curve plot whose curves the
  result does not hold (``curves: "none"``, or a curve never given coarse such as
  ``interval_width``) is not listed and is for admins only, drawn by the worker from the
  stored prediction and the benchmark's targets at full resolution; so the list is the same
  for every reader.

Importing this module does not import matplotlib (the plot functions import it when they
draw).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from service import keys
from service.settings import Settings
from uqcore.curves import CURVES
from uqcore.plots import PLOTS, PlotSpec

__all__ = [
    "FORMATS",
    "MEDIA_TYPES",
    "benchmark_rule",
    "cache_ttl_s",
    "comparison_plots",
    "curve_plot_why_not",
    "holds_curves",
    "leaderboard_plots",
    "link",
    "plots_key",
    "result_field_why_not",
    "submission_plots",
]

#: The image formats served, and their media types.
MEDIA_TYPES: dict[str, str] = {"png": "image/png", "svg": "image/svg+xml"}
FORMATS: tuple[str, ...] = tuple(MEDIA_TYPES)


def plots_key(scope: str, ident: str, digest: str = "") -> str:
    """The Redis hash of ``scope``'s plots of ``ident`` (a leaderboard's: of one answer)."""
    if scope == "submission":
        return keys.submission_plots(ident)
    if scope == "comparison":
        return keys.comparison_plots(ident)
    if scope == "leaderboard":
        return keys.leaderboard_plots(ident, digest)
    raise ValueError(f"unknown plot scope {scope!r}")


#: How long the plots of one leaderboard answer are kept at most (s): a board changes with
#: every result, and each answer's plots are kept apart.
LEADERBOARD_PLOT_TTL_S = 3600


def cache_ttl_s(settings: Settings, scope: str) -> int:
    """How long a rendered plot of ``scope`` stays cached (s)."""
    ttl = settings.plot_cache_ttl_s
    return min(ttl, LEADERBOARD_PLOT_TTL_S) if scope == "leaderboard" else ttl


def link(
    path: str, spec: PlotSpec, query: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """One entry of a ``plots`` list: name, title and the relative URL (PNG; add
    ``format=svg`` for SVG)."""
    params = {k: v for k, v in (query or {}).items() if v is not None}
    url = f"{path}/{spec.name}" + (f"?{urlencode(params)}" if params else "")
    return {"name": spec.name, "title": spec.title, "url": url}


def _task_why_not(spec: PlotSpec, task: str) -> str | None:
    if spec.task is not None and spec.task != task:
        return f"plot {spec.name!r} is a {spec.task} plot; this submission is {task}"
    return None


def result_field_why_not(spec: PlotSpec, task: str, result: Mapping[str, Any]) -> str | None:
    """Why ``spec`` (a plot drawn from a result field) does not apply to ``result``."""
    why = _task_why_not(spec, task)
    if why is not None:
        return why
    field = spec.result_field
    if field is None or not result.get(field):
        hint = {
            "stability": "submit with analyses.stability.enabled = true",
            "by_estimator": "submit with analyses.estimators",
        }.get(str(field), "")
        return f"plot {spec.name!r} is drawn from the result's {field!r}, which this result " + (
            f"does not hold ({hint})" if hint else "does not hold"
        )
    return None


def curve_plot_why_not(spec: PlotSpec, prediction: Any, available: frozenset[str]) -> str | None:
    """Why ``spec`` (a plot drawn from curves) does not apply to ``prediction`` with the
    extra inputs ``available`` (``"groups"``, ``"ood"``)."""
    why = _task_why_not(spec, str(getattr(prediction, "task", "regression")))
    if why is not None:
        return why
    for name in spec.curves:
        curve = CURVES.get(name)
        if curve is None:
            return f"plot {spec.name!r} needs the curve {name!r}, which this version lacks"
        reason = curve.why_not(prediction, available)
        if reason is not None:
            return f"plot {spec.name!r}: {reason}"
    return None


def holds_curves(spec: PlotSpec, result: Mapping[str, Any]) -> bool:
    """Whether ``result`` holds every curve that ``spec`` draws."""
    held = result.get("curves") or {}
    return bool(spec.curves) and all(name in held for name in spec.curves)


def benchmark_rule(spec: PlotSpec, result: Mapping[str, Any]) -> str | None:
    """Why a non-admin reader cannot have ``spec`` of a benchmark submission whose result
    is ``result`` (None: can): a curve plot is for every reader only when the result holds
    its (coarse) curves."""
    if spec.curves and not holds_curves(spec, result):
        return (
            f"plot {spec.name!r} is drawn from curves of the benchmark's hidden targets that "
            'this result does not hold (the benchmark\'s setting curves is "none", or the '
            "curve is never given on a benchmark); a benchmark submission's readers see only "
            "the plots listed in its result's plots"
        )
    return None


def submission_plots(
    sub_id: str,
    prediction: Any,
    available: frozenset[str],
    result: Mapping[str, Any],
    *,
    benchmark: bool,
) -> list[dict[str, str]]:
    """The ``plots`` list of a submission's result document (see the module's rules)."""
    task = str(getattr(prediction, "task", "regression"))
    path = f"/v1/submissions/{sub_id}/plots"
    out = []
    for spec in PLOTS.values():
        if spec.scope != "submission":
            continue
        if spec.curves:
            if benchmark:
                if not holds_curves(spec, result):
                    continue
            elif curve_plot_why_not(spec, prediction, available) is not None:
                continue
        elif result_field_why_not(spec, task, result) is not None:
            continue
        out.append(link(path, spec))
    return out


def comparison_plots(cmp_id: str) -> list[dict[str, str]]:
    """The ``plots`` list of a succeeded comparison."""
    path = f"/v1/comparisons/{cmp_id}/plots"
    return [link(path, s) for s in PLOTS.values() if s.scope == "comparison"]


def leaderboard_plots(
    bench_id: str, metric: str | None, estimator: str | None
) -> list[dict[str, str]]:
    """The ``plots`` list of a leaderboard answer (the same query: metric and estimator)."""
    path = f"/v1/benchmarks/{bench_id}/plots"
    query = {"metric": metric, "estimator": estimator}
    return [link(path, s, query) for s in PLOTS.values() if s.scope == "leaderboard"]
