"""The one resampling engine: any registered metric on many weightings of one batch.

A resample is a weight vector over the N rows (bootstrap counts, a 0/1 subsample mask) or a
sparse index set with weights. For every metric the engine picks the cheapest exact path:

- metrics that declare ``mean_terms`` (metric = finalize(Σ w_i t_i / Σ w_i)): the per-row terms
  are computed once and a whole block of resamples is one matrix product (b×N)·(N×k) for all
  such metrics together;
- other metrics on a dense resample: ``batch.with_weights(base_weight · w)``, so the sorts, PIT
  values and other weight-independent arrays of the batch are computed once and reused;
- small subsets (at most ``gather_fraction``·N rows with non-zero weight): the rows are
  gathered into a small batch (cheaper than an O(N) pass over mostly zero weights);
- metrics exempt from the ``repeat_rows`` or ``zero_weight`` invariance: always an explicit
  index resample (row i repeated c_i times), so the result is by construction the metric on the
  resampled arrays;
- the other metrics with a block evaluator (:mod:`uqcore.stability.blocks`: Spearman, AUSE,
  AURG, the PIT KS statistic and the calibration errors, adversarial group calibration,
  Pearson, corr, R², coverage, mean width, MdAE, MeRCI, n-MeRCI, ENCE, UCE) on dense resamples
  of a numpy batch: the whole block at once, from the row sums of fixed per-row columns and
  cumulative sums of the weight matrix along orders that are computed once per batch (O(N)
  per resample, no per-resample sort). On a numpy batch the mean-type terms and these columns
  share one matrix product per block.

All paths give the metric on the resampled arrays (the registry-wide tests check the weight
invariances the engine relies on). Values come back as float arrays with NaN where a
resample's metric is undefined; the callers turn them into ``None`` and count them.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from uqcore import registry
from uqcore._backend import from_numpy, to_numpy
from uqcore._validation import UQValidationError
from uqcore.batch import Batch, ClassificationBatch
from uqcore.registry import MetricSpec, UndefinedMetricWarning
from uqcore.report import json_safe
from uqcore.stability import blocks

__all__ = [
    "Engine",
    "Progress",
    "Resample",
    "StabilityResult",
    "batch_targets",
    "count_block",
    "make_batch",
    "scalar",
    "select_metrics",
]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
AnyBatch = Batch | ClassificationBatch


class Progress:
    """The fraction done of one computation, reported to the caller's ``progress`` callback:
    increasing, each value once, the last one 1.0 (:meth:`finish`). A phase reports through
    :meth:`span`, which maps its own 0..1 onto its share of the whole. Without a callback
    every call is free.

    An exception the callback raises (e.g. a cancelled job) propagates: the computation
    stops at the block it was in.
    """

    def __init__(self, callback: Callable[[float], None] | None) -> None:
        if callback is not None and not callable(callback):
            raise UQValidationError(
                f"progress must be a callable taking a float, found {type(callback).__name__}",
                argument="progress",
            )
        self._callback = callback
        self._last = 0.0

    def report(self, fraction: float) -> None:
        if self._callback is None:
            return
        f = min(max(float(fraction), 0.0), 1.0)
        if f > self._last:
            self._last = f
            self._callback(f)

    def span(self, start: float, stop: float) -> Callable[[float], None] | None:
        """A callback for a phase that covers ``start``..``stop`` of the whole (None without
        a callback, so the phase skips its reports)."""
        if self._callback is None:
            return None
        return lambda f: self.report(start + (stop - start) * f)

    def finish(self) -> None:
        self.report(1.0)


#: Elements of one dense weight block (b·N, 64 MiB of float64 weights): the matrix products of
#: the mean-type metrics and of the block evaluators' row sums read their N × K columns once
#: per block, so more resamples per product are cheaper (at N = 10⁶ and K = 16 columns,
#: measured 6.3 ms per resample with one resample per product, 2.5 ms with eight). The
#: order-based paths then walk the block in pieces of :data:`blocks.tuning.BLOCK_ELEMENTS`.
BLOCK_ELEMENTS = 2**23


@dataclass
class Resample:
    """One weighting of the rows: dense ``weights`` (length N; float64, or bootstrap counts in
    an integer type such as ``uint8``) or sparse ``indices``+``weights``."""

    weights: Any
    indices: np.ndarray[Any, np.dtype[np.int64]] | None = None

    def dense(self, n: int) -> Any:
        """The weights of all N rows: float64, or bootstrap counts as drawn (e.g. ``uint8``)."""
        if self.indices is None:
            return self.weights
        out = np.zeros(n)
        np.add.at(out, self.indices, self.weights)
        return out

    def dense_float(self, n: int) -> FloatArray:
        """:meth:`dense` as float64."""
        return np.asarray(self.dense(n), dtype=np.float64)

    def sparse(self) -> tuple[np.ndarray[Any, np.dtype[np.int64]], FloatArray]:
        if self.indices is not None:
            return self.indices, self.weights
        idx = np.flatnonzero(self.weights)
        return idx, np.asarray(self.weights[idx], dtype=np.float64)

    def support(self) -> int:
        if self.indices is not None:
            return int(self.indices.shape[0])
        return int(np.count_nonzero(self.weights))


@dataclass
class Chosen:
    """A metric to compute and its resolved options.

    ``label`` names the entry when one metric is computed for several estimators
    (``"auroc_ood[mutual_information]"``); it defaults to the metric's name.
    """

    spec: MetricSpec
    params: dict[str, Any]
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.spec.name


def scalar(value: Any) -> float:
    """The scalar of a metric value (the ``"value"`` entry of a structured one); NaN if None."""
    if isinstance(value, Mapping):
        value = value.get("value")
    if value is None:
        return math.nan
    f = float(value)
    return f if math.isfinite(f) else math.nan


def _task(prediction: Any) -> str:
    return str(getattr(prediction, "task", "regression"))


def select_metrics(
    predictions: Sequence[Any],
    metrics: str | Sequence[str],
    params: Mapping[str, Mapping[str, Any]] | None,
    *,
    targets: frozenset[str] = frozenset(),
    estimators: str | Sequence[str] | None = None,
    sample_weight: Any = None,
) -> tuple[list[Chosen], dict[str, str]]:
    """The metrics to compute (applicable to every prediction) and, for "all", those skipped.

    Metrics are looked up in the predictions' task (``"ece"`` and ``"nll"`` exist for both);
    ``targets`` names the optional classification targets given (``"ood"``,
    ``"soft_labels"``); ``sample_weight`` the batch's weights (a metric may need integer
    weights, :attr:`MetricSpec.integer_weights`). With ``estimators`` (classification, as in :func:`uqcore.evaluate`)
    every metric that takes an ``estimator`` option is computed once more for each named
    estimator other than its own, as the entry ``"metric[estimator]"``.
    """
    params = dict(params or {})
    task = _task(predictions[0])
    if any(_task(p) != task for p in predictions):
        raise UQValidationError("the predictions must all be of the same task")
    not_applicable: dict[str, str] = {}
    chosen: list[MetricSpec] = []
    if isinstance(metrics, str):
        if metrics != "all":
            raise UQValidationError(
                f"metrics must be 'all' or a list of metric names, found {metrics!r}"
            )
        for spec in registry.specs(task):
            params_of = params.get(spec.name)
            reasons = [
                r
                for r in (spec.why_not(p, targets, sample_weight, params_of) for p in predictions)
                if r is not None
            ]
            if reasons:
                not_applicable[spec.name] = reasons[0]
            else:
                chosen.append(spec)
    else:
        if len(metrics) == 0:
            raise UQValidationError("metrics must name at least one metric")
        for name in dict.fromkeys(metrics):
            spec = registry.get(name, task)
            for p in predictions:
                reason = spec.why_not(p, targets, sample_weight, params.get(name))
                if reason is not None:
                    raise UQValidationError(reason)
            chosen.append(spec)
    names = {s.name for s in chosen}
    stray = sorted(set(params) - names - set(not_applicable))
    if stray:
        raise UQValidationError(
            f"params given for metric(s) not requested: {', '.join(map(repr, stray))}"
        )
    out = [Chosen(s, s.resolve_params(params.get(s.name))) for s in chosen]
    est_names = _estimators(predictions, estimators)
    for c in list(out):
        if not est_names or "estimator" not in c.spec.defaults:
            continue
        for est in est_names:
            if est != c.params["estimator"]:
                out.append(Chosen(c.spec, {**c.params, "estimator": est}, f"{c.name}[{est}]"))
    return out, not_applicable


def _estimators(predictions: Sequence[Any], estimators: str | Sequence[str] | None) -> list[str]:
    """The estimator names (those every prediction provides, for ``"all"``)."""
    if estimators is None:
        return []
    from uqcore.report import estimator_names

    lists = [estimator_names(p, estimators) for p in predictions]
    return [e for e in lists[0] if all(e in other for other in lists[1:])]


def _batch_class(prediction: Any = None) -> type[Batch] | type[ClassificationBatch]:
    return ClassificationBatch if _task(prediction) == "classification" else Batch


def _batch_parameters(prediction: Any = None) -> set[str]:
    return set(inspect.signature(_batch_class(prediction).__init__).parameters) - {"self"}


def batch_extra(kwargs: Mapping[str, Any], groups: Any, prediction: Any = None) -> dict[str, Any]:
    """The extra keyword arguments for the batch of ``prediction``'s task (:class:`Batch` or
    :class:`ClassificationBatch`, whose extras are ``ood`` and ``soft_labels``): ``kwargs``,
    plus ``groups`` where the batch takes them (group labels serve both the resampling unit
    and group metrics)."""
    extra = dict(kwargs)
    if groups is not None and "groups" in _batch_parameters(prediction):
        extra["groups"] = groups
    return extra


def make_batch(prediction: Any, y: Any, sample_weight: Any, extra: Mapping[str, Any]) -> AnyBatch:
    """The batch of ``prediction``'s task, passing through the extra keyword arguments that it
    accepts (an unknown one is an error naming those it accepts)."""
    accepted = _batch_parameters(prediction)
    unknown = sorted(set(extra) - accepted)
    if unknown:
        raise UQValidationError(
            f"unknown keyword argument(s) {', '.join(map(repr, unknown))}; this batch accepts "
            f"{', '.join(sorted(accepted - {'prediction', 'y', 'labels'}))}"
        )
    return _batch_class(prediction)(prediction, y, sample_weight, **extra)


def batch_targets(batch: AnyBatch) -> frozenset[str]:
    """The optional targets a batch holds (classification: ``"ood"``, ``"soft_labels"``)."""
    return frozenset(getattr(batch, "targets", frozenset()))


def _take_rows(value: Any, idx: Any, n: int, xp: Any) -> Any:
    """Rows ``idx`` of a per-row argument (arrays with N rows, mappings of them); else as is."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {k: _take_rows(v, idx, n, xp) for k, v in value.items()}
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) >= 1 and shape[0] == n:
        if isinstance(value, np.ndarray):
            return value[to_numpy(idx)]
        return xp.take(value, idx, axis=0)
    return value


