"""Plots over HTTP with the real worker: every plot a result lists loads as PNG and SVG (of a
regression and of a classification submission, of a comparison and of a leaderboard), the
list is what the registry's rules give, the errors (unknown name with did-you-mean, not
applicable, bad format, not yet succeeded, another team's), the benchmark rule (no curve
plots for non-admins), the cache (no second render, ETag and 304), and classification
results' curves equal to uqcore's own.

The submission plots are those registered in :data:`uqcore.plots.PLOTS` when the tests run,
so the tests cover every plot that is registered."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import pytest

from service.kinds import KIND_FIELDS, build_prediction, task_of
from service.store import TERMINAL, Store
from tests.factories import gaussian_arrays, gaussian_json
from tests.service._api import ADMIN, TestClient, error_of, new_key, wait_terminal
from uqcore.curves import CURVES, curve_to_json, curves
from uqcore.plots import PLOTS
from uqcore.report import json_safe

pytest_plugins = ["tests.service._api"]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def is_svg(data: bytes) -> bool:
    head = data[:4000].lstrip()
    return (head.startswith(b"<?xml") or head.startswith(b"<svg")) and b"<svg" in head


def expected_plots(
    kind: str, arrays: dict[str, Any], result: dict[str, Any], *, benchmark: bool = False
) -> set[str]:
    """The submission plots that apply, by the registry and each curve's own rule: a curve
    plot when every curve applies to the prediction and the inputs sent (none on a
    benchmark), a result-field plot when the result holds that field."""
    pred = build_prediction(
        kind, {f: np.asarray(arrays[f]) for f in KIND_FIELDS[kind] if f in arrays}
    )
    available = frozenset(k for k in ("groups", "ood") if k in arrays)
    task = task_of(kind)
    out = set()
    for name, spec in PLOTS.items():
        if spec.scope != "submission" or spec.task not in (None, task):
            continue
        if spec.curves:
            if not benchmark and all(
                c in CURVES and CURVES[c].why_not(pred, available) is None for c in spec.curves
            ):
                out.add(name)
        elif result.get(str(spec.result_field)):
            out.add(name)
    return out


def load_all(api: TestClient, headers: dict[str, str], plots: list[dict[str, Any]]) -> None:
    """GET every listed plot as PNG (the default) and as SVG."""
    for p in plots:
        assert p["url"].split("?")[0].endswith(f"/plots/{p['name']}") and p["title"], p
        r = api.get(p["url"], headers=headers)
        assert r.status_code == 200, (p["name"], r.text[:500])
        assert r.headers["content-type"] == "image/png"
        assert r.content.startswith(PNG_MAGIC), p["name"]
        assert r.headers["cache-control"].startswith("private, max-age=")
        svg = p["url"] + ("&" if "?" in p["url"] else "?") + "format=svg"
        r = api.get(svg, headers=headers)
        assert r.status_code == 200, (p["name"], r.text[:500])
        assert r.headers["content-type"].startswith("image/svg+xml")
        assert is_svg(r.content), p["name"]


def regression_arrays(n: int = 150) -> dict[str, Any]:
    a: dict[str, Any] = gaussian_arrays(n, seed=4)
    a["groups"] = np.arange(n) % 3
    return a


def submit_regression(api: TestClient, headers: dict[str, str], **analyses: Any) -> dict[str, Any]:
    a = regression_arrays()
    body = gaussian_json(
        len(a["y"]),
        seed=4,
        groups=a["groups"].tolist(),
        analyses={"metrics": ["mae", "crps", "nll"], "seed": 2, **analyses},
    )
    r = api.post("/v1/submissions", json=body, headers=headers)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, headers, r.json()["id"], timeout_s=120)
    assert doc["status"] == "succeeded", doc
    return doc


def test_regression_plots_load_and_are_cached(
    api: TestClient, submitter: dict[str, str], store: Store, worker: Any
) -> None:
    doc = submit_regression(api, submitter, stability={"enabled": True, "repeats": 3})
    result = doc["result"]
    assert result["curves"] == {}  # the curve plots are drawn from the curves the job kept
    listed = [p["name"] for p in result["plots"]]
    assert set(listed) == expected_plots("gaussian", regression_arrays(), result)
    assert len(listed) == len(set(listed))
    before = store.plots_rendered()
    load_all(api, submitter, result["plots"])
    assert store.plots_rendered() == before + 2 * len(listed)
    for p in result["plots"]:
        # a cache hit: the same bytes, not drawn again; the ETag revalidates
        first = api.get(p["url"], headers=submitter)
        assert first.status_code == 200
        etag = first.headers["etag"]
        again = api.get(p["url"], headers={**submitter, "If-None-Match": etag})
        assert again.status_code == 304 and again.headers["etag"] == etag and not again.content
        other = api.get(p["url"], headers={**submitter, "If-None-Match": '"x"'})
        assert other.status_code == 200 and other.content == first.content
    assert store.plots_rendered() == before + 2 * len(listed)

    # the plots named in no list: not applicable to this submission, with the reason
    sub = doc["id"]
    for name, spec in PLOTS.items():
        if spec.scope == "submission" and name not in listed:
            r = api.get(f"/v1/submissions/{sub}/plots/{name}", headers=submitter)
            assert r.status_code == 404, (name, r.text)
            err = error_of(r)
            assert err["field"] == "name" and name in err["message"], err
            assert "did you mean" not in err["message"]


def test_plot_errors(api: TestClient, submitter: dict[str, str], worker: Any) -> None:
    doc = submit_regression(api, submitter)
    sub = doc["id"]
    # unknown names: 404, with the closest registered names
    r = api.get(f"/v1/submissions/{sub}/plots/no_such_plot", headers=submitter)
    assert r.status_code == 404 and error_of(r)["field"] == "name"
    for p in doc["result"]["plots"]:
        typo = p["name"][:-1]
        if typo in PLOTS:
            continue
        r = api.get(f"/v1/submissions/{sub}/plots/{typo}", headers=submitter)
        assert r.status_code == 404
        message = error_of(r)["message"]
        assert "did you mean" in message and repr(p["name"]) in message, message
    # a comparison's plot is no submission plot
    r = api.get(f"/v1/submissions/{sub}/plots/forest", headers=submitter)
    assert r.status_code == 404 and "no submission plot 'forest'" in error_of(r)["message"]
    names = [p["name"] for p in doc["result"]["plots"]] or ["stability"]
    # a bad format: 422 naming it
    r = api.get(f"/v1/submissions/{sub}/plots/{names[0]}?format=jpg", headers=submitter)
    assert r.status_code == 422 and error_of(r)["field"] == "format"
    # another team's private submission: 404 as an unknown id; public: readable
    other = new_key(api, "other-team")
    for name in names:
        r = api.get(f"/v1/submissions/{sub}/plots/{name}", headers=other)
        assert r.status_code == 404 and error_of(r)["field"] == "sub_id"
    r = api.patch(f"/v1/submissions/{sub}", json={"visibility": "public"}, headers=submitter)
    assert r.status_code == 200, r.text
    for p in doc["result"]["plots"]:
        assert api.get(p["url"], headers=other).status_code == 200
    # no key: 401
    assert api.get(f"/v1/submissions/{sub}/plots/{names[0]}").status_code == 401
    # a deleted submission's plots go with it
    assert api.delete(f"/v1/submissions/{sub}", headers=submitter).status_code == 204
    r = api.get(f"/v1/submissions/{sub}/plots/{names[0]}", headers=submitter)
    assert r.status_code == 404 and error_of(r)["field"] == "sub_id"


def test_a_queued_submission_has_no_plots_yet(idle_api: TestClient, idle_settings: Any) -> None:
    key = new_key(idle_api, "idle")
    r = idle_api.post("/v1/submissions", json=gaussian_json(8), headers=key)
    assert r.status_code == 202
    sub = r.json()["id"]
    for name in [n for n, s in PLOTS.items() if s.scope == "submission"][:2]:
        r = idle_api.get(f"/v1/submissions/{sub}/plots/{name}", headers=key)
        assert r.status_code == 409, r.text
        assert "queued" in error_of(r)["message"]


def _ensemble(n: int = 90, c: int = 3, m: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    labels = rng.integers(0, c, size=n)
    ood = rng.random(n) < 0.3
    logits = 2.0 * np.eye(c)[labels][None] + np.where(ood, 2.0, 0.6)[None, :, None] * rng.normal(
        size=(m, n, c)
    )
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return {"member_probs": e / e.sum(axis=-1, keepdims=True), "labels": labels, "ood": ood}


def _close(a: Any, b: Any) -> bool:
    """Equal JSON values, numbers within floating-point rounding."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def test_classification_curves_and_plots(
    api: TestClient, submitter: dict[str, str], worker: Any
) -> None:
    a = _ensemble()
    body = {
        "model_name": "ens",
        "prediction": {"kind": "ensemble", "member_probs": a["member_probs"].tolist()},
        "labels": a["labels"].tolist(),
        "ood": a["ood"].tolist(),
        "analyses": {
            "metrics": ["accuracy", "nll", "auroc_ood"],
            "estimators": "all",
            "curves": True,
            "stability": {"enabled": True, "repeats": 3},
            "seed": 5,
        },
    }
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"], timeout_s=120)
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    # every curve that applies, equal to uqcore's own computation on the same inputs
    pred = build_prediction("ensemble", {"member_probs": a["member_probs"]})
    own = curves(pred, a["labels"], "all", ood=a["ood"], seed=5)
    assert set(result["curves"]) == set(own)
    for name, curve in own.items():
        reference = json.loads(json.dumps(json_safe(curve_to_json(curve), name, [])))
        assert _close(result["curves"][name], reference), name
    listed = [p["name"] for p in result["plots"]]
    assert set(listed) == expected_plots("ensemble", a, result)
    load_all(api, submitter, result["plots"])


