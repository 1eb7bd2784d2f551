"""Drawing one plot for the service (the ``uqeval.render_plot`` task): re-read the document,
draw it with :data:`uqcore.plots.PLOTS`, store the bytes.

- a submission's plot drawn from a result field (``stability``, ``by_estimator``) is drawn
  from its result document;
- a curve plot is drawn from the result's ``curves`` when it holds them all (submitted with
  ``analyses.curves``), else from the curves the job kept at its end (:func:`keep_curves`:
  a submission outside benchmarks), else from curves computed here from the stored
  prediction and its targets (a benchmark's hidden targets for a benchmark submission whose
  result holds no coarse curves for it: only admins are served those) with the
  submission's seed — so the plot is the one that
  ``analyses.curves`` would have given;
- a comparison's plot is drawn from its result, a leaderboard's from the answer's JSON that
  the API stored beside it (``source``).

Idempotent: a plot already stored is left alone (a re-delivered message, or two requests
after the claim expired). A plot that cannot be drawn is stored as an error (404 when it does
not apply, with the reason; 500 when drawing failed) so that waiting requests answer at once.
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson
from celery.exceptions import SoftTimeLimitExceeded

from service.kinds import ESTIMATE_PREFIX, KIND_FIELDS, build_prediction, target_field, task_of
from service.plots import (
    FORMATS,
    cache_ttl_s,
    curve_plot_why_not,
    plots_key,
    result_field_why_not,
)
from service.settings import Settings
from service.store import Store, StoreUnavailable
from service.store.plots import plot_error
from uqcore import UQValidationError
from uqcore.curves import curve_to_json, curves
from uqcore.plots import PLOTS, PlotSpec
from uqcore.report import json_safe

__all__ = [
    "NotDrawable",
    "decode_curves",
    "encode_curves",
    "keep_curves",
    "pack_curves",
    "render_plot",
]

log = logging.getLogger(__name__)


class NotDrawable(Exception):
    """The plot does not apply to this document (its reason is the 404's)."""


class Gone(Exception):
    """The document was deleted (or never succeeded): nothing is stored."""


def _curves_json(
    kind: str,
    arrays: Mapping[str, Any],
    seed: int,
    names: list[str] | str = "all",
    spec: PlotSpec | None = None,
    prediction: Any = None,
) -> dict[str, Any]:
    """The JSON (NaN-free) of curves ``names`` of the prediction in ``arrays`` (``prediction``:
    that prediction, built already from them)."""
    if prediction is None:
        fields = {
            f: v
            for f, v in arrays.items()
            if f in KIND_FIELDS.get(kind, ()) and not f.startswith(ESTIMATE_PREFIX)
        }
        prediction = build_prediction(kind, fields)
    pred = prediction
    if spec is not None:
        available = frozenset(k for k in ("groups", "ood") if k in arrays)
        why = curve_plot_why_not(spec, pred, available)
        if why is not None:
            raise NotDrawable(why)
    found = curves(
        pred,
        arrays[target_field(kind)],
        names,
        sample_weight=arrays.get("sample_weight"),
        groups=arrays.get("groups"),
        ood=arrays.get("ood"),
        seed=seed,
    )
    notes: list[str] = []
    return {name: json_safe(curve_to_json(c), name, notes) for name, c in found.items()}


#: zlib level of the kept curves' JSON (the long numeric lists left out, see
#: :data:`KEPT_MAGIC`), which level 1 packs to within 5% of level 6's size in a seventh of its
#: time. Any level reads back the same way.
CURVES_ZLIB_LEVEL = 1

#: The kept curves' format (:func:`encode_curves`): this prefix; the length of the header
#: (4 bytes, little-endian); the header, zlib-compressed JSON ``{"doc": the curves' JSON,
#: "arrays": [[curve, field, dtype, count], ...]}`` where each listed field of the doc is null;
#: then the listed fields' values, one after the other, as little-endian arrays of that dtype
#: (``<f8``, ``<i4`` or ``<i8``). A field goes there when it is a list of at least
#: :data:`KEPT_ARRAY_MIN` floats (or of integers) and no nulls: the interval-width scatter's
#: 2,000 points are most of a submission's curves, which as JSON took longer to compress
#: (about 1.2 ms of 86 kB at N = 10^4) than all the curves took to compute beside it, for
#: about the bytes the raw floats take (42 kB against 40 kB). Curves kept by earlier versions
#: (the whole JSON zlib-compressed, starting with zlib's 0x78) read back as before.
KEPT_MAGIC = b"\x00uqeval-curves-2\n"

#: Lists at least this long go into the binary part of the kept curves.
KEPT_ARRAY_MIN = 64

_INT32 = (-(2**31), 2**31 - 1)


def _as_array(value: Any) -> np.ndarray[Any, Any] | None:
    """``value`` as the array its floats (or integers) give back exactly, or None when it is
    not a long enough list of one of those."""
    if not isinstance(value, list) or len(value) < KEPT_ARRAY_MIN:
        return None
    types = set(map(type, value))
    if types == {float}:
        return np.array(value, dtype="<f8")
    if types == {int}:  # (as in JSON: an integer past int64 cannot be kept either way)
        ints = np.array(value, dtype="<i8")
        if _INT32[0] <= int(ints.min()) and int(ints.max()) <= _INT32[1]:
            return ints.astype("<i4")
        return ints
    return None


def encode_curves(drawn: Mapping[str, Any]) -> bytes:
    """The kept form of ``drawn`` (curve name -> its JSON object; see :data:`KEPT_MAGIC`)."""
    doc: dict[str, Any] = {}
    listed: list[list[Any]] = []
    parts: list[bytes] = []
    for name, curve in drawn.items():
        if not isinstance(curve, dict):
            doc[name] = curve
            continue
        fields: dict[str, Any] = {}
        for field, value in curve.items():
            arr = _as_array(value)
            if arr is None:
                fields[field] = value
                continue
            fields[field] = None
            listed.append([name, field, arr.dtype.str, int(arr.size)])
            parts.append(arr.tobytes())
        doc[name] = fields
    head = zlib.compress(orjson.dumps({"doc": doc, "arrays": listed}), CURVES_ZLIB_LEVEL)
    return b"".join([KEPT_MAGIC, struct.pack("<I", len(head)), head, *parts])


_KEPT_DTYPES = frozenset({"<f8", "<i4", "<i8"})


def decode_curves(kept: bytes) -> dict[str, Any]:
    """The curves' JSON from their kept form (this version's, or earlier versions' zlib-
    compressed JSON); ValueError when the bytes are not one of those."""
    try:
        doc = _decode(kept)
    except (zlib.error, KeyError, IndexError, TypeError, struct.error) as exc:
        raise ValueError(f"kept curves: not readable ({exc})") from exc
    if not isinstance(doc, dict):
        raise ValueError("kept curves: not a JSON object")
    return doc


def _decode(kept: bytes) -> Any:
    if not kept.startswith(KEPT_MAGIC):
        return orjson.loads(zlib.decompress(kept))  # earlier versions' form
    at = len(KEPT_MAGIC)
    if len(kept) < at + 4:
        raise ValueError("kept curves: truncated header")
    (size,) = struct.unpack_from("<I", kept, at)
    at += 4
    if len(kept) < at + size:
        raise ValueError("kept curves: truncated header")
    head = orjson.loads(zlib.decompress(kept[at : at + size]))
    at += size
    doc = head["doc"]
    for name, field, dtype, count in head["arrays"]:
        if dtype not in _KEPT_DTYPES:
            raise ValueError(f"kept curves: unknown dtype {dtype!r}")
        dt = np.dtype(dtype)
        end = at + dt.itemsize * int(count)
        if int(count) < 0 or end > len(kept):
            raise ValueError("kept curves: truncated arrays")
        doc[name][field] = np.frombuffer(kept, dtype=dt, count=int(count), offset=at).tolist()
        at = end
    if at != len(kept):
        raise ValueError("kept curves: bytes left after the arrays")
    return doc


def pack_curves(
    sub_id: str,
    kind: str,
    arrays: Mapping[str, Any],
    seed: int,
    prediction: Any = None,
) -> bytes | None:
    """The kept form of every curve that applies (:func:`encode_curves`);
    None when they cannot be computed (logged: a failure here never fails the job)."""
    try:
        # NaN-free already (json_safe); the same values as json
        return encode_curves(_curves_json(kind, arrays, seed, prediction=prediction))
    except SoftTimeLimitExceeded:
        raise  # the job's time is up (packed within its evaluation): it fails as such
    except Exception:
        log.exception("curves of %s not kept", sub_id)
        return None


def keep_curves(
    store: Store,
    sub_id: str,
    kind: str,
    arrays: Mapping[str, Any],
    result: Mapping[str, Any],
    seed: int,
    prediction: Any = None,
    packed: bytes | None = None,
) -> None:
    """At the end of a job: keep every curve that applies (:func:`encode_curves`) when the
    result does not hold them, so that the submission's curve plots can be drawn after its raw arrays
    expire. Curves are thinned (at most a few thousand points each): tens of kB per
    submission. A failure here never fails the job; the plots then fall back to the arrays.
    ``prediction``: the job's prediction of ``arrays`` (host arrays, the kind's fields), whose
    batch the job's ``uqcore.reusing_batches`` block may still hold with its caches;
    ``packed``: their :func:`pack_curves`, computed already (while the job's metrics finished
    in their helper threads)."""
    if result.get("curves"):
        return
    if packed is None:
        packed = pack_curves(sub_id, kind, arrays, seed, prediction)
    if packed is None:
        return
    try:
        store.put_curves(sub_id, packed)
    except StoreUnavailable:
        raise
    except Exception:
        log.exception("curves of %s not kept", sub_id)


def _curve_source(store: Store, record: Any, result: Mapping[str, Any], spec: PlotSpec) -> Any:
    """The result document with the curves ``spec`` draws (computed when it lacks them)."""
    held = result.get("curves") or {}
    if all(name in held for name in spec.curves):
        return result
    kept = store.get_curves(record.id)
    stored: dict[str, Any] = {}
    if kept is not None:
        try:
            stored = decode_curves(kept)
        except ValueError:  # drawn from the arrays below while they are kept
            log.exception("kept curves of %s not readable", record.id)
        if all(name in stored for name in spec.curves):
            return {**result, "curves": {**held, **stored}}
    # The one loader: a benchmark submission's curves are drawn on the public rows only.
    arrays = store.load_part(record, "public")
    if (
        arrays is None
        and record.benchmark is not None
        and store.get_benchmark(record.benchmark) is None
    ):
        raise NotDrawable(f"benchmark {record.benchmark!r} was deleted")
    if arrays is None:
        raise NotDrawable(
            f"plot {spec.name!r} is drawn from the submission's prediction, which is no longer "
            "stored (raw arrays are kept for a limited time); submit with analyses.curves = "
            "true to keep the curves in the result"
        )
    drawn = _curves_json(record.kind, arrays, record.analyses.seed, list(spec.curves), spec)
    return {**result, "curves": {**held, **drawn}}


def _source(store: Store, scope: str, ident: str, target: str, spec: PlotSpec) -> Any:
    """What ``spec`` is drawn from."""
    if scope == "submission":
        record = store.get_submission(ident)
        result = store.get_result(ident) if record is not None else None
        if record is None or result is None:
            raise Gone
        if spec.curves:
            return _curve_source(store, record, result, spec)
        why = result_field_why_not(spec, task_of(record.kind), result)
        if why is not None:
            raise NotDrawable(why)
        return result
    if scope == "comparison":
        doc = store.get_comparison(ident)
        if doc is None or doc.get("result") is None:
            raise Gone
        return doc["result"]
    source = store.get_plot_source(target)
    if source is None:
        raise Gone
    return json.loads(source)


def render_plot(
    store: Store, settings: Settings, scope: str, ident: str, name: str, fmt: str, digest: str = ""
) -> str:
    """Draw plot ``name`` of ``scope`` ``ident`` as ``fmt`` and store it; returns what
    happened: "cached" (already stored), "rendered", "not-drawable", "failed", "gone"."""
    target = plots_key(scope, ident, digest)
    field = f"{name}.{fmt}"
    if store.get_plot(target, field) is not None:
        return "cached"
    spec = PLOTS.get(name)
    try:
        if spec is None or spec.scope != scope or fmt not in FORMATS:
            raise NotDrawable(f"no {scope} plot {name!r} in {fmt!r}")
        data = spec.function(_source(store, scope, ident, target, spec)).to_bytes(
            "svg" if fmt == "svg" else "png"
        )
        outcome = "rendered"
    except Gone:
        return "gone"
    except NotDrawable as exc:
        data, outcome = plot_error(404, str(exc)), "not-drawable"
    except UQValidationError as exc:  # uqcore refuses this input for this plot
        data, outcome = plot_error(404, f"plot {name!r} does not apply: {exc}"), "not-drawable"
    except StoreUnavailable:
        raise
    except ImportError as exc:  # a worker installed without the plots extra
        log.error("plot %s of %s %s: %s", name, scope, ident, exc)
        reason = "this server's workers cannot draw plots: install uq-eval[plots] (matplotlib)"
        data, outcome = plot_error(501, reason), "failed"
    except Exception as exc:  # a bug must not leave the requests waiting: say so at once
        log.exception("plot %s of %s %s failed", name, scope, ident)
        reason = f"internal error while drawing ({type(exc).__name__}); please report it"
        data, outcome = plot_error(500, reason), "failed"
    store.put_plot(target, field, data, cache_ttl_s(settings, scope))
    return outcome
