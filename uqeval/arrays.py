"""From what users hold to the request body: host arrays named as in the API, the prediction
kind, and the JSON or NPZ bytes (gzip-encoded when that pays).

Arrays may be numpy arrays, lists, torch tensors (detached and moved to the CPU), CuPy arrays
(copied to the host with ``.get()``) or anything with ``__array__``/``__dlpack__``. A float32
array stays float32 in an NPZ body; a JSON body widens every number to float64, so ``auto``
picks NPZ for float32 data.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.lib.format as npy_format

from service.kinds import (
    CLASSIFICATION_KINDS,
    ESTIMATE_PREFIX,
    KIND_FIELDS,
    ONE_OF,
    SCALAR_FIELDS,
    TENSOR_FIELDS,
    required_fields,
)
from uqeval.errors import BadRequest

__all__ = [
    "TARGET_FIELDS",
    "EncodedBody",
    "encode_json",
    "encode_npz",
    "gzip_if_it_pays",
    "infer_kind",
    "prediction_arrays",
    "to_host",
]

#: Arrays that travel beside the prediction's: targets and the optional per-row arrays.
TARGET_FIELDS = ("y", "labels", "sample_weight", "groups", "soft_labels", "ood")

#: Arrays whose JSON form is a list of integers (or booleans), not of floats.
_INTEGER_FIELDS = frozenset({"labels", "groups"})

#: Below this many bytes a body is sent as it is (gzip's header and the CPU are not worth it).
GZIP_MIN_BYTES = 1024
#: Keep gzip when a sample compresses to less than this fraction of its size.
GZIP_MAX_RATIO = 0.9
_SAMPLE_BYTES = 64 * 1024


def to_host(x: Any, name: str = "array") -> np.ndarray:
    """``x`` as a numpy array in host memory.

    Parameters
    ----------
    x : array_like
        A numpy array, a list or scalar, a torch tensor (``.detach().cpu()``; bfloat16 is
        widened to float32, which numpy lacks), a CuPy array (``.get()``), or any object with
        ``__array__`` or ``__dlpack__``.
    name : str
        The field name used in error messages.

    Returns
    -------
    numpy.ndarray
        The array, in its own dtype where numpy has it.

    Raises
    ------
    BadRequest
        If ``x`` cannot be turned into a numeric array.
    """
    if isinstance(x, np.ndarray):
        return x
    try:
        if hasattr(x, "detach") and hasattr(x, "cpu") and hasattr(x, "numpy"):  # torch
            t = x.detach().cpu()
            if str(getattr(t, "dtype", "")) == "torch.bfloat16":
                t = t.float()
            return np.asarray(t.numpy())
        if callable(getattr(x, "get", None)) and not isinstance(x, Mapping):  # CuPy
            return np.asarray(x.get())
        if hasattr(x, "__array__"):
            return np.asarray(x)
        if hasattr(x, "__dlpack__"):
            return np.from_dlpack(x)
        out = np.asarray(x)
    except (TypeError, ValueError, RuntimeError, BufferError) as exc:
        raise BadRequest(f"{name} cannot be read as an array: {exc}", field=name) from None
    if out.dtype == object:
        raise BadRequest(
            f"{name} must be a numeric array (a rectangular list of numbers); it holds Python "
            "objects",
            field=name,
        )
    return out


def prediction_arrays(pred: Any) -> tuple[str, dict[str, np.ndarray]]:
    """The kind and the named host arrays of a uqcore prediction object.

    Parameters
    ----------
    pred : uqcore prediction
        Any of ``uqcore.predictions`` (Gaussian, Laplace, StudentT, Mixture, Samples,
        Quantiles, PointUncertainty, Interval, Probs, Logits, Ensemble, Dirichlet,
        PredictionSet).

    Returns
    -------
    kind : str
        The service's kind name (``gaussian``, ..., ``ensemble``).
    arrays : dict of str to numpy.ndarray
        The fields named as in the API (``mean``, ``std``; ``member_probs`` ...; an
        interval's ``level``, when it has one, as a 0-d array) and, for a classification
        prediction, its named estimates as ``estimate:<name>``.
    """
    kind = getattr(pred, "kind", None)
    if kind not in KIND_FIELDS or not callable(getattr(pred, "arrays", None)):
        raise BadRequest(
            f"cannot submit a {type(pred).__name__}: give a uqcore prediction object or a "
            "mapping of arrays named as in the API",
            field="prediction",
        )
    arrays = {name: to_host(v, name) for name, v in pred.arrays().items()}
    for name in SCALAR_FIELDS.intersection(KIND_FIELDS[kind]) - set(arrays):
        # a scalar attribute (an interval's level), not one of the prediction's arrays
        value = getattr(pred, name, None)
        if value is not None:
            arrays[name] = np.asarray(float(value))
    if kind in CLASSIFICATION_KINDS:
        for est, v in (getattr(pred, "estimates", None) or {}).items():
            arrays[ESTIMATE_PREFIX + est] = to_host(v, ESTIMATE_PREFIX + est)
    return str(kind), arrays


def infer_kind(names: Any) -> str:
    """The prediction kind whose required fields are among ``names`` (the members of an NPZ,
    the keys of a mapping) and that takes most of them (``sets`` and ``probs`` are a
    prediction_set, ``probs`` alone a probs prediction); targets, optional arrays and
    estimates are ignored.

    Raises
    ------
    BadRequest
        If no kind, or more than one equally, matches (then give ``kind=``).
    """
    given = {str(n) for n in names if str(n) not in TARGET_FIELDS and str(n) != "request"} - {
        n for n in map(str, names) if n.startswith(ESTIMATE_PREFIX)
    }
    best: list[str] = []
    score = 0
    for kind, fields in KIND_FIELDS.items():
        options = [(f,) for f in ONE_OF[kind]] if kind in ONE_OF else [required_fields(kind)]
        taken = len(given & set(fields))
        for needed in options:
            if set(needed) <= given and taken >= score:
                if taken > score:
                    best, score = [], taken
                best.append(kind)
                break
    if len(best) == 1:
        return best[0]
    known = ", ".join(f"{k}: {'/'.join(f)}" for k, f in KIND_FIELDS.items())
    what = (
        f"fields {sorted(given)} fit the kinds {best}"
        if best
        else f"no kind has the fields {sorted(given)}"
    )
    raise BadRequest(
        f"cannot infer the prediction kind: {what}; give kind= ({known})", field="kind"
    )


def _json_array(name: str, a: np.ndarray) -> Any:
    if name == "ood":
        return a.astype(bool).tolist()
    if name in _INTEGER_FIELDS and a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise BadRequest(f"{name} must hold integers", field=name)
        return a.astype(np.int64).tolist()
    return a.tolist()


def encode_json(kind: str, arrays: Mapping[str, np.ndarray], request: Mapping[str, Any]) -> bytes:
    """A JSON submission body (``SubmissionCreate``) from the named arrays and the request
    fields (``model_name``, ``metadata``, ``analyses``, ``visibility``, ``benchmark_id``)."""
    prediction: dict[str, Any] = {"kind": kind}
    estimates: dict[str, Any] = {}
    doc: dict[str, Any] = {k: v for k, v in request.items() if k != "kind"}
    for name, a in arrays.items():
        if name.startswith(ESTIMATE_PREFIX):
            estimates[name[len(ESTIMATE_PREFIX) :]] = a.tolist()
        elif name in TARGET_FIELDS:
            doc[name] = _json_array(name, a)
        else:
            prediction[name] = a.tolist()
    if estimates:
        prediction["estimates"] = estimates
    doc["prediction"] = prediction
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":")).encode()
    except ValueError as exc:
        raise BadRequest(f"the body cannot be written as JSON: {exc}", field="body") from None


def encode_npz(arrays: Mapping[str, np.ndarray], request: Mapping[str, Any]) -> bytes:
    """An NPZ body: every array as a member named as in the API, in its own dtype (float32
    stays float32), and ``request`` as a 0-d string array holding the JSON of the request
    fields (``kind``, ``model_name``, ``metadata``, ``analyses``, ...)."""
    buf = io.BytesIO()
    members: dict[str, Any] = {name: np.asarray(a, order="C") for name, a in arrays.items()}
    members["request"] = np.array(json.dumps(dict(request), allow_nan=False))
    # As numpy.savez writes it, but with a fixed member time: the same arrays and request
    # give the same bytes, so an interrupted resumable upload can be resumed from them.
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, a in members.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as fh:
                npy_format.write_array(fh, a, allow_pickle=False)
    return buf.getvalue()


def gzip_if_it_pays(body: bytes) -> tuple[bytes, bool]:
    """``body`` gzip-compressed when a sample of it (three slices, from its start, middle and
    end) shrinks below :data:`GZIP_MAX_RATIO` of its size; else ``body`` as it is.

    Returns
    -------
    body : bytes
        What to send.
    gzipped : bool
        True when ``body`` is compressed (send ``Content-Encoding: gzip``).
    """
    n = len(body)
    if n < GZIP_MIN_BYTES:
        return body, False
    if n <= 3 * _SAMPLE_BYTES:
        sample = body
    else:
        mid = n // 2 - _SAMPLE_BYTES // 2
        sample = b"".join(
            (body[:_SAMPLE_BYTES], body[mid : mid + _SAMPLE_BYTES], body[-_SAMPLE_BYTES:])
        )
    if len(gzip.compress(sample, compresslevel=1)) >= GZIP_MAX_RATIO * len(sample):
        return body, False
    packed = gzip.compress(body, compresslevel=1, mtime=0)
    if len(packed) >= GZIP_MAX_RATIO * n:
        return body, False
    return packed, True


class EncodedBody:
    """A request body ready to send: its bytes, media type and whether it is gzip-encoded."""

    __slots__ = ("content", "content_type", "gzipped")

    def __init__(self, content: bytes, content_type: str, gzipped: bool) -> None:
        self.content = content
        self.content_type = content_type
        self.gzipped = gzipped

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": self.content_type, "Content-Length": str(len(self.content))}
        if self.gzipped:
            out["Content-Encoding"] = "gzip"
        return out


def _needs_npz(arrays: Mapping[str, np.ndarray], threshold: int) -> bool:
    """True when JSON would not carry the arrays faithfully or compactly: above ``threshold``
    raw bytes, float32 (JSON widens it), or a non-finite float (JSON cannot say NaN; the
    server then names the field and row)."""
    if sum(a.nbytes for a in arrays.values()) >= threshold:
        return True
    for a in arrays.values():
        if a.dtype.kind == "f" and (a.dtype != np.float64 or not np.all(np.isfinite(a))):
            return True
    return False


def encode_body(
    kind: str | None,
    arrays: Mapping[str, np.ndarray],
    request: Mapping[str, Any],
    *,
    format: str = "auto",
    npz_threshold: int = 64 * 1024,
    json_body: Any = None,
) -> EncodedBody:
    """The body of a submission (``kind`` given) or of a benchmark (``kind`` None: the JSON
    document is ``request`` with the arrays as lists), as ``format`` says: ``json``, ``npz``
    or ``auto`` (NPZ above ``npz_threshold`` raw bytes or for float32 data), gzip-encoded
    when that pays."""
    if format not in ("auto", "json", "npz"):
        raise BadRequest(f"format must be auto, json or npz; found {format!r}", field="format")
    use_npz = format == "npz" or (format == "auto" and _needs_npz(arrays, npz_threshold))
    if use_npz:
        req = dict(request) if kind is None else {"kind": kind, **request}
        raw, media = encode_npz(arrays, req), "application/x-npz"
    elif kind is None:
        doc = {**request, **{k: _json_array(k, a) for k, a in arrays.items()}}
        raw, media = json.dumps(doc, allow_nan=False).encode(), "application/json"
    else:
        raw, media = encode_json(kind, arrays, request), "application/json"
    content, gzipped = gzip_if_it_pays(raw)
    return EncodedBody(content, media, gzipped)


def n_rows(kind: str, arrays: Mapping[str, np.ndarray]) -> int | None:
    """N, the number of rows of a prediction (None when its arrays do not say)."""
    for f in KIND_FIELDS[kind]:
        a = arrays.get(f)
        if a is None or f == "levels":  # quantile levels: Q values shared by every row
            continue
        axis = 1 if f in TENSOR_FIELDS else 0
        return int(a.shape[axis]) if a.ndim > axis else None
    return None