def _bench(api: TestClient) -> str:
    y = regression_arrays()["y"]
    body = {
        "name": "plots-bench",
        "primary_metric": "crps",
        "metrics": ["crps", "mae"],
        "bootstrap": {"n_resamples": 30},
        "seed": 5,
        "y": y.tolist(),
    }
    r = api.post("/v1/benchmarks", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _bench_submission(api: TestClient, headers: dict[str, str], bench: str, scale: float) -> str:
    a = regression_arrays()
    body = {
        "model_name": f"gauss-{scale}",
        "benchmark_id": bench,
        "visibility": "public",
        "prediction": {
            "kind": "gaussian",
            "mean": a["mean"].tolist(),
            "std": (scale * a["std"]).tolist(),
        },
    }
    r = api.post("/v1/submissions", json=body, headers=headers)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, headers, r.json()["id"], timeout_s=120)
    assert doc["status"] == "succeeded", doc
    return str(doc["id"])


def test_benchmark_submission_plots_follow_the_benchmark_rule(
    api: TestClient, submitter: dict[str, str], worker: Any
) -> None:
    bench = _bench(api)
    sub = _bench_submission(api, submitter, bench, 1.0)
    doc = api.get(f"/v1/submissions/{sub}", headers=submitter).json()
    result = doc["result"]
    assert result["curves"] == {}
    listed = [p["name"] for p in result["plots"]]
    a = {k: v for k, v in regression_arrays().items() if k != "groups"}  # none on the benchmark
    assert set(listed) == expected_plots("gaussian", a, result, benchmark=True)
    assert all(not PLOTS[n].curves for n in listed)
    load_all(api, submitter, result["plots"])
    # the curve plots that would apply: 404 for the submitter, saying why; drawn for an admin
    # (from the prediction and the hidden targets)
    curve_plots = sorted(n for n in expected_plots("gaussian", a, result) if PLOTS[n].curves)
    for name in curve_plots:
        r = api.get(f"/v1/submissions/{sub}/plots/{name}", headers=submitter)
        assert r.status_code == 404, r.text
        assert "hidden targets" in error_of(r)["message"]
        r = api.get(f"/v1/submissions/{sub}/plots/{name}", headers=ADMIN)
        assert r.status_code == 200, (name, r.text[:300])
        assert r.content.startswith(PNG_MAGIC)
    # one that needs an input the benchmark lacks: 404 with the reason, for the admin too
    for name, spec in PLOTS.items():
        applies = spec.scope == "submission" and spec.task in (None, "regression")
        if applies and spec.curves and name not in curve_plots:
            r = api.get(f"/v1/submissions/{sub}/plots/{name}", headers=ADMIN)
            assert r.status_code == 404 and name in error_of(r)["message"], r.text