class Engine:
    """Evaluates the chosen metrics on one batch under many resamples.

    Parameters
    ----------
    batch : Batch
        The full batch (its weights are the base weights every resample multiplies).
    chosen : list of Chosen
    extra : mapping
        The extra per-batch keyword arguments (rows are gathered with the rows).
    gather_fraction : float
        A resample with at most this fraction of rows non-zero is gathered into a small batch.
    use_mean_terms : bool
        Use the matrix-product path for metrics with ``mean_terms`` (default; False evaluates
        every resample through the implementation, e.g. to check the two agree).
    use_blocks : bool
        Use the block evaluators of :mod:`uqcore.stability.blocks` where they apply (default;
        False evaluates those metrics resample by resample).
    """

    def __init__(
        self,
        batch: AnyBatch,
        chosen: Sequence[Chosen],
        extra: Mapping[str, Any] | None = None,
        *,
        gather_fraction: float = 0.125,
        use_mean_terms: bool = True,
        use_blocks: bool = True,
    ) -> None:
        self.batch = batch
        self.chosen = list(chosen)
        self.extra = dict(extra or {})
        self.n = batch.n
        self.xp = batch.xp
        self.gather_fraction = gather_fraction
        self.use_mean_terms = use_mean_terms
        self.base: FloatArray | None = (
            None if batch.weights is None else np.asarray(to_numpy(batch.weights), dtype=float)
        )
        self.undefined_reasons: dict[str, list[str]] = {c.name: [] for c in self.chosen}
        self.other_warnings: list[str] = []
        self._mean: list[Chosen] = []
        self._term_list: list[Any] = []  # the mean-type metrics' per-row terms, one per metric
        self._stacked: Any = None
        self._exact: list[Chosen] = []
        self._weighted: list[Chosen] = []
        self.full: dict[str, Any] = {}
        self.full_notes: list[str] = []
        self._split()
        self._keys: blocks.Keys | None = None
        self._fast: dict[str, blocks.BlockEvaluator] = {}
        if use_blocks:
            slow = [
                (c.name, c.params)
                for c in (*self._weighted, *self._exact)
                if c.spec.task == "regression"
            ]
            self._keys, self._fast = blocks.prepare(batch, slow)
        # the mean-type terms join the block evaluators' columns: one matrix product per block
        self._term_cols: list[int] = []
        if self._keys is not None and self._term_list:
            self._term_cols = [
                self._keys.column(f"term:{c.name}", partial(_host_floats, t))
                for t, c in zip(self._term_list, self._mean, strict=True)
            ]

    # -- setup -----------------------------------------------------------------------------
    def _split(self) -> None:
        columns = []
        for c in self.chosen:
            spec = c.spec
            if "repeat_rows" in spec.exempt or "zero_weight" in spec.exempt:
                self._exact.append(c)
                continue
            if spec.mean_terms is not None and self.use_mean_terms:
                t = spec.mean_terms(self.batch, **c.params)
                t_host = to_numpy(t)
                if t_host.shape == (self.n,) and bool(np.all(np.isfinite(t_host))):
                    self._mean.append(c)
                    columns.append(self.xp.astype(self.xp.asarray(t), self.xp.float64))
                    continue
            self._weighted.append(c)
        self._term_list = columns

    @property
    def _terms(self) -> Any:
        """The mean-type terms as one N × k matrix, stacked when first needed: on a numpy
        batch the block product takes the columns as they are (stacking them cost a strided
        copy of N × k at N = 10⁶ for nothing)."""
        if self._stacked is None and self._term_list:
            self._stacked = self.xp.stack(self._term_list, axis=1)
        return self._stacked

    def compute_full(self) -> dict[str, Any]:
        """The metric values on the full batch (JSON-safe), with notes in ``full_notes``."""
        for c in self.chosen:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                warnings.simplefilter("ignore", ResourceWarning)  # a finalizer's, no metric's
                value = c.spec.impl(self.batch, **c.params)
            notes = [str(w.message) for w in caught]
            self.full[c.name] = json_safe(value, c.name, notes)
            self.full_notes.extend(notes)
        return self.full

    # -- conversions -----------------------------------------------------------------------
    def _to_xp(self, a: FloatArray) -> Any:
        return from_numpy(self.xp, self.batch.y, np.ascontiguousarray(a, dtype=np.float64))

    def _gathered(self, idx: np.ndarray[Any, Any], w: FloatArray) -> AnyBatch:
        """A batch of rows ``idx`` with weights ``w`` (already multiplied by the base)."""
        xp = self.xp
        idx_x = from_numpy(xp, self.batch.y, idx.astype(np.int64))
        pred = self.batch.prediction.take(idx)
        y = xp.take(self.batch.y, idx_x, axis=0)
        weights = None if bool(np.all(w == 1.0)) else self._to_xp(w)
        extra = {k: _take_rows(v, idx_x, self.n, xp) for k, v in self.extra.items()}
        return _batch_class(pred)(pred, y, weights, **extra)

    # -- evaluation ------------------------------------------------------------------------
    def _record(self, name: str, caught: list[warnings.WarningMessage]) -> None:
        for w in caught:
            msg = str(w.message)
            if issubclass(w.category, UndefinedMetricWarning):
                if (
                    len(self.undefined_reasons[name]) < 3
                    and msg not in self.undefined_reasons[name]
                ):
                    self.undefined_reasons[name].append(msg)
            elif msg not in self.other_warnings and len(self.other_warnings) < 20:
                self.other_warnings.append(msg)

    def _params(self, c: Chosen, rows: np.ndarray[Any, Any] | None) -> dict[str, Any]:
        """``c``'s options for a batch of ``rows`` of this one (None: the same rows): an option
        given one value per row (:attr:`MetricSpec.row_options`) is taken with the rows."""
        if rows is None or not c.spec.row_options:
            return c.params
        out = dict(c.params)
        for k in c.spec.row_options:
            v = out.get(k)
            if isinstance(v, (list, tuple)):
                v = np.asarray(v, dtype=np.float64)
            elif hasattr(v, "shape"):
                v = to_numpy(v)  # on the host, as the row indices
            out[k] = _take_rows(v, rows, self.n, self.xp)
        return out

    def _call(
        self, c: Chosen, batch: AnyBatch | None, rows: np.ndarray[Any, Any] | None = None
    ) -> float:
        if batch is None:
            return math.nan
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.simplefilter("ignore", ResourceWarning)  # a finalizer's, no metric's
            try:
                value = c.spec.impl(batch, **self._params(c, rows))
            except UQValidationError as exc:
                # the input of this resample is invalid for the metric (e.g. too few distinct
                # rows): the value is undefined on this resample, like a None
                reasons = self.undefined_reasons[c.name]
                if len(reasons) < 3 and str(exc) not in reasons:
                    reasons.append(str(exc))
                value = None
        if caught:
            self._record(c.name, caught)
        return scalar(value)

    def _weighted_batch(self, r: Resample) -> AnyBatch | None:
        w = r.dense_float(self.n)
        if self.base is not None:
            w = w * self.base
        if not np.any(w > 0):
            self._note_empty()
            return None
        return self.batch.with_weights(self._to_xp(w))

    def _gather_batch(self, r: Resample) -> tuple[AnyBatch | None, np.ndarray[Any, Any] | None]:
        """The batch of the rows of ``r`` with positive weight, and those rows."""
        idx, w = r.sparse()
        if self.base is not None:
            w = w * self.base[idx]
        keep = w > 0
        if not np.any(keep):
            self._note_empty()
            return None, None
        return self._gathered(idx[keep], w[keep]), idx[keep]

    def _expanded_batch(self, r: Resample) -> tuple[AnyBatch | None, np.ndarray[Any, Any] | None]:
        """The batch of row i repeated c_i times, and those rows."""
        idx, c = r.sparse()
        if np.any(c != np.round(c)):
            raise UQValidationError(
                "resample weights must be integer counts for metrics exempt from the "
                "repeat_rows/zero_weight invariance"
            )
        rows = np.repeat(idx, c.astype(np.int64))
        w = np.ones(rows.shape[0]) if self.base is None else self.base[rows]
        keep = w > 0
        if not np.any(keep):
            self._note_empty()
            return None, None
        return self._gathered(rows[keep], w[keep]), rows[keep]

    def _note_empty(self) -> None:
        msg = "a resample had zero total weight; its metrics are undefined"
        if msg not in self.other_warnings:
            self.other_warnings.append(msg)

    def values(self, resamples: Sequence[Resample]) -> dict[str, FloatArray]:
        """Metric values (NaN where undefined) for each resample, name -> array (b,)."""
        b = len(resamples)
        out = {c.name: np.full(b, math.nan) for c in self.chosen}
        # large subsets given as index sets go through the dense block paths as well
        big = self.gather_fraction * self.n
        dense = [
            i
            for i, r in enumerate(resamples)
            if r.indices is None or (self._fast and r.support() > big)
        ]
        # float64, or integer counts (one byte each: the block paths gather them as they are,
        # the row sums convert a stretch at a time)
        w_dense: Any = None
        if dense and (self._mean or self._fast):
            w_dense = _stack_rows([resamples[i].dense(self.n) for i in dense])
            if self.base is not None:
                w_dense = w_dense * self.base[None, :]
            elif w_dense.dtype.kind not in "iuf":
                w_dense = w_dense.astype(np.float64)
        lin = None
        if w_dense is not None and self._keys is not None:
            lin = self._keys.linear(w_dense)  # row sums of every column, one matrix product
        if self._mean:
            self._mean_values(resamples, out, dense, w_dense, lin)
        handled = self._block_values(dense, w_dense, lin, out) if w_dense is not None else {}
        none = np.zeros(b, dtype=bool)
        for i, r in enumerate(resamples):
            weighted = [c for c in self._weighted if not handled.get(c.name, none)[i]]
            exact = [c for c in self._exact if not handled.get(c.name, none)[i]]
            if weighted:
                small = r.support() <= self.gather_fraction * self.n
                batch, rows = self._gather_batch(r) if small else (self._weighted_batch(r), None)
                for c in weighted:
                    out[c.name][i] = self._call(c, batch, rows)
            if exact:
                batch, rows = self._expanded_batch(r)
                for c in exact:
                    out[c.name][i] = self._call(c, batch, rows)
        return out

    def _block_values(
        self,
        dense: list[int],
        w: FloatArray,
        lin: FloatArray | None,
        out: dict[str, FloatArray],
    ) -> dict[str, np.ndarray[Any, np.dtype[np.bool_]]]:
        """The block evaluators on the dense resamples; per metric, which resamples they
        computed.

        ``lin`` holds the row sums of every evaluator's columns (one matrix product over all
        of ``w``); the order-based work goes a piece of :func:`blocks.rows_per_block`
        resamples at a time, so its derived arrays stay small.
        """
        if not self._fast or self._keys is None:
            return {}
        b = next(iter(out.values())).shape[0]
        handled = {name: np.zeros(b, dtype=bool) for name in self._fast}
        where = np.asarray(dense, dtype=np.int64)
        step = blocks.rows_per_block(self.n)
        pending: list[tuple[str, np.ndarray[Any, Any], blocks.Deferred]] = []
        side = {k: ev for k, ev in self._fast.items() if k in blocks.BESIDE}
        here = {k: ev for k, ev in self._fast.items() if k not in blocks.BESIDE}
        for start in range(0, len(dense), step):
            part = slice(start, min(start + step, len(dense)))
            ctx = blocks.context(self._keys, w[part], None if lin is None else lin[part])
            if not bool(np.all(ctx.total > 0)):
                continue  # an empty resample: the per-resample path notes it
            _ = (ctx.top, ctx.positive_rows)  # shared by both threads: computed before either
            rows = where[part]
            # the piece's scratch buffers are reused by the next piece: wait for both first
            beside = blocks.beside(partial(_evaluate, side, ctx)) if side else dict
            got = _evaluate(here, ctx)
            got.update(beside())
            for name in self._fast:
                v = got.get(name)
                if isinstance(v, blocks.Deferred):
                    pending.append((name, rows, v))
                elif v is not None:
                    self._store(name, rows, v, out, handled)
        for name, rows, deferred in pending:  # computed meanwhile by the helper thread
            self._store(name, rows, deferred.result(), out, handled)
        return handled

    def _store(
        self,
        name: str,
        rows: np.ndarray[Any, Any],
        v: FloatArray | blocks.Partial,
        out: dict[str, FloatArray],
        handled: dict[str, np.ndarray[Any, np.dtype[np.bool_]]],
    ) -> None:
        values = v.values[v.done] if isinstance(v, blocks.Partial) else v
        if isinstance(v, blocks.Partial):  # the rest: resample by resample
            rows = rows[v.done]
        out[name][rows] = values
        handled[name][rows] = True
        reason = blocks.undefined_reason(name)
        reasons = self.undefined_reasons[name]
        undefined = reason is not None and bool(np.any(np.isnan(values)))
        if undefined and reason is not None and reason not in reasons and len(reasons) < 3:
            reasons.append(reason)

    def _mean_values(
        self,
        resamples: Sequence[Resample],
        out: dict[str, FloatArray],
        dense: list[int],
        w: FloatArray | None,
        lin: FloatArray | None = None,
    ) -> None:
        xp = self.xp
        num = np.empty((len(resamples), len(self._mean)))
        den = np.empty(len(resamples))
        in_dense = set(dense)
        sparse = [i for i in range(len(resamples)) if i not in in_dense]
        if dense and w is not None:
            if lin is not None and self._term_cols:
                num[dense] = lin[:, self._term_cols]
            else:
                num[dense] = to_numpy(xp.matmul(self._to_xp(w), self._terms))
            if lin is not None and self._keys is not None and w.dtype.kind in "iu":
                den[dense] = lin[:, self._keys.total_column]  # Σ counts·1: exact
            else:
                den[dense] = np.sum(w, axis=1, dtype=np.float64)
        for i in sparse:
            idx, ws = resamples[i].sparse()
            if self.base is not None:
                ws = ws * self.base[idx]
            t = to_numpy(xp.take(self._terms, from_numpy(xp, self.batch.y, idx), axis=0))
            num[i] = ws @ t
            den[i] = np.sum(ws)
        for j, c in enumerate(self._mean):
            fin = c.spec.finalize
            col = out[c.name]
            for i in range(len(resamples)):
                if den[i] > 0:
                    m = num[i, j] / den[i]
                    col[i] = scalar(fin(m) if fin is not None else m)
                else:
                    self._note_empty()

    def run(
        self,
        make: Callable[[Sequence[int]], list[Resample]],
        count: int,
        block: int,
        progress: Callable[[float], None] | None = None,
        *,
        ahead: bool = False,
    ) -> dict[str, FloatArray]:
        """Values for resamples 0..count-1, built ``block`` at a time by ``make(indices)``;
        ``progress`` (optional) gets the fraction done after each block. With ``ahead``,
        ``make`` for the next block runs in a helper thread while this block is evaluated
        (:func:`blocks.ahead`): the caller's ``make`` must then not overwrite the resamples of
        the block before (e.g. two buffers in turn); the values are the same."""
        parts: dict[str, list[FloatArray]] = {c.name: [] for c in self.chosen}
        starts = range(0, count, block)
        drawn: Callable[[], list[Resample]] | None = None
        for j, start in enumerate(starts):
            stop = min(start + block, count)
            resamples = drawn() if drawn is not None else make(range(start, stop))
            drawn = None
            if ahead and j + 1 < len(starts):
                nxt = starts[j + 1]
                drawn = blocks.ahead(partial(make, range(nxt, min(nxt + block, count))))
            got = self.values(resamples)
            for k, v in got.items():
                parts[k].append(v)
            if progress is not None:
                progress(stop / count)
        return {k: (np.concatenate(v) if v else np.empty(0)) for k, v in parts.items()}

    # -- influence values for BCa ----------------------------------------------------------
    def mean_acceleration(self, c: Chosen, codes: Any = None) -> float | None:
        """BCa acceleration of a mean-type metric from its closed-form influence values.

        For θ = f(Σ w t / Σ w) the delete-one jackknife differences are, to first order,
        f'(m)(t_i − m)/(n − 1), so â = sign(f'(m)) Σ w_i u_i³ / (6 (Σ w_i u_i²)^{3/2}) with
        u_i = t_i − m and the weights as frequency weights. With ``codes`` (cluster bootstrap)
        the influence of a group is the sum over its rows and the groups are the units.
        ``None`` if the metric is not of mean type here.
        """
        if c not in self._mean:
            return None
        j = self._mean.index(c)
        t = to_numpy(self._term_list[j])
        w = np.ones(self.n) if self.base is None else self.base
        m = float(np.sum(w * t) / np.sum(w))
        u = t - m
        if codes is not None:
            g = np.bincount(codes, weights=w * u)
            s2, s3 = float(np.sum(g**2)), float(np.sum(g**3))
        else:
            s2, s3 = float(np.sum(w * u**2)), float(np.sum(w * u**3))
        if s2 <= 0:
            return 0.0
        sign = 1.0
        fin = c.spec.finalize
        if fin is not None:
            h = 1e-6 * max(abs(m), 1e-12)
            sign = math.copysign(1.0, fin(m + h) - fin(max(m - h, 0.0) if m >= 0 else m - h))
        return float(sign * s3 / (6.0 * s2**1.5))

    def is_mean_type(self, c: Chosen) -> bool:
        return c in self._mean


