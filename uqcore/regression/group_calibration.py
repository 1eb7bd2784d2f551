"""Adversarial group calibration (Zhao et al. 2020, as run in Uncertainty Toolbox).

For group sizes spanning the data, draw random groups, measure the calibration error of each,
keep the worst per trial, and report the mean (and spread) of the worst over trials.

How it is fast: a row's membership in the level sets of the calibration curve is nested (a row
inside the interval at level p_j is inside at every larger level), so the observed proportions
of any group are determined by how many of its rows enter the sets first at each level — a
histogram over M + 1 categories. The category totals of the whole batch come from the shared
calibration tally (one sort of the PIT values, see :mod:`uqcore.regression.calibration`). A
random group of G rows drawn without replacement then has a multivariate hypergeometric
histogram, and one drawn with replacement a multinomial one; numpy's ``Generator`` draws these
directly in O(M) per group instead of O(G), with exactly the distribution of drawing the row
indices (Uncertainty Toolbox's procedure). Without replacement (the default), a compiled kernel
draws the very histograms numpy's sampler would from the same generator and computes their
errors as numpy does, bit for bit (:func:`hypergeometric_group_errors`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import decimal
import functools
import math
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np

from uqcore import _background
from uqcore._compiled import kernels
from uqcore._validation import UQValidationError
from uqcore.batch import Batch
from uqcore.options import MAX_DRAWS, CurveLevels, Draws, Range, Seed
from uqcore.registry import IntegerWeights, register, undefined
from uqcore.regression.calibration import Compat, PropType, _tally

__all__ = ["adversarial_group_calibration"]

CaliType = Literal["mean_abs", "root_mean_sq"]


def check_int(value: Any, name: str, low: int) -> int:
    """Option ``name`` as an int, if it is an integer >= ``low``; else UQValidationError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise UQValidationError(f"{name} must be an integer >= {low}, found {value!r}")
    return int(value)


