"""Prediction kinds as the service sees them: named arrays in, a uqcore prediction out.

Both the API (validation before the 202) and the worker (the computation) build predictions
through :func:`build_prediction`, so a batch the API accepted is exactly the batch the worker
evaluates.

The tables of kinds and fields import nothing but numpy: the Python client and the command line
read them without loading uqcore (and scipy), which only :func:`construct` and
:func:`build_prediction` need, imported on their first call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: kind -> the fields of the prediction, in constructor order. The targets (``y`` for
#: regression, ``labels`` for classification) and the optional ``sample_weight`` travel beside
#: them. An ensemble takes exactly one of its two fields (see :data:`ONE_OF`); some fields may
#: be left out (see :data:`OPTIONAL_FIELDS`).
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "gaussian": ("mean", "std"),
    "laplace": ("loc", "scale"),
    "student_t": ("loc", "scale", "df"),
    "mixture": ("weights", "means", "stds"),
    "samples": ("draws",),
    "quantiles": ("levels", "values"),
    "point_uncertainty": ("prediction", "uncertainty"),
    "interval": ("lower", "upper", "level"),
    "probs": ("probs",),
    "logits": ("logits",),
    "ensemble": ("member_probs", "member_logits"),
    "dirichlet": ("alpha",),
    "prediction_set": ("sets", "probs"),
}

#: The classification kinds (uqcore.predictions.classification); the others are regression.
CLASSIFICATION_KINDS = frozenset({"probs", "logits", "ensemble", "dirichlet", "prediction_set"})
REGRESSION_KINDS: tuple[str, ...] = tuple(k for k in KIND_FIELDS if k not in CLASSIFICATION_KINDS)

#: Kinds whose fields are alternatives: exactly one of them is given.
ONE_OF: dict[str, tuple[str, ...]] = {"ensemble": ("member_probs", "member_logits")}

#: Fields a kind may leave out: an interval's nominal level (unknown when absent), the
#: probabilities a prediction set was made from (without them only the set metrics apply).
OPTIONAL_FIELDS: dict[str, frozenset[str]] = {
    "interval": frozenset({"level"}),
    "prediction_set": frozenset({"probs"}),
}

#: Named user-supplied estimates of a classification prediction travel as arrays
#: ``estimate:<name>`` (N values each) beside the prediction fields.
ESTIMATE_PREFIX = "estimate:"

#: Optional classification targets beside ``labels``: soft labels (N×C) and OOD flags (N).
CLASSIFICATION_TARGETS = ("soft_labels", "ood")


def task_of(kind: str) -> str:
    """``"classification"`` for the classification kinds, else ``"regression"``."""
    return "classification" if kind in CLASSIFICATION_KINDS else "regression"


def target_field(kind: str) -> str:
    """The name of the targets array of ``kind``: ``labels`` (classification) or ``y``."""
    return "labels" if kind in CLASSIFICATION_KINDS else "y"


#: Fields that are matrices (N×K, N×S, N×Q or N×C); ``levels`` is a vector of length Q; the
#: ensemble fields are M×N×C arrays (:data:`TENSOR_FIELDS`); ``level`` is one number
#: (:data:`SCALAR_FIELDS`); the rest are vectors of length N.
MATRIX_FIELDS = frozenset(
    {"weights", "means", "stds", "draws", "values", "probs", "logits", "alpha", "sets"}
)
TENSOR_FIELDS = frozenset({"member_probs", "member_logits"})
SCALAR_FIELDS = frozenset({"level"})
#: Fields of booleans: JSON true/false, NPZ a bool array; 0 and 1 are accepted for them too,
#: as uqcore accepts them.
BOOL_FIELDS = frozenset({"sets"})


def field_rank(name: str) -> int:
    """The number of dimensions of field ``name``: 0 (a number), 1 (a vector), 2 (a matrix)
    or 3 (an M×N×C array)."""
    if name in SCALAR_FIELDS:
        return 0
    if name in TENSOR_FIELDS:
        return 3
    return 2 if name in MATRIX_FIELDS else 1


def required_fields(kind: str) -> tuple[str, ...]:
    """The fields that a prediction of ``kind`` must give (none of an ensemble's alternatives
    is required on its own: :func:`build_prediction` checks that exactly one is given)."""
    if kind in ONE_OF:
        return ()
    optional = OPTIONAL_FIELDS.get(kind, frozenset())
    return tuple(f for f in KIND_FIELDS[kind] if f not in optional)


def construct(kind: str, fields: Mapping[str, Any]) -> Any:
    """The uqcore prediction of ``kind`` from its checked ``fields`` (arrays of any namespace
    uqcore takes; a scalar field as a 0-d array or a number), by keyword: a field left out is
    the constructor's default. Classification kinds also take estimates ``estimate:<name>``."""
    from uqcore import predictions as P
    from uqcore.predictions import classification as PC

    args: dict[str, Any] = {}
    for f in KIND_FIELDS[kind]:
        if f in fields:
            value = fields[f]
            args[f] = float(np.asarray(value).item()) if f in SCALAR_FIELDS else value
    if kind in CLASSIFICATION_KINDS:
        estimates = {
            k[len(ESTIMATE_PREFIX) :]: v for k, v in fields.items() if k.startswith(ESTIMATE_PREFIX)
        }
        cls: Any = PC.KINDS[kind]
        return cls(**args, estimates=estimates)
    return P.KINDS[kind](**args)


