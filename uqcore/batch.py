"""One evaluation's inputs and the derived arrays its metrics share.

A :class:`Batch` holds a validated prediction, the targets and optional sample weights, and
caches what several metrics need (point prediction, errors, PIT values, sort orders), so that
:func:`uqcore.evaluate` computes each of them once. The cache of weight-independent quantities
is shared by :meth:`Batch.with_weights`, which is how resampling (bootstrap, subsampling)
reuses one batch's orderings for every resample.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import array_api_compat
import numpy as np

from uqcore._backend import Array, Namespace, flip_is_view, radix_argsort
from uqcore._memory import keep_freed_heap
from uqcore._scaling import exponent, max_abs, rescaled, squares_in_range
from uqcore._stats import chunks, sum_of_products
from uqcore._validation import (
    UQValidationError,
    check_finite,
    validate_sample_weight,
    validate_targets,
)
from uqcore.predictions.regression import RegressionPrediction

__all__ = [
    "Batch",
    "ClassificationBatch",
    "host_weights",
    "is_reused",
    "make_batch",
    "regression_batch",
    "reusing",
    "reusing_batches",
]

T = TypeVar("T")


class _Caches:
    """The two caches of a batch: weight-independent (``_shared``, kept by re-weighted copies)
    and weight-dependent (``_own``)."""

    _shared: dict[str, Any]
    _own: dict[str, Any]
    #: The names of the metrics an ``evaluate`` call will compute on this batch (empty
    #: otherwise): a hint that lets a metric derive a shared quantity the way that is cheapest
    #: for the whole set (e.g. mdae takes the sorted |e| that the ranking metrics will make).
    plan: frozenset[str] = frozenset()

    def shared(self, key: str, compute: Callable[[], T]) -> T:
        """Cache of a weight-independent quantity (shared with :meth:`with_weights` copies)."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]  # type: ignore[no-any-return]

    def has_shared(self, key: str) -> bool:
        """Whether the weight-independent quantity ``key`` is cached already."""
        return key in self._shared

    def weighted(self, key: str, compute: Callable[[], T]) -> T:
        """Cache of a quantity that depends on this batch's weights."""
        if key not in self._own:
            self._own[key] = compute()
        return self._own[key]  # type: ignore[no-any-return]

    def cached_keys(self) -> tuple[frozenset[str], frozenset[str]]:
        """The keys cached now (weight-independent, weight-dependent), for :meth:`forget_since`."""
        return frozenset(self._shared), frozenset(self._own)

    def forget_since(self, keys: tuple[frozenset[str], frozenset[str]]) -> None:
        """Drop what was cached after :meth:`cached_keys` returned ``keys`` (its memory is
        freed; a later use computes it again, the same values)."""
        for cache, kept in ((self._shared, keys[0]), (self._own, keys[1])):
            for key in [k for k in cache if k not in kept]:
                del cache[key]

    #: Metric values computed on this batch (:meth:`remember_score`), by name and options.
    _scores: dict[tuple[str, Any], tuple[Any, list[tuple[type[Warning], str]]]] | None = None

    def remember_score(
        self,
        name: str,
        options: Mapping[str, Any],
        value: Any,
        raised: list[tuple[type[Warning], str]],
    ) -> None:
        """Keep the value of metric ``name`` with ``options`` on this batch (its weights), and
        the warnings (category, message) its computation raised: a metric that computes
        another one (a skill score its score) leaves it to ``evaluate``, which then reports
        it without computing it again. A few floats per metric: kept for the batch's life,
        through :meth:`forget_since`; a re-weighted copy (:meth:`with_weights`) starts with
        none."""
        key = options_key(options)
        if key is None:
            return
        if self._scores is None:
            self._scores = {}
        self._scores[(name, key)] = (value, list(raised))

    def remembered_score(
        self, name: str, options: Mapping[str, Any]
    ) -> tuple[Any, list[tuple[type[Warning], str]]] | None:
        """(value, warnings raised) of :meth:`remember_score` for equal options, or None."""
        if not self._scores:
            return None
        key = options_key(options)
        return None if key is None else self._scores.get((name, key))