def _integer_totals(batch: Batch, counts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per-category integer totals (frequency weights), refusing non-integer weights."""
    if batch.weights is not None:
        xp = batch.xp
        w = batch.weights
        if not bool(xp.all(w == xp.round(w))):
            raise UQValidationError(
                "adversarial_group_calibration needs integer (frequency) sample_weight: a row "
                "of weight k counts as k rows when groups are drawn; found non-integer weights"
            )
    return category_totals(counts, batch.total_weight)


#: numpy's multivariate hypergeometric sampler ("marginals" method) needs fewer rows than this.
MAX_ROWS_WITHOUT_REPLACEMENT = 10**9

#: Above 2^53 a float64 total weight no longer counts rows exactly.
MAX_ROWS_WITH_REPLACEMENT = 2**53


def too_many_rows(total: float, draw_with_replacement: bool) -> str | None:
    """Why groups cannot be drawn from ``total`` rows (the total weight), or ``None``."""
    if draw_with_replacement:
        if total <= MAX_ROWS_WITH_REPLACEMENT:
            return None
        return f"the total weight {total:.6g} exceeds 2^53, where float64 stops counting rows"
    if total < MAX_ROWS_WITHOUT_REPLACEMENT:
        return None
    return (
        f"the total weight {total:.6g} is 10^9 rows or more, more than numpy's sampler draws "
        "groups from without replacement (draw_with_replacement=True allows up to 2^53)"
    )


def category_totals(counts: np.ndarray[Any, Any], total: float) -> np.ndarray[Any, Any]:
    """Rows per category (M + 1: entering the level sets first at level j, or never) from the
    nested counts of the level sets and the total weight."""
    cum = np.concatenate([counts, [total]])
    cats = np.diff(np.concatenate([[0.0], cum]))
    return np.rint(cats).astype(np.int64)


def _start(batch: Batch, **options: Any) -> Callable[[], dict[str, Any] | None]:
    """:attr:`~uqcore.registry.MetricSpec.start`: the totals now, the random groups (without
    the GIL; about 7 ms at the defaults and N = 10^4) in the helper thread."""
    got = _prepared(batch, **options)
    if got is None:
        return lambda: None
    return group_scores.submit(got[0], got[1], **got[2])


@register(
    "adversarial_group_calibration",
    biased=True,
    family="calibration",
    needs={"quantiles"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Zhao et al. 2020, Individual calibration with randomized forecasting (ICML); "
    "Chung et al. 2021, Uncertainty Toolbox, appendix A.3",
    structured=True,
    exempt={
        "scale_weights": "weights are frequency weights: group sizes are counted in rows of "
        "the weighted population (Σw), so scaling the weights changes the group sizes; "
        "non-integer weights are refused",
    },
    integer_weights=IntegerWeights("it draws groups of rows, a row of weight k being k rows"),
    start=_start,
)
def adversarial_group_calibration(
    batch: Batch,
    *,
    cali_type: CaliType = "mean_abs",
    prop_type: PropType = "interval",
    levels: CurveLevels | None = None,
    num_group_bins: Annotated[int, Range(2, MAX_DRAWS)] = 10,
    num_trials: Draws = 10,
    num_group_draws: Draws = 10,
    draw_with_replacement: bool = False,
    seed: Seed = 0,
    compat: Compat = None,
) -> dict[str, Any] | None:
    """Adversarial group calibration: the worst calibration error over random groups, per size.

    Uncertainty Toolbox's procedure (``adversarial_group_calibration``, same defaults): group
    size fractions r = ``linspace(0, 1, num_group_bins)``, G = max(round(r·N), 2) rows (capped
    at N without replacement); for each size, ``num_trials`` trials of ``num_group_draws``
    random groups; a trial's score is its worst group's calibration error (``cali_type``:
    ``"mean_abs"`` = :func:`~uqcore.regression.calibration.ece`, ``"root_mean_sq"`` =
    ``rmsce``, on ``prop_type`` proportions at ``levels``; ``compat="uncertainty_toolbox"`` uses
    its grid and proportions). Random groups are drawn by ``numpy.random.default_rng(seed)``:
    deterministic for a given ``seed``; the draws have exactly the distribution of Uncertainty
    Toolbox's (unseeded) index draws, so values agree in distribution, not draw by draw.

    Returns ``group_sizes`` (the fractions r), ``group_rows`` (G), ``score_mean`` (mean over
    trials of the worst error), ``score_std`` (their standard deviation, ddof = 1 — what
    Uncertainty Toolbox reports as ``score_stderr``), ``score_stderr`` (score_std / √trials;
    ``None`` for one trial) and ``value``, the mean of ``score_mean`` over the group sizes (the
    area under the curve per unit of r). Lower is better; best 0.

    Weights are frequency weights: a row of integer weight k is k rows of the population the
    groups are drawn from (so integer weights equal repeated rows and zero weights drop rows
    exactly). The metric applies only to integer weights (``integer_weights`` in the
    registry: ``evaluate(metrics="all")`` lists it as not applicable to other weights, and a
    direct call raises :class:`UQValidationError`). It is undefined (``None`` with a warning)
    when the total weight is too large to draw groups from: 10^9 rows without replacement
    (numpy's sampler), 2^53 with replacement.

    >>> import numpy as np; from uqcore import predictions as P
    >>> rng = np.random.default_rng(0); y = rng.normal(size=200)
    >>> r = adversarial_group_calibration(P.Gaussian(np.zeros(200), np.ones(200)), y, seed=1)
    >>> len(r["score_mean"]), r["group_rows"][:3]
    (10, [2, 22, 44])
    """
    got = _prepared(
        batch,
        cali_type=cali_type,
        prop_type=prop_type,
        levels=levels,
        num_group_bins=num_group_bins,
        num_trials=num_trials,
        num_group_draws=num_group_draws,
        draw_with_replacement=draw_with_replacement,
        seed=seed,
        compat=compat,
    )
    return None if got is None else group_scores(got[0], got[1], **got[2])


def _prepared(
    batch: Batch,
    *,
    cali_type: CaliType,
    prop_type: PropType,
    levels: CurveLevels | None,
    num_group_bins: int,
    num_trials: int,
    num_group_draws: int,
    draw_with_replacement: bool,
    seed: int,
    compat: Compat,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], dict[str, Any]] | None:
    """The arguments of :func:`group_scores` for the batch (the options checked; the category
    totals from the shared calibration tally), or ``None`` where the metric is undefined."""
    if cali_type not in ("mean_abs", "root_mean_sq"):
        raise UQValidationError(
            f"cali_type must be 'mean_abs' or 'root_mean_sq', found {cali_type!r}"
        )
    n_bins = check_int(num_group_bins, "num_group_bins", 1)
    trials = check_int(num_trials, "num_trials", 1)
    draws = check_int(num_group_draws, "num_group_draws", 1)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise UQValidationError(f"seed must be an integer, found {seed!r}")
    why = too_many_rows(batch.total_weight, bool(draw_with_replacement))
    if why is not None:
        undefined("adversarial_group_calibration", why)
        return None
    tally = _tally(batch, prop_type, levels, compat)
    cats = _integer_totals(batch, tally.counts)  # M + 1 categories: first level inside, or never
    options = {
        "cali_type": cali_type,
        "prop_type": prop_type,
        "n_bins": n_bins,
        "trials": trials,
        "draws": draws,
        "draw_with_replacement": draw_with_replacement,
        "seed": int(seed),
    }
    return cats, tally.expected, options


def group_errors(
    hist: np.ndarray[Any, Any], g: int, expected: np.ndarray[Any, Any], root: bool
) -> np.ndarray[Any, Any]:
    """The calibration error of each group of ``g`` rows whose histogram over the M + 1
    categories is a row of ``hist``: the mean over the M levels of |o_j − e_j| (``root``: the
    root of the mean of the squares), o = cumsum(histogram[:M]) / g, e = ``expected``."""
    diff = np.cumsum(hist[:, :-1], axis=1) / g - expected[None, :]
    err: np.ndarray[Any, Any] = (
        np.sqrt(np.mean(diff * diff, axis=1)) if root else np.mean(np.abs(diff), axis=1)
    )
    return err


def hypergeometric_group_errors(
    rng: np.random.Generator,
    cats: np.ndarray[Any, Any],
    sizes: list[int],
    count: int,
    expected: np.ndarray[Any, Any],
    root: bool,
) -> np.ndarray[Any, Any]:
    """:func:`group_errors` of ``count`` groups of each of ``sizes`` rows drawn without
    replacement from the category totals ``cats`` (one row of the result per size): their
    histograms are ``rng.multivariate_hypergeometric(cats, g, size=count)`` for each size g
    in turn.

    With the compiled kernels, :func:`uqcore._jit.group_errors` draws the same histograms
    from ``rng`` (numpy's algorithm, the same bits of its generator, which ends in the same
    state) and computes the errors as numpy does, the same values to the last bit, without the
    GIL and without a (count, M + 1) histogram: 0.65× the time of numpy's sampler and passes
    at N = 10^4, the default 100 levels and 100 groups per size. ``UQCORE_JIT=0`` or a
    missing numba: numpy's sampler and :func:`group_errors`.
    """
    jit = kernels()
    colors = np.ascontiguousarray(cats, dtype=np.int64)
    if jit is None or colors.shape[0] < 2:
        return np.stack(
            [
                group_errors(
                    rng.multivariate_hypergeometric(cats, g, size=count), g, expected, root
                )
                for g in sizes
            ]
        )
    if np.shape(expected) != (colors.shape[0] - 1,):
        raise ValueError(
            f"{colors.shape[0]} category totals need {colors.shape[0] - 1} expected "
            f"proportions, found shape {np.shape(expected)}"
        )
    out = np.empty((len(sizes), count))
    table = log_factorials(int(colors.sum()) + 1)
    jit.group_errors(rng, colors, np.array(sizes, dtype=np.int64), expected, bool(root), table, out)
    return out


#: log(k!) for k < 126, the table numpy's hypergeometric sampler reads (its values are the
#: correctly rounded ones, computed here exactly); past it, numpy's Stirling series.
_EXACT_LOG_FACTORIALS = 126

#: At most this many log(k!) are kept (1 MiB, the size of a core's L2 cache on the machines
#: measured); the sampler computes larger ones as it goes, by the same series. Each draw reads
#: the table at four scattered places: a table of N + 1 values (8 MiB at N = 10⁶) missed the
#: cache on most of them, and the groups of one resample at N = 10⁶ took 9–12 ms against 7 ms
#: with this one (10⁷: 11 against 8 ms; 10⁴ and 10⁵ unchanged), the same draws.
MAX_LOG_FACTORIALS = 1 << 17

_LOG_FACTORIALS: list[np.ndarray[Any, Any]] = []
_LOG_FACTORIALS_LOCK = threading.Lock()


def _exact_log_factorials() -> list[float]:
    """log(k!) for k < 126, correctly rounded (60 digits, then rounded once)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        return [
            float(decimal.Decimal(math.factorial(k)).ln()) if k > 1 else 0.0
            for k in range(_EXACT_LOG_FACTORIALS)
        ]


def stirling_log_factorials(start: int, stop: int) -> np.ndarray[Any, Any]:
    """numpy's Stirling series of log(k!) for ``start`` ≤ k < ``stop`` (k ≥ 1), in Python
    floats and ``math.log`` (the C library's log, as numpy's C code calls it)."""
    c = 0.9189385332046728  # log(2π)/2 as numpy writes it
    return np.array(
        [
            (k + 0.5) * math.log(k) - k + (c + (1.0 / k) * (1 / 12.0 - 1 / (360.0 * k * k)))
            for k in range(start, stop)
        ],
        dtype=np.float64,
    )


def log_factorials(n: int) -> np.ndarray[Any, Any]:
    """log(k!) for k < min(n, :data:`MAX_LOG_FACTORIALS`) (at least the 126 exact ones), the
    values numpy's sampler uses; kept per process and grown as needed (read-only)."""
    want = max(min(n, MAX_LOG_FACTORIALS), _EXACT_LOG_FACTORIALS)
    with _LOG_FACTORIALS_LOCK:
        if _LOG_FACTORIALS and _LOG_FACTORIALS[0].shape[0] >= want:
            return _LOG_FACTORIALS[0]
        table = np.empty(want)
        held = _LOG_FACTORIALS[0] if _LOG_FACTORIALS else None
        start = _EXACT_LOG_FACTORIALS if held is None else held.shape[0]
        if held is None:
            table[:start] = _exact_log_factorials()
        else:
            table[:start] = held
        jit = kernels()
        if jit is None or numba_uses_svml():
            # numba with Intel's SVML may vectorize the log with other roundings than the C
            # library's: the series in Python there
            table[start:] = stirling_log_factorials(start, want)
        else:
            jit.fill_log_factorials(table, start)
        table.setflags(write=False)
        _LOG_FACTORIALS[:] = [table]
        return table


def numba_uses_svml() -> bool:
    """Whether numba compiles with Intel's short vector math library."""
    try:
        from numba import config
    except ImportError:  # pragma: no cover - numba is a dependency
        return False
    return bool(getattr(config, "USING_SVML", False))


#: The last results of :func:`group_scores` by their inputs: a job computes the metric and
#: then its curve (the same draws from the same totals and seed), the second for free.
_RECENT: collections.OrderedDict[tuple[Any, ...], dict[str, Any]] = collections.OrderedDict()
_RECENT_SIZE = 8
_RECENT_LOCK = threading.Lock()
#: The results being computed, by their inputs: a second call with the same inputs (the
#: curve, while :func:`uqcore.evaluate` still draws the metric's groups in its helper thread)
#: waits for the first instead of drawing them again.
_PENDING: dict[tuple[Any, ...], concurrent.futures.Future[dict[str, Any]]] = {}

_Scores = Callable[..., dict[str, Any]]


class _Kept:
    """``fn(cats, expected, **options)``, a function of its inputs alone, with its last few
    results kept by those inputs and returned again (as copies) for equal ones; a call whose
    inputs another thread is computing waits for that result. :meth:`submit` computes in the
    helper thread (:mod:`uqcore._background`), the inputs being claimed at once in the
    calling thread: a call made before the helper thread begins waits for it too."""

    def __init__(self, fn: _Scores) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)  # its name, its doc, __wrapped__

    def __call__(
        self, cats: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], **options: Any
    ) -> dict[str, Any]:
        return self.submit(cats, expected, now=True, **options)()

    def submit(
        self,
        cats: np.ndarray[Any, Any],
        expected: np.ndarray[Any, Any],
        *,
        now: bool = False,
        **options: Any,
    ) -> Callable[[], dict[str, Any]]:
        """The result of ``fn(cats, expected, **options)``, kept, computed by another call
        (then waited for), or computed here (``now``) or in the helper thread; the returned
        callable waits for it and returns a copy (or raises its error)."""
        c = np.ascontiguousarray(cats)
        e = np.ascontiguousarray(expected, dtype=np.float64)
        key = (self.fn, c.dtype.str, c.tobytes(), e.tobytes(), *sorted(options.items()))
        other: concurrent.futures.Future[dict[str, Any]] | None = None
        with _RECENT_LOCK:
            held = _RECENT.get(key)
            if held is not None:
                _RECENT.move_to_end(key)
            elif key in _PENDING:
                other = _PENDING[key]
            else:
                mine: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
                _PENDING[key] = mine
        if held is not None:
            found = held
            return lambda: _copy(found)
        if other is not None:
            waited = other
            return lambda: _copy(waited.result())  # the other call's result, or its error

        def compute() -> None:
            try:
                value = self.fn(c, e, **options)
            except BaseException as exc:
                with _RECENT_LOCK:
                    del _PENDING[key]
                mine.set_exception(exc)
                return
            with _RECENT_LOCK:
                _RECENT[key] = value
                while len(_RECENT) > _RECENT_SIZE:
                    _RECENT.popitem(last=False)
                del _PENDING[key]
            mine.set_result(value)

        if now:
            compute()
        else:
            _background.submit(compute)
        return lambda: _copy(mine.result())