def _check_dtype(name: str, a: np.ndarray) -> None:
    from uqcore import UQValidationError

    if name in BOOL_FIELDS and a.dtype.kind == "b":
        return
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        what = "booleans (or 0 and 1)" if name in BOOL_FIELDS else "real numbers"
        raise UQValidationError(f"{name} must hold {what}; found dtype {a.dtype}", argument=name)


def build_prediction(kind: str, arrays: Mapping[str, Any]) -> Any:
    """Validate and build the uqcore prediction of ``kind`` from its named arrays.

    Classification kinds also take named estimates as arrays ``estimate:<name>`` (N values).
    Raises :class:`uqcore.UQValidationError` naming the field, the rule and the first offending
    index for any bad input (unknown kind, missing or unexpected field, wrong rank, NaN/inf, a
    kind rule such as std <= 0, upper < lower or a probability row off the simplex); its
    ``argument`` is the field (the first one listed for a missing or unexpected field). Arrays
    are passed on in their own dtype (a float32 ensemble stays float32); a scalar field
    (``level``) is a 0-d array or a number.
    """
    from uqcore import UQValidationError

    if kind not in KIND_FIELDS:
        raise UQValidationError(
            f"kind must be one of {sorted(KIND_FIELDS)}; found {kind!r}",
            argument="kind",
            value=kind,
        )
    fields = KIND_FIELDS[kind]
    classification = kind in CLASSIFICATION_KINDS
    given = [f for f in arrays if not (classification and f.startswith(ESTIMATE_PREFIX))]
    if kind in ONE_OF:
        present = [f for f in ONE_OF[kind] if f in arrays]
        if len(present) != 1:
            raise UQValidationError(
                f"prediction of kind {kind!r} needs field(s) {list(ONE_OF[kind])}: exactly one "
                f"of them; found {present}",
                argument=ONE_OF[kind][0],
            )
    missing = [f for f in required_fields(kind) if f not in arrays]
    if missing:
        raise UQValidationError(
            f"prediction of kind {kind!r} needs field(s) {missing}", argument=missing[0]
        )
    extra = sorted(set(given) - set(fields))
    if extra:
        raise UQValidationError(
            f"prediction of kind {kind!r} takes only {list(fields)}; unexpected field(s) {extra}",
            argument=extra[0],
        )
    values: dict[str, Any] = {}
    for f in fields:
        if f not in arrays:
            continue
        a = np.asarray(arrays[f])
        want = field_rank(f)
        if a.ndim != want:
            shape = {3: "an M×N×C array", 2: "a matrix (N×K)", 1: "a vector", 0: "one number"}
            raise UQValidationError(
                f"{f} must be {shape[want]}; found shape {tuple(a.shape)}", argument=f
            )
        _check_dtype(f, a)
        values[f] = a
    if classification:
        values.update((k, v) for k, v in arrays.items() if k.startswith(ESTIMATE_PREFIX))
    return construct(kind, values)
