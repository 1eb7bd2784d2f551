"""Bad input answers 422 before anything is stored, naming the field, the rule and the index."""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from typing import Any

import numpy as np
import pytest

from service.store import Store
from tests.factories import gaussian_arrays, gaussian_json, npz_bytes
from tests.service._api import ADMIN, NPZ, TestClient, error_of, new_key

pytest_plugins = ["tests.service._api"]


@pytest.fixture
def key(idle_api: TestClient) -> dict[str, str]:
    return new_key(idle_api, "validation")


def _nothing_stored(client: TestClient, key: dict[str, str]) -> None:
    assert client.get("/v1/submissions", headers=key).json()["total"] == 0


def _with(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``body`` with the member at dotted ``path`` replaced (``path`` may end in ``[i]``)."""
    doc = json.loads(json.dumps(body))
    parts = path.split(".")
    target = doc
    for p in parts[:-1]:
        target = target[p]
    last = parts[-1]
    if last.endswith("]"):
        name, idx = last[:-1].split("[")
        target[name][int(idx)] = value
    else:
        target[last] = value
    return doc


def _raw(body: dict[str, Any], **replacements: str) -> bytes:
    """JSON text of ``body`` with placeholder strings replaced by raw tokens (NaN, 1e999)."""
    text = json.dumps(body)
    for placeholder, token in replacements.items():
        text = text.replace(f'"{placeholder}"', token)
    return text.encode()


@pytest.mark.parametrize(
    ("token", "path", "field", "index"),
    [
        ("NaN", "prediction.mean[3]", "prediction.mean", 3),
        ("Infinity", "prediction.std[5]", "prediction.std", 5),
        ("-Infinity", "y[7]", "y", 7),
        ("1e999", "y[2]", "y", 2),
    ],
)
def test_non_finite_json_numbers(
    idle_api: TestClient, key: dict[str, str], token: str, path: str, field: str, index: int
):
    body = _with(gaussian_json(10), path, "__BAD__")
    r = idle_api.post(
        "/v1/submissions",
        content=_raw(body, __BAD__=token),
        headers={**key, "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == (field, index)
    assert "finite" in err["message"]
    _nothing_stored(idle_api, key)


@pytest.mark.parametrize(
    ("path", "value", "field", "index", "words"),
    [
        ("prediction.std[4]", -0.3, "prediction.std", 4, "must be > 0"),
        ("prediction.std[0]", 0.0, "prediction.std", 0, "must be > 0"),
        ("prediction.mean[1]", "1.5", "prediction.mean", 1, "valid number"),
        ("y[6]", True, "y", 6, "valid number"),
        ("prediction.mean", [], "prediction.mean", None, "at least 1"),
        ("y", [], "y", None, "at least 1"),
        ("prediction.std", [1.0] * 9, "prediction.std", None, "same shape"),
        ("y", [0.0] * 11, "y", None, "same length"),
        ("sample_weight", [1.0] * 9, "sample_weight", None, "same length"),
        ("sample_weight", [0.0] * 10, "sample_weight", None, "not be all zero"),
        ("groups", [1] * 3, "groups", None, "same length"),
        ("groups", [1.5] * 10, "groups", 0, "valid integer"),
        ("model_name", "", "model_name", None, "at least 1"),
        ("unexpected", 1, "unexpected", None, "Extra inputs"),
        ("metadata", {"a": "x" * 20_000}, "metadata", None, "at most"),
    ],
)
def test_bad_json_fields(
    idle_api: TestClient,
    key: dict[str, str],
    path: str,
    value: Any,
    field: str,
    index: int | None,
    words: str,
):
    r = idle_api.post("/v1/submissions", json=_with(gaussian_json(10), path, value), headers=key)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["code"] == "validation_error"
    assert (err["field"], err["index"]) == (field, index), err
    assert words in err["message"], err
    _nothing_stored(idle_api, key)


@pytest.mark.parametrize(
    ("prediction", "field", "index", "words"),
    [
        ({"kind": "gaussian", "mean": [0.0, 1.0]}, "prediction.std", None, "Field required"),
        ({"kind": "nope", "mean": [0.0, 1.0]}, "prediction", None, "kind"),
        (
            {"kind": "gaussian", "mean": [0.0, 1.0], "std": [1.0, 1.0], "df": [1.0, 1.0]},
            "prediction.df",
            None,
            "Extra inputs",
        ),
        (
            {"kind": "samples", "draws": [[0.0, 1.0], [1.0]]},
            "prediction.draws",
            1,
            "rectangular",
        ),
        (
            {
                "kind": "mixture",
                "weights": [[0.5, 0.5], [0.5, 0.6]],
                "means": [[0.0, 1.0]] * 2,
                "stds": [[1.0, 1.0]] * 2,
            },
            "prediction.weights",
            1,
            "sum to 1",
        ),
        (
            {"kind": "quantiles", "levels": [0.1, 0.5, 0.5], "values": [[0.0, 1.0, 2.0]] * 2},
            "prediction.levels",
            2,
            "strictly increasing",
        ),
        (
            {"kind": "point_uncertainty", "prediction": [0.0, 1.0], "uncertainty": [1.0, -1.0]},
            "prediction.uncertainty",
            1,
            ">= 0",
        ),
    ],
)
def test_kind_rules(
    idle_api: TestClient,
    key: dict[str, str],
    prediction: dict[str, Any],
    field: str,
    index: int | None,
    words: str,
):
    body = gaussian_json(2, prediction=prediction, y=[0.0, 1.0], analyses={"metrics": "all"})
    r = idle_api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == (field, index), err
    assert words in err["message"], err


@pytest.mark.parametrize(
    ("analyses", "code", "field", "index", "words"),
    [
        (
            {"metrics": ["mae", "no_such"]},
            "unknown_metric",
            "analyses.metrics",
            1,
            "unknown metric",
        ),
        ({"metrics": ["Bad-Name"]}, "validation_error", "analyses.metrics", 0, "pattern"),
        ({"metrics": ["mae", "mae"]}, "validation_error", "analyses.metrics", None, "twice"),
        ({"metrics": []}, "validation_error", "analyses.metrics", None, "at least 1"),
        ({"metrics": "some"}, "validation_error", "analyses.metrics", None, "all"),
        (
            {"metrics": ["mae"], "params": {"nmerci": {"alpha": 0.9}}},
            "validation_error",
            "analyses.params.nmerci",
            None,
            "does not list",
        ),
        (
            {"metrics": ["nmerci"], "params": {"nmerci": {"beta": 0.9}}},
            "unknown_parameter",
            "analyses.params.nmerci",
            None,
            "unknown parameter",
        ),
        (
            {"metrics": ["nmerci"], "params": {"nmerci": {"alpha": "0.9"}}},
            "validation_error",
            "analyses.params.nmerci.alpha",
            None,
            "must be a number",
        ),
        (
            {"metrics": ["coverage"], "params": {"coverage": {"level": 1.5}}},
            "validation_error",
            "analyses.params.coverage.level",
            None,
            "level must be a number in (0, 1 - 2**-52]",
        ),
        (
            {"metrics": ["coverage"], "params": {"coverage": {"level": 0.7}}},
            "validation_error",
            "analyses.params.coverage.level",
            None,
            "level must be one of levels",
        ),
        (
            {"metrics": ["merci"], "params": {"merci": {"alpha": 1.5}}},
            "validation_error",
            "analyses.params.merci.alpha",
            None,
            "alpha must be a number in (0, 1]",
        ),
        (
            {"metrics": ["ence"], "params": {"ence": {"n_bins": 0}}},
            "validation_error",
            "analyses.params.ence.n_bins",
            None,
            "n_bins must be an integer in [1, 10000]",
        ),
        (
            {"params": {"ence": {"n_bins": 10**9}}},
            "validation_error",
            "analyses.params.ence.n_bins",
            None,
            "found 1000000000",
        ),
        (
            {"metrics": ["mdae"], "params": {"mdae": {"method": "bogus"}}},
            "validation_error",
            "analyses.params.mdae.method",
            None,
            "method must be one of 'linear', 'inverted_cdf'",
        ),
        (
            {"params": {"calibration_error": {"levels": [0.5, 0.2]}}},
            "validation_error",
            "analyses.params.calibration_error.levels",
            None,
            "levels[1] = 0.2 <= levels[0] = 0.5",
        ),
        (
            {"params": {"nope": {}}},
            "unknown_metric",
            "analyses.params.nope",
            None,
            "unknown metric",
        ),
        (
            {"bootstrap": {"n_resamples": -1}},
            "validation_error",
            "analyses.bootstrap.n_resamples",
            None,
            "greater",
        ),
        (
            {"bootstrap": {"level": 1.5}},
            "validation_error",
            "analyses.bootstrap.level",
            None,
            "less",
        ),
        (
            {"bootstrap": {"method": "basic"}},
            "validation_error",
            "analyses.bootstrap.method",
            None,
            "percentile",
        ),
        ({"seed": "1"}, "validation_error", "analyses.seed", None, "valid integer"),
        ({"stability": {"on": True}}, "validation_error", "analyses.stability.on", None, "Extra"),
    ],
)
def test_bad_analyses(
    idle_api: TestClient,
    key: dict[str, str],
    analyses: dict[str, Any],
    code: str,
    field: str,
    index: int | None,
    words: str,
):
    r = idle_api.post("/v1/submissions", json=gaussian_json(10, analyses=analyses), headers=key)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["code"], err["field"], err["index"]) == (code, field, index), err
    assert words in err["message"], err


def test_inapplicable_metric_says_why(idle_api: TestClient, key: dict[str, str]):
    body = gaussian_json(
        3,
        prediction={
            "kind": "point_uncertainty",
            "prediction": [0.0, 1.0, 2.0],
            "uncertainty": [0.1, 0.2, 0.3],
        },
        y=[0.0, 1.0, 2.5],
        analyses={"metrics": ["mae", "ause", "nll"]},
    )
    r = idle_api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 422
    err = error_of(r)
    assert err["code"] == "metric_not_applicable"
    assert (err["field"], err["index"]) == ("analyses.metrics", 2)
    assert "nll needs logpdf" in err["message"]
    # Without nll it is accepted.
    body["analyses"]["metrics"] = ["mae", "ause"]
    assert idle_api.post("/v1/submissions", json=body, headers=key).status_code == 202


def test_limits_on_points(idle_api: TestClient, key: dict[str, str], idle_settings: Any):
    idle_api.app.state.settings = idle_settings.model_copy(update={"max_points": 5})  # type: ignore[attr-defined]
    r = idle_api.post("/v1/submissions", json=gaussian_json(6), headers=key)
    assert r.status_code == 422
    err = error_of(r)
    assert (err["code"], err["field"]) == ("too_many_points", "y")
    assert idle_api.post("/v1/submissions", json=gaussian_json(5), headers=key).status_code == 202


# --------------------------------------------------------------------------------------------
# NPZ
# --------------------------------------------------------------------------------------------


def _npz(request: dict[str, Any] | None = None, **arrays: Any) -> bytes:
    req = {"kind": "gaussian", "model_name": "m", "analyses": {"metrics": ["mae"]}}
    if request is not None:
        req.update(request)
    return npz_bytes(req, **arrays)


@pytest.mark.parametrize(
    ("mutate", "field", "index", "words"),
    [
        (lambda a: a["mean"].__setitem__(3, np.nan), "mean", 3, "must be finite"),
        (lambda a: a["std"].__setitem__(8, -1.0), "std", 8, "must be > 0"),
        (lambda a: a["y"].__setitem__(1, np.inf), "y", 1, "must be finite"),
        (lambda a: a.__setitem__("std", a["std"][:5]), "std", None, "same shape"),
        (lambda a: a.__setitem__("y", a["y"][:5]), "y", None, "same length"),
        (lambda a: a.__setitem__("mean", a["mean"][:0]), "std", None, "same shape"),
        (
            lambda a: a.update(mean=a["mean"][:0], std=a["std"][:0], y=a["y"][:0]),
            "mean",
            None,
            "empty",
        ),
        (lambda a: a.__setitem__("mean", a["mean"].reshape(2, 5)), "mean", None, "vector"),
        (lambda a: a.__setitem__("mean", a["mean"].astype(str)), "mean", None, "real numbers"),
        (lambda a: a.__setitem__("extra", a["mean"]), "extra", None, "not fields"),
        (lambda a: a.pop("std"), "std", None, "needs a member"),
        (lambda a: a.__setitem__("groups", a["y"]), "groups", None, "integers"),
    ],
)
def test_bad_npz_arrays(
    idle_api: TestClient,
    key: dict[str, str],
    mutate: Any,
    field: str,
    index: int | None,
    words: str,
):
    arrays = gaussian_arrays(10)
    mutate(arrays)
    r = idle_api.post("/v1/submissions", content=_npz(**arrays), headers={**key, **NPZ})
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == (field, index), err
    assert words in err["message"], err
    _nothing_stored(idle_api, key)


def test_large_body_whose_arrays_disagree_on_rows_is_refused_from_shapes(
    idle_api: TestClient, key: dict[str, str], monkeypatch: pytest.MonkeyPatch
):
    """Above one block of rows, arrays that disagree on N are answered from their shapes (and
    the first row's rules): no prediction is built from more than one block of rows."""
    from service.api import spool
    from service.api import validation as v

    built: list[int] = []
    real = v.build_prediction

    def spy(kind: str, fields: dict[str, Any]) -> Any:
        built.append(max(len(a) for k, a in fields.items() if k != "levels"))
        return real(kind, fields)

    monkeypatch.setattr(v, "build_prediction", spy)
    n = spool.CHUNK_ROWS + 3
    h = {**key, **NPZ}
    cases = [
        ({"y": n - 1}, "y", "y must have the same length as the prediction (%d), found %d"),
        ({"std": n - 2}, "std", "std must have the same shape as mean (%d,), found (%d,)"),
        ({"sample_weight": n + 1}, "sample_weight", "must have the same length"),
    ]
    for sizes, field, words in cases:
        a = gaussian_arrays(8)
        full = {k: np.resize(a[k], n) for k in ("mean", "std", "y")}
        for name, size in sizes.items():
            full[name] = np.resize(a["std"], size)
        built.clear()
        r = idle_api.post("/v1/submissions", content=_npz(**full), headers=h)
        assert r.status_code == 422, r.text
        err = error_of(r)
        assert err["field"] == field, err
        expected = words % (n, sizes[field]) if "%d" in words else words
        assert expected in err["message"], err
        assert built and max(built) <= 1, built  # the first row only, never the whole arrays
    # a rule of the first row is still uqcore's error, named as on the whole arrays
    bad = {k: np.resize(gaussian_arrays(8)[k], n) for k in ("mean", "std", "y")}
    bad["std"] = bad["std"][: n - 1].copy()
    bad["mean"][0] = np.nan
    r = idle_api.post("/v1/submissions", content=_npz(**bad), headers=h)
    assert r.status_code == 422 and error_of(r)["field"] == "mean", r.text
    _nothing_stored(idle_api, key)


def test_npz_request_member(idle_api: TestClient, key: dict[str, str]):
    a = gaussian_arrays(10)
    h = {**key, **NPZ}
    r = idle_api.post("/v1/submissions", content=npz_bytes(None, **a), headers=h)
    assert (r.status_code, error_of(r)["field"]) == (422, "request")
    numeric = io.BytesIO()
    np.savez(numeric, request=np.arange(3), **a)
    r = idle_api.post("/v1/submissions", content=numeric.getvalue(), headers=h)
    assert (r.status_code, error_of(r)["field"]) == (422, "request")
    bad = io.BytesIO()
    np.savez(bad, request=np.array("{not json"), **a)
    r = idle_api.post("/v1/submissions", content=bad.getvalue(), headers=h)
    assert r.status_code == 422
    assert "not valid JSON" in error_of(r)["message"]
    r = idle_api.post("/v1/submissions", content=_npz({"kind": "weird"}, **a), headers=h)
    assert (r.status_code, error_of(r)["field"]) == (422, "request.kind")
    r = idle_api.post("/v1/submissions", content=_npz({"model_name": 3}, **a), headers=h)
    assert (r.status_code, error_of(r)["field"]) == (422, "request.model_name")


def test_pickled_npz_is_refused(idle_api: TestClient, key: dict[str, str], store: Store):
    a = gaussian_arrays(10)
    evil = np.array([{"a": 1}, "x"], dtype=object)
    body = _npz(**a, sample_weight=evil)
    r = idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ})
    assert r.status_code == 422
    err = error_of(r)
    assert err["field"] == "sample_weight"
    assert "pickled" in err["message"]
    _nothing_stored(idle_api, key)


