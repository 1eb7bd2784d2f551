"""Bootstrap confidence intervals for any registered metric: percentile and BCa.

Every resample is a vector of counts (:mod:`uqcore.stability.weights`) evaluated by the one
resampling engine, so orderings are computed once per batch, mean-type metrics cost one
matrix product per block of resamples, and the order-based metrics (Spearman, AUSE, AURG, the
PIT KS statistic, ENCE, UCE, MeRCI, ...) are cumulative sums of the block's weights along
those fixed orders (:mod:`uqcore.stability._blocks`).

Intervals
---------
- ``"percentile"``: the (1 − level)/2 and (1 + level)/2 quantiles of the B bootstrap values
  (linear interpolation between order statistics).
- ``"bca"``: Efron's bias-corrected and accelerated interval (Efron & Tibshirani 1993, §14.3):
  α_{1,2} = Φ(ẑ₀ + (ẑ₀ + z_α)/(1 − â(ẑ₀ + z_α))) with ẑ₀ = Φ⁻¹(#{θ* < θ̂}/B + ½#{θ* = θ̂}/B).
  The acceleration â comes, for metrics that declare per-row mean terms, from their closed-form
  influence values (first order, see :meth:`Engine.mean_acceleration`); for every other metric
  from a delete-a-block jackknife: the rows (groups, for the cluster bootstrap) are split by a
  seeded random permutation into K = min(``jackknife_blocks``, N) blocks of nearly equal size
  (K = 100 by default, i.e. the delete-one jackknife when N ≤ 100) and
  â = Σ(θ̄ − θ₍ₖ₎)³ / (6 (Σ(θ̄ − θ₍ₖ₎)²)^{3/2}).

Metrics with a known finite-sample bias (binned calibration errors, AUSE, Spearman, n-MeRCI:
:attr:`~uqcore.registry.MetricSpec.biased`) get a warning in their entry: their percentile interval is centred on a biased estimate and may
under-cover at small N; so does every metric whose bootstrap bias exceeds a quarter of its
bootstrap standard error (Efron & Tibshirani 1993, §10.2).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from scipy.special import ndtr, ndtri

from uqcore._scaling import std
from uqcore._validation import UQValidationError
from uqcore.stability._engine import (
    Chosen,
    Engine,
    Progress,
    Resample,
    StabilityResult,
    batch_extra,
    batch_targets,
    count_block,
    default_block,
    finish,
    make_batch,
    none_if_nan,
    select_metrics,
)
from uqcore.stability.weights import STREAM_JACKKNIFE, Resampler, Scheme, Unit, resample_rng

__all__ = [
    "BootstrapValues",
    "bca_interval",
    "bootstrap",
    "bootstrap_block_size",
    "bootstrap_values",
    "check_level",
    "check_resamples",
    "combine_bootstrap_values",
    "iter_bootstrap_values",
    "jackknife_acceleration",
    "jackknife_values",
    "percentile_interval",
]

Method = Literal["percentile", "bca"]


def check_level(level: Any) -> float:
    """``level`` must be a float in (0, 1)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise UQValidationError(f"level must be in (0, 1), found {level!r}")
    return float(level)


def check_resamples(n_resamples: Any, name: str = "n_resamples") -> int:
    """A positive integer number of resamples."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
        raise UQValidationError(f"{name} must be a positive integer, found {n_resamples!r}")
    if n_resamples < 1:
        raise UQValidationError(f"{name} must be >= 1, found {n_resamples}")
    return int(n_resamples)


def percentile_interval(values: np.ndarray[Any, Any], level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of the finite ``values``."""
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bca_interval(
    values: np.ndarray[Any, Any], theta: float, accel: float, level: float
) -> tuple[float, float, float] | None:
    """BCa interval and ẑ₀; ``None`` when ẑ₀ is infinite (θ̂ outside the bootstrap values)."""
    b = values.shape[0]
    prop = (np.sum(values < theta) + 0.5 * np.sum(values == theta)) / b
    if not 0 < prop < 1:
        return None
    z0 = float(ndtri(prop))
    alphas = []
    for z in (ndtri((1 - level) / 2), ndtri((1 + level) / 2)):
        denom = 1 - accel * (z0 + z)
        if denom <= 0:
            return None
        alphas.append(float(ndtr(z0 + (z0 + z) / denom)))
    lo, hi = np.quantile(values, alphas)
    return float(lo), float(hi), z0


