"""Numbers out of range answer 422 naming the field and the first bad index, never 500.

JSON integers have no size: ``10**30`` or ``2**64`` must be refused before anything converts
them to a fixed-size integer, and NPZ members of dtype uint64 or float must be checked on
their stored values (a cast to int64 would wrap them into another, valid-looking value).
Also here: floats and booleans given to integer fields, negative counts, non-standard JSON
tokens (NaN, Infinity), huge exponents, deep nesting, and the keep-alive connection that
stays open after a refused request (over real HTTP).
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Annotated, Any

import numpy as np
import pytest
from fastapi import Depends, FastAPI, Query

from service.api import errors
from service.api.deps import single_query_values
from tests.factories import gz, npz_bytes
from tests.service._api import ADMIN, NPZ, LiveServer, TestClient, error_of, new_key

pytest_plugins = ["tests.service._api"]

PROBS = [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]]


@pytest.fixture
def key(idle_api: TestClient) -> dict[str, str]:
    return new_key(idle_api, "ranges")


def _probs(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model_name": "m",
        "prediction": {"kind": "probs", "probs": PROBS},
        "labels": [0, 0, 1],
    }
    body.update(fields)
    return body


def _gaussian(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model_name": "m",
        "prediction": {"kind": "gaussian", "mean": [0.0, 1.0, 2.0], "std": [1.0, 1.0, 1.0]},
        "y": [0.0, 1.0, 2.0],
    }
    body.update(fields)
    return body


def _regression_benchmark(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "b", "primary_metric": "mae", "y": [1.0, 2.0, 3.0]}
    body.update(fields)
    return body


def _classification_benchmark(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "b",
        "task": "classification",
        "primary_metric": "ece",
        "labels": [0, 1, 2],
    }
    body.update(fields)
    return body


def _refused(r: Any, status: int, field: str | None, index: int | None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == (field, index), err
    return err


# --- whole numbers beyond 64 bits (the defect) -----------------------------------------------


@pytest.mark.parametrize(
    ("route", "body", "field", "index"),
    [
        ("/v1/submissions", _probs(labels=[10**30, 0, 1]), "labels", 0),
        ("/v1/submissions", _probs(groups=[2**64, 1, 1]), "groups", 0),
        ("/v1/submissions", _probs(groups=[1, -(2**63) - 1, 1]), "groups", 1),
        ("/v1/submissions", _gaussian(groups=[1, 1, 2**64]), "groups", 2),
        ("/v1/benchmarks", _classification_benchmark(labels=[0, 10**30, 1]), "labels", 1),
        ("/v1/benchmarks", _classification_benchmark(groups=[2**64, 1, 1]), "groups", 0),
        ("/v1/benchmarks", _regression_benchmark(groups=[1, 2**64, 1]), "groups", 1),
        # labels given to a regression benchmark: refused for their range before their place
        ("/v1/benchmarks", _regression_benchmark(labels=[10**30, 0, 1]), "labels", 0),
    ],
    ids=[
        "sub-labels",
        "sub-groups",
        "sub-groups-negative",
        "sub-regression-groups",
        "bench-labels",
        "bench-cls-groups",
        "bench-reg-groups",
        "bench-reg-labels",
    ],
)
def test_json_integers_beyond_64_bits(
    idle_api: TestClient, key: dict[str, str], route: str, body: Any, field: str, index: int
):
    headers = ADMIN if route == "/v1/benchmarks" else key
    # json.dumps writes Python ints as JSON integers of any length (no exponent).
    raw = json.dumps(body).encode()
    r = idle_api.post(route, content=raw, headers={**headers, "Content-Type": "application/json"})
    err = _refused(r, 422, field, index)
    assert f"{field}[{index}]" in err["message"]
    assert idle_api.get("/v1/submissions", headers=key).json()["total"] == 0


@pytest.mark.parametrize(
    ("arrays", "field", "index", "shown"),
    [
        (
            {"labels": np.array([0, 2**64 - 1, 1], dtype=np.uint64)},
            "labels",
            1,
            "18446744073709551615",
        ),
        ({"labels": np.array([1e30, 0.0, 1.0])}, "labels", 0, "1e+30"),
        ({"labels": np.array([0.0, 1.5, 1.0])}, "labels", 1, "1.5"),
        ({"labels": np.array([0.0, 1.0, np.nan])}, "labels", 2, "nan"),
        ({"labels": np.array([0, 2**40, 1], dtype=np.int64)}, "labels", 1, str(2**40)),
        (
            {"labels": np.array([0, 0, 1]), "groups": np.array([1, 2**64 - 1, 1], dtype=np.uint64)},
            "groups",
            1,
            "18446744073709551615",
        ),
    ],
    ids=[
        "uint64-label",
        "float-1e30-label",
        "fractional-label",
        "nan-label",
        "int64-label",
        "uint64-group",
    ],
)
def test_npz_integer_members_checked_before_any_cast(
    idle_api: TestClient,
    key: dict[str, str],
    arrays: dict[str, np.ndarray],
    field: str,
    index: int,
    shown: str,
):
    """The value named in the answer is the one sent, not its int64 wrap-around (-1 for
    uint64 2**64 - 1, the most negative int64 for 1e30), on both routes."""
    body = npz_bytes({"kind": "probs", "model_name": "n"}, probs=np.array(PROBS), **arrays)
    err = _refused(
        idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ}), 422, field, index
    )
    assert shown in err["message"], err
    bench = npz_bytes({"name": "b", "task": "classification", "primary_metric": "ece"}, **arrays)
    err = _refused(
        idle_api.post("/v1/benchmarks", content=bench, headers={**ADMIN, **NPZ}), 422, field, index
    )
    assert shown in err["message"], err


def test_npz_regression_groups_beyond_int64(idle_api: TestClient, key: dict[str, str]):
    groups = np.array([0, 2**63, 1], dtype=np.uint64)
    arrays = {"mean": np.zeros(3), "std": np.ones(3), "y": np.zeros(3)}
    body = npz_bytes({"kind": "gaussian", "model_name": "n"}, groups=groups, **arrays)
    err = _refused(
        idle_api.post("/v1/submissions", content=body, headers={**key, **NPZ}), 422, "groups", 1
    )
    assert str(2**63) in err["message"]
    # the largest int64 is a group like any other
    ok = npz_bytes(
        {"kind": "gaussian", "model_name": "n"},
        groups=np.array([0, 2**63 - 1, 1], dtype=np.uint64),
        **arrays,
    )
    assert idle_api.post("/v1/submissions", content=ok, headers={**key, **NPZ}).status_code == 202


def test_gzip_bodies_are_checked_the_same(idle_api: TestClient, key: dict[str, str]):
    """A gzip-encoded body is checked after decompression like a plain one (JSON and NPZ)."""
    json_body = gz(json.dumps(_probs(labels=[0, 0, 10**30])).encode())
    headers = {**key, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    _refused(idle_api.post("/v1/submissions", content=json_body, headers=headers), 422, "labels", 2)
    labels = np.array([0, 0, 2**64 - 1], dtype=np.uint64)
    npz = gz(npz_bytes({"kind": "probs", "model_name": "n"}, probs=np.array(PROBS), labels=labels))
    headers = {**key, **NPZ, "Content-Encoding": "gzip"}
    _refused(idle_api.post("/v1/submissions", content=npz, headers=headers), 422, "labels", 2)
    bench = gz(json.dumps(_classification_benchmark(labels=[10**30, 0, 1])).encode())
    headers = {**ADMIN, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    _refused(idle_api.post("/v1/benchmarks", content=bench, headers=headers), 422, "labels", 0)


# --- other numbers in the wrong form ----------------------------------------------------------


def _tokens(body: dict[str, Any], **tokens: str) -> bytes:
    """JSON of ``body`` with the placeholder strings replaced by raw tokens."""
    text = json.dumps(body)
    for placeholder, token in tokens.items():
        text = text.replace(f'"{placeholder}"', token)
    return text.encode()


SUB, BENCH = "/v1/submissions", "/v1/benchmarks"

CASES: list[tuple[str, str, bytes, int, str | None, int | None]] = [
    # floats and booleans where integers are expected
    ("float-label", SUB, _tokens(_probs(labels=[0, "X", 1]), X="1.5"), 422, "labels", 1),
    ("exp-label", SUB, _tokens(_probs(labels=[0, 0, "X"]), X="1e30"), 422, "labels", 2),
    ("bool-label", SUB, _tokens(_probs(labels=["X", 0, 1]), X="true"), 422, "labels", 0),
    ("negative-label", SUB, json.dumps(_probs(labels=[0, -1, 1])).encode(), 422, "labels", 1),
    ("float-group", SUB, _tokens(_probs(groups=[0, "X", 1]), X="2.0"), 422, "groups", 1),
    ("int-ood", SUB, _tokens(_probs(ood=[False, "X", True]), X="2"), 422, "ood", 1),
    (
        "float-seed",
        SUB,
        _tokens(_gaussian(analyses={"seed": "X"}), X="1.5"),
        422,
        "analyses.seed",
        None,
    ),
    (
        "bool-seed",
        SUB,
        _tokens(_gaussian(analyses={"seed": "X"}), X="true"),
        422,
        "analyses.seed",
        None,
    ),
    (
        "huge-seed",
        SUB,
        json.dumps(_gaussian(analyses={"seed": 2**64})).encode(),
        422,
        "analyses.seed",
        None,
    ),
    (
        "negative-seed",
        SUB,
        json.dumps(_gaussian(analyses={"seed": -1})).encode(),
        422,
        "analyses.seed",
        None,
    ),
    (
        "negative-resamples",
        SUB,
        json.dumps(_gaussian(analyses={"bootstrap": {"n_resamples": -1}})).encode(),
        422,
        "analyses.bootstrap.n_resamples",
        None,
    ),
    (
        "huge-resamples",
        SUB,
        json.dumps(_gaussian(analyses={"bootstrap": {"n_resamples": 10**30}})).encode(),
        422,
        "analyses.bootstrap.n_resamples",
        None,
    ),
    (
        "zero-repeats",
        SUB,
        json.dumps(_gaussian(analyses={"stability": {"enabled": True, "repeats": 0}})).encode(),
        422,
        "analyses.stability.repeats",
        None,
    ),
    # JSON values (metadata, metric parameters): no NaN/inf, no integer beyond 64 bits
    (
        "metadata-huge-int",
        SUB,
        json.dumps(_gaussian(metadata={"a": 10**400})).encode(),
        422,
        "metadata",
        None,
    ),
    ("metadata-nan", SUB, _tokens(_gaussian(metadata={"a": "X"}), X="NaN"), 422, "metadata", None),
    (
        "param-huge-int",
        SUB,
        json.dumps(_gaussian(analyses={"params": {"nmerci": {"alpha": 10**400}}})).encode(),
        422,
        "analyses.params",
        None,
    ),
    (
        "param-huge-exponent",
        SUB,
        _tokens(_gaussian(analyses={"params": {"ence": {"n_bins": "X"}}}), X="1e999999"),
        422,
        "analyses.params",
        None,
    ),
    (
        "bench-param-huge-int",
        BENCH,
        json.dumps(
            _regression_benchmark(metrics=["mae", "nmerci"], params={"nmerci": {"alpha": 10**400}})
        ).encode(),
        422,
        "params",
        None,
    ),
    (
        "bench-param-nan",
        BENCH,
        _tokens(
            _regression_benchmark(metrics=["mae", "nmerci"], params={"nmerci": {"alpha": "X"}}),
            X="NaN",
        ),
        422,
        "params",
        None,
    ),
    (
        "bench-param-huge-exponent",
        BENCH,
        _tokens(
            _regression_benchmark(
                metrics=["mae", "calibration_error"],
                params={"calibration_error": {"levels": ["X"]}},
            ),
            X="1e999999",
        ),
        422,
        "params",
        None,
    ),
    (
        "bench-float-seed",
        BENCH,
        _tokens(_regression_benchmark(seed="X"), X="1e3"),
        422,
        "seed",
        None,
    ),
    (
        "bench-negative-quota",
        BENCH,
        json.dumps(_regression_benchmark(quota={"per_day": -1})).encode(),
        422,
        "quota.per_day",
        None,
    ),
    (
        "bench-huge-classes",
        BENCH,
        json.dumps(_classification_benchmark(n_classes=2**64)).encode(),
        422,
        "n_classes",
        None,
    ),
    (
        "bench-bool-classes",
        BENCH,
        _tokens(_classification_benchmark(n_classes="X"), X="true"),
        422,
        "n_classes",
        None,
    ),
    # non-standard tokens and huge exponents in arrays
    ("infinity-y", SUB, _tokens(_gaussian(y=[0.0, "X", 1.0]), X="Infinity"), 422, "y", 1),
    (
        "huge-exponent-probs",
        SUB,
        _tokens(
            _probs(prediction={"kind": "probs", "probs": [["X", 0, 0], *PROBS[1:]]}), X="1e999999"
        ),
        422,
        "prediction.probs",
        0,
    ),
    ("huge-int-y", SUB, json.dumps(_gaussian(y=[0, 10**400, 1])).encode(), 422, "y", 1),
    # nesting and digits beyond what the parser takes: 400 (the body is not JSON we read)
    (
        "deep-nesting",
        SUB,
        _tokens(_gaussian(metadata={"a": "X"}), X="[" * 5000 + "]" * 5000),
        400,
        "body",
        None,
    ),
    ("5000-digit-label", SUB, _tokens(_probs(labels=["X", 0, 1]), X="9" * 5000), 400, "body", None),
]


@pytest.mark.parametrize(
    ("route", "raw", "status", "field", "index"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_numbers_in_the_wrong_form(
    idle_api: TestClient,
    key: dict[str, str],
    route: str,
    raw: bytes,
    status: int,
    field: str | None,
    index: int | None,
):
    headers = ADMIN if route == BENCH else key
    r = idle_api.post(route, content=raw, headers={**headers, "Content-Type": "application/json"})
    _refused(r, status, field, index)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/submissions?limit=100000000000000000000000000000", "limit"),
        ("/v1/submissions?limit=1e30", "limit"),
        ("/v1/submissions?limit=1.5", "limit"),
        ("/v1/submissions?limit=true", "limit"),
        ("/v1/submissions?offset=-1", "offset"),
        ("/v1/submissions?offset=NaN", "offset"),
        ("/v1/benchmarks/b/leaderboard?limit=0", "limit"),
        ("/v1/benchmarks/b/leaderboard?offset=" + "9" * 5000, "offset"),
    ],
)
def test_query_numbers(idle_api: TestClient, key: dict[str, str], path: str, field: str):
    _refused(idle_api.get(path, headers=key), 422, field, None)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/submissions?status=queued&status=running", "status"),
        ("/v1/submissions?limit=5&limit=5", "limit"),
        ("/v1/submissions?offset=0&limit=5&offset=1", "offset"),
        ("/v1/benchmarks/b/leaderboard?metric=mae&metric=crps", "metric"),
        ("/v1/metrics?task=regression&task=classification", "task"),
    ],
)
def test_a_query_parameter_given_twice_is_refused(
    idle_api: TestClient, key: dict[str, str], path: str, field: str
):
    """One value each: a second value is not silently dropped (nor the first)."""
    r = idle_api.get(path, headers=key)
    _refused(r, 422, field, None)
    assert "more than once" in error_of(r)["message"]


def test_query_parameters_a_route_does_not_declare_are_ignored(
    idle_api: TestClient, key: dict[str, str]
):
    for path in ("/v1/submissions?x=1&x=2", "/v1/benchmarks?limit=1&limit=2", "/healthz?a=1&a=1"):
        assert idle_api.get(path, headers=key).status_code == 200, path
    r = idle_api.get("/v1/submissions?status=queued&limit=5&x=1", headers=key)
    assert r.status_code == 200 and r.json()["limit"] == 5
    # The UI's pages answer as pages: the rule is the API's.
    r = idle_api.get("/ui/benchmarks/nope?metric=mae&metric=crps", headers=key)
    assert (r.status_code, r.headers["content-type"]) == (404, "text/html; charset=utf-8")


def test_path_ids(idle_api: TestClient, key: dict[str, str]):
    long = "9" * 101
    _refused(idle_api.get(f"/v1/submissions/{long}", headers=key), 422, "sub_id", None)
    for weird in ("1e999999", "-1", urllib.parse.quote("NaN\x00")):
        assert idle_api.get(f"/v1/submissions/{weird}", headers=key).status_code == 404


# --- the connection stays open -----------------------------------------------------------------


def test_keep_alive_connection_survives_a_refused_number(live_server: LiveServer):
    """One HTTP/1.1 connection: a body with 10**30 as a label, then a good one, on the same
    socket (before the fix the first answer was a 500 and the server closed the connection)."""
    url = urllib.parse.urlsplit(live_server.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/v1/admin/keys",
            json.dumps({"name": "ka"}),
            {**ADMIN, "Content-Type": "application/json"},
        )
        r = conn.getresponse()
        assert r.status == 201
        auth = {
            "Authorization": f"Bearer {json.loads(r.read())['key']}",
            "Content-Type": "application/json",
        }
        conn.auto_open = 0  # a reconnect would raise NotConnected instead of hiding a close
        sock = conn.sock
        assert sock is not None
        conn.request("POST", "/v1/submissions", json.dumps(_probs(labels=[10**30, 0, 1])), auth)
        r = conn.getresponse()
        doc = json.loads(r.read())
        assert r.status == 422, doc
        assert (doc["error"]["field"], doc["error"]["index"]) == ("labels", 0)
        assert r.getheader("connection", "").lower() != "close"
        conn.request("POST", "/v1/submissions", json.dumps(_probs()), auth)
        r = conn.getresponse()
        assert r.status == 202, r.read()
        r.read()
        assert conn.sock is sock  # the same socket carried both requests
    finally:
        conn.close()


def test_only_single_valued_query_parameters_refuse_repeats() -> None:
    """The rule reads each route's declared parameters, its dependencies' included: a list
    parameter takes repeats; a single one, declared by the route or by a dependency, does not."""

    def page(limit: int = 10) -> int:
        return limit

    app = FastAPI(dependencies=[Depends(single_query_values)])
    errors.install(app)

    @app.get("/r")
    def route(
        tag: Annotated[list[str] | None, Query()] = None,
        name: str = "",
        limit: Annotated[int, Depends(page)] = 10,
    ) -> dict[str, Any]:
        return {"tag": tag, "name": name, "limit": limit}

    with TestClient(app) as client:
        assert client.get("/r?tag=a&tag=b&name=x").json() == {
            "tag": ["a", "b"],
            "name": "x",
            "limit": 10,
        }
        for query, field in (("name=x&name=y", "name"), ("limit=1&limit=2", "limit")):
            r = client.get(f"/r?{query}")
            assert r.status_code == 422 and error_of(r)["field"] == field, r.text
