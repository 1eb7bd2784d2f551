"""The leaderboard route's answer cache over HTTP, with the real worker: a cached answer is
byte for byte the answer rendered afresh (JSON and CSV), it is the same for every key, and it
is never served once the state it shows has changed — a new succeeded submission, a deletion,
a visibility change, a benchmark PATCH (name, baseline, metrics shown, rule), a new rank
document, the deletion of a private baseline, the claim of a lost rank job lapsing (the next
read queues the job again); a private submission never appears in a cached answer; and a
cached answer is served only after the same authentication and rate count as every other
route.

A read is shown to come from the cache by planting a marker in the cached body (in Redis,
beside its stamp): a read that answers the marker was served from the cache; after an event,
a read that still answers it would be a stale answer.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import numpy as np
import pytest

from service import keys
from service.api.app import create_app
from service.api.routes.leaderboards import page_key
from service.settings import Settings
from service.store import Ranking, Store
from tests.service._api import ADMIN, TestClient, error_of, wait_terminal

pytest_plugins = ["tests.service._api"]

N = 60
B = 40
SEED = 5
MARK = b"marker: served from the cache"
ROUTE = "/v1/benchmarks/{}/leaderboard"


def targets() -> np.ndarray:
    return np.random.default_rng(321).normal(size=N)


def prediction(scale: float, seed: int) -> dict[str, list[float]]:
    """A Gaussian prediction whose mean is off the targets by noise of size ``scale``."""
    rng = np.random.default_rng(seed)
    mean = targets() + scale * rng.normal(size=N)
    return {"kind": "gaussian", "mean": mean.tolist(), "std": [0.5 + scale] * N}


def new_bench(api: TestClient, **fields: Any) -> str:
    body = {
        "name": "cached",
        "primary_metric": "mae",
        "metrics": ["mae", "crps"],
        "bootstrap": {"n_resamples": B},
        "seed": SEED,
        "y": targets().tolist(),
        **fields,
    }
    r = api.post("/v1/benchmarks", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    bench_id: str = r.json()["id"]
    return bench_id


def team(api: TestClient, name: str) -> dict[str, str]:
    """Headers of a submitter key of a new team."""
    team_id = api.post("/v1/admin/teams", json={"name": name}, headers=ADMIN).json()["team_id"]
    r = api.post("/v1/admin/keys", json={"name": name, "team_id": team_id}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def submit(
    api: TestClient,
    key: dict[str, str],
    bench_id: str,
    scale: float,
    seed: int,
    visibility: str = "public",
) -> str:
    body = {
        "model_name": f"m{seed}",
        "metadata": {"seed": seed},
        "visibility": visibility,
        "benchmark_id": bench_id,
        "prediction": prediction(scale, seed),
    }
    r = api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 202, r.text
    sub_id: str = r.json()["id"]
    assert wait_terminal(api, key, sub_id)["status"] == "succeeded"
    return sub_id


def get(api: TestClient, key: dict[str, str], bench_id: str, **params: Any) -> httpx.Response:
    r = api.get(ROUTE.format(bench_id), params=params, headers=key)
    assert r.status_code == 200, r.text
    return r


def page_of(bench_id: str, **params: Any) -> str:
    """The Redis key of the cached answer to ``params``."""
    return page_key(
        bench_id,
        params.get("metric"),
        params.get("estimator"),
        int(params.get("offset", 0)),
        int(params.get("limit", 50)),
        params.get("format", "json"),
    )


def wait_current(
    api: TestClient, key: dict[str, str], bench_id: str, **params: Any
) -> dict[str, Any]:
    """Read until the rank intervals are current (the JSON answer tells; a CSV one is read
    once they are); every answer on the way must be a real one (never the marker of an
    earlier cached answer). Returns the JSON answer."""
    as_json = {k: v for k, v in params.items() if k != "format"}
    deadline = time.monotonic() + 90
    while True:
        r = get(api, key, bench_id, **as_json)
        assert r.content != MARK, "a stale cached answer was served"
        doc: dict[str, Any] = r.json()
        if doc["ranks"]["status"] == "current":
            break
        assert time.monotonic() < deadline, doc["ranks"]
        time.sleep(0.1)
    if params.get("format") == "csv":
        assert get(api, key, bench_id, **params).content != MARK, "a stale cached answer"
    return doc


def prime(
    api: TestClient, store: Store, key: dict[str, str], bench_id: str, **params: Any
) -> dict[str, Any]:
    """Wait for a current answer, check it is cached, plant the marker in the cached body and
    check that a read answers it (the next read comes from the cache). Returns the answer."""
    doc = wait_current(api, key, bench_id, **params)
    page = page_of(bench_id, **params)
    assert store.client.hexists(page, "stamp"), "a current answer is cached"
    store.client.hset(page, "body", MARK)
    assert get(api, key, bench_id, **params).content == MARK
    return doc


def fresh(api: TestClient, store: Store, key: dict[str, str], bench_id: str, **params: Any):
    """The answer rendered afresh (the cached one removed first)."""
    store.client.delete(page_of(bench_id, **params))
    return get(api, key, bench_id, **params)


def after_event(
    api: TestClient, store: Store, key: dict[str, str], bench_id: str, **params: Any
) -> dict[str, Any]:
    """The first (JSON) read after an event: never the marker; once current, the cached
    answer equals the one rendered afresh."""
    r = get(api, key, bench_id, **params)
    assert r.content != MARK, "a stale cached answer was served"
    wait_current(api, key, bench_id, **params)
    cached = get(api, key, bench_id, **params)
    assert cached.content == fresh(api, store, key, bench_id, **params).content
    doc: dict[str, Any] = r.json()
    return doc


def ids(doc: dict[str, Any]) -> list[str]:
    return [e["submission_id"] for e in doc["entries"]]


QUERIES: list[dict[str, Any]] = [
    {},
    {"format": "csv"},
    {"metric": "crps"},
    {"metric": "mae", "format": "csv"},
    {"offset": 1, "limit": 2},
    {"offset": 5},
]


def test_a_cached_answer_is_the_fresh_answer_for_every_key_json_and_csv(
    api: TestClient, store: Store, worker: object
):
    bench = new_bench(api)
    red, blue, gold = team(api, "red"), team(api, "blue"), team(api, "gold")
    submit(api, red, bench, 0.1, 1)
    submit(api, blue, bench, 0.4, 2)
    submit(api, gold, bench, 0.4, 2)  # tied with blue
    base = submit(api, ADMIN, bench, 0.6, 3, visibility="private")
    r = api.patch(f"/v1/benchmarks/{bench}", json={"baseline_id": base}, headers=ADMIN)
    assert r.status_code == 200, r.text
    for params in QUERIES:
        wait_current(api, red, bench, **params)
        page = page_of(bench, **params)
        first = fresh(api, store, red, bench, **params)  # rendered, then cached
        assert store.client.hexists(page, "stamp"), params
        hits = [get(api, k, bench, **params) for k in (red, blue, ADMIN)]
        for r in hits:
            assert r.content == first.content, params
            assert r.headers["content-type"] == first.headers["content-type"]
            assert r.headers.get("content-disposition") == first.headers.get("content-disposition")
        # Those were hits: the marker comes back; without the cached answer, the same bytes.
        store.client.hset(page, "body", MARK)
        assert get(api, blue, bench, **params).content == MARK
        assert fresh(api, store, blue, bench, **params).content == first.content
    csv = get(api, red, bench, format="csv")
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.headers["content-disposition"] == f'attachment; filename="{bench}-mae.csv"'
    doc = get(api, red, bench).json()
    assert doc["baseline"]["is_baseline"] is True
    assert [e["rank"] for e in doc["entries"]] == [1, 2, 2]
    assert ids(get(api, red, bench, offset=5).json()) == []


def test_submissions_deletions_and_visibility_changes_reach_cached_answers(
    api: TestClient, store: Store, worker: object
):
    bench = new_bench(api)
    red, blue = team(api, "red"), team(api, "blue")
    good = submit(api, red, bench, 0.1, 1)
    other = submit(api, blue, bench, 0.5, 2)
    hidden = submit(api, blue, bench, 0.01, 3, visibility="private")
    for params in ({"format": "csv"}, {}):  # (the CSV first: its wait reads the JSON)
        prime(api, store, red, bench, **params)

    # A new succeeded submission.
    worse = submit(api, red, bench, 0.9, 4)
    doc = after_event(api, store, red, bench)
    assert doc["total"] == 2 and ids(doc) == [good, other]
    prime(api, store, red, bench, metric="crps")
    newcomer = submit(api, team(api, "gold"), bench, 0.3, 5)
    doc = after_event(api, store, red, bench, metric="crps")
    assert doc["total"] == 3 and newcomer in ids(doc)

    # A deletion: red falls back to its other submission.
    prime(api, store, red, bench)
    assert api.delete(f"/v1/submissions/{good}", headers=red).status_code == 204
    doc = after_event(api, store, red, bench)
    assert good not in ids(doc) and worse in ids(doc)

    # Visibility: private leaves the board, public enters it.
    prime(api, store, red, bench)
    r = api.patch(f"/v1/submissions/{hidden}", json={"visibility": "public"}, headers=blue)
    assert r.status_code == 200, r.text
    doc = after_event(api, store, red, bench)
    assert ids(doc)[0] == hidden
    prime(api, store, red, bench, format="csv")
    r = api.patch(f"/v1/submissions/{hidden}", json={"visibility": "private"}, headers=blue)
    assert r.status_code == 200, r.text
    r = get(api, red, bench, format="csv")
    assert r.content != MARK and hidden not in r.text

    # No cached answer ever holds the private submission.
    wait_current(api, red, bench)
    wait_current(api, red, bench, format="csv")
    for params in ({}, {"format": "csv"}):
        body = store.client.hget(page_of(bench, **params), "body")
        assert body is not None and hidden.encode() not in body
        assert hidden not in get(api, blue, bench, **params).text


def test_benchmark_changes_reach_cached_answers(api: TestClient, store: Store, worker: object):
    bench = new_bench(api)
    red, blue = team(api, "red"), team(api, "blue")
    a = submit(api, red, bench, 0.1, 1)
    b = submit(api, blue, bench, 0.5, 2)
    base = submit(api, ADMIN, bench, 0.3, 3, visibility="private")

    def patch(body: dict[str, Any]) -> None:
        r = api.patch(f"/v1/benchmarks/{bench}", json=body, headers=ADMIN)
        assert r.status_code == 200, r.text

    # Metadata the answer does not show: still a new stamp (the record is part of it).
    prime(api, store, red, bench)
    patch({"name": "renamed", "description": "new"})
    assert after_event(api, store, red, bench)["entries"]

    # A baseline: its row appears (private: shown, not ranked), then goes with the baseline.
    prime(api, store, red, bench)
    patch({"baseline_id": base})
    doc = after_event(api, store, red, bench)
    assert doc["baseline"]["model_name"] == "baseline" and doc["baseline"]["rank"] == 2
    prime(api, store, red, bench)
    patch({"baseline_id": None})
    assert after_event(api, store, red, bench)["baseline"] is None

    # The primary metric (the default answer's metric) and the metrics shown.
    prime(api, store, red, bench)
    patch({"primary_metric": "crps", "metrics": ["crps", "mae"]})
    assert after_event(api, store, red, bench)["metric"] == "crps"
    prime(api, store, red, bench, metric="mae")
    patch({"primary_metric": "crps", "metrics": ["crps"]})
    r = api.get(ROUTE.format(bench), params={"metric": "mae"}, headers=red)
    assert r.status_code == 422 and error_of(r)["field"] == "metric"

    # The rule: latest per team.
    prime(api, store, red, bench)
    patch({"rule": "latest"})
    doc = after_event(api, store, red, bench)
    assert doc["rule"] == "latest" and set(ids(doc)) == {a, b}

    # A deleted benchmark: 404, whatever was cached.
    prime(api, store, red, bench)
    assert api.delete(f"/v1/benchmarks/{bench}", headers=ADMIN).status_code == 204
    r = api.get(ROUTE.format(bench), headers=red)
    assert r.status_code == 404 and error_of(r)["field"] == "bench_id"


def test_rank_documents_and_a_private_baseline_reach_cached_answers(
    api: TestClient, store: Store, worker: object
):
    bench = new_bench(api)
    red, blue = team(api, "red"), team(api, "blue")
    submit(api, red, bench, 0.1, 1)
    submit(api, blue, bench, 0.5, 2)
    page = page_of(bench)
    prime(api, store, red, bench)

    # A new rank document for the same board version (as a recomputation writes it).
    ranks = store.get_ranks(bench, "mae", "best")
    assert ranks is not None
    first = next(iter(ranks["entries"]))
    ranks["entries"][first]["p_best"] = 0.123
    store.put_ranks(bench, "mae", "best", ranks)
    doc = after_event(api, store, red, bench)
    assert {e["submission_id"]: e for e in doc["entries"]}[first]["p_best"] == 0.123

    # A new submission: the answer says stale (it may be cached as such) until the rank job
    # stored the new document; then the current answer is the cached one.
    prime(api, store, red, bench)
    submit(api, team(api, "gold"), bench, 0.3, 3)
    doc = after_event(api, store, red, bench)
    assert doc["total"] == 3
    assert store.client.hget(page, "body") == get(api, red, bench).content

    # A private baseline, deleted: its row goes, though the boards did not change.
    base = submit(api, ADMIN, bench, 0.2, 4, visibility="private")
    r = api.patch(f"/v1/benchmarks/{bench}", json={"baseline_id": base}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert prime(api, store, red, bench)["baseline"]["is_baseline"] is True
    version = store.leaderboard_version(bench)
    assert api.delete(f"/v1/submissions/{base}", headers=ADMIN).status_code == 204
    assert store.leaderboard_version(bench) == version
    assert after_event(api, store, red, bench)["baseline"] is None


def test_cached_answers_need_a_live_key_and_count_against_its_rate_limit(
    settings: Settings, store: Store, worker: object
):
    limit = 6
    # A long window: the burst below does not straddle two windows.
    limited = {"rate_limit": limit, "rate_limit_window_s": 3600}
    app = create_app(settings.model_copy(update=limited), store=store)
    with TestClient(app) as api:
        bench = new_bench(api)
        red = team(api, "red")
        submit(api, red, bench, 0.1, 1)
        prime(api, store, ADMIN, bench)
        path = ROUTE.format(bench)
        revoked_key = api.post("/v1/admin/keys", json={"name": "gone"}, headers=ADMIN).json()
        api.delete(f"/v1/admin/keys/{revoked_key['key_id']}", headers=ADMIN)
        for headers in (
            {},
            {"Authorization": "Bearer uqe_wrong"},
            {"X-API-Key": "uqe_wrong"},
            {"Authorization": f"Bearer {revoked_key['key']}"},
        ):
            r = api.get(path, headers=headers)
            assert r.status_code == 401, headers
            assert r.headers["WWW-Authenticate"].startswith("Bearer")
            # The answer of every other route to the same key.
            other = api.get(f"/v1/benchmarks/{bench}", headers=headers)
            assert r.json() == other.json()
        # The key's budget is shared with the other routes: leaderboard reads (cached
        # answers included) and others, then 429 with Retry-After on both.
        fresh_key = team(api, "blue")
        statuses = []
        for i in range(limit + 2):
            route = path if i % 2 == 0 else f"/v1/benchmarks/{bench}"
            statuses.append(api.get(route, headers=fresh_key).status_code)
        assert statuses[:limit] == [200] * limit
        assert statuses[limit:] == [429, 429]
        r = api.get(path, headers=fresh_key)
        other = api.get(f"/v1/benchmarks/{bench}", headers=fresh_key)
        assert r.status_code == other.status_code == 429
        assert 1 <= int(r.headers["Retry-After"]) <= 3600
        assert error_of(r)["code"] == "rate_limited"
        assert (
            error_of(r)["message"].split("; retry in")[0]
            == (error_of(other)["message"].split("; retry in")[0])
        )
        # Admin keys are not limited; the cached answer is still served to them.
        for _ in range(limit + 2):
            assert api.get(path, headers=ADMIN).content == MARK


@pytest.mark.parametrize("params", [{"metric": "nll"}, {"estimator": "entropy_bma"}])
def test_refused_queries_are_not_cached(api: TestClient, store: Store, params: dict[str, Any]):
    bench = new_bench(api)
    r = api.get(ROUTE.format(bench), params=params, headers=ADMIN)
    assert r.status_code == 422
    assert error_of(r)["field"] == next(iter(params))
    assert not store.client.exists(page_of(bench, **params))


def test_a_cached_answer_is_not_served_once_the_rank_job_claim_lapses(idle_api: TestClient):
    """On a database without a worker (rank jobs stay queued): a read that finds the rank
    document missing claims and queues the job; once the claim lapses (a lost job), the next
    read is not answered from the cache: it renders and queues the job again."""
    settings: Settings = idle_api.app.state.settings  # type: ignore[attr-defined]
    assert settings.redis_url is not None
    store = Store.from_url(settings.redis_url, settings)
    try:
        bench = new_bench(idle_api)
        red = team(idle_api, "red")
        body = {"model_name": "m", "benchmark_id": bench, "prediction": prediction(0.1, 1)}
        r = idle_api.post("/v1/submissions", json={**body, "visibility": "public"}, headers=red)
        assert r.status_code == 202, r.text
        # The worker's part, written as it writes it: the result with the board entry.
        record = store.get_submission(r.json()["id"])
        assert record is not None and record.team is not None
        assert store.mark_running(record.id, "w", 5.0, 3)[0] == "started"
        ranking = Ranking(bench, record.team, record.created_ts, {"mae": (0.2, {"value": 0.2})})
        assert store.finish(record.id, {"metrics": {}}, 0.1, ranking=ranking) == "succeeded"

        lock = keys.ranks_lock(bench, "mae", "best")
        page = page_of(bench)
        first = get(idle_api, red, bench).json()
        assert first["ranks"]["status"] == "computing" and first["total"] == 1
        assert store.client.exists(lock)  # claimed and queued by that read: not cached
        assert not store.client.exists(page)
        assert get(idle_api, red, bench).json() == first
        assert store.client.hexists(page, "stamp")  # claimed before: cached
        store.client.hset(page, "body", MARK)
        assert get(idle_api, red, bench).content == MARK
        store.client.delete(lock)  # the claim lapses: its job was lost
        again = get(idle_api, red, bench)
        assert again.content != MARK and again.json() == first
        assert store.client.exists(lock)  # queued again
    finally:
        store.close()