def _evaluate(
    evaluators: Mapping[str, blocks.BlockEvaluator], ctx: blocks.BlockContext
) -> dict[str, Any]:
    """Each evaluator on one piece of a block (in the thread that calls it)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return {name: ev(ctx) for name, ev in evaluators.items()}


def _host_floats(a: Any) -> FloatArray:
    """``a`` as a float64 numpy array."""
    return np.asarray(to_numpy(a), dtype=np.float64)


def _stack_rows(rows: list[Any]) -> Any:
    """Stack equal-length rows; consecutive rows of one block are returned as a view (of
    their own dtype)."""
    first = rows[0]
    base = first.base
    if (
        isinstance(base, np.ndarray)
        and base.ndim == 2
        and base.shape[1] == first.shape[0]
        and base.shape[0] >= len(rows)
        and base.flags.c_contiguous
    ):
        step = base.strides[0]
        start = (first.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // step
        view = base[start : start + len(rows)]
        if view.shape[0] == len(rows) and all(
            r.__array_interface__["data"][0] == v.__array_interface__["data"][0]
            for r, v in zip(rows, view, strict=True)
        ):
            return view
    return np.stack(rows)


@dataclass
class StabilityResult(Mapping[str, Any]):
    """Name -> JSON-serialisable entry (a metric's interval, a model's ranks, ...).

    ``meta`` records the provenance (seed, B or R, sizes, resampling unit, method, level, ...),
    ``warnings`` what the caller must know (undefined resamples, intervals not to be trusted).
    :meth:`to_dict` is the JSON document.
    """

    entries: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    not_applicable: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: entries under ``"results"``, plus provenance and warnings."""
        return {
            "results": dict(self.entries),
            **self.meta,
            "not_applicable": dict(self.not_applicable),
            "warnings": list(self.warnings),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.entries!r})"