def jackknife_values(
    engine: Engine,
    chosen: Sequence[Chosen],
    resampler: Resampler,
    seed: int,
    n_blocks: int,
    progress: Callable[[float], None] | None = None,
) -> tuple[dict[str, np.ndarray[Any, Any]], int]:
    """Delete-a-block jackknife values θ₍ₖ₎ of the metrics in ``chosen``, k = 1..K.

    The rows (groups, for the cluster bootstrap) are split by the seeded permutation
    ``default_rng([seed, 1])`` into K = min(``n_blocks``, units) blocks of nearly equal size;
    θ₍ₖ₎ is the metric without block k. The blocks depend only on the seed, N and the groups,
    so two engines on the same rows (a paired comparison) get the same blocks.
    """
    n = engine.n
    units = resampler.n_groups if resampler.unit == "cluster" else n
    k = min(n_blocks, units)
    if k < 2 or not chosen:
        return {c.name: np.empty(0) for c in chosen}, k
    perm = resample_rng(seed, STREAM_JACKKNIFE).permutation(units)
    block_of_unit = np.empty(units, dtype=np.int64)
    for b, part in enumerate(np.array_split(perm, k)):
        block_of_unit[part] = b
    codes = resampler.codes if resampler.unit == "cluster" else None
    block_of_row = block_of_unit if codes is None else block_of_unit[codes]

    def make(indices: Sequence[int]) -> list[Resample]:
        return [Resample((block_of_row != i).astype(np.float64)) for i in indices]

    sub = Engine(engine.batch, chosen, engine.extra)
    return sub.run(make, k, default_block(n, k), progress), k


def jackknife_acceleration(values: np.ndarray[Any, Any]) -> float | None:
    """â = Σ(θ̄ − θ₍ₖ₎)³ / (6 (Σ(θ̄ − θ₍ₖ₎)²)^{3/2}) over the finite jackknife values; ``None``
    with fewer than 3 of them, 0 when they are all equal."""
    v = values[np.isfinite(values)]
    if v.shape[0] < 3:
        return None
    d = np.mean(v) - v
    s2 = float(np.sum(d**2))
    return 0.0 if s2 <= 0 else float(np.sum(d**3) / (6.0 * s2**1.5))


def _jackknife_acceleration(
    engine: Engine,
    chosen: Sequence[Chosen],
    resampler: Resampler,
    seed: int,
    n_blocks: int,
    progress: Callable[[float], None] | None = None,
) -> tuple[dict[str, float | None], int]:
    """Delete-a-block jackknife accelerations of the non-mean metrics in ``chosen``."""
    vals, k = jackknife_values(engine, chosen, resampler, seed, n_blocks, progress)
    return {c.name: jackknife_acceleration(vals[c.name]) for c in chosen}, k


def bootstrap_block_size(n: int, n_resamples: int) -> int:
    """The number of resamples :func:`bootstrap` evaluates together by default for N = ``n``
    rows and B = ``n_resamples``.

    The resamples of one block share matrix products, whose rounding may depend on the block
    (~1e-16 relative): parts computed by :func:`bootstrap_values` whose bounds are multiples of
    this size (the last one ending at B) see the same blocks as one :func:`bootstrap` call, so
    their concatenation gives bit-identical intervals.

    >>> bootstrap_block_size(10**6, 1000)
    16
    """
    b_count = check_resamples(n_resamples)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise UQValidationError(f"n must be a non-negative integer, found {n!r}")
    return count_block(int(n), b_count)


