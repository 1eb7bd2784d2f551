"""Prediction kinds as the service sees them: named arrays in, a uqcore prediction out.

Both the API (validation before the 202) and the worker (the computation) build predictions
through :func:`build_prediction`, so a batch the API accepted is exactly the batch the worker
evaluates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore import UQValidationError
from uqcore import predictions as P
from uqcore.predictions import classification as PC

#: kind -> the array fields of the prediction, in constructor order. The targets (``y`` for
#: regression, ``labels`` for classification) and the optional ``sample_weight`` travel beside
#: them. An ensemble takes exactly one of its two fields (see :data:`ONE_OF`).
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "gaussian": ("mean", "std"),
    "laplace": ("loc", "scale"),
    "student_t": ("loc", "scale", "df"),
    "mixture": ("weights", "means", "stds"),
    "samples": ("draws",),
    "quantiles": ("levels", "values"),
    "point_uncertainty": ("prediction", "uncertainty"),
    "probs": ("probs",),
    "logits": ("logits",),
    "ensemble": ("member_probs", "member_logits"),
    "dirichlet": ("alpha",),
}

#: The classification kinds (uqcore.predictions.classification); the others are regression.
CLASSIFICATION_KINDS = frozenset({"probs", "logits", "ensemble", "dirichlet"})
REGRESSION_KINDS: tuple[str, ...] = tuple(k for k in KIND_FIELDS if k not in CLASSIFICATION_KINDS)

#: Kinds whose fields are alternatives: exactly one of them is given.
ONE_OF: dict[str, tuple[str, ...]] = {"ensemble": ("member_probs", "member_logits")}

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
#: ensemble fields are M×N×C arrays (:data:`TENSOR_FIELDS`); the rest are vectors of length N.
MATRIX_FIELDS = frozenset(
    {"weights", "means", "stds", "draws", "values", "probs", "logits", "alpha"}
)
TENSOR_FIELDS = frozenset({"member_probs", "member_logits"})


def build_prediction(kind: str, arrays: Mapping[str, Any]) -> Any:
    """Validate and build the uqcore prediction of ``kind`` from its named arrays.

    Classification kinds also take named estimates as arrays ``estimate:<name>`` (N values).
    Raises :class:`uqcore.UQValidationError` naming the field, the rule and the first offending
    index for any bad input (unknown kind, missing or unexpected field, wrong rank, NaN/inf, a
    kind rule such as std <= 0 or a probability row off the simplex); its ``argument`` is the
    field (the first one listed for a missing or unexpected field). Arrays are passed on in
    their own dtype (a float32 ensemble stays float32).
    """
    if kind not in KIND_FIELDS:
        raise UQValidationError(
            f"kind must be one of {sorted(KIND_FIELDS)}; found {kind!r}",
            argument="kind",
            value=kind,
        )
    fields = KIND_FIELDS[kind]
    classification = kind in CLASSIFICATION_KINDS
    estimates = {
        k[len(ESTIMATE_PREFIX) :]: v
        for k, v in arrays.items()
        if classification and k.startswith(ESTIMATE_PREFIX)
    }
    given = [f for f in arrays if not (classification and f.startswith(ESTIMATE_PREFIX))]
    if kind in ONE_OF:
        present = [f for f in ONE_OF[kind] if f in arrays]
        if len(present) != 1:
            raise UQValidationError(
                f"prediction of kind {kind!r} needs field(s) {list(ONE_OF[kind])}: exactly one "
                f"of them; found {present}",
                argument=ONE_OF[kind][0],
            )
        fields = tuple(present)
    missing = [f for f in fields if f not in arrays]
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
    values = []
    for f in fields:
        a = np.asarray(arrays[f])
        want = 3 if f in TENSOR_FIELDS else 2 if f in MATRIX_FIELDS else 1
        if a.ndim != want:
            shape = {3: "an M×N×C array", 2: "a matrix (N×K)", 1: "a vector"}[want]
            raise UQValidationError(
                f"{f} must be {shape}; found shape {tuple(a.shape)}", argument=f
            )
        if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise UQValidationError(
                f"{f} must hold real numbers; found dtype {a.dtype}", argument=f
            )
        values.append(a)
    if classification:
        cls: Any = PC.KINDS[kind]
        return cls(**dict(zip(fields, values, strict=True)), estimates=estimates)
    return P.KINDS[kind](*values)
