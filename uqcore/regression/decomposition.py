"""Score decompositions for regression: CORP (miscalibration, discrimination, uncertainty) of
the mean or of a quantile, and the weighted interval score with its three components.

CORP (:mod:`uqcore._isotonic`): the forecast x_i is the point prediction (``functional="mean"``,
scored by the squared error; the point of a distributional kind is its mean, of a
``Quantiles`` prediction its median) or the quantile F_i⁻¹(α) (``functional="quantile"``,
scored by the pinball loss at ``level`` α). The three components and the score come from one
isotonic fit, cached on the batch for the options given, so asking for all three costs one.

WIS (Bracher, Ray, Gneiting & Reich 2021, PLoS Comput. Biol. 17(2) e1008618, eq. 2): for the
central intervals [l_k, u_k] at coverages 1 − α_k (k = 1..K) and the median m,

    WIS = (1/(K + ½)) (½ |y − m| + Σ_k (α_k/2) IS_{α_k}),
    IS_α = (u − l) + (2/α)(l − y)₊ + (2/α)(y − u)₊,

and WIS = dispersion + overprediction + underprediction with
dispersion = Σ_k (α_k/2)(u_k − l_k) / (K + ½),
overprediction = (Σ_k (l_k − y)₊ + ½ (m − y)₊) / (K + ½),
underprediction = (Σ_k (y − u_k)₊ + ½ (y − m)₊) / (K + ½):
the median's term goes to over- or underprediction, as scoringutils' ``wis`` does (its
``separate_results``). For Gaussian, Laplace and Student-t predictions with one df the
quantiles are μ_i + σ_i z_p, and each part of a row is σ_i times a function of
t_i = (y_i − μ_i)/σ_i alone, constant (dispersion) or piecewise linear (over- and
underprediction): tabulated once per family and levels, one pass over the rows each, with no
quantile computed (:func:`_wis_tables`). The other kinds' parts come from one pass over the
quantiles, in blocks of rows that stay in the cache (numpy: a matrix-vector product per part
and block; the dispersion centred on the median, so that a large location cancels nothing).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import array_api_compat
import numpy as np

from uqcore._backend import Array, argsort_host, clip, to_numpy
from uqcore._compiled import kernels
from uqcore._isotonic import Corp, corp
from uqcore._scaling import exponent, max_abs, rescaled
from uqcore._validation import UQValidationError
from uqcore.batch import Batch
from uqcore.options import CoverageLevels, Range
from uqcore.registry import NO_TERMS, register, undefined
from uqcore.regression import scoring
from uqcore.regression.scoring import _rows

__all__ = [
    "HUB_COVERAGES",
    "corp_dsc",
    "corp_mcb",
    "corp_of",
    "corp_unc",
    "wis",
    "wis_dispersion",
    "wis_overprediction",
    "wis_underprediction",
]

Functional = Literal["mean", "quantile"]
Level = Annotated[float, Range(0, 1, lo_open=True, hi_open=True)]
NDArray = np.ndarray[Any, Any]

_CORP = (
    "Dimitriadis, Gneiting & Jordan 2021, PNAS 118(8) e2016191118 (CORP); Gneiting & Resin "
    "2023, Electron. J. Statist. 17:3226 (general functionals)"
)
_WIS = "Bracher, Ray, Gneiting & Reich 2021, PLoS Comput. Biol. 17(2) e1008618, eq. 2"

#: The central coverages 1 − α of the COVID-19 Forecast Hub (α = 0.02, 0.05, 0.1, 0.2, ...,
#: 0.9): 23 quantile levels with the median.
HUB_COVERAGES: tuple[float, ...] = tuple(
    round(1.0 - a, 10) for a in (0.02, 0.05, *(k / 10 for k in range(1, 10)))
)
_TOL = 1e-9


# -- CORP ---------------------------------------------------------------------------------------
def _forecast(batch: Batch, functional: Functional, level: float) -> tuple[Any, Any] | str:
    """(forecast x, an argsort of x) as float64 numpy arrays (cached: resamples share them),
    or why the functional is undefined for the prediction."""

    def compute() -> tuple[Any, Any] | str:
        pred = batch.prediction
        if functional == "mean":
            x = to_numpy(batch.point)
        else:
            if "quantiles" not in pred.capabilities:
                return f"the quantile functional needs quantiles, which a {pred.kind} lacks"
            try:
                x = to_numpy(pred.ppf([level]))[:, 0]
            except UQValidationError as exc:
                return str(exc)
        x = np.asarray(x, dtype=np.float64)
        return x, argsort_host(x)

    return batch.shared(f"corp-x:{functional}:{level!r}", compute)


def corp_of(batch: Batch, functional: Functional, level: float) -> Corp | str:
    """The CORP decomposition of the batch (cached per options), or why it is undefined."""

    def compute() -> Corp | str:
        got = _forecast(batch, functional, level)
        if isinstance(got, str):
            return got
        x, order = got
        y = np.asarray(to_numpy(batch.y), dtype=np.float64)
        w = None if batch.weights is None else to_numpy(batch.weights)
        # exact powers of two keep squares and sums inside float64's range at any scale
        e = exponent(max_abs(np, x), max_abs(np, y))
        power = 2 if functional == "mean" else 1
        out = corp(
            rescaled(x, e), rescaled(y, e), w, functional=functional, level=level, order=order
        )
        out = out.scaled(e, power)
        if not all(math.isfinite(v) for v in (out.score, out.mcb, out.dsc, out.unc)):
            return "the scores exceed float64's range"
        return out

    return batch.weighted(f"corp:{functional}:{level!r}", compute)


def _corp_value(batch: Batch, name: str, part: str, functional: Functional, level: float) -> Any:
    d = corp_of(batch, functional, level)
    if isinstance(d, str):
        undefined(name, d)
        return None
    parts = {"mcb": d.mcb, "dsc": d.dsc, "unc": d.unc}
    out: dict[str, Any] = {"value": parts[part], "score": d.score, **parts}
    if functional == "quantile":
        out["level"] = level
    return out


_CORP_ARGS: dict[str, Any] = {
    "family": "calibration",
    "needs": {"point"},
    "reference": _CORP,
    "scaling": "quadratic",
}


@register("corp_mcb", direction="lower", bounds=(0.0, None), best=0.0, biased=True, **_CORP_ARGS)
def corp_mcb(batch: Batch, *, functional: Functional = "mean", level: Level = 0.5) -> Any:
    """CORP miscalibration MCB = S̄(x) − S̄(x̂): the score the isotonic recalibration x̂ saves.

    x̂ is the isotonic (PAV) regression of y on the forecast x (tied forecasts share one
    value); S the squared error of the point prediction (``functional="mean"``, the default;
    the point is the predictive mean, a ``Quantiles`` prediction's median) or the pinball
    loss of the quantile F⁻¹(``level``) (``functional="quantile"``: kinds with quantiles
    only, undefined for the others although ``needs`` is the point's). S̄ is the weighted
    mean. S̄(x) = MCB − DSC + UNC exactly; the dict gives all three and ``score`` = S̄(x).
    Best 0 (x is its own recalibration); lower is better (the in-sample fit makes MCB and DSC
    biased upwards at small N: marked biased); in the units of y² (mean) or y
    (quantile). Dimitriadis, Gneiting & Jordan 2021; model-diagnostics' ``decompose`` is the
    same (it takes the midpoint of the non-unique quantile fit, which changes no value).

    >>> import numpy as np; from uqcore import predictions as P
    >>> d = corp_mcb(P.PointUncertainty([0.0, 1.0, 2.0], [1.0, 1.0, 1.0]), np.array([1.0, 0.0, 2.0]))
    >>> round(d["value"], 6), round(d["dsc"], 6), round(d["unc"], 6), round(d["score"], 6)
    (0.5, 0.5, 0.666667, 0.666667)
    """
    return _corp_value(batch, "corp_mcb", "mcb", functional, level)


@register("corp_dsc", direction="higher", bounds=(0.0, None), biased=True, **_CORP_ARGS)
def corp_dsc(batch: Batch, *, functional: Functional = "mean", level: Level = 0.5) -> Any:
    """CORP discrimination DSC = S̄(r) − S̄(x̂): what the recalibrated forecast gains over
    climatology r.

    r is the weighted mean (``functional="mean"``) or the lower weighted α-quantile
    (``"quantile"``) of y; x̂, S and the options as for ``corp_mcb``. 0 <= DSC <= UNC; higher
    is better. Dimitriadis, Gneiting & Jordan 2021.

    >>> import numpy as np; from uqcore import predictions as P
    >>> d = corp_dsc(P.PointUncertainty([0.0, 1.0, 2.0], [1.0, 1.0, 1.0]), np.array([0.0, 0.0, 3.0]))
    >>> round(d["value"], 6), abs(d["mcb"] - d["value"] + d["unc"] - d["score"]) < 1e-15
    (2.0, True)
    """
    return _corp_value(batch, "corp_dsc", "dsc", functional, level)


@register("corp_unc", direction="lower", bounds=(0.0, None), **_CORP_ARGS)
def corp_unc(batch: Batch, *, functional: Functional = "mean", level: Level = 0.5) -> Any:
    """CORP uncertainty UNC = S̄(r): the score of climatology, a property of the targets.

    r as for ``corp_dsc`` (the weighted mean of y, or its lower weighted α-quantile); for the
    mean UNC is the weighted variance of y. It does not depend on the prediction (its
    direction is nominal). Dimitriadis, Gneiting & Jordan 2021.

    >>> import numpy as np; from uqcore import predictions as P
    >>> corp_unc(P.PointUncertainty([0.0, 0.0], [1.0, 1.0]), np.array([1.0, 3.0]))["value"]
    1.0
    """
    return _corp_value(batch, "corp_unc", "unc", functional, level)


# -- WIS ----------------------------------------------------------------------------------------
def _wis_grid(batch: Batch, levels: Any) -> tuple[np.ndarray[Any, Any], str | None]:
    """α_k of the central intervals, or why WIS is undefined."""
    pred = batch.prediction
    if levels is None and pred.kind == "quantiles":
        known = np.asarray(to_numpy(pred.levels), dtype=np.float64)  # type: ignore[attr-defined]
        if not bool(np.any(np.abs(known - 0.5) <= _TOL)):
            return np.zeros(0), "the quantiles prediction has no median (level 0.5)"
        pairs: list[float] = []
        for p in known[known < 0.5 - _TOL]:
            if bool(np.any(np.abs(known - (1.0 - p)) <= _TOL)):
                pairs.append(2.0 * float(p))
        return np.asarray(pairs, dtype=np.float64), None
    c = np.asarray(HUB_COVERAGES if levels is None else levels, dtype=np.float64)
    alphas = np.unique(1.0 - c)
    if pred.kind == "quantiles":
        ends = np.concatenate([alphas / 2, 1 - alphas / 2, [0.5]])
        j = pred.outside(ends)  # type: ignore[attr-defined]
        if j is not None:
            return alphas, "the central intervals at levels reach beyond the predicted levels"
    return alphas, None


@functools.lru_cache(maxsize=64)
def _wis_tables(
    kind: str, df: float | None, alphas: tuple[float, ...]
) -> tuple[float, scoring._Table, scoring._Table]:
    """The parts of WIS of a location-scale family with one standardised distribution
    (:func:`uqcore.regression.scoring._tabulable`): with the quantiles μ_i + σ_i z_p and
    t_i = (y_i − μ_i)/σ_i, a row's dispersion is σ_i·D and its over- and underprediction
    σ_i·g_o(t_i) and σ_i·g_u(t_i), with D = Σ_k (α_k/2)(z_{1−α_k/2} − z_{α_k/2}) / (K + ½),
    g_o(t) = (Σ_k (z_{α_k/2} − t)₊ + ½(z_½ − t)₊) / (K + ½) and
    g_u(t) = (Σ_k (t − z_{1−α_k/2})₊ + ½(t − z_½)₊) / (K + ½), piecewise linear: (D, the
    table of g_o, the table of g_u) (:class:`~uqcore.regression.scoring._Table`), built once
    per process for the family and levels."""
    a = np.asarray(alphas, dtype=np.float64)
    k = a.shape[0]
    norm = 1.0 / (k + 0.5)
    z_lo = scoring._std_ppf_of(kind, df, a / 2.0)
    z_up = scoring._std_ppf_of(kind, df, 1.0 - a / 2.0)
    z_med = scoring._std_ppf_of(kind, df, np.asarray([0.5]))
    arm = norm * np.concatenate([np.ones(k), [0.5]])
    none = np.zeros(k + 1)
    spread = norm * math.fsum(float(v) for v in a / 2.0 * (z_up - z_lo))
    over = scoring._Table(np.concatenate([z_lo, z_med]), arm, none, 0.0)
    under = scoring._Table(np.concatenate([z_up, z_med]), none, arm, 0.0)
    return spread, over, under


def _wis_tabulated(
    batch: Batch, alphas: NDArray
) -> tuple[float, scoring.RowFn, scoring.RowFn] | None:
    """(D, the row functions σ_i·g_o(t_i) and σ_i·g_u(t_i)) of :func:`_wis_tables` for a
    tabulable prediction (one compiled pass each on numpy), or None for the other kinds."""
    pred = batch.prediction
    if not scoring._tabulable(pred):
        return None
    spread, over, under = _wis_tables(
        pred.kind, scoring._family_df(pred), tuple(float(a) for a in alphas)
    )
    return (
        spread,
        scoring._location_scale_table(batch, over),
        scoring._location_scale_table(batch, under),
    )


def _wis_parts(batch: Batch, levels: Any) -> tuple[Array, Array, Array] | str:
    """Per-row (dispersion, overprediction, underprediction), or why undefined."""
    alphas, why = _wis_grid(batch, levels)
    return why if why is not None else _wis_rows(batch, alphas)


def _wis_rows(batch: Batch, alphas: NDArray) -> tuple[Array, Array, Array]:
    """:func:`_wis_parts` of the central intervals at α = ``alphas`` (checked)."""
    tabulated = _wis_tabulated(batch, alphas)
    if tabulated is not None:
        spread, over, under = tabulated
        return (
            spread * scoring._scale(batch.prediction),
            scoring._terms(batch, 1, over),
            scoring._terms(batch, 1, under),
        )
    k = alphas.shape[0]
    lv = np.concatenate([[0.5], alphas / 2.0, 1.0 - alphas / 2.0])
    cols = None
    if batch.prediction.kind == "quantiles":  # its own columns where the levels are its own
        known = np.asarray(to_numpy(batch.prediction.levels), dtype=np.float64)  # type: ignore[attr-defined]
        j = np.argmin(np.abs(known[None, :] - lv[:, None]), axis=1)
        if bool(np.all(np.abs(known[j] - lv) <= _TOL)):
            cols = j
    norm = 1.0 / (k + 0.5)
    if array_api_compat.is_numpy_namespace(batch.xp):
        return _wis_rows_numpy(batch, alphas, lv, cols, norm)
    # Not cached: three N-vectors held for the rest of an evaluation would raise its peak
    # memory; the four metrics share the means instead (:func:`_wis_value`).
    xp = batch.xp
    half = xp.asarray(alphas / 2.0, dtype=batch.y.dtype, device=batch.device)
    take = None if cols is None else xp.asarray(cols, device=batch.device)
    n = batch.n
    step = max(1, 2**18 // (2 * k + 1))
    parts: list[list[Array]] = [[], [], []]
    for a in range(0, n, step):
        b = min(n, a + step)
        sub = _rows(batch.prediction, a, b) if (a, b) != (0, n) else batch.prediction
        q = sub.ppf(lv) if take is None else xp.take(sub.values, take, axis=1)  # type: ignore[union-attr]
        y = batch.y[a:b][:, None]
        m, lo, up = q[:, 0], q[:, 1 : k + 1], q[:, k + 1 :]
        disp = xp.sum(half * (up - lo), axis=1)
        over = xp.sum(clip(xp, lo - y, min=0.0), axis=1) + 0.5 * clip(xp, m - y[:, 0], min=0.0)
        under = xp.sum(clip(xp, y - up, min=0.0), axis=1) + 0.5 * clip(xp, y[:, 0] - m, min=0.0)
        for store, v in zip(parts, (disp, over, under), strict=True):
            store.append(v * norm)
    d, o, u = (p[0] if len(p) == 1 else xp.concat(p) for p in parts)
    return d, o, u


#: Values per block of the numpy path (rows × quantile columns): its block-sized buffers
#: stay in the cache, where N × K temporaries would go through memory several times.
_WIS_BLOCK = 1 << 16


def _quantile_blocks(
    pred: Any, lv: NDArray, cols: NDArray | None, rows: int
) -> Iterator[tuple[int, int, NDArray]]:
    """(start, stop, quantiles) of blocks of ``rows`` rows: a ``Quantiles`` prediction's own
    values (``cols`` given: all its columns, a view), else ``ppf`` at the levels ``lv``."""
    n = pred.n
    for a in range(0, n, rows):
        b = min(n, a + rows)
        if cols is not None:
            yield a, b, pred.values[a:b]
        else:
            sub = _rows(pred, a, b) if (a, b) != (0, n) else pred
            yield a, b, np.asarray(sub.ppf(lv))


def _wis_rows_numpy(
    batch: Batch, alphas: NDArray, lv: NDArray, cols: NDArray | None, norm: float
) -> tuple[NDArray, NDArray, NDArray]:
    """The per-row parts in blocks of rows, each block in one pass over two reused buffers.

    With D = q − y over a block's quantile columns q (a ``Quantiles`` prediction's own
    columns, unused ones with coefficient 0; else ``ppf`` at the levels), each part is a
    product of the block with a coefficient vector (BLAS): overprediction
    max(D, 0)·(1 at l_k, ½ at m), underprediction min(D, 0)·(−1 at u_k, −½ at m), and the
    dispersion (q − m)·(−α_k/2 at l_k, α_k/2 at u_k) — centred on the median, so that its
    terms are all of one sign (no cancellation of the location however large it is).
    """
    k = alphas.shape[0]
    pred = batch.prediction
    y = np.asarray(batch.y)
    # the precision of the inputs, as the array-API path (float32 stays float32)
    dtype = y.dtype if cols is None else np.result_type(y.dtype, pred.values.dtype)  # type: ignore[attr-defined]
    index = np.arange(lv.shape[0]) if cols is None else cols
    width = lv.shape[0] if cols is None else int(pred.values.shape[1])  # type: ignore[attr-defined]
    median, lower, upper = int(index[0]), index[1 : k + 1], index[k + 1 :]
    c_disp = np.zeros(width, dtype=dtype)
    c_over = np.zeros(width, dtype=dtype)
    c_under = np.zeros(width, dtype=dtype)
    np.add.at(c_disp, lower, -alphas / 2.0)
    np.add.at(c_disp, upper, alphas / 2.0)
    np.add.at(c_over, lower, 1.0)
    np.add.at(c_under, upper, -1.0)
    c_over[median] += 0.5
    c_under[median] -= 0.5
    n = batch.n
    out = [np.empty(n, dtype=dtype) for _ in range(3)]
    jit = kernels()
    if jit is not None:  # one compiled pass over each row's used columns
        used = np.flatnonzero((c_disp != 0) | (c_over != 0) | (c_under != 0))
        coef = [np.ascontiguousarray(c[used], dtype=np.float64) for c in (c_disp, c_over, c_under)]
        rows = n if cols is not None else min(n, max(1, _WIS_BLOCK // width))
        for a, b, q in _quantile_blocks(pred, lv, cols, rows):
            parts = [v[a:b] for v in out]
            jit.wis_rows(q, y[a:b], median, used, *coef, *parts)
        for v in out:
            v *= norm
        return out[0], out[1], out[2]
    rows = min(n, max(1, _WIS_BLOCK // width))
    diff = np.empty((rows, width), dtype=dtype)
    pos = np.empty((rows, width), dtype=dtype)
    for a, b, q in _quantile_blocks(pred, lv, cols, rows):
        dv, pv = diff[: b - a], pos[: b - a]
        # einsum's own loops, not BLAS: OpenBLAS, allocating its buffer lazily, hangs instead of
        # raising MemoryError when a worker's per-job memory limit (RLIMIT_DATA) refuses it
        np.subtract(q, q[:, median : median + 1], out=dv)
        np.einsum("ij,j->i", dv, c_disp, out=out[0][a:b])
        np.subtract(q, y[a:b, None], out=dv)
        np.maximum(dv, 0.0, out=pv)
        np.einsum("ij,j->i", pv, c_over, out=out[1][a:b])
        np.minimum(dv, 0.0, out=dv)
        np.einsum("ij,j->i", dv, c_under, out=out[2][a:b])
    for v in out:
        v *= norm
    return out[0], out[1], out[2]


def _wis_key(levels: Any) -> str:
    return "wis:" + ("own" if levels is None else repr(tuple(float(c) for c in levels)))


_PART = {"dispersion": 0, "overprediction": 1, "underprediction": 2}


def _wis_terms(part: str) -> Any:
    def terms(batch: Batch, *, levels: Any = None) -> Array:
        p = _wis_parts(batch, levels)
        if isinstance(p, str):
            return NO_TERMS
        if part == "wis":
            return p[0] + p[1] + p[2]
        return p[_PART[part]]

    return terms


def _wis_means(batch: Batch, levels: Any) -> tuple[float, float, float, float] | str:
    """The weighted means of the parts and of their sum (cached per weights), or why
    undefined."""

    def compute() -> tuple[float, float, float, float] | str:
        alphas, why = _wis_grid(batch, levels)
        if why is not None:
            return why
        tabulated = _wis_tabulated(batch, alphas)
        if tabulated is not None:  # no per-row arrays: block by block, one pass each
            spread, over, under = tabulated
            d = spread * batch.mean(scoring._scale(batch.prediction))
            o, u = scoring._mean(batch, 1, over), scoring._mean(batch, 1, under)
            return d, o, u, d + o + u
        p = _wis_rows(batch, alphas)
        d, o, u = (batch.mean(v) for v in p)
        return d, o, u, batch.mean(p[0] + p[1] + p[2])

    return batch.weighted(_wis_key(levels), compute)


def _wis_value(batch: Batch, name: str, part: str, levels: Any) -> Any:
    got = _wis_means(batch, levels)
    if isinstance(got, str):
        undefined(name, got)
        return None
    d, o, u, total = got
    value = total if part == "wis" else {"dispersion": d, "overprediction": o}.get(part, u)
    return {
        "value": value,
        "wis": total,
        "dispersion": d,
        "overprediction": o,
        "underprediction": u,
    }


def _wis_args(part: str) -> dict[str, Any]:
    return {
        "family": "scoring",
        "needs": {"quantiles"},
        "direction": "lower",
        "bounds": (0.0, None),
        "best": 0.0,
        "reference": _WIS,
        "scaling": "equivariant",
        "mean_terms": _wis_terms(part),
    }


Levels = CoverageLevels | None


@register("wis", **_wis_args("wis"))
def wis(batch: Batch, *, levels: Levels = None) -> Any:
    """Weighted interval score (Bracher et al. 2021) with its three components.

    WIS = (½|y − m| + Σ_k (α_k/2) IS_{α_k}(l_k, u_k; y)) / (K + ½), weighted mean over rows;
    IS the interval score of the central interval at coverage 1 − α_k. ``levels``: the
    coverages 1 − α_k; ``None`` (default) is the COVID-19 Forecast Hub's α = 0.02, 0.05,
    0.1, 0.2, ..., 0.9 (with the median: 23 quantiles), or for a ``Quantiles`` prediction
    its own symmetric level pairs (p, 1 − p), which need its median (undefined without
    level 0.5). The dict gives ``dispersion`` + ``overprediction`` + ``underprediction`` =
    ``wis`` (the median's term in over/underprediction, as scoringutils). Equals
    scoringrules' ``weighted_interval_score`` with its default weights w_k = α_k/2, w_0 = ½
    divided by K + ½. Best 0; lower is better.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Quantiles([0.25, 0.5, 0.75], [[0.0, 1.0, 2.0]])
    >>> round(wis(pred, np.array([3.0]))["value"], 12)
    1.666666666667
    """
    return _wis_value(batch, "wis", "wis", levels)


@register("wis_dispersion", **_wis_args("dispersion"))
def wis_dispersion(batch: Batch, *, levels: Levels = None) -> Any:
    """Dispersion of the weighted interval score: Σ_k (α_k/2)(u_k − l_k) / (K + ½).

    The width part of ``wis`` (same levels and conventions); it does not depend on y.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Quantiles([0.25, 0.5, 0.75], [[0.0, 1.0, 2.0]])
    >>> round(wis_dispersion(pred, np.array([3.0]))["value"], 12)
    0.333333333333
    """
    return _wis_value(batch, "wis_dispersion", "dispersion", levels)


@register("wis_overprediction", **_wis_args("overprediction"))
def wis_overprediction(batch: Batch, *, levels: Levels = None) -> Any:
    """Overprediction of the weighted interval score: (Σ_k (l_k − y)₊ + ½(m − y)₊) / (K + ½).

    The part of ``wis`` from targets below the intervals and the median (same levels).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Quantiles([0.25, 0.5, 0.75], [[0.0, 1.0, 2.0]])
    >>> round(wis_overprediction(pred, np.array([-1.0]))["value"], 12)
    1.333333333333
    """
    return _wis_value(batch, "wis_overprediction", "overprediction", levels)


@register("wis_underprediction", **_wis_args("underprediction"))
def wis_underprediction(batch: Batch, *, levels: Levels = None) -> Any:
    """Underprediction of the weighted interval score: (Σ_k (y − u_k)₊ + ½(y − m)₊) / (K + ½).

    The part of ``wis`` from targets above the intervals and the median (same levels).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Quantiles([0.25, 0.5, 0.75], [[0.0, 1.0, 2.0]])
    >>> round(wis_underprediction(pred, np.array([3.0]))["value"], 12)
    1.333333333333
    """
    return _wis_value(batch, "wis_underprediction", "underprediction", levels)