def _copy(held: dict[str, Any]) -> dict[str, Any]:
    """A caller's copy of a kept result (its lists copied)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in held.items()}


@_Kept
def group_scores(
    cats: np.ndarray[Any, Any],
    expected: np.ndarray[Any, Any],
    *,
    cali_type: CaliType,
    prop_type: PropType,
    n_bins: int,
    trials: int,
    draws: int,
    draw_with_replacement: bool,
    seed: int,
) -> dict[str, Any]:
    """The result of :func:`adversarial_group_calibration` from the category totals ``cats``
    (validated options; also the stability engine's per-resample form, whose totals come from
    cumulative weights along the PIT order). A function of its inputs alone (the draws are
    seeded): the last few results are kept (:class:`_Kept`)."""
    n_rows = int(cats.sum())
    rng = np.random.default_rng(seed)
    ratios = np.linspace(0.0, 1.0, n_bins)
    sizes = [max(round(n_rows * float(r)), 2) for r in ratios]
    if not draw_with_replacement:
        sizes = [min(g, n_rows) for g in sizes]
    k = trials * draws
    root = cali_type == "root_mean_sq"
    if draw_with_replacement:
        p = cats / n_rows
        err = np.stack(
            [group_errors(rng.multinomial(g, p, size=k), g, expected, root) for g in sizes]
        )
    else:
        err = hypergeometric_group_errors(rng, cats, sizes, k, expected, root)
    # per size (a row each): the worst group of each trial, its mean and standard deviation
    # over the trials (each row reduced as numpy reduces a row alone)
    worst = err.reshape(len(sizes), trials, draws).max(axis=2)
    means = [float(v) for v in np.mean(worst, axis=1)]
    stds: list[float | None] = [None] * len(sizes)
    stderrs: list[float | None] = [None] * len(sizes)
    if trials > 1:
        spread = [float(v) for v in np.std(worst, axis=1, ddof=1)]
        stds, stderrs = list(spread), [sd / math.sqrt(trials) for sd in spread]
    return {
        "value": float(np.mean(means)),
        "group_sizes": [float(r) for r in ratios],
        "group_rows": [int(g) for g in sizes],
        "score_mean": means,
        "score_std": stds,
        "score_stderr": stderrs,
        "cali_type": cali_type,
        "prop_type": prop_type,
    }