class BootstrapValues(dict[str, np.ndarray[Any, Any]]):
    """Bootstrap values of resamples ``start``..``stop``-1, name -> float array (NaN where a
    resample's metric is undefined), with what the resampling noted on the way:
    ``undefined_reasons`` (name -> up to 3 reasons) and ``warnings`` (other warnings). Plain
    mappings of arrays are accepted wherever this is; it only carries the notes along."""

    def __init__(
        self,
        values: Mapping[str, np.ndarray[Any, Any]] | None = None,
        *,
        start: int = 0,
        stop: int = 0,
        undefined_reasons: Mapping[str, Sequence[str]] | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        super().__init__(values or {})
        self.start = start
        self.stop = stop
        self.undefined_reasons = {k: list(v) for k, v in (undefined_reasons or {}).items()}
        self.warnings = list(warnings)


#: At most this many distinct reasons are kept per metric, and warnings in all (as the
#: engine keeps them, so that combining parts keeps what one run keeps).
_MAX_REASONS = 3
_MAX_WARNINGS = 20


def _merge_notes(
    into_reasons: dict[str, list[str]],
    into_warnings: list[str],
    reasons: Mapping[str, Sequence[str]],
    warnings_: Sequence[str],
) -> None:
    for name, found in reasons.items():
        kept = into_reasons.setdefault(name, [])
        for r in found:
            if r not in kept and len(kept) < _MAX_REASONS:
                kept.append(r)
    for w in warnings_:
        if w not in into_warnings and len(into_warnings) < _MAX_WARNINGS:
            into_warnings.append(w)


def combine_bootstrap_values(
    parts: Sequence[Mapping[str, np.ndarray[Any, Any]]],
) -> BootstrapValues:
    """The values of consecutive parts (in resample order) as one :class:`BootstrapValues`:
    each metric's arrays concatenated, the parts' notes merged as one run would keep them."""
    if not parts:
        raise UQValidationError("parts must hold at least one part of bootstrap values")
    names = list(parts[0])
    for i, part in enumerate(parts):
        if set(part) != set(names):
            raise UQValidationError(
                f"every part must hold the same metrics; part {i} holds {sorted(part)}, "
                f"part 0 {sorted(names)}"
            )
    reasons: dict[str, list[str]] = {}
    warnings_: list[str] = []
    for part in parts:
        _merge_notes(
            reasons,
            warnings_,
            getattr(part, "undefined_reasons", {}),
            getattr(part, "warnings", ()),
        )
    values = {n: np.concatenate([np.asarray(p[n], dtype=np.float64) for p in parts]) for n in names}
    first, last = parts[0], parts[-1]
    return BootstrapValues(
        values,
        start=int(getattr(first, "start", 0)),
        stop=int(getattr(last, "stop", next(iter(values.values())).shape[0] if values else 0)),
        undefined_reasons=reasons,
        warnings=warnings_,
    )


def _prepared(
    prediction: Any,
    y: Any,
    metrics: str | Sequence[str],
    *,
    scheme: Scheme,
    unit: Unit,
    groups: Any,
    params: Mapping[str, Mapping[str, Any]] | None,
    sample_weight: Any,
    estimators: str | Sequence[str] | None,
    kwargs: Mapping[str, Any],
) -> tuple[Engine, list[Chosen], dict[str, str], Resampler]:
    """The engine, chosen metrics, inapplicable ones and resampler of one bootstrap."""
    extra = batch_extra(kwargs, groups, prediction)
    batch = make_batch(prediction, y, sample_weight, extra)
    chosen, not_applicable = select_metrics(
        [prediction],
        metrics,
        params,
        targets=batch_targets(batch),
        estimators=estimators,
        sample_weight=batch.weights,
    )
    resampler = Resampler(batch.n, scheme=scheme, unit=unit, groups=groups)
    return Engine(batch, chosen, extra), chosen, not_applicable, resampler


def _resample_values(
    engine: Engine,
    resampler: Resampler,
    seed: int,
    start: int,
    stop: int,
    block: int,
    progress: Callable[[float], None] | None,
) -> dict[str, np.ndarray[Any, Any]]:
    """Values of resamples ``start``..``stop``-1, ``block`` at a time from ``start``."""
    count = stop - start
    # reused: counts as bytes (a wider block where one exceeds 255); with more than one block,
    # two buffers in turn, the next block drawn while this one is evaluated
    ahead = count > block
    buffers = [np.empty((min(block, count), engine.n), dtype=np.uint8) for _ in range(1 + ahead)]

    def make(indices: Sequence[int]) -> list[Resample]:
        buffer = buffers[(indices[0] // block) % len(buffers)] if len(indices) else buffers[0]
        w = resampler.block(seed, [start + i for i in indices], out=buffer)
        return [Resample(row) for row in w]

    return engine.run(make, count, block, progress, ahead=ahead)


def bootstrap_values(
    prediction: Any,
    y: Any,
    metrics: str | Sequence[str] = "all",
    *,
    start: int,
    stop: int,
    n_resamples: int = 1000,
    seed: int = 0,
    scheme: Scheme = "multinomial",
    unit: Unit = "row",
    groups: Any = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    estimators: str | Sequence[str] | None = None,
    block_size: int | None = None,
    progress: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> BootstrapValues:
    """The bootstrap values of resamples ``start``..``stop``-1 of a B = ``n_resamples`` run:
    one part of :func:`bootstrap`'s work, for splitting it among processes or machines.

    The arguments are those of :func:`bootstrap` (same meaning, same defaults). The blocks
    of resamples start at ``start``; ``start`` must be a multiple of the block size
    (``block_size``, default :func:`bootstrap_block_size` (N, B)) and ``stop`` too, or B. Then
    ``bootstrap(..., values=combine_bootstrap_values(parts))`` over parts covering 0..B in
    order is bit-identical to ``bootstrap(...)`` with the same seed and block size.

    Returns
    -------
    BootstrapValues
        name -> float array of length ``stop - start`` (NaN where undefined), for every metric
        :func:`bootstrap` would compute; with the notes of the resampling.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> rng = np.random.default_rng(0); y = rng.normal(size=200)
    >>> pred = P.Gaussian(np.zeros(200), np.ones(200))
    >>> kw = dict(n_resamples=200, block_size=50)
    >>> parts = [bootstrap_values(pred, y, ["mae"], start=a, stop=a + 100, **kw)
    ...          for a in (0, 100)]
    >>> whole = bootstrap(pred, y, ["mae"], **kw)
    >>> bootstrap(pred, y, ["mae"], values=combine_bootstrap_values(parts), **kw) == whole
    True
    """
    _check_range(start, stop, check_resamples(n_resamples), 1)  # before the batch is built
    done = Progress(progress)
    span = done.span(0.0, 1.0)
    parts = iter_bootstrap_values(
        prediction,
        y,
        metrics,
        ranges=[(start, stop)],
        n_resamples=n_resamples,
        seed=seed,
        scheme=scheme,
        unit=unit,
        groups=groups,
        params=params,
        sample_weight=sample_weight,
        estimators=estimators,
        block_size=block_size,
        progress=None if span is None else (lambda _a, _b, f: span(f)),
        **kwargs,
    )
    (values,) = parts
    done.finish()
    return values


def iter_bootstrap_values(
    prediction: Any,
    y: Any,
    metrics: str | Sequence[str] = "all",
    *,
    ranges: Iterable[tuple[int, int]],
    n_resamples: int = 1000,
    seed: int = 0,
    scheme: Scheme = "multinomial",
    unit: Unit = "row",
    groups: Any = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    estimators: str | Sequence[str] | None = None,
    block_size: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    **kwargs: Any,
) -> Iterator[BootstrapValues]:
    """:func:`bootstrap_values` of each ``(start, stop)`` of ``ranges`` in turn, on one batch.

    The batch's sorts and per-row terms are computed once for all the ranges; ``ranges`` is
    read lazily (one range after the previous one's values are taken), so it may hand out
    ranges as they come (e.g. claimed from other processes). ``progress(start, stop,
    fraction)`` is called after each block of a range. The same checks as
    :func:`bootstrap_values` apply to every range.
    """
    b_count = check_resamples(n_resamples)
    engine, _, _, resampler = _prepared(
        prediction,
        y,
        metrics,
        scheme=scheme,
        unit=unit,
        groups=groups,
        params=params,
        sample_weight=sample_weight,
        estimators=estimators,
        kwargs=kwargs,
    )
    block = block_size if block_size is not None else count_block(engine.n, b_count)
    block = check_resamples(block, "block_size")
    for start, stop in ranges:
        start, stop = _check_range(start, stop, b_count, block)
        for reasons in engine.undefined_reasons.values():
            reasons.clear()  # each range carries its own notes
        engine.other_warnings.clear()
        report = None
        if progress is not None:
            report = functools.partial(progress, start, stop)
        values = _resample_values(engine, resampler, seed, start, stop, block, report)
        yield BootstrapValues(
            values,
            start=start,
            stop=stop,
            undefined_reasons={k: list(v) for k, v in engine.undefined_reasons.items() if v},
            warnings=engine.other_warnings,
        )


def _check_range(start: Any, stop: Any, b_count: int, block: int) -> tuple[int, int]:
    for name, v in (("start", start), ("stop", stop)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise UQValidationError(f"{name} must be an integer, found {v!r}")
    start, stop = int(start), int(stop)
    if not 0 <= start < stop <= b_count:
        raise UQValidationError(
            f"start and stop must satisfy 0 <= start < stop <= n_resamples = {b_count}; "
            f"found start = {start}, stop = {stop}"
        )
    if start % block or (stop % block and stop != b_count):
        raise UQValidationError(
            f"start and stop must be multiples of the block size {block} (stop may also be "
            f"n_resamples = {b_count}), so that the blocks are those of one bootstrap run; "
            f"found start = {start}, stop = {stop}"
        )
    return start, stop


def _given_values(
    values: Mapping[str, np.ndarray[Any, Any]], chosen: Sequence[Chosen], b_count: int
) -> dict[str, np.ndarray[Any, Any]]:
    """The precomputed values of every chosen metric, checked: float arrays of length B."""
    out: dict[str, np.ndarray[Any, Any]] = {}
    for c in chosen:
        if c.name not in values:
            raise UQValidationError(
                f"values must hold the bootstrap values of every metric computed; "
                f"{c.name!r} is missing"
            )
        v = np.asarray(values[c.name], dtype=np.float64)
        if v.shape != (b_count,):
            raise UQValidationError(
                f"values[{c.name!r}] must have shape ({b_count},) (n_resamples), found {v.shape}"
            )
        out[c.name] = v
    return out


def bootstrap(
    prediction: Any,
    y: Any,
    metrics: str | Sequence[str] = "all",
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    method: Method = "percentile",
    level: float = 0.95,
    scheme: Scheme = "multinomial",
    unit: Unit = "row",
    groups: Any = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    jackknife_blocks: int = 100,
    block_size: int | None = None,
    keep_values: bool = False,
    estimators: str | Sequence[str] | None = None,
    progress: Callable[[float], None] | None = None,
    values: Mapping[str, np.ndarray[Any, Any]] | None = None,
    **kwargs: Any,
) -> StabilityResult:
    """Bootstrap confidence intervals of registered metrics at the full test-set size.

    Parameters
    ----------
    prediction : a uqcore prediction object
    y : array_like, shape (N,)
    metrics : "all" or list of str
        As in :func:`uqcore.evaluate`; "all" lists the inapplicable ones in ``not_applicable``.
    n_resamples : int
        B, the number of bootstrap resamples (default 1000).
    seed : int
        Resample i is drawn from ``default_rng([seed, 0, i])``: same seed, same output.
    method : {"percentile", "bca"}
        The interval (see the module docstring). Default "percentile".
    level : float
        Confidence level, default 0.95.
    scheme : {"multinomial", "poisson"}
        Counts of N draws with replacement (default) or independent Poisson(1) counts.
    unit : {"row", "stratified", "cluster"}
        Resample rows (default), rows within each group of ``groups``, or whole groups.
    groups : array_like, shape (N,), optional
        Group labels for the stratified and cluster bootstrap.
    params, sample_weight
        As in :func:`uqcore.evaluate`; each resample's weights are ``sample_weight · counts``.
    jackknife_blocks : int
        K, the number of blocks of the delete-a-block jackknife for BCa (default 100).
    block_size : int, optional
        Resamples evaluated together (bounds memory). The resamples do not depend on it;
        the matrix product of mean-type metrics may round differently (~1e-16 relative).
    keep_values : bool
        Also return the B bootstrap values per metric (``"values"``; ``None`` where undefined).
    estimators : "all" or list of str, optional
        Classification: also compute every metric that takes an ``estimator`` option for each
        of these estimators, as the entry ``"metric[estimator]"`` (as in
        :func:`uqcore.evaluate`; the metric's own estimator keeps the entry ``"metric"``).
    progress : callable, optional
        Called with the fraction done (increasing, in (0, 1], the last call 1.0) after each
        block of resamples (and of the jackknife, for BCa); what it raises stops the
        computation. The results do not depend on it.
    values : mapping, optional
        The B bootstrap values of every metric computed, precomputed in parts by
        :func:`bootstrap_values` (and :func:`combine_bootstrap_values`): the resampling is
        skipped, the intervals (and, for BCa, the jackknife) computed from them. With the
        same seed, scheme, unit and block size the result is bit-identical to computing them
        here.
    **kwargs
        Further keyword arguments of the prediction's batch, passed through: for
        classification ``ood`` and ``soft_labels`` (as in :func:`uqcore.evaluate`).

    Returns
    -------
    StabilityResult
        name -> {"value", "low", "high", "std", "mean", "bias", "n_valid", "n_undefined",
        "method", "level", "warnings"} (plus "z0" and "acceleration" for BCa). Undefined
        values are ``None``. ``to_dict()`` adds seed, n_resamples, scheme, unit, method, level.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> rng = np.random.default_rng(0); y = rng.normal(size=200)
    >>> ci = bootstrap(P.Gaussian(np.zeros(200), np.ones(200)), y, ["mae"], n_resamples=200)
    >>> ci["mae"]["low"] < ci["mae"]["value"] < ci["mae"]["high"]
    True
    """
    b_count = check_resamples(n_resamples)
    level = check_level(level)
    if method not in ("percentile", "bca"):
        raise UQValidationError(f"method must be 'percentile' or 'bca', found {method!r}")
    jackknife_blocks = check_resamples(jackknife_blocks, "jackknife_blocks")
    done = Progress(progress)
    engine, chosen, not_applicable, resampler = _prepared(
        prediction,
        y,
        metrics,
        scheme=scheme,
        unit=unit,
        groups=groups,
        params=params,
        sample_weight=sample_weight,
        estimators=estimators,
        kwargs=kwargs,
    )
    batch = engine.batch
    full = engine.compute_full()
    block = block_size if block_size is not None else count_block(batch.n, b_count)
    block = check_resamples(block, "block_size")

    # BCa's jackknife evaluates K more resamples (K <= jackknife_blocks): its share of the
    # progress is its share of the resamples (all of it when the values are given).
    jk_share = jackknife_blocks if method == "bca" else 0
    resampled = b_count / (b_count + jk_share) if values is None else 0.0
    if values is None:
        boot = _resample_values(
            engine, resampler, seed, 0, b_count, block, done.span(0.0, resampled)
        )
    else:
        boot = _given_values(values, chosen, b_count)
        _merge_notes(
            engine.undefined_reasons,
            engine.other_warnings,
            getattr(values, "undefined_reasons", {}),
            getattr(values, "warnings", ()),
        )

    accel: dict[str, float | None] = {}
    jk_blocks = 0
    if method == "bca":
        codes = resampler.codes if unit == "cluster" else None
        others = []
        for c in chosen:
            if engine.is_mean_type(c):
                accel[c.name] = engine.mean_acceleration(c, codes)
            else:
                others.append(c)
        jk, jk_blocks = _jackknife_acceleration(
            engine, others, resampler, seed, jackknife_blocks, done.span(resampled, 1.0)
        )
        accel.update(jk)
    done.finish()

    entries: dict[str, Any] = {}
    warnings_: list[str] = list(engine.full_notes)
    for c in chosen:
        entry, notes = _entry(c, full[c.name], boot[c.name], engine, method, level, accel)
        if keep_values:
            entry["values"] = [none_if_nan(float(v)) for v in boot[c.name]]
        entries[c.name] = entry
        warnings_.extend(f"{c.name}: {m}" for m in notes)
    warnings_.extend(engine.other_warnings)
    meta = {
        "analysis": "bootstrap",
        "seed": seed,
        "n_resamples": b_count,
        "method": method,
        "level": level,
        "n": batch.n,
        "weighted": batch.weights is not None,
        "resampling": resampler.describe(),
        "prediction_kind": getattr(prediction, "kind", None),
        "params": {c.name: c.params for c in chosen},
    }
    if method == "bca":
        meta["jackknife"] = {
            "mean_type_metrics": "closed-form influence values (first order)",
            "other_metrics": f"delete-a-block jackknife, {jk_blocks} blocks of "
            f"{'groups' if unit == 'cluster' else 'rows'} (seeded random partition)",
            "blocks": jk_blocks,
        }
    return finish(entries, meta, warnings_, not_applicable)


def _entry(
    c: Chosen,
    full: Any,
    values: np.ndarray[Any, Any],
    engine: Engine,
    method: str,
    level: float,
    accel: Mapping[str, float | None],
) -> tuple[dict[str, Any], list[str]]:
    theta = full.get("value") if isinstance(full, Mapping) else full
    ok = values[np.isfinite(values)]
    n_undef = int(values.shape[0] - ok.shape[0])
    notes: list[str] = []
    entry: dict[str, Any] = {
        "value": theta,
        "low": None,
        "high": None,
        "std": None,
        "mean": None,
        "bias": None,
        "n_valid": int(ok.shape[0]),
        "n_undefined": n_undef,
        "method": method,
        "level": level,
        "direction": c.spec.direction,
    }
    if n_undef:
        why = "; ".join(engine.undefined_reasons[c.name][:2])
        notes.append(
            f"undefined on {n_undef} of {values.shape[0]} resamples (left out of the interval)"
            + (f": {why}" if why else "")
        )
    if ok.shape[0] == 0 or theta is None:
        notes.append("no interval: the metric is undefined on the data or on every resample")
        entry["warnings"] = notes
        return entry, notes
    theta = float(theta)
    entry["std"] = std(ok, ddof=1) if ok.shape[0] > 1 else 0.0
    entry["mean"] = float(np.mean(ok))
    entry["bias"] = entry["mean"] - theta
    low, high = percentile_interval(ok, level)
    if method == "bca":
        a = accel.get(c.name)
        entry["acceleration"] = a
        res = None if a is None else bca_interval(ok, theta, a, level)
        if res is None:
            notes.append(
                "BCa not available (estimate outside the bootstrap distribution or too few "
                "jackknife values); the percentile interval is reported"
            )
            entry["method"] = "percentile"
            entry["z0"] = None
        else:
            low, high, entry["z0"] = res
    entry["low"], entry["high"] = low, high
    if c.spec.biased:
        notes.append(
            "this estimator has a finite-sample bias: the interval may be shifted and "
            "under-cover at small N (see the stability docs)"
        )
    elif entry["std"] > 0 and abs(entry["bias"]) > 0.25 * entry["std"]:
        if entry["method"] == "percentile":
            advice = "the percentile interval may be shifted; prefer method='bca'"
        else:  # BCa corrects for the bias through z0
            advice = "the BCa interval corrects for it (see z0)"
        notes.append(f"bootstrap bias {entry['bias']:.3g} exceeds 0.25 standard errors: {advice}")
    if not all(math.isfinite(v) for v in (low, high)):
        entry["low"], entry["high"] = none_if_nan(low), none_if_nan(high)
    entry["warnings"] = notes
    return entry, notes