def test_comparison_and_leaderboard_plots(
    api: TestClient, submitter: dict[str, str], store: Store, worker: Any
) -> None:
    bench = _bench(api)
    subs = [_bench_submission(api, submitter, bench, s) for s in (1.0, 1.6)]
    r = api.post(
        "/v1/comparisons",
        json={"benchmark_id": bench, "submission_ids": subs},
        headers=submitter,
    )
    assert r.status_code == 202, r.text
    url = r.json()["status_url"]
    cmp_id = r.json()["id"]
    deadline = time.monotonic() + 120
    while (detail := api.get(url, headers=submitter).json())["status"] not in TERMINAL:
        assert detail["plots"] == [] and time.monotonic() < deadline, detail
        time.sleep(0.05)
    assert detail["status"] == "succeeded", detail
    assert detail["plots"] == [
        {
            "name": "forest",
            "title": PLOTS["forest"].title,
            "url": f"/v1/comparisons/{cmp_id}/plots/forest",
        }
    ]
    load_all(api, submitter, detail["plots"])
    r = api.get(f"/v1/comparisons/{cmp_id}/plots/forst", headers=submitter)
    assert r.status_code == 404 and "did you mean 'forest'" in error_of(r)["message"]
    other = new_key(api, "other-team")
    r = api.get(f"/v1/comparisons/{cmp_id}/plots/forest", headers=other)
    assert r.status_code == 404 and error_of(r)["field"] == "cmp_id"

    # the leaderboard: its answer lists its plot for the same query; every key reads it
    # (once its rank intervals are current: the plot is of the board as it is)
    deadline = time.monotonic() + 120
    query = f"/v1/benchmarks/{bench}/leaderboard?metric=mae"
    while (board := api.get(query, headers=submitter).json())["ranks"]["status"] != "current":
        assert time.monotonic() < deadline, board
        time.sleep(0.05)
    assert len(board["entries"]) == 1  # one team
    assert [p["name"] for p in board["plots"]] == ["leaderboard"]
    assert board["plots"][0]["url"] == f"/v1/benchmarks/{bench}/plots/leaderboard?metric=mae"
    load_all(api, other, board["plots"])
    before = store.plots_rendered()
    r = api.get(board["plots"][0]["url"], headers=submitter)
    assert r.status_code == 200 and store.plots_rendered() == before
    r304 = api.get(
        board["plots"][0]["url"], headers={**submitter, "If-None-Match": r.headers["etag"]}
    )
    assert r304.status_code == 304
    r = api.get(f"/v1/benchmarks/{bench}/plots/leaderboard?metric=nope", headers=submitter)
    assert r.status_code == 422 and error_of(r)["field"] == "metric"
    r = api.get(f"/v1/benchmarks/{bench}/plots/leaderbord", headers=submitter)
    assert r.status_code == 404 and "did you mean 'leaderboard'" in error_of(r)["message"]
    r = api.get("/v1/benchmarks/nobench/plots/leaderboard", headers=submitter)
    assert r.status_code == 404 and error_of(r)["field"] == "bench_id"