def test_npz_member_whose_shape_lies_is_refused(idle_api: TestClient, key: dict[str, str]):
    a = gaussian_arrays(10)
    body = _npz(**a)
    # Rewrite the header of "y" to claim 10^12 elements, keeping the 10 stored.
    src = zipfile.ZipFile(io.BytesIO(body))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "y.npy":
                data = data.replace(b"(10,)", b"(1000000000000,)".ljust(5), 1)
            dst.writestr(info.filename, data)
    r = idle_api.post("/v1/submissions", content=out.getvalue(), headers={**key, **NPZ})
    assert r.status_code == 422
    err = error_of(r)
    assert err["field"] == "y"
    assert "declares shape" in err["message"]


def _rewritten(body: bytes, change: dict[str, Any], extra: dict[str, bytes] | None = None) -> bytes:
    """``body``'s archive with the bytes of members rewritten (``change``: filename ->
    function of the bytes) and ``extra`` members appended (deflated when ``body``'s were)."""
    src = zipfile.ZipFile(io.BytesIO(body))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, change.get(info.filename, lambda b: b)(data))
        for name, data in (extra or {}).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile warns of a duplicate name
                dst.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize(
    ("change", "words"),
    [
        # 10 float64 declared, 9 stored: fewer bytes than declared, though more than the
        # declared data alone would need without the header
        (lambda b: b[:-8], "holds only 72 bytes"),
        (lambda b: b + b"\0" * 8, "holds 88 bytes"),  # one more value than declared
        (lambda b: b + b"\0" * (1 << 20), "holds 1048656 bytes"),  # a megabyte of padding
    ],
    ids=["short", "one-more", "padded"],
)
def test_npz_member_with_other_bytes_than_its_header_declares_is_refused(
    idle_api: TestClient, key: dict[str, str], change: Any, words: str, compressed: bool
) -> None:
    """The bytes after a member's header are exactly those its shape and dtype declare: an
    array cut short, or followed by anything, is refused rather than read in part."""
    body = npz_bytes(
        {"kind": "gaussian", "model_name": "m"}, compressed=compressed, **gaussian_arrays(10)
    )
    r = idle_api.post(
        "/v1/submissions", content=_rewritten(body, {"y.npy": change}), headers={**key, **NPZ}
    )
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["field"] == "y"
    assert (
        "declares shape (10,) of float64 (80 bytes)" in err["message"] and words in err["message"]
    )
    _nothing_stored(idle_api, key)


