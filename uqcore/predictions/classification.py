"""Validated classification prediction kinds: first-order probabilities and second-order
predictions (ensembles, Dirichlet), each with optional named scalar uncertainty estimates.

Kinds (N samples, C >= 2 classes, M members):

``probs``      :class:`Probs`     N×C class probabilities
``logits``     :class:`Logits`    N×C logits (probabilities by softmax)
``ensemble``   :class:`Ensemble`  M×N×C member probabilities (deep ensembles, MC dropout, SWAG,
                                  Laplace samples), or M×N×C member logits
``dirichlet``  :class:`Dirichlet` N×C concentrations α > 0 (evidential methods)
``prediction_set`` :class:`PredictionSet` N×C booleans: the classes in each row's prediction
                                  set (conformal classification), optionally with the N×C
                                  probabilities the sets came from

Probability rows must be non-negative and sum to 1 within :data:`PROBS_ATOL` (1e-4, loose
enough for float32 softmax outputs over 1,000 classes); they are then used as given, not
renormalised, so that the values scored are the values passed (renormalising would perturb
equal probabilities of different rows by a rounding error and break their ties). Arrays are checked and computed on the host in
float64, chunk by chunk over N for M×N×C input (the input is kept in its own dtype and never
copied whole); arrays of other array-API libraries are copied to numpy first.

Every kind but a :class:`PredictionSet` without probabilities has the capability ``"probs"`` (the predictive distribution p̄, for an ensemble its
mean, the Bayesian model average, BMA) and ``"estimates"`` (scalar uncertainty estimators, see
:mod:`uqcore.classification.aggregators`); second-order kinds add ``"second_order"``.
User-supplied estimates are passed as ``estimates={"name": array of N}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError
from uqcore.predictions._aggregators import (
    AGGREGATORS,
    builtin_names,
    dirichlet,
    ensemble,
    first_order,
)

__all__ = [
    "PROBS_ATOL",
    "ClassificationPrediction",
    "Dirichlet",
    "Ensemble",
    "Logits",
    "PredictionSet",
    "Probs",
    "applicable",
    "compute",
    "validate_labels",
    "validate_ood",
    "validate_soft_labels",
]

#: Absolute tolerance on the row sums of probability inputs (and of soft labels).
PROBS_ATOL = 1e-4

NDArray = np.ndarray[Any, Any]


def _host(x: Any, name: str) -> NDArray:
    if x is None:
        raise UQValidationError(f"{name} is required", argument=name)
    try:
        arr = to_numpy(x) if hasattr(x, "__dlpack__") else np.asarray(x)
    except (TypeError, ValueError):
        raise UQValidationError(
            f"{name} must be an array, found {type(x).__name__}", argument=name
        ) from None
    return np.asarray(arr)


def _fmt(v: Any) -> str:
    return f"{float(v):.6g}"


def _first(ok: NDArray) -> tuple[int, ...] | None:
    if bool(np.all(ok)):
        return None
    flat = int(np.argmin(ok.reshape(-1)))
    return tuple(int(i) for i in np.unravel_index(flat, ok.shape))


def _idx(idx: tuple[int, ...]) -> str:
    return ", ".join(map(str, idx))


def _bad_entry(arr: NDArray, name: str, rule: str, idx: tuple[int, ...]) -> UQValidationError:
    """The error for entry ``idx`` of ``arr`` breaking ``rule``: "name rule; name[idx] = v"."""
    value = float(arr[idx])
    return UQValidationError(
        f"{name} {rule}; {name}[{_idx(idx)}] = {_fmt(value)}",
        argument=name,
        index=idx,
        value=value,
    )


def _float_input(x: Any, name: str, ndim: int) -> NDArray:
    arr = _host(x, name)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise UQValidationError(
            f"{name} must hold real numbers, found dtype {arr.dtype}", argument=name
        )
    if arr.dtype.kind in "iu":
        arr = arr.astype(np.float64)
    if arr.ndim != ndim:
        raise UQValidationError(f"{name} must be {ndim}-D, found shape {arr.shape}", argument=name)
    if arr.size == 0 or arr.shape[-2] == 0:
        raise UQValidationError(f"{name} must not be empty, found shape {arr.shape}", argument=name)
    if arr.shape[-1] < 2:
        raise UQValidationError(
            f"{name} must have at least 2 classes, found C = {arr.shape[-1]}", argument=name
        )
    return arr


def _chunk_rows(arr: NDArray) -> int:
    """Rows (along N) per chunk so that a float64 chunk holds about 2**18 values (2 MB: the
    chunk and its derived arrays stay in the cache and below the allocator's mmap
    threshold)."""
    per_row = int(np.prod(arr.shape)) // int(arr.shape[-2])
    return max(1, (1 << 18) // max(per_row, 1))


def _check_finite(arr: NDArray, name: str, lo: int, hi: int) -> None:
    chunk = arr[..., lo:hi, :]
    idx = _first(np.isfinite(chunk))
    if idx is not None:
        raise _bad_entry(arr, name, "must be finite", (*idx[:-2], idx[-2] + lo, idx[-1]))


def _check_simplex(arr: NDArray, name: str) -> float:
    """Non-negative rows summing to 1 within PROBS_ATOL, checked chunk by chunk over N; returns
    the smallest value.

    A chunk whose minimum is >= 0 (False for NaN) and whose float64 row sums are within the
    tolerance (False for ±inf and NaN) is valid; only a chunk that fails is checked element
    by element, to name the first offending value.
    """
    step = _chunk_rows(arr)
    n = arr.shape[-2]
    smallest = np.inf
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        chunk = arr[..., lo:hi, :]
        sums: NDArray = np.asarray(np.sum(chunk, axis=-1, dtype=np.float64))
        sums_ok = np.abs(sums - 1.0) <= PROBS_ATOL
        low = float(np.min(chunk))
        if low >= 0 and bool(np.all(sums_ok)):
            smallest = min(smallest, low)
            continue
        _check_finite(arr, name, lo, hi)
        idx = _first(chunk >= 0)
        if idx is not None:
            raise _bad_entry(arr, name, "must be >= 0", (*idx[:-2], idx[-2] + lo, idx[-1]))
        idx = _first(sums_ok)
        if idx is not None:
            full = (*idx[:-1], idx[-1] + lo)
            total = float(sums[idx])
            raise UQValidationError(
                f"{name} rows must sum to 1 (tolerance {PROBS_ATOL:g}); "
                f"sum({name}[{_idx(full)}]) = {total:.10g}",
                argument=name,
                index=full,
                value=total,
            )
    return smallest


def _check_all_finite(arr: NDArray, name: str) -> None:
    step = _chunk_rows(arr)
    for lo in range(0, arr.shape[-2], step):
        _check_finite(arr, name, lo, min(arr.shape[-2], lo + step))


def softmax(z: NDArray) -> NDArray:
    """Row-wise softmax in float64 (max-shifted): p_c = exp(z_c − max z) / Σ exp(z − max z)."""
    z = np.asarray(z, dtype=np.float64)
    e: NDArray = np.exp(z - np.max(z, axis=-1, keepdims=True))
    e /= np.sum(e, axis=-1, keepdims=True)
    return e


def validate_labels(labels: Any, n: int, n_classes: int) -> NDArray:
    """Hard labels: N integers in [0, C) (integral floats are accepted)."""
    arr = _host(labels, "labels")
    if arr.ndim != 1:
        raise UQValidationError(f"labels must be 1-D, found shape {arr.shape}", argument="labels")
    if arr.shape[0] != n:
        raise UQValidationError(
            f"labels must have the same length as the prediction ({n}), found {arr.shape[0]}",
            argument="labels",
        )
    if arr.dtype.kind == "f":
        ok = np.isfinite(arr) & (arr == np.round(arr))
        idx = _first(ok)
        if idx is not None:
            raise UQValidationError(
                f"labels must be integers; labels[{idx[0]}] = {arr[idx]}",
                argument="labels",
                index=idx,
                value=arr[idx],
            )
    elif arr.dtype.kind not in "iu":
        raise UQValidationError(
            f"labels must be integers, found dtype {arr.dtype}", argument="labels"
        )
    out = arr.astype(np.int64)
    idx = _first((out >= 0) & (out < n_classes))
    if idx is not None:
        raise UQValidationError(
            f"labels must lie in [0, {n_classes}); labels[{idx[0]}] = {int(out[idx])}",
            argument="labels",
            index=idx,
            value=int(out[idx]),
        )
    return out


def validate_soft_labels(soft_labels: Any, n: int, n_classes: int) -> NDArray:
    """Soft labels: an N×C array of label distributions (rows on the simplex)."""
    arr = _float_input(soft_labels, "soft_labels", 2)
    if arr.shape != (n, n_classes):
        raise UQValidationError(
            f"soft_labels must have shape ({n}, {n_classes}), found {arr.shape}",
            argument="soft_labels",
        )
    _check_simplex(arr, "soft_labels")
    out: NDArray = arr.astype(np.float64)
    return out


def validate_ood(ood: Any, n: int) -> NDArray:
    """OOD flags: N booleans (or 0/1 integers); True marks an out-of-distribution sample."""
    arr = _host(ood, "ood")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise UQValidationError(
            f"ood must be 1-D of length {n}, found shape {arr.shape}", argument="ood"
        )
    if arr.dtype.kind == "b":
        return arr.astype(bool)
    idx = _first(np.isin(arr, (0, 1)))
    if idx is not None:
        raise UQValidationError(
            f"ood must be booleans or 0/1; ood[{idx[0]}] = {arr[idx]}",
            argument="ood",
            index=idx,
            value=arr[idx],
        )
    return arr.astype(bool)


class ClassificationPrediction:
    """Base class of the classification kinds.

    ``probs()`` gives p̄ (N×C float64), ``estimate(name)`` a scalar uncertainty per sample
    (higher = more uncertain), ``estimator_names()`` those this prediction can give.
    Instances are immutable; :meth:`take` returns a new instance on a subset of rows.
    """

    task: ClassVar[str] = "classification"
    kind: ClassVar[str] = ""
    _capabilities: ClassVar[frozenset[str]] = frozenset({"probs", "estimates"})

    n: int
    n_classes: int
    estimates: Mapping[str, NDArray]

    def _set_estimates(self, estimates: Mapping[str, Any] | None) -> None:
        out: dict[str, NDArray] = {}
        for name, value in dict(estimates or {}).items():
            # A bad name is an error of the mapping as a whole (argument "estimates"); a bad
            # array is one of the estimate itself, named as the caller wrote it.
            if not isinstance(name, str) or not name:
                raise UQValidationError(
                    f"estimate names must be non-empty strings, found {name!r}",
                    argument="estimates",
                    value=name,
                )
            if name in AGGREGATORS:
                raise UQValidationError(
                    f"estimate name {name!r} is the name of a built-in aggregator; choose another",
                    argument="estimates",
                    value=name,
                )
            label = f"estimates[{name!r}]"
            arr = _host(value, label)
            if arr.dtype.kind not in "iuf":
                raise UQValidationError(
                    f"{label} must hold real numbers, found dtype {arr.dtype}", argument=label
                )
            arr = arr.astype(np.float64)
            if arr.shape != (self.n,):
                raise UQValidationError(
                    f"{label} must have shape ({self.n},), found {arr.shape}", argument=label
                )
            idx = _first(np.isfinite(arr))
            if idx is not None:
                raise UQValidationError(
                    f"{label} must be finite; {label}[{idx[0]}] = {arr[idx]}",
                    argument=label,
                    index=idx,
                    value=arr[idx],
                )
            out[name] = arr
        self.estimates = out
        self._cache: dict[str, NDArray] = {}
        self._finite: set[str] = set()  # built-in estimates checked to be finite

    @property
    def capabilities(self) -> frozenset[str]:
        """What this prediction gives metrics (see the module docstring)."""
        return self._capabilities

    def probs(self) -> NDArray:
        """The predictive distribution p̄ (N×C, float64, rows summing to 1)."""
        raise NotImplementedError

    def estimator_names(self) -> list[str]:
        """Built-in aggregators that apply to this kind, then the user-supplied estimates."""
        return [*applicable(self), *self.estimates]

    def estimate(self, name: str) -> NDArray:
        """Per-sample scalar uncertainty ``name`` (an aggregator or a user-supplied estimate).

        Raises :class:`FloatingPointError` if a built-in aggregator is NaN or −inf on some row:
        every input is finite, so that would be a defect, and a NaN must never reach a metric
        (a NaN estimate sorts as an arbitrary rank and gives a plausible wrong AUROC). +inf is
        the one non-finite value allowed: an uncertainty whose true value exceeds float64 (the
        variance of logits spread beyond about 1e154), which ranks above every finite one.
        User-supplied estimates are checked to be finite when the prediction is made.
        """
        if name in self.estimates:
            return self.estimates[name]
        if name not in self._cache:
            self._cache.update(compute(self, name))
        value = self._cache[name]
        if name not in self._finite:
            _check_estimate_finite(value, name, self.kind)
            self._finite.add(name)
        return value

    def _aggregates(self) -> dict[str, NDArray]:
        """Every built-in aggregator of this prediction, computed together (see
        :func:`compute`)."""
        raise NotImplementedError

    def arrays(self) -> dict[str, Any]:
        """The arrays that define this prediction, by constructor argument name."""
        raise NotImplementedError

    def take(self, indices: Any) -> Any:
        """A new prediction of the same kind holding rows ``indices`` (in that order)."""
        idx = np.asarray(to_numpy(np.asarray(indices)), dtype=np.int64)
        args = {k: np.take(v, idx, axis=-2) for k, v in self.arrays().items()}
        est = {k: v[idx] for k, v in self.estimates.items()}
        cls: Any = type(self)
        return cls(**args, estimates=est)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, n={self.n}, classes={self.n_classes})"


class Probs(ClassificationPrediction):
    """Class probabilities: an N×C array, rows non-negative and summing to 1 (± PROBS_ATOL).

    >>> import numpy as np
    >>> Probs(np.array([[0.7, 0.3], [0.4, 0.6]])).estimate("one_minus_max_prob_bma").tolist()
    [0.30000000000000004, 0.4]
    """

    kind = "probs"

    def __init__(self, probs: Any, *, estimates: Mapping[str, Any] | None = None) -> None:
        arr = _float_input(probs, "probs", 2)
        _check_simplex(arr, "probs")
        self._probs = arr
        self.n, self.n_classes = int(arr.shape[0]), int(arr.shape[1])
        self._set_estimates(estimates)

    def probs(self) -> NDArray:
        return np.asarray(self._probs, dtype=np.float64)

    def _aggregates(self) -> dict[str, NDArray]:
        return first_order(self.probs())

    def arrays(self) -> dict[str, Any]:
        return {"probs": self._probs}


class Logits(ClassificationPrediction):
    """Logits: an N×C finite array; probabilities are its row-wise softmax."""

    kind = "logits"
    _capabilities = frozenset({"probs", "estimates", "logits"})

    def __init__(self, logits: Any, *, estimates: Mapping[str, Any] | None = None) -> None:
        arr = _float_input(logits, "logits", 2)
        _check_all_finite(arr, "logits")
        self._logits = arr
        self.n, self.n_classes = int(arr.shape[0]), int(arr.shape[1])
        self._set_estimates(estimates)

    def logits(self) -> NDArray:
        """The logits (N×C, float64)."""
        return np.asarray(self._logits, dtype=np.float64)

    def probs(self) -> NDArray:
        return softmax(self._logits)

    def _aggregates(self) -> dict[str, NDArray]:
        return first_order(self.probs(), self.logits())

    def arrays(self) -> dict[str, Any]:
        return {"logits": self._logits}


class Ensemble(ClassificationPrediction):
    """Second-order samples: M×N×C member probabilities (or member logits, softmaxed).

    Give exactly one of ``member_probs`` (rows on the simplex ± PROBS_ATOL) and
    ``member_logits`` (finite). The predictive distribution is the BMA p̄ = (1/M) Σ_m p_m.
    The input array is kept as given (float32 stays float32) and read chunk by chunk over N.

    >>> import numpy as np
    >>> ens = Ensemble(member_probs=np.array([[[0.9, 0.1]], [[0.5, 0.5]]]))
    >>> ens.probs().tolist()
    [[0.7, 0.3]]
    """

    kind = "ensemble"
    _capabilities = frozenset({"probs", "estimates", "second_order"})

    def __init__(
        self,
        member_probs: Any = None,
        *,
        member_logits: Any = None,
        estimates: Mapping[str, Any] | None = None,
    ) -> None:
        if (member_probs is None) == (member_logits is None):
            raise UQValidationError(
                "give exactly one of member_probs and member_logits",
                argument="member_probs" if member_probs is None else "member_logits",
            )
        if member_probs is not None:
            arr = _float_input(member_probs, "member_probs", 3)
            #: the smallest member probability (``None`` for logits): the aggregator pass
            #: needs no clamp before its logarithm when it is positive and normal
            self.min_member: float | None = _check_simplex(arr, "member_probs")
            self.from_logits = False
        else:
            arr = _float_input(member_logits, "member_logits", 3)
            _check_all_finite(arr, "member_logits")
            self.min_member = None
            self.from_logits = True
        self._members = arr
        self.n_members = int(arr.shape[0])
        self.n, self.n_classes = int(arr.shape[1]), int(arr.shape[2])
        self._set_estimates(estimates)

    @property
    def capabilities(self) -> frozenset[str]:
        if self.from_logits:
            return self._capabilities | {"logits"}
        return self._capabilities

    def member_chunks(self) -> Any:
        """Yield ``(lo, hi, p, z)``: float64 member probabilities M×(hi−lo)×C of rows lo:hi and
        the member logits of those rows (``None`` for probability input).

        The float64 copy of a chunk lives in one buffer that the next chunk overwrites: use
        ``p`` and ``z`` before asking for the next chunk.
        """
        step = _chunk_rows(self._members)
        buf = np.empty((self.n_members, min(step, self.n), self.n_classes))
        for lo in range(0, self.n, step):
            hi = min(self.n, lo + step)
            raw = buf[:, : hi - lo]
            np.copyto(raw, self._members[:, lo:hi, :], casting="unsafe")
            if self.from_logits:
                yield lo, hi, softmax(raw), raw
            else:
                yield lo, hi, raw, None

    def probs(self) -> NDArray:
        if "__bma__" not in self._cache:
            # The BMA comes out of the one pass that computes every aggregator: reading the
            # M×N×C members once for the BMA and again for the estimates would cost a second
            # read of the largest array (metrics="all" needs both).
            self._cache.update(compute(self, "one_minus_max_prob_bma"))
        return self._cache["__bma__"]

    def _aggregates(self) -> dict[str, NDArray]:
        shape = (self.n_members, self.n, self.n_classes)
        out, bma = ensemble(self.member_chunks(), shape, applicable(self), self.min_member)
        self._cache["__bma__"] = bma
        return out

    def arrays(self) -> dict[str, Any]:
        key = "member_logits" if self.from_logits else "member_probs"
        return {key: self._members}


class Dirichlet(ClassificationPrediction):
    """Dirichlet second-order distributions: N×C concentrations α > 0 (finite).

    The predictive distribution is the Dirichlet mean p̄_c = α_c / α_0, α_0 = Σ_c α_c.
    """

    kind = "dirichlet"
    _capabilities = frozenset({"probs", "estimates", "second_order"})

    def __init__(self, alpha: Any, *, estimates: Mapping[str, Any] | None = None) -> None:
        arr = _float_input(alpha, "alpha", 2)
        _check_all_finite(arr, "alpha")
        idx = _first(arr > 0)
        if idx is not None:
            raise _bad_entry(arr, "alpha", "must be > 0", idx)
        self._alpha = arr
        self.n, self.n_classes = int(arr.shape[0]), int(arr.shape[1])
        self._set_estimates(estimates)

    def alpha(self) -> NDArray:
        """The concentrations (N×C, float64)."""
        return np.asarray(self._alpha, dtype=np.float64)

    def probs(self) -> NDArray:
        a = self.alpha()
        return np.asarray(a / np.sum(a, axis=1, keepdims=True))

    def _aggregates(self) -> dict[str, NDArray]:
        return dirichlet(self.alpha())

    def arrays(self) -> dict[str, Any]:
        return {"alpha": self._alpha}


def _check_estimate_finite(value: NDArray, name: str, kind: str) -> None:
    idx = _first(np.isfinite(value) | (value == np.inf))
    if idx is not None:
        raise FloatingPointError(
            f"estimator {name!r} of a {kind} prediction is not finite on row {idx[0]} "
            f"({value[idx]}); its inputs are finite, so this is a defect of uqcore: please "
            "report it"
        )


def applicable(pred: ClassificationPrediction) -> list[str]:
    """Names of the built-in aggregators that ``pred`` provides, in catalogue order."""
    if isinstance(pred, PredictionSet):  # those of its probabilities, if it has them
        return builtin_names("probs") if pred.has_probs else []
    return builtin_names(pred.kind, isinstance(pred, Ensemble) and pred.from_logits)


def compute(pred: ClassificationPrediction, name: str) -> dict[str, NDArray]:
    """Compute aggregator ``name`` for ``pred`` (with the others computed in the same pass)."""
    if name not in AGGREGATORS:
        known = ", ".join([*AGGREGATORS, *pred.estimates])
        raise UQValidationError(
            f"unknown estimator {name!r}; known estimators: {known}", argument="name", value=name
        )
    if name not in applicable(pred):
        raise UQValidationError(
            f"estimator {name!r} does not apply to a {pred.kind} prediction"
            + (" built from probabilities" if isinstance(pred, Ensemble) else "")
            + f"; it applies to: {', '.join(applicable(pred))}",
            argument="name",
            value=name,
        )
    return pred._aggregates()


class PredictionSet(ClassificationPrediction):
    """Prediction sets (e.g. conformal classification): ``sets[i, c]`` is True when class c is
    in row i's set.

    Parameters
    ----------
    sets : array_like of bool, shape (N, C)
        Booleans (or integers 0 and 1). A row may be empty (no class) or hold every class.
    probs : array_like, shape (N, C), optional
        The class probabilities the sets were made from (rows on the simplex, as
        :class:`Probs`). When given, the probability metrics (``brier``, ``ece``, ...) and
        the aggregators of :class:`Probs` apply as well; without them only the set metrics do.

    >>> PredictionSet([[True, False], [True, True]]).set_sizes().tolist()
    [1, 2]
    """

    kind = "prediction_set"

    def __init__(
        self, sets: Any, probs: Any = None, *, estimates: Mapping[str, Any] | None = None
    ) -> None:
        arr = _host(sets, "sets")
        if arr.ndim != 2:
            raise UQValidationError(f"sets must be 2-D, found shape {arr.shape}", argument="sets")
        if arr.shape[0] == 0:
            raise UQValidationError(
                f"sets must not be empty, found shape {arr.shape}", argument="sets"
            )
        if arr.shape[1] < 2:
            raise UQValidationError(
                f"sets must have at least 2 classes, found C = {arr.shape[1]}", argument="sets"
            )
        if arr.dtype.kind != "b":
            if arr.dtype.kind not in "iuf":
                raise UQValidationError(
                    f"sets must hold booleans (or 0 and 1), found dtype {arr.dtype}",
                    argument="sets",
                )
            idx = _first((arr == 0) | (arr == 1))
            if idx is not None:
                raise _bad_entry(arr, "sets", "must be a boolean (0 or 1)", idx)
            arr = arr != 0
        self._sets = arr
        self.n, self.n_classes = int(arr.shape[0]), int(arr.shape[1])
        self._probs: NDArray | None = None
        if probs is not None:
            p = _float_input(probs, "probs", 2)
            if p.shape != arr.shape:
                raise UQValidationError(
                    f"probs must have the shape of sets {arr.shape}, found {p.shape}",
                    argument="probs",
                )
            _check_simplex(p, "probs")
            self._probs = p
        self._set_estimates(estimates)

    @property
    def has_probs(self) -> bool:
        """Whether the probabilities the sets came from were given."""
        return self._probs is not None

    @property
    def capabilities(self) -> frozenset[str]:
        caps = {"sets"}
        if self._probs is not None:
            caps |= {"probs", "estimates"}
        return frozenset(caps)

    def sets(self) -> NDArray:
        """The prediction sets (N×C booleans)."""
        return self._sets

    def set_sizes(self) -> NDArray:
        """The number of classes in each row's set (N integers)."""
        return np.asarray(np.count_nonzero(self._sets, axis=1))

    def probs(self) -> NDArray:
        if self._probs is None:
            raise UQValidationError(
                "this prediction_set prediction was given without probs, so it has no class "
                "probabilities",
                argument="probs",
            )
        return np.asarray(self._probs, dtype=np.float64)

    def _aggregates(self) -> dict[str, NDArray]:
        return first_order(self.probs())

    def arrays(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sets": self._sets}
        if self._probs is not None:
            out["probs"] = self._probs
        return out


KINDS: dict[str, type[ClassificationPrediction]] = {
    "probs": Probs,
    "logits": Logits,
    "ensemble": Ensemble,
    "dirichlet": Dirichlet,
    "prediction_set": PredictionSet,
}