def test_concurrent_misses_queue_one_render_and_wait_bounded(idle_settings: Any) -> None:
    """With no worker on its database: N simultaneous requests for the same missing plot
    publish one render task, and each answers 503 with Retry-After after plot_timeout_s."""
    from concurrent.futures import ThreadPoolExecutor

    from service.api.app import create_app
    from service.store import now_iso
    from tests.stack import clear_store
    from tests.uqcore.plots.test_compare_plots import comparison_doc

    settings = idle_settings.model_copy(update={"plot_timeout_s": 1.0})
    store = Store.from_url(settings.redis_url, settings)
    store.client.flushdb()
    try:
        cmp_id = "cmp_concurrent"
        store.create_comparison(
            {"id": cmp_id, "owner": "key_x", "created_at": now_iso(), "request": {}}
        )
        store.set_comparison_status(cmp_id, "succeeded", result=comparison_doc())
        with TestClient(create_app(settings, store=store)) as client:
            url = f"/v1/comparisons/{cmp_id}/plots/forest"
            start = time.monotonic()
            with ThreadPoolExecutor(6) as pool:
                answers = list(pool.map(lambda _: client.get(url, headers=ADMIN), range(6)))
            elapsed = time.monotonic() - start
        assert [a.status_code for a in answers] == [503] * 6
        assert all(a.headers["retry-after"].isdigit() for a in answers)
        assert "still being drawn" in error_of(answers[0])["message"]
        assert 1.0 <= elapsed < 20.0
        messages = [json.loads(m) for m in store.client.lrange("cpu", 0, -1)]
        renders = [m for m in messages if m["headers"]["task"] == "uqeval.render_plot"]
        assert len(renders) == 1, messages
        assert (
            "'comparison', 'cmp_concurrent', 'forest', 'png'" in renders[0]["headers"]["argsrepr"]
        )
    finally:
        clear_store(store)
        store.client.flushdb()
        store.close()


