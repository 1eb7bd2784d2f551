"""The public/private split of a benchmark's rows: drawing it, and cutting arrays to one part.

A split benchmark stores the mask of its private rows (``private_mask``: N booleans, true =
private) with its hidden targets. While the benchmark is open every number computed on the
targets is computed on the public rows only; the private rows are evaluated too, but their
result is sealed until the benchmark is closed (docs/hidden-targets.md, "Public and private
parts"). Every job reads its arrays through one loader
(:meth:`service.store.Store.load_part`), which cuts the targets and the submission's arrays
with :func:`part_rows` and :func:`cut_rows`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from service.kinds import SCALAR_FIELDS, TENSOR_FIELDS

__all__ = [
    "MASK",
    "PRIVATE_BOARD",
    "Part",
    "cut_rows",
    "draw_mask",
    "is_private_board",
    "part_rows",
    "public_board",
]

#: The name of the stored mask of the private rows (beside the targets).
MASK = "private_mask"

#: Which rows a computation sees: the public part, the private part, or every row.
Part = Literal["public", "private", "all"]

#: Prediction fields that are not per row: a quantile prediction's levels (Q values) and an
#: interval's nominal level (one number).
NOT_PER_ROW = frozenset({"levels", *SCALAR_FIELDS})


def draw_mask(n: int, fraction: float) -> np.ndarray[Any, Any]:
    """N booleans with round(``fraction`` · N) true rows, drawn with a seed made here and
    kept nowhere (never the benchmark's public seed: the mask must not be reproducible by a
    submitter)."""
    rng = np.random.default_rng(secrets.randbits(128))
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, size=round(fraction * n), replace=False)] = True
    return mask


def part_rows(mask: np.ndarray[Any, Any] | None, part: Part) -> np.ndarray[Any, Any] | None:
    """The row indices of ``part`` (ascending), or None for every row (no split, or
    ``part="all"``)."""
    if mask is None or part == "all":
        return None
    m = np.asarray(mask, dtype=bool)
    return np.flatnonzero(m if part == "private" else ~m)


def row_axis(name: str) -> int | None:
    """The row axis of array ``name`` (targets, groups, weights, estimates and prediction
    fields): 1 for an ensemble's M×N×C members, None for fields that are not per row, else 0."""
    if name in NOT_PER_ROW:
        return None
    return 1 if name in TENSOR_FIELDS else 0


def cut_rows(
    arrays: Mapping[str, Any], rows: np.ndarray[Any, Any] | None, n: int
) -> dict[str, Any]:
    """``arrays`` restricted to ``rows`` (None: unchanged) along each array's row axis.
    ``n``: the benchmark's N; an array whose row axis has another length is an error (a
    wrongly cut array would silently mix the parts)."""
    if rows is None:
        return dict(arrays)
    out: dict[str, Any] = {}
    for name, a in arrays.items():
        axis = row_axis(name)
        if axis is None:
            out[name] = a
            continue
        shape = np.shape(a)
        if len(shape) <= axis or shape[axis] != n:
            raise ValueError(f"array {name!r} of shape {shape} has no row axis of length {n}")
        out[name] = np.take(np.asarray(a), rows, axis=axis)
    return out


#: The prefix of a private board's name in the rank jobs and their documents
#: (``"private:crps"``: board ``crps`` ranked on the private rows over the finals).
PRIVATE_BOARD = "private:"


def is_private_board(board: str) -> bool:
    return board.startswith(PRIVATE_BOARD)


def public_board(board: str) -> str:
    """The board's own name (without the private prefix)."""
    return board.removeprefix(PRIVATE_BOARD)
