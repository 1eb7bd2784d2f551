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

#: kind -> the array fields of the prediction, in constructor order. ``y`` (targets) and the
#: optional ``sample_weight`` travel beside them.
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "gaussian": ("mean", "std"),
    "laplace": ("loc", "scale"),
    "student_t": ("loc", "scale", "df"),
    "mixture": ("weights", "means", "stds"),
    "samples": ("draws",),
    "quantiles": ("levels", "values"),
    "point_uncertainty": ("prediction", "uncertainty"),
}

#: Fields that are matrices (N×K, N×S or N×Q); ``levels`` is a vector of length Q; the rest
#: are vectors of length N.
MATRIX_FIELDS = frozenset({"weights", "means", "stds", "draws", "values"})


def build_prediction(kind: str, arrays: Mapping[str, Any]) -> Any:
    """Validate and build the uqcore prediction of ``kind`` from its named arrays.

    Raises :class:`uqcore.UQValidationError` naming the field, the rule and the first offending
    index for any bad input (unknown kind, missing or unexpected field, wrong rank, NaN/inf, a
    kind rule such as std <= 0).
    """
    if kind not in KIND_FIELDS:
        raise UQValidationError(f"kind must be one of {sorted(KIND_FIELDS)}; found {kind!r}")
    fields = KIND_FIELDS[kind]
    missing = [f for f in fields if f not in arrays]
    if missing:
        raise UQValidationError(f"prediction of kind {kind!r} needs field(s) {missing}")
    extra = sorted(set(arrays) - set(fields))
    if extra:
        raise UQValidationError(
            f"prediction of kind {kind!r} takes only {list(fields)}; unexpected field(s) {extra}"
        )
    values = []
    for f in fields:
        a = np.asarray(arrays[f])
        want = 2 if f in MATRIX_FIELDS else 1
        if a.ndim != want:
            raise UQValidationError(
                f"{f} must be {'a matrix (N×K)' if want == 2 else 'a vector'}; "
                f"found shape {tuple(a.shape)}"
            )
        if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise UQValidationError(f"{f} must hold real numbers; found dtype {a.dtype}")
        values.append(a)
    return P.KINDS[kind](*values)