def finish(
    entries: dict[str, Any],
    meta: dict[str, Any],
    warnings_: list[str],
    not_applicable: dict[str, str],
) -> StabilityResult:
    """Run everything through :func:`json_safe` (NaN → None with a note) and wrap it."""
    from uqcore import __version__

    notes: list[str] = []
    safe_entries = json_safe(entries, "results", notes)
    safe_meta = json_safe({"uqcore_version": __version__, **meta}, "meta", notes)
    return StabilityResult(safe_entries, safe_meta, [*warnings_, *notes], dict(not_applicable))


def none_if_nan(x: float) -> float | None:
    """``None`` for NaN/inf, else the float."""
    return float(x) if math.isfinite(float(x)) else None


#: Bytes of one block of bootstrap counts drawn as ``uint8`` (:func:`count_block`): 16 MiB, 16
#: resamples at N = 10⁶, whose row sums then read the N × K columns once per 16 resamples.
COUNT_BLOCK_BYTES = 2**24


def count_block(n: int, count: int) -> int:
    """Resamples per block of one-byte bootstrap counts: at most :data:`COUNT_BLOCK_BYTES`
    (at least one resample, at most 256)."""
    return max(1, min(count, COUNT_BLOCK_BYTES // max(n, 1), 256))


def default_block(n: int, count: int) -> int:
    """Resamples per block so that a dense block has at most :data:`BLOCK_ELEMENTS` entries
    (at least one, at most 256)."""
    return max(1, min(count, BLOCK_ELEMENTS // max(n, 1), 256))
