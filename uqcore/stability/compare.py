"""Paired comparison of predictions on the same targets, and the bootstrap distribution of ranks.

Both use the paired bootstrap: every resample's counts (the same as :func:`bootstrap` draws with
the same seed) weight all predictions at once, so the differences keep the pairing of rows.

- ``diff`` = metric(A) − metric(B) on the full data; ``low``/``high`` the interval of the
  bootstrap differences Δ*: percentile (default) or BCa (``method="bca"``: ẑ₀ from the share of
  Δ* below Δ̂, the acceleration from a delete-a-block jackknife of the difference, with the
  same blocks for A and B — see :func:`~uqcore.stability.bootstrap.jackknife_values`).
- ``p_better``: the bootstrap probability that A is better in the metric's direction (lower,
  higher, or closer to the best value for "target" metrics: the registry's
  :meth:`~uqcore.registry.MetricSpec.badness`); ties count ½. Identical predictions give
  Δ = 0 exactly and ``p_better`` = 0.5.
- ``p_value``: two-sided test of "no difference" by the shifted bootstrap (Efron & Tibshirani
  1993, §16.4; Hall & Wilson 1991): p = (1 + #{|Δ* − Δ̂| ≥ |Δ̂|}) / (B + 1), with B the number
  of resamples on which both values are defined. Identical predictions give p = 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore._scaling import std
from uqcore._validation import UQValidationError
from uqcore.registry import MetricSpec
from uqcore.stability._engine import (
    Chosen,
    Engine,
    Progress,
    Resample,
    StabilityResult,
    batch_extra,
    batch_targets,
    default_block,
    finish,
    make_batch,
    scalar,
    select_metrics,
)
from uqcore.stability.bootstrap import (
    Method,
    bca_interval,
    check_level,
    check_resamples,
    jackknife_acceleration,
    jackknife_values,
    percentile_interval,
)
from uqcore.stability.weights import Resampler, Scheme, Unit

__all__ = [
    "MULTIPLE_COMPARISON_NOTE",
    "Comparisons",
    "compare",
    "compare_all",
    "rank_distribution",
    "target_value",
]

MULTIPLE_COMPARISON_NOTE = (
    "Rank intervals and P(best) are marginal, per model, at the stated level; they are not "
    "simultaneous. With k models, up to k·(1 − level) of the intervals may miss by chance, and "
    "picking the pairs that look separable after the fact inflates the error rate. For "
    "simultaneous intervals use simultaneous=True (Bonferroni: each interval at level "
    "1 − (1 − level)/k); for a decision between two given models use compare(), whose p-value "
    "is for that one pre-chosen pair."
)


#: ``target_value(spec, params)``: the best value of a "target" metric under ``params``
#: (:meth:`MetricSpec.target`, exported under this name since before the registry held it).
target_value = MetricSpec.target


def _setup(
    predictions: Sequence[Any],
    y: Any,
    metrics: str | Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None,
    sample_weight: Any,
    scheme: Scheme,
    unit: Unit,
    groups: Any,
    kwargs: Mapping[str, Any],
    estimators: str | Sequence[str] | None = None,
) -> tuple[list[Engine], Any, Resampler, dict[str, str]]:
    extra = batch_extra(kwargs, groups, predictions[0])
    batches = [make_batch(p, y, sample_weight, extra) for p in predictions]
    n = batches[0].n
    for p, b in zip(predictions, batches, strict=True):
        if b.n != n:
            raise UQValidationError(
                f"all predictions must have the same number of rows ({n}), found {p.n}"
            )
    chosen, not_applicable = select_metrics(
        list(predictions),
        metrics,
        params,
        targets=batch_targets(batches[0]),
        estimators=estimators,
        sample_weight=batches[0].weights,
    )
    engines = [Engine(b, chosen, extra) for b in batches]
    return engines, chosen, Resampler(n, scheme=scheme, unit=unit, groups=groups), not_applicable


def _paired_values(
    engines: Sequence[Engine],
    resampler: Resampler,
    seed: int,
    b_count: int,
    block: int | None,
    progress: Callable[[float], None] | None = None,
) -> list[dict[str, np.ndarray[Any, Any]]]:
    n = resampler.n
    size = block if block is not None else default_block(n, b_count)
    size = check_resamples(size, "block_size")
    out: list[dict[str, list[np.ndarray[Any, Any]]]] = [
        {c.name: [] for c in e.chosen} for e in engines
    ]
    for start in range(0, b_count, size):
        w = resampler.block(seed, list(range(start, min(start + size, b_count))))
        resamples = [Resample(row) for row in w]
        for e, acc in zip(engines, out, strict=True):
            for k, v in e.values(resamples).items():
                acc[k].append(v)
        if progress is not None:
            progress(min(start + size, b_count) / b_count)
    return [{k: np.concatenate(v) for k, v in acc.items()} for acc in out]


def compare(
    prediction_a: Any,
    prediction_b: Any,
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
    estimators: str | Sequence[str] | None = None,
    **kwargs: Any,
) -> StabilityResult:
    """Paired bootstrap comparison of two predictions of the same targets.

    Parameters are those of :func:`~uqcore.stability.bootstrap`; the interval is that of the
    paired differences Δ* = θ*(A) − θ*(B): ``method="percentile"`` (default) or ``"bca"``
    (acceleration from a delete-a-block jackknife of Δ with ``jackknife_blocks`` blocks, the
    same blocks for A and B). ``p_better`` and ``p_value`` do not depend on the method.

    Returns
    -------
    StabilityResult
        name -> {"value_a", "value_b", "diff", "low", "high", "std", "p_better", "p_value",
        "direction", "method", "n_valid", "n_undefined", "warnings"} (plus "z0" and
        "acceleration" for BCa); ``to_dict()`` adds the seed, B, scheme, unit, method, level
        and the test used.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.random.default_rng(0).normal(size=300)
    >>> good, bad = P.Gaussian(np.zeros(300), np.ones(300)), P.Gaussian(np.ones(300), np.ones(300))
    >>> r = compare(good, bad, y, ["mae"], n_resamples=200)
    >>> r["mae"]["high"] < 0, r["mae"]["p_better"]
    (True, 1.0)
    """
    done = _compare_many(
        {"a": prediction_a, "b": prediction_b},
        y,
        metrics,
        with_ranks=False,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
        level=level,
        simultaneous=False,
        scheme=scheme,
        unit=unit,
        groups=groups,
        params=params,
        sample_weight=sample_weight,
        jackknife_blocks=jackknife_blocks,
        block_size=block_size,
        estimators=estimators,
        kwargs=kwargs,
    )
    return done.pairs[("a", "b")]


def _pair_result(
    chosen: Sequence[Chosen],
    full: tuple[Mapping[str, Any], Mapping[str, Any]],
    boot: tuple[Mapping[str, np.ndarray[Any, Any]], Mapping[str, np.ndarray[Any, Any]]],
    jk: Sequence[Mapping[str, np.ndarray[Any, Any]]],
    jk_blocks: int,
    engines: Sequence[Engine],
    resampler: Resampler,
    not_applicable: Mapping[str, str],
    *,
    seed: int,
    b_count: int,
    method: Method,
    level: float,
) -> StabilityResult:
    """The :func:`compare` result of A = ``engines[0]`` against B = ``engines[1]`` from their
    full-data values, bootstrap values (the same resamples) and, for BCa, jackknife values."""
    full_a, full_b = full
    boot_a, boot_b = boot
    accel: dict[str, float | None] = {}
    if method == "bca":
        for c in chosen:
            d_jk = jk[0][c.name] - jk[1][c.name]
            accel[c.name] = jackknife_acceleration(d_jk) if d_jk.shape[0] else None
    entries: dict[str, Any] = {}
    warnings_: list[str] = [*engines[0].full_notes, *engines[1].full_notes]
    for c in chosen:
        ta, tb = scalar(full_a[c.name]), scalar(full_b[c.name])
        va, vb = boot_a[c.name], boot_b[c.name]
        ok = np.isfinite(va) & np.isfinite(vb)
        d = va[ok] - vb[ok]
        notes: list[str] = []
        entry: dict[str, Any] = {
            "value_a": ta,
            "value_b": tb,
            "diff": ta - tb,
            "low": None,
            "high": None,
            "std": None,
            "p_better": None,
            "p_value": None,
            "direction": c.spec.direction,
            "method": method,
            "n_valid": int(ok.sum()),
            "n_undefined": int((~ok).sum()),
        }
        if entry["n_undefined"]:
            notes.append(
                f"undefined for A or B on {entry['n_undefined']} of {b_count} resamples (left out)"
            )
        if d.shape[0] and math.isfinite(ta) and math.isfinite(tb):
            diff = ta - tb
            entry["low"], entry["high"] = percentile_interval(d, level)
            if method == "bca":
                a = accel.get(c.name)
                entry["acceleration"] = a
                res = None if a is None else bca_interval(d, diff, a, level)
                if res is None:
                    notes.append(
                        "BCa not available (Δ̂ outside the bootstrap differences or too few "
                        "jackknife values); the percentile interval is reported"
                    )
                    entry["method"] = "percentile"
                    entry["z0"] = None
                else:
                    entry["low"], entry["high"], entry["z0"] = res
            entry["std"] = std(d, ddof=1) if d.shape[0] > 1 else 0.0
            bad_a, bad_b = c.spec.badness(va[ok], c.params), c.spec.badness(vb[ok], c.params)
            entry["p_better"] = float(
                (np.sum(bad_a < bad_b) + 0.5 * np.sum(bad_a == bad_b)) / d.shape[0]
            )
            extreme = np.sum(np.abs(d - diff) >= abs(diff))
            entry["p_value"] = float((1 + extreme) / (d.shape[0] + 1))
        else:
            notes.append("no comparison: the metric is undefined on the data or every resample")
        if c.spec.biased:
            notes.append(
                "this estimator has a finite-sample bias; the bias largely cancels in a paired "
                "difference at equal N, but the interval may under-cover at small N"
            )
        entry["warnings"] = notes
        entries[c.name] = entry
        warnings_.extend(f"{c.name}: {m}" for m in notes)
    for e in engines:
        warnings_.extend(e.other_warnings)
    meta = {
        "analysis": "compare",
        "seed": seed,
        "n_resamples": b_count,
        "method": f"{method} (paired bootstrap of the difference A − B)",
        "test": "shifted bootstrap: p = (1 + #{|Δ* − Δ̂| ≥ |Δ̂|}) / (B + 1), two-sided",
        "level": level,
        "n": resampler.n,
        "resampling": resampler.describe(),
        "params": {c.name: c.params for c in chosen},
    }
    if method == "bca":
        meta["jackknife"] = {
            "acceleration": f"delete-a-block jackknife of A − B, {jk_blocks} blocks of "
            f"{'groups' if resampler.unit == 'cluster' else 'rows'} (seeded random partition, "
            "the same blocks for A and B)",
            "blocks": jk_blocks,
        }
    return finish(entries, meta, warnings_, dict(not_applicable))


def rank_distribution(
    predictions: Mapping[str, Any],
    y: Any,
    *,
    metric: str,
    n_resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    simultaneous: bool = False,
    scheme: Scheme = "multinomial",
    unit: Unit = "row",
    groups: Any = None,
    params: Mapping[str, Any] | None = None,
    sample_weight: Any = None,
    block_size: int | None = None,
    **kwargs: Any,
) -> StabilityResult:
    """Bootstrap distribution of the ranks of k predictions of one benchmark under one metric.

    Rank 1 is best (in the metric's direction). Tied models share the tied ranks equally (each
    gets probability 1/t for each of the t tied ranks), so every model's rank probabilities and
    every rank's probabilities sum to 1.

    Parameters
    ----------
    predictions : mapping name -> prediction (at least 2)
    y : array_like, shape (N,)
    metric : str
        One registered metric (structured metrics: their ``"value"`` entry).
    level : float
        Level of each rank interval (default 0.95).
    simultaneous : bool
        If True, Bonferroni: each interval at level 1 − (1 − level)/k (see the note).
    params : dict, optional
        Options of ``metric``.

    Returns
    -------
    StabilityResult
        model name -> {"value", "rank", "rank_mean", "rank_low", "rank_high", "p_best",
        "rank_probabilities"}; ``to_dict()`` adds the seed, B, level, interval level and the
        multiple-comparison note.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.random.default_rng(0).normal(size=300)
    >>> preds = {"good": P.Gaussian(np.zeros(300), np.ones(300)),
    ...          "bad": P.Gaussian(np.ones(300), np.ones(300))}
    >>> r = rank_distribution(preds, y, metric="mae", n_resamples=200)
    >>> r["good"]["p_best"], (r["bad"]["rank_low"], r["bad"]["rank_high"])
    (1.0, (2, 2))
    """
    if not isinstance(predictions, Mapping) or len(predictions) < 2:
        raise UQValidationError("predictions must be a mapping of at least 2 named predictions")
    b_count = check_resamples(n_resamples)
    level = check_level(level)
    names = [str(k) for k in predictions]
    engines, chosen, resampler, _ = _setup(
        list(predictions.values()),
        y,
        [metric],
        {metric: dict(params or {})},
        sample_weight,
        scheme,
        unit,
        groups,
        kwargs,
    )
    full = np.array([scalar(e.compute_full()[metric]) for e in engines])
    boot = np.stack(
        [v[metric] for v in _paired_values(engines, resampler, seed, b_count, block_size)]
    )
    notes = [n for e in engines for n in e.full_notes]
    return _rank_result(
        names,
        chosen[0],
        full,
        boot,
        notes,
        resampler,
        seed=seed,
        b_count=b_count,
        level=level,
        simultaneous=simultaneous,
    )


def _rank_result(
    names: Sequence[str],
    chosen: Chosen,
    full: np.ndarray[Any, Any],
    boot: np.ndarray[Any, Any],
    notes: Sequence[str],
    resampler: Resampler,
    *,
    seed: int,
    b_count: int,
    level: float,
    simultaneous: bool,
) -> StabilityResult:
    """The :func:`rank_distribution` result from the k full-data values and the k × B
    bootstrap values (the same resamples for every model) of one metric entry."""
    metric = chosen.name
    spec = chosen.spec
    k = len(names)
    ok = np.all(np.isfinite(boot), axis=0)
    bad = spec.badness(boot[:, ok], chosen.params)  # k × B'
    probs = _rank_probabilities(bad)  # k × k
    ranks = _average_ranks(bad)  # k × B'
    full_ranks = (
        _average_ranks(spec.badness(full, chosen.params)[:, None])[:, 0]
        if np.all(np.isfinite(full))
        else np.full(k, math.nan)
    )
    interval_level = 1 - (1 - level) / k if simultaneous else level
    tail = (1 - interval_level) / 2
    entries: dict[str, Any] = {}
    for i, name in enumerate(names):
        cdf = np.cumsum(probs[i])
        if bad.shape[1]:
            low = int(np.argmax(cdf > tail - 1e-12) + 1)
            high = int(np.argmax(cdf >= 1 - tail - 1e-12) + 1)
            rank_mean: float | None = float(np.mean(ranks[i]))
        else:
            low = high = 0
            rank_mean = None
        entries[name] = {
            "value": full[i],
            "rank": full_ranks[i],
            "rank_mean": rank_mean,
            "rank_low": low or None,
            "rank_high": high or None,
            "p_best": float(probs[i, 0]) if bad.shape[1] else None,
            "rank_probabilities": [float(p) for p in probs[i]] if bad.shape[1] else None,
        }
    warnings_ = list(notes)
    n_undef = int((~ok).sum())
    if n_undef:
        warnings_.append(
            f"{metric} undefined for some model on {n_undef} of {b_count} resamples (left out)"
        )
    if spec.biased:
        warnings_.append(
            f"{metric} has a finite-sample bias; ranks are comparable at equal N but intervals "
            "may under-cover at small N"
        )
    meta = {
        "analysis": "rank_distribution",
        "metric": metric,
        "direction": spec.direction,
        "seed": seed,
        "n_resamples": b_count,
        "n_valid": int(ok.sum()),
        "n_undefined": n_undef,
        "level": level,
        "interval_level": interval_level,
        "simultaneous": simultaneous,
        "n": resampler.n,
        "resampling": resampler.describe(),
        "ties": "tied models share the tied ranks equally (average ranks)",
        "multiple_comparison_note": MULTIPLE_COMPARISON_NOTE,
        "params": chosen.params,
    }
    return finish(entries, meta, warnings_, {})


@dataclass(frozen=True)
class Comparisons:
    """Every pairwise comparison and every metric's rank distribution of k predictions.

    Attributes
    ----------
    names : tuple of str
        The models, in the order given.
    pairs : dict
        (name_a, name_b) -> the :func:`compare` result of A against B, for every pair with A
        before B in ``names``.
    ranks : dict
        metric entry -> the :func:`rank_distribution` result over the k models.
    """

    names: tuple[str, ...]
    pairs: dict[tuple[str, str], StabilityResult]
    ranks: dict[str, StabilityResult]


def compare_all(
    predictions: Mapping[str, Any],
    y: Any,
    metrics: str | Sequence[str] = "all",
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    method: Method = "percentile",
    level: float = 0.95,
    simultaneous: bool = False,
    scheme: Scheme = "multinomial",
    unit: Unit = "row",
    groups: Any = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    jackknife_blocks: int = 100,
    block_size: int | None = None,
    estimators: str | Sequence[str] | None = None,
    progress: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> Comparisons:
    """All k(k−1)/2 paired comparisons and the rank distributions of k predictions at once.

    The results equal :func:`compare` on every pair and :func:`rank_distribution` on every
    metric with the same arguments and seed (up to the rounding of the matrix product that
    evaluates mean-type metrics, ~1e-16 relative), because every call with one seed draws the
    same resamples. Here each resample is drawn once and each model evaluated once on it:
    k model evaluations per resample instead of k(k−1) for the pairs plus k per metric for
    the ranks. ``metrics="all"`` (and ``estimators="all"``) means those applicable to all k
    models. ``progress`` (optional) is called with the fraction done (increasing, the last
    call 1.0) after each block of resamples (and of each model's jackknife, for BCa); what it
    raises stops the computation, and the results do not depend on it.

    Returns
    -------
    Comparisons

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.random.default_rng(0).normal(size=300)
    >>> preds = {f"m{i}": P.Gaussian(np.full(300, i / 2), np.ones(300)) for i in range(3)}
    >>> c = compare_all(preds, y, ["mae"], n_resamples=200)
    >>> sorted(c.pairs), c.ranks["mae"]["m0"]["p_best"]
    ([('m0', 'm1'), ('m0', 'm2'), ('m1', 'm2')], 1.0)
    """
    if not isinstance(predictions, Mapping) or len(predictions) < 2:
        raise UQValidationError("predictions must be a mapping of at least 2 named predictions")
    return _compare_many(
        predictions,
        y,
        metrics,
        with_ranks=True,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
        level=level,
        simultaneous=simultaneous,
        scheme=scheme,
        unit=unit,
        groups=groups,
        params=params,
        sample_weight=sample_weight,
        jackknife_blocks=jackknife_blocks,
        block_size=block_size,
        estimators=estimators,
        kwargs=kwargs,
        progress=progress,
    )


def _compare_many(
    predictions: Mapping[str, Any],
    y: Any,
    metrics: str | Sequence[str],
    *,
    with_ranks: bool,
    n_resamples: int,
    seed: int,
    method: Method,
    level: float,
    simultaneous: bool,
    scheme: Scheme,
    unit: Unit,
    groups: Any,
    params: Mapping[str, Mapping[str, Any]] | None,
    sample_weight: Any,
    jackknife_blocks: int,
    block_size: int | None,
    estimators: str | Sequence[str] | None,
    kwargs: Mapping[str, Any],
    progress: Callable[[float], None] | None = None,
) -> Comparisons:
    """:func:`compare_all` (the rank distributions only ``with_ranks``); :func:`compare` is
    its two-model case."""
    b_count = check_resamples(n_resamples)
    level = check_level(level)
    if method not in ("percentile", "bca"):
        raise UQValidationError(f"method must be 'percentile' or 'bca', found {method!r}")
    jackknife_blocks = check_resamples(jackknife_blocks, "jackknife_blocks")
    done = Progress(progress)
    names = [str(k) for k in predictions]
    engines, chosen, resampler, not_applicable = _setup(
        list(predictions.values()),
        y,
        metrics,
        params,
        sample_weight,
        scheme,
        unit,
        groups,
        kwargs,
        estimators,
    )
    full = [e.compute_full() for e in engines]
    # Progress: each engine's jackknife (BCa) is K <= jackknife_blocks more resamples.
    k = len(engines)
    jk_share = k * jackknife_blocks if method == "bca" else 0
    resampled = b_count / (b_count + jk_share)
    boot = _paired_values(engines, resampler, seed, b_count, block_size, done.span(0.0, resampled))
    jk: list[dict[str, np.ndarray[Any, Any]]] = []
    jk_blocks = 0
    if method == "bca":
        step = (1.0 - resampled) / k
        for i, e in enumerate(engines):
            span = done.span(resampled + i * step, resampled + (i + 1) * step)
            values, jk_blocks = jackknife_values(e, chosen, resampler, seed, jackknife_blocks, span)
            jk.append(values)
    done.finish()
    pairs: dict[tuple[str, str], StabilityResult] = {}
    for i, j in itertools.combinations(range(len(names)), 2):
        pairs[(names[i], names[j])] = _pair_result(
            chosen,
            (full[i], full[j]),
            (boot[i], boot[j]),
            [jk[i], jk[j]] if jk else [],
            jk_blocks,
            [engines[i], engines[j]],
            resampler,
            not_applicable,
            seed=seed,
            b_count=b_count,
            method=method,
            level=level,
        )
    notes = [n for e in engines for n in e.full_notes]
    if not with_ranks:
        return Comparisons(tuple(names), pairs, {})
    ranks = {
        c.name: _rank_result(
            names,
            c,
            np.array([scalar(f[c.name]) for f in full]),
            np.stack([v[c.name] for v in boot]),
            notes,
            resampler,
            seed=seed,
            b_count=b_count,
            level=level,
            simultaneous=simultaneous,
        )
        for c in chosen
    }
    return Comparisons(tuple(names), pairs, ranks)


def _average_ranks(bad: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Average ranks (1 = smallest) within each column of a k × B array."""
    from scipy.stats import rankdata

    return np.asarray(rankdata(bad, method="average", axis=0), dtype=float)


def _rank_probabilities(bad: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """P(model i has rank r), ties sharing their ranks equally; k × k, rows and columns sum to 1."""
    from scipy.stats import rankdata

    k, b = bad.shape
    out = np.zeros((k, k))
    if b == 0:
        return out
    lo = np.asarray(rankdata(bad, method="min", axis=0), dtype=np.int64)  # first tied rank
    hi = np.asarray(rankdata(bad, method="max", axis=0), dtype=np.int64)  # last tied rank
    for r in range(1, k + 1):
        inside = (lo <= r) & (r <= hi)
        out[:, r - 1] = np.sum(np.where(inside, 1.0 / (hi - lo + 1), 0.0), axis=1) / b
    return out
