"""Stratified evaluation: any registered metric per group of samples or per bin of the targets.

Each stratum is evaluated as its own dataset (the prediction restricted to its rows with
:meth:`~uqcore.predictions.regression.RegressionPrediction.take`), so a stratum's value is
exactly the metric on that subset. Nothing is dropped silently: empty bins and strata whose
weights are all zero are reported with their count and the value ``None``, and targets outside
the bin edges are counted in ``"out_of_range"``.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat
import numpy as np

from uqcore import registry
from uqcore._backend import to_numpy
from uqcore._validation import (
    UQValidationError,
    check_finite,
    check_strictly_increasing,
)
from uqcore.batch import Batch, ClassificationBatch

__all__ = ["stratified"]

#: Most strata one call evaluates (a bin width far below the spread of y is a mistake).
MAX_STRATA = 100_000


def _groups(groups: Any, n: int) -> np.ndarray[Any, Any]:
    g = to_numpy(groups) if array_api_compat.is_array_api_obj(groups) else np.asarray(groups)
    if g.ndim != 1:
        raise UQValidationError(f"groups must be 1-D, found shape {g.shape}")
    if g.dtype.kind not in "iu":
        raise UQValidationError(f"groups must hold integer group ids, found dtype {g.dtype}")
    if g.shape[0] != n:
        raise UQValidationError(
            f"groups must have the same length as the prediction ({n}), found {g.shape[0]}"
        )
    return g.astype(np.int64)


def _edges(bins: Any, y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if isinstance(bins, bool):
        raise UQValidationError(f"bins must be a bin width > 0 or increasing edges, found {bins!r}")
    if isinstance(bins, (int, float)):
        width = float(bins)
        if not math.isfinite(width) or width <= 0:
            raise UQValidationError(f"bins (a bin width) must be finite and > 0, found {bins!r}")
        lo = math.floor(float(y.min()) / width)
        hi = math.floor(float(y.max()) / width) + 1
        lo -= int(lo * width > float(y.min()))  # guard the rounding of the division
        hi += int(hi * width <= float(y.max()))
        if hi - lo > MAX_STRATA:
            raise UQValidationError(
                f"bins width {width:g} gives {hi - lo} bins over the range of y; at most "
                f"{MAX_STRATA} are allowed"
            )
        return np.arange(lo, hi + 1, dtype=np.float64) * width
    e = to_numpy(bins) if array_api_compat.is_array_api_obj(bins) else np.asarray(bins)
    if e.ndim != 1 or e.shape[0] < 2 or e.dtype.kind not in "iuf":
        raise UQValidationError(
            f"bins must be a bin width > 0 or a 1-D array of at least 2 real edges, found {bins!r}"
        )
    e = e.astype(np.float64)
    check_finite(e, "bins", np)
    check_strictly_increasing(e, "bins", np)
    if e.shape[0] - 1 > MAX_STRATA:
        raise UQValidationError(f"bins gives {e.shape[0] - 1} bins; at most {MAX_STRATA}")
    return e


def stratified(
    metric_name: str,
    prediction: Any,
    y: Any,
    *,
    groups: Any = None,
    bins: Any = None,
    sample_weight: Any = None,
    **params: Any,
) -> dict[str, Any]:
    """Evaluate metric ``metric_name`` per group or per bin of ``y`` (moukari2019 Fig. 5).

    Classification predictions (e.g. the coverage of prediction sets per group, a
    conditional-coverage check) are stratified by ``groups``, with ``y`` their labels.

    Parameters
    ----------
    metric_name : str
        Any registered metric that applies to ``prediction``.
    prediction, y, sample_weight
        As for every metric; weights are split with the rows.
    groups : array_like of int, shape (N,), optional
        An integer group id per sample; one stratum per distinct id (ascending).
    bins : float or array_like, optional
        Strata by the value of ``y``: either strictly increasing edges e_0 < … < e_K, giving
        the bins [e_k, e_{k+1}) with the last one closed (``numpy.histogram``), or a bin width
        h > 0 (e.g. 0.1 m of depth as in moukari2019), giving the edges h·k that cover y.
        Exactly one of ``groups`` and ``bins`` must be given.
    **params
        Options of the metric (checked against its registered defaults).

    Returns
    -------
    dict
        JSON-serialisable: ``metric``, ``params`` (all options used), ``by`` (``"groups"`` or
        ``"bins"``), ``groups`` (the ids) or ``edges``, and per stratum ``values`` (the
        metric's result, ``None`` when the stratum is empty, has zero total weight, or the
        metric is undefined on it), ``counts`` (rows) and ``weights`` (total weight), plus
        ``out_of_range`` (rows whose y lies outside the edges; 0 for groups).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.PointUncertainty(np.zeros(4), np.ones(4))
    >>> r = stratified("mae", pred, np.array([0.1, 0.3, 2.0, 2.5]), bins=[0.0, 1.0, 2.0, 3.0])
    >>> r["values"], r["counts"]
    ([0.2, None, 2.25], [2, 0, 2])
    """
    task = str(getattr(prediction, "task", "regression"))
    spec = registry.get(metric_name, task)
    reason = spec.why_not(prediction)
    if reason is not None:
        raise UQValidationError(reason)
    resolved = spec.resolve_params(params)
    if (groups is None) == (bins is None):
        raise UQValidationError("exactly one of groups and bins must be given")
    if task == "classification" and bins is not None:
        raise UQValidationError(
            "bins stratify by the value of a regression target; a classification prediction "
            "is stratified by groups",
            argument="bins",
        )
    make: Any = ClassificationBatch if task == "classification" else Batch
    full = make(prediction, y, sample_weight)  # validates y and the weights once
    xp = full.xp
    n = full.n
    y_host = to_numpy(full.y)
    w_host = None if full.weights is None else to_numpy(full.weights)
    out: dict[str, Any] = {"metric": metric_name, "params": dict(resolved)}
    if groups is not None:
        g = _groups(groups, n)
        labels, codes = np.unique(g, return_inverse=True)
        n_strata = int(labels.shape[0])
        out["by"] = "groups"
        out["groups"] = [int(v) for v in labels]
        out_of_range = 0
    else:
        edges = _edges(bins, y_host)
        n_strata = int(edges.shape[0]) - 1
        codes = np.searchsorted(edges, y_host, side="right") - 1
        codes[y_host == edges[-1]] = n_strata - 1
        inside = (codes >= 0) & (codes < n_strata)
        out_of_range = int(np.count_nonzero(~inside))
        codes = np.where(inside, codes, n_strata)
        out["by"] = "bins"
        out["edges"] = [float(v) for v in edges]
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n_strata + 1), side="left")
    values: list[Any] = []
    counts: list[int] = []
    weights: list[float] = []
    for k in range(n_strata):
        idx = order[bounds[k] : bounds[k + 1]]
        counts.append(int(idx.shape[0]))
        tw = float(idx.shape[0]) if w_host is None else float(w_host[idx].sum())
        weights.append(tw)
        if idx.shape[0] == 0 or tw <= 0.0:
            values.append(None)
            continue
        idx_xp = xp.asarray(idx, device=full.device)
        sub_w = None if full.weights is None else xp.take(full.weights, idx_xp)
        batch = make(prediction.take(idx_xp), xp.take(full.y, idx_xp), sub_w)
        values.append(registry.call(spec, batch, resolved))
    out["values"] = values
    out["counts"] = counts
    out["weights"] = weights
    out["out_of_range"] = out_of_range
    return out