@pytest.mark.parametrize("second", ["mean.npy", "mean"])
def test_npz_member_given_twice_is_refused(
    idle_api: TestClient, key: dict[str, str], second: str
) -> None:
    """Two members of one name: which was meant cannot be told, so neither is read."""
    a = gaussian_arrays(10)
    buf = io.BytesIO()
    np.save(buf, np.full(10, 5.0))
    body = _rewritten(_npz(**a), {}, {second: buf.getvalue()})
    r = idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ})
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["field"] == "mean" and "more than once" in err["message"]
    _nothing_stored(idle_api, key)


def test_npz_benchmark_member_given_twice_is_refused(idle_api: TestClient) -> None:
    y = gaussian_arrays(10)["y"]
    buf = io.BytesIO()
    np.save(buf, y + 1.0)
    body = _rewritten(
        npz_bytes({"name": "b", "primary_metric": "mae"}, y=y), {}, {"y": buf.getvalue()}
    )
    r = idle_api.post("/v1/benchmarks", content=body, headers={**ADMIN, **NPZ})
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["field"] == "y" and "more than once" in err["message"]


def test_npz_and_json_accept_the_same_batch(idle_api: TestClient, key: dict[str, str]):
    a = gaussian_arrays(10)
    body = _npz({"metadata": {"x": 1}}, **a, sample_weight=np.ones(10), groups=np.arange(10))
    r = idle_api.post(
        "/v1/submissions", content=body, headers={**key, "Content-Type": "application/octet-stream"}
    )
    assert r.status_code == 202, r.text
    sub = idle_api.get(r.json()["status_url"], headers=key).json()
    assert (sub["kind"], sub["n"], sub["model_name"], sub["metadata"]) == (
        "gaussian",
        10,
        "m",
        {"x": 1},
    )
    assert sub["analyses"]["metrics"] == ["mae"]
    assert sub["analyses"]["bootstrap"] == {"n_resamples": 0, "method": "percentile", "level": 0.95}