class _NoKey(Exception):
    """An option value that :func:`options_key` does not key by value."""


def options_key(options: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A hashable key equal for equal option values (numpy arrays by dtype, shape and bytes;
    lists, tuples and mappings item by item; strings, numbers, booleans and None as they are),
    whatever the order of the names; None where a value is of another type (another
    namespace's array, say), which is then not remembered."""

    def key(v: Any) -> Any:
        if v is None or type(v) in (str, int, float, bool):
            return (type(v).__name__, v)
        if isinstance(v, (np.ndarray, np.generic)):
            return ("ndarray", v.dtype.str, v.shape, v.tobytes())
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, *map(key, v))
        if isinstance(v, Mapping):
            return ("mapping", *((str(k), key(v[k])) for k in sorted(v, key=str)))
        raise _NoKey

    try:
        return tuple((name, key(options[name])) for name in sorted(options))
    except _NoKey:
        return None


class Batch(_Caches):
    """A prediction, its targets ``y`` and optional ``sample_weight``, with shared caches.

    Parameters
    ----------
    prediction : RegressionPrediction
        Any validated prediction kind.
    y : array_like, shape (N,)
        Finite targets, same namespace as the prediction (Python sequences are converted).
    sample_weight : array_like, shape (N,), optional
        Finite, non-negative, not all zero. ``None`` means unit weights. Weights are frequency
        weights: an integer weight k is the same as k copies of the row.
    defer_finite : bool, default False
        Check ``y`` finite on first use instead of at once (the same error, raised later).
    """

    def __init__(
        self,
        prediction: RegressionPrediction,
        y: Any,
        sample_weight: Any = None,
        *,
        defer_finite: bool = False,
    ) -> None:
        if not isinstance(prediction, RegressionPrediction):
            raise UQValidationError(
                "prediction must be a uqcore prediction object (e.g. predictions.Gaussian), "
                f"found {type(prediction).__name__}",
                argument="prediction",
            )
        keep_freed_heap()  # temporaries from freed heap memory, not fresh pages (once)
        self.prediction = prediction
        self.xp: Namespace = prediction.xp
        self.n = prediction.n
        first = next(iter(prediction.arrays().values()))

        self.device = array_api_compat.device(first)
        # converted and length-checked now; checked finite now, or with ``defer_finite`` (one
        # metric computed at once, :func:`uqcore.metric`) on first use (:attr:`y`), unless the
        # metric's own reduction proves it first (:meth:`abs_error_unchecked`)
        self._y: Array = validate_targets(y, self.n, self.xp, self.device, finite=not defer_finite)
        self._y_finite = not defer_finite
        self.weights: Array | None = validate_sample_weight(
            sample_weight, self.n, self.xp, self.device
        )
        self._shared: dict[str, Any] = {}
        self._own: dict[str, Any] = {}

    def with_weights(self, sample_weight: Any) -> Batch:
        """The same prediction and targets with other weights, sharing the weight-free cache."""
        other = Batch.__new__(Batch)
        other.prediction = self.prediction
        other.xp = self.xp
        other.n = self.n
        other.device = self.device
        other._y = self.y
        other._y_finite = True
        other.plan = self.plan
        other.weights = validate_sample_weight(sample_weight, self.n, self.xp, self.device)
        other._shared = self._shared
        other._own = {}
        return other

    @property
    def y(self) -> Array:
        """The targets (finite: checked on first use, as :func:`validate_targets` does)."""
        if not self._y_finite:
            check_finite(self._y, "y", self.xp)
            self._y_finite = True
        return self._y

    @y.setter
    def y(self, value: Array) -> None:
        """Targets validated already (another batch's)."""
        self._y = value
        self._y_finite = True

    def abs_error_unchecked(self) -> tuple[Array, Callable[[float], None]]:
        """|y_i − ŷ_i| before ``y`` is checked finite, and the function that accepts it.

        A reduction over |e| that comes out finite proves every |e_i|, hence every y_i,
        finite (ŷ is finite), so the separate finiteness pass over ``y`` is not needed: pass
        the reduction's value to the returned function, which then caches |e| and marks ``y``
        finite, or else runs the check (raising for a bad ``y``, as validation does)."""
        if self._y_finite or self.has_shared("abs_error"):
            return self.abs_error, lambda value: None
        xp = self.xp
        d = self._y - self.point
        e = np.abs(d, out=d) if array_api_compat.is_numpy_namespace(xp) else xp.abs(d)

        def accept(value: float) -> None:
            if not math.isfinite(value):
                _ = self.y  # the check: raises where y is not finite
            self._y_finite = True
            self._shared.setdefault("abs_error", e)

        return e, accept

    # -- weighted reductions ---------------------------------------------------------------
    @property
    def total_weight(self) -> float:
        """Σ w_i (N when unweighted)."""
        if self.weights is None:
            return float(self.n)
        return self.weighted("total_weight", lambda: float(self.xp.sum(self.weights)))

    @property
    def mean_weights(self) -> tuple[Array | None, float]:
        """The weights that weighted means use, and their sum: the weights themselves, or,
        when their scale is extreme (the largest outside 2^±250), the weights divided by a
        power of two — exactly, and a weighted mean does not change — so that products with
        them stay inside float64's range (:mod:`uqcore._scaling`). ``(None, N)`` unweighted."""
        w = self.weights
        if w is None:
            return None, float(self.n)

        def compute() -> tuple[Array, float]:
            e = exponent(float(self.xp.max(w)))
            if e == 0:
                return w, self.total_weight
            unit = rescaled(w, e)
            return unit, float(self.xp.sum(unit))

        return self.weighted("mean_weights", compute)

    def mean(self, values: Array) -> float:
        """Weighted mean Σ w_i v_i / Σ w_i of a per-row array."""
        xp = self.xp
        w, total = self.mean_weights
        if w is None:
            if (
                type(values) is np.ndarray
                and values.dtype == np.float64
                and values.ndim == 1
                and values.shape[0] > 0
            ):
                # numpy's mean without its Python layers: the same pairwise sum, divided by N
                return float(np.add.reduce(values)) / int(values.shape[0])
            return float(xp.mean(values))
        return float(xp.sum(w * values)) / total

    def mean_square(self, values: Array) -> float:
        """Weighted mean of squares Σ w_i v_i² / Σ w_i of a per-row array.

        Unweighted numpy: one sum-of-products pass (``einsum``), no N-sized temporary. The
        squares themselves can overflow or underflow: see :meth:`scaled_mean_square`.
        """
        xp = self.xp
        w, total = self.mean_weights
        if w is None:
            if array_api_compat.is_numpy_namespace(xp):
                return float(np.einsum("i,i->", values, values)) / self.n
            return float(xp.sum(values * values)) / self.n
        return float(xp.sum(w * values * values)) / total

    def scaled_mean_square(self, values: Array) -> tuple[float, int]:
        """The weighted mean square as (m, e) with Σ w_i v_i² / Σ w_i = m · 4^e.

        e = 0 (m is :meth:`mean_square`) unless the squares overflowed or underflowed; then
        the values are divided by a power of two 2^e (exactly, :mod:`uqcore._scaling`) and the
        mean computed again, so that m is exact up to rounding for values of any magnitude
        (the mean square itself may lie outside float64's range).
        """
        with np.errstate(over="ignore", under="ignore"):  # checked just below
            ms = self.mean_square(values)
        if squares_in_range(ms):
            return ms, 0
        e = exponent(max_abs(self.xp, values))
        if e == 0:
            return ms, 0  # 0 or tiny legitimately: nothing to rescale
        return self.mean_square(rescaled(values, e)), e

    def root_mean_square(self, values: Array) -> float:
        """sqrt(Σ w_i v_i² / Σ w_i) for values of any magnitude (:meth:`scaled_mean_square`)."""
        ms, e = self.scaled_mean_square(values)
        return math.ldexp(math.sqrt(ms), e)

    def mean_by_chunks(self, terms: Callable[[slice], Array]) -> float:
        """Weighted mean Σ w_i t_i / Σ w_i of per-row terms made chunk by chunk:
        ``terms(rows)`` gives t_i for the rows of the slice ``rows``
        (:func:`uqcore._stats.chunks`), so no N-sized array of terms is ever held."""
        xp = self.xp
        w, total_weight = self.mean_weights
        total = 0.0
        for rows in chunks(xp, self.n):
            t = terms(rows)
            total += float(xp.sum(t)) if w is None else sum_of_products(xp, w[rows], t)
        return total / total_weight

    def mean_rows(self, values: Array) -> Array:
        """Weighted mean over rows of an N×K array: a length-K array."""
        xp = self.xp
        w, total = self.mean_weights
        if w is None:
            return xp.mean(values, axis=0)
        return xp.sum(w[:, None] * values, axis=0) / total

    # -- shared derived quantities ------------------------------------------------------------
    @property
    def point(self) -> Array:
        """Point prediction ŷ_i."""
        return self.shared("point", self.prediction.point)

    @property
    def uncertainty(self) -> Array:
        """Scalar uncertainty u_i (predictive std for distributions)."""
        return self.shared("uncertainty", self.prediction.uncertainty)

    @property
    def std(self) -> Array:
        """Predictive std σ_i."""
        return self.shared("std", self.prediction.std)

    @property
    def residual(self) -> Array:
        """y_i − ŷ_i."""
        return self.shared("residual", lambda: self.y - self.point)

    @property
    def abs_error(self) -> Array:
        """|y_i − ŷ_i| (from the cached residual if there is one, else one new array)."""
        return self.shared("abs_error", self._abs_error)

    def _abs_error(self) -> Array:
        xp = self.xp
        if self.has_shared("residual"):
            return xp.abs(self.residual)
        d = self.y - self.point
        if array_api_compat.is_numpy_namespace(xp):
            return np.abs(d, out=d)
        return xp.abs(d)

    @property
    def pit(self) -> Array:
        """Probability integral transform values F_i(y_i)."""
        return self.shared("pit", lambda: self.prediction.cdf(self.y))

    def order(self, key: str, values: Callable[[], Array], *, descending: bool = False) -> Array:
        """Argsort of a weight-independent per-row array, cached under ``key``.

        The sort is the fastest one the backend has: for numpy float64 arrays the radix sort
        (:func:`~uqcore._backend.radix_argsort`, which also caches the sorted values under
        ``"stats:sorted:<key>"``), else an unstable argsort. Tied values come in an
        unspecified order, so every consumer must give the same result for any order of ties
        (they do: ties are merged into blocks or only the sorted values are used).
        """
        xp = self.xp
        if not descending:

            def ascending() -> Array:
                v = values()
                got = radix_argsort(xp, v)
                if got is None:
                    return xp.argsort(v, stable=False)
                order, sorted_values = got
                # the radix sort yields the sorted values with the order: cached as
                # _stats.sorted_values(self, key, ...) would cache them, for the gathers along
                # this order that every consumer of it makes
                self.shared(f"stats:sorted:{key}", lambda: sorted_values)
                return order

            return self.shared(f"order:{key}:asc", ascending)

        def reversed_order() -> Array:
            # the reversed view of the ascending argsort where that is free (numpy, CuPy): one
            # sort and nothing else; torch sorts descending itself
            if flip_is_view(xp):
                return xp.flip(self.order(key, values))
            return xp.argsort(values(), descending=True, stable=False)

        return self.shared(f"order:{key}:desc", reversed_order)


class ClassificationBatch(_Caches):
    """A classification prediction, hard ``labels``, optional weights and optional targets.

    Parameters
    ----------
    prediction : ClassificationPrediction
    labels : array_like of int, shape (N,)
        Hard labels in [0, C).
    sample_weight : array_like, shape (N,), optional
        Frequency weights, as for :class:`Batch`.
    ood : array_like of bool, shape (N,), optional
        True for out-of-distribution samples (OOD-detection metrics need it).
    soft_labels : array_like, shape (N, C), optional
        Label distributions, e.g. human annotator votes (aleatoric metrics need them).

    Arrays are numpy float64 on the host. ``targets`` names the optional targets given
    (``"ood"``, ``"soft_labels"``); metrics that need one declare it in ``needs``.
    """

    def __init__(
        self,
        prediction: Any,
        labels: Any,
        sample_weight: Any = None,
        *,
        ood: Any = None,
        soft_labels: Any = None,
    ) -> None:
        keep_freed_heap()
        from uqcore.predictions.classification import (
            ClassificationPrediction,
            validate_labels,
            validate_ood,
            validate_soft_labels,
        )

        if not isinstance(prediction, ClassificationPrediction):
            raise UQValidationError(
                "prediction must be a uqcore classification prediction (e.g. predictions.Probs), "
                f"found {type(prediction).__name__}",
                argument="prediction",
            )
        self.prediction = prediction
        self.xp: Namespace = np
        self.n = prediction.n
        self.device = "cpu"
        self.y: Array = validate_labels(labels, self.n, prediction.n_classes)
        self.weights: Array | None = host_weights(sample_weight, self.n)
        self.ood = None if ood is None else validate_ood(ood, self.n)
        self.soft_labels = (
            None
            if soft_labels is None
            else validate_soft_labels(soft_labels, self.n, prediction.n_classes)
        )
        targets = set()
        if self.ood is not None:
            targets.add("ood")
        if self.soft_labels is not None:
            targets.add("soft_labels")
        self.targets: frozenset[str] = frozenset(targets)
        self._shared: dict[str, Any] = {}
        self._own: dict[str, Any] = {}

    @property
    def total_weight(self) -> float:
        """Σ w_i (N when unweighted)."""
        return float(self.n) if self.weights is None else float(self.xp.sum(self.weights))

    def mean(self, values: Array) -> float:
        """Weighted mean Σ w_i v_i / Σ w_i of a per-row array."""
        if self.weights is None:
            return float(self.xp.mean(values))
        return float(self.xp.sum(self.weights * values)) / self.total_weight

    def with_weights(self, sample_weight: Any) -> ClassificationBatch:
        """The same prediction and targets with other weights, sharing the weight-free cache."""
        other = ClassificationBatch.__new__(ClassificationBatch)
        other.__dict__.update(self.__dict__)
        other.weights = host_weights(sample_weight, self.n)
        other._own = {}
        other._scores = None  # values of these weights' own (remember_score)
        return other

    def weights_or_ones(self) -> Array:
        """The weights, or ones when unweighted."""

        return np.ones(self.n) if self.weights is None else self.weights

    def estimate(self, name: str) -> Array:
        """Scalar uncertainty ``name`` of the prediction (cached on the prediction)."""
        return self.prediction.estimate(name)

    @property
    def probs(self) -> Array:
        """The predictive distribution p̄ (N×C)."""
        return self.shared("probs", self.prediction.probs)

    @property
    def predicted(self) -> Array:
        """Predicted class argmax_c p̄_c (the first of tied maxima)."""

        return self.shared("predicted", lambda: np.argmax(self.probs, axis=1))

    @property
    def confidence(self) -> Array:
        """Top-label confidence max_c p̄_c."""

        # read at the argmax (one gather) rather than by a second reduction over N×C
        return self.shared(
            "confidence",
            lambda: np.take_along_axis(self.probs, self.predicted[:, None], axis=1)[:, 0],
        )

    @property
    def correct(self) -> Array:
        """1.0 where the predicted class equals the label, else 0.0."""
        return self.shared("correct", lambda: (self.predicted == self.y).astype(float))


def host_weights(sample_weight: Any, n: int) -> Array | None:
    """Sample weights of any array library as a validated numpy array (``None`` stays)."""

    from uqcore._backend import to_numpy

    if sample_weight is None:
        return None
    if hasattr(sample_weight, "__dlpack__") and not isinstance(sample_weight, np.ndarray):
        sample_weight = to_numpy(sample_weight)
    return validate_sample_weight(np.asarray(sample_weight), n, np, None)


def make_batch(
    prediction: Any,
    y: Any,
    sample_weight: Any = None,
    *,
    ood: Any = None,
    soft_labels: Any = None,
    defer_finite: bool = False,
) -> Batch | ClassificationBatch:
    """The batch type of ``prediction``'s task: :class:`Batch` (regression) or
    :class:`ClassificationBatch`. ``ood`` and ``soft_labels`` are classification targets;
    ``defer_finite``: a regression batch checks ``y`` finite on first use (see :class:`Batch`)."""
    given = (prediction, y, sample_weight, ood, soft_labels)
    held = _held(given)
    if held is not None:
        return held
    batch: Batch | ClassificationBatch
    if getattr(prediction, "task", "regression") == "classification":
        batch = ClassificationBatch(prediction, y, sample_weight, ood=ood, soft_labels=soft_labels)
    elif ood is not None or soft_labels is not None:
        raise UQValidationError(
            "ood and soft_labels apply to classification predictions only",
            argument="ood" if ood is not None else "soft_labels",
        )
    else:
        batch = Batch(prediction, y, sample_weight, defer_finite=defer_finite)
    _keep(given, batch)
    return batch


def regression_batch(prediction: Any, y: Any, sample_weight: Any = None) -> Batch:
    """``Batch(prediction, y, sample_weight)`` for a function that takes a regression
    prediction only (the curves): within a :func:`reusing_batches` block, the batch made
    before for these objects (by identity)."""
    given = (prediction, y, sample_weight, None, None)
    held = _held(given)
    if isinstance(held, Batch):
        return held
    batch = Batch(prediction, y, sample_weight)
    _keep(given, batch)
    return batch


def _held(given: tuple[Any, ...]) -> Batch | ClassificationBatch | None:
    """The batch the open :func:`reusing_batches` block holds for the objects ``given``."""
    scope: _Reuse | None = getattr(_REUSE, "scope", None)
    if scope is not None:
        for inputs, held in scope.batches:
            if all(a is b for a, b in zip(inputs, given, strict=True)):
                return held
    return None


def _keep(given: tuple[Any, ...], batch: Batch | ClassificationBatch) -> None:
    """Hold ``batch`` for the objects ``given`` in the open block, if any and small enough."""
    scope: _Reuse | None = getattr(_REUSE, "scope", None)
    if scope is not None and batch.n < scope.max_rows:
        scope.batches.append((given, batch))


class _Reuse:
    """The batches :func:`make_batch` made within one :func:`reusing_batches` block."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self.batches: list[tuple[tuple[Any, ...], Batch | ClassificationBatch]] = []


_REUSE = threading.local()


@contextlib.contextmanager
def reusing_batches(max_rows: int = 1 << 17) -> Iterator[None]:
    """Within the block (in this thread), :func:`make_batch` returns the batch it made before
    for the same objects (prediction, ``y``, ``sample_weight``, ``ood``, ``soft_labels``, by
    identity) instead of a new one, caches included: ``evaluate`` and then the curves of one
    prediction (or several metric calls) sort, compute PIT values and errors once. Only
    batches of fewer than ``max_rows`` rows are kept (their caches live until the block
    ends; ``evaluate`` then keeps every cached array of such a batch instead of dropping
    each group's working set, see :func:`is_reused`). An inner block is part of the outer
    one (its batches and ``max_rows``)."""
    if getattr(_REUSE, "scope", None) is not None:
        yield
        return
    _REUSE.scope = _Reuse(max_rows)
    try:
        yield
    finally:
        _REUSE.scope = None


def reusing() -> bool:
    """Whether a :func:`reusing_batches` block is open in this thread."""
    return getattr(_REUSE, "scope", None) is not None


def is_reused(batch: Any) -> bool:
    """Whether ``batch`` is kept by the enclosing :func:`reusing_batches` block."""
    scope: _Reuse | None = getattr(_REUSE, "scope", None)
    return scope is not None and any(held is batch for _, held in scope.batches)