@pytest.mark.parametrize("form", ["current", "legacy", "damaged"])
def test_curve_plots_outlive_the_raw_arrays(
    api: TestClient, submitter: dict[str, str], store: Store, worker: Any, form: str
) -> None:
    """The job keeps the curves at its end; once the raw arrays are gone (their retention
    ended: deleted here), every listed curve plot is still drawn, from those curves, and
    they are the curves uqcore computes from the prediction. Curves kept by earlier versions
    (zlib-compressed JSON) draw the same; kept curves that cannot be read are drawn from the
    arrays while those are kept."""
    import zlib

    import orjson

    from service import keys
    from worker.plots import decode_curves

    doc = submit_regression(api, submitter)
    sub = doc["id"]
    kept = store.get_curves(sub)
    assert kept is not None
    # packed while the metrics' helper thread drew the groups, its time apart from theirs
    assert doc["result"]["provenance"]["timings_s"]["plot_curves"] > 0
    a = regression_arrays()
    pred = build_prediction("gaussian", {f: np.asarray(a[f]) for f in KIND_FIELDS["gaussian"]})
    want = curves(pred, a["y"], groups=a["groups"], seed=2)
    notes: list[str] = []
    assert decode_curves(kept) == {
        n: json_safe(curve_to_json(c), n, notes) for n, c in want.items()
    }
    if form == "legacy":
        store.put_curves(sub, zlib.compress(orjson.dumps(decode_curves(kept))))
    if form == "damaged":
        store.put_curves(sub, kept[:-1])
    else:
        store.client.delete(keys.arrays(sub))
        assert store.load_arrays(sub) is None
    curve_plots = [p for p in doc["result"]["plots"] if PLOTS[p["name"]].curves]
    assert curve_plots
    load_all(api, submitter, curve_plots)
    assert api.delete(f"/v1/submissions/{sub}", headers=submitter).status_code == 204
    assert store.get_curves(sub) is None
