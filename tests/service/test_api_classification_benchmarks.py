"""Classification benchmarks over HTTP with the real worker: hidden labels, soft labels and OOD
flags (never readable back), probs and ensemble submissions checked before the 202 (N, kind,
classes), leaderboards per metric and per estimator in both directions, and bootstrap
intervals, rank intervals and separability flags equal to uqcore run directly with the same
seed on the same labels, OOD flags and soft labels."""

from __future__ import annotations

import csv
import io
import json
import time
from typing import Any

import numpy as np
import pytest

import uqcore
from service.store import Store
from tests.factories import npz_bytes
from tests.service._api import ADMIN, NPZ, TestClient, error_of, new_key, wait_terminal
from uqcore.predictions import classification as PC
from uqcore.stability import bootstrap, compare, rank_distribution

pytest_plugins = ["tests.service._api"]

N, C, M = 80, 4, 5
B = 40
SEED = 13
ESTIMATORS = ["mutual_information", "entropy_bma", "score"]
METRICS = ["accuracy", "auroc_ood", "nll", "aurc", "aleatoric_rank_corr"]


def hidden() -> dict[str, np.ndarray]:
    """The hidden targets: labels, soft labels around them, and OOD flags (seeded)."""
    rng = np.random.default_rng(2024)
    labels = rng.integers(0, C, size=N)
    soft = 0.7 * np.eye(C)[labels] + 0.3 * rng.dirichlet(np.ones(C), size=N)
    ood = rng.random(N) < 0.3
    return {"labels": labels, "soft_labels": soft, "ood": ood}


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ensemble(quality: float, seed: int) -> np.ndarray:
    """M×N×C member probabilities: peaked on the label by ``quality``; the members disagree
    more on the OOD rows (so epistemic estimators separate them)."""
    t = hidden()
    rng = np.random.default_rng(seed)
    spread = np.where(t["ood"], 2.0, 0.5)[None, :, None]
    logits = quality * np.eye(C)[t["labels"]][None] + spread * rng.normal(size=(M, N, C))
    return _softmax(logits)


def score(seed: int) -> np.ndarray:
    """A named estimate: higher on the OOD rows, with noise."""
    rng = np.random.default_rng(seed)
    return hidden()["ood"] + rng.normal(scale=0.8, size=N)


def bench_body(**fields: Any) -> dict[str, Any]:
    t = hidden()
    body: dict[str, Any] = {
        "name": "cls-hidden",
        "task": "classification",
        "primary_metric": "accuracy",
        "metrics": METRICS,
        "estimators": ESTIMATORS,
        "bootstrap": {"n_resamples": B},
        "seed": SEED,
        "labels": t["labels"].tolist(),
        "soft_labels": t["soft_labels"].tolist(),
        "ood": t["ood"].tolist(),
    }
    body.update(fields)
    return body


def create(client: TestClient, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/benchmarks", json=bench_body(**fields), headers=ADMIN)
    assert r.status_code == 201, r.text
    doc: dict[str, Any] = r.json()
    return doc


def ensemble_json(bench_id: str, members: np.ndarray, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model_name": "ens",
        "benchmark_id": bench_id,
        "visibility": "public",
        "prediction": {"kind": "ensemble", "member_probs": members.tolist()},
    }
    body.update(fields)
    return body


def probs_json(bench_id: str, probs: np.ndarray, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model_name": "softmax",
        "benchmark_id": bench_id,
        "visibility": "public",
        "prediction": {"kind": "probs", "probs": probs.tolist()},
    }
    body.update(fields)
    return body


def direct(pred: Any, metrics: list[str], estimators: list[str] | None = None) -> Any:
    t = hidden()
    return uqcore.evaluate(
        pred,
        t["labels"],
        metrics,
        estimators=estimators,
        ood=t["ood"],
        soft_labels=t["soft_labels"],
    )


# --------------------------------------------------------------------------------------------
# creation
# --------------------------------------------------------------------------------------------


def test_create_get_update_without_targets(api: TestClient, submitter: dict[str, str]) -> None:
    created = create(api)
    assert created["task"] == "classification"
    assert created["n"] == N
    assert created["n_classes"] == C  # the width of the soft labels
    assert created["has_soft_labels"] is True and created["has_ood"] is True
    assert created["estimators"] == ESTIMATORS
    assert created["kinds"] == ["probs", "logits", "ensemble", "dirichlet", "prediction_set"]
    assert created["metrics"] == METRICS
    for hidden_field in ("labels", "soft_labels", "ood", "y", "label_max"):
        assert hidden_field not in created
    got = api.get(f"/v1/benchmarks/{created['id']}", headers=submitter)
    assert got.status_code == 200 and got.json() == created

    # Estimators can be changed; on a regression benchmark they are refused.
    bid = created["id"]
    r = api.patch(f"/v1/benchmarks/{bid}", json={"estimators": ["entropy_bma"]}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["estimators"] == ["entropy_bma"]
    r = api.patch(f"/v1/benchmarks/{bid}", json={"metrics": ["accuracy", "mae"]}, headers=ADMIN)
    assert r.status_code == 422
    assert (error_of(r)["field"], error_of(r)["index"]) == ("metrics", 1)
    # A regression metric's own "estimator" option (the CRPS estimator of samples) is no
    # uncertainty estimator: any valid value is kept, and its board takes no estimator.
    reg = api.post(
        "/v1/benchmarks",
        json={
            "name": "reg",
            "primary_metric": "crps",
            "params": {"crps": {"estimator": "fair"}},
            "y": [0.0, 1.0, 2.0],
        },
        headers=ADMIN,
    )
    assert reg.status_code == 201, reg.text
    assert reg.json()["task"] == "regression" and reg.json()["n_classes"] is None
    board = api.get(f"/v1/benchmarks/{reg.json()['id']}/leaderboard", headers=ADMIN).json()
    assert board["metric"] == "crps" and board["estimator"] is None
    r = api.get(
        f"/v1/benchmarks/{reg.json()['id']}/leaderboard",
        params={"estimator": "fair"},
        headers=ADMIN,
    )
    assert r.status_code == 422 and error_of(r)["field"] == "estimator"
    assert "classification benchmarks only" in error_of(r)["message"]
    r = api.patch(
        f"/v1/benchmarks/{reg.json()['id']}", json={"estimators": ["entropy_bma"]}, headers=ADMIN
    )
    assert r.status_code == 422 and error_of(r)["field"] == "estimators"

    # NPZ: the same targets as members, without a declared C (any C above every label).
    t = hidden()
    request = {
        "name": "cls-npz",
        "task": "classification",
        "primary_metric": "auroc_ood",
        "metrics": ["auroc_ood"],
    }
    body = npz_bytes(request, labels=t["labels"], ood=t["ood"].astype(np.int8))
    r = api.post("/v1/benchmarks", content=body, headers={**ADMIN, **NPZ})
    assert r.status_code == 201, r.text
    assert r.json()["n_classes"] is None and r.json()["has_ood"] is True
    assert r.json()["has_soft_labels"] is False


def _bad(labels: list[int] | None = None, **fields: Any) -> dict[str, Any]:
    body = bench_body(**fields)
    if labels is not None:
        body["labels"] = labels + body["labels"][len(labels) :]
    return body


def _soft_off_simplex() -> list[list[float]]:
    soft = hidden()["soft_labels"].copy()
    soft[5] = [0.5, 0.5, 0.5, 0.5]
    return soft.tolist()


@pytest.mark.parametrize(
    ("body", "field", "index"),
    [
        (_bad(labels=[0, -1]), "labels", 1),
        (_bad(labels=[0, 1, 7]), "labels", 2),  # C = 4 from the soft labels
        (_bad(soft_labels=_soft_off_simplex()), "soft_labels", 5),
        (_bad(n_classes=5), "soft_labels", None),  # soft labels are N×4
        (_bad(ood=[True] * (N - 1)), "ood", None),
        (_bad(y=[0.0] * N), "y", None),
        (_bad(metrics=["accuracy", "crps"]), "metrics", 1),
        (_bad(primary_metric="crps"), "primary_metric", None),
        (_bad(kinds=["probs", "gaussian"]), "kinds", 1),
        (_bad(estimators=["entropy_bma", "entropy_bma"]), "estimators", 1),
        (_bad(estimators=["not ok"]), "estimators", 0),
        (_bad(params={"auroc_ood": {"estimator": "nope"}}), "params.auroc_ood.estimator", None),
        (_bad(ood=None), "metrics", 1),  # auroc_ood needs the OOD flags
        (
            {"name": "r", "primary_metric": "mae", "y": [1.0, 2.0], "labels": [0, 1]},
            "labels",
            None,
        ),
        ({"name": "r", "primary_metric": "mae", "y": [1.0], "n_classes": 3}, "n_classes", None),
        (
            {"name": "r", "primary_metric": "mae", "y": [1.0], "estimators": ["margin"]},
            "estimators",
            None,
        ),
    ],
)
def test_creation_errors(
    api: TestClient, body: dict[str, Any], field: str, index: int | None
) -> None:
    r = api.post("/v1/benchmarks", json=body, headers=ADMIN)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["field"] == field, err
    if index is not None:
        assert err["index"] == index, err
    assert api.get("/v1/benchmarks", headers=ADMIN).json()["benchmarks"] == []


# --------------------------------------------------------------------------------------------
# submissions: checks before the 202
# --------------------------------------------------------------------------------------------


def test_submission_checks_before_the_202(idle_api: TestClient) -> None:
    headers = new_key(idle_api)
    bench = create(idle_api)
    bid = bench["id"]
    no_c = create(idle_api, soft_labels=None, metrics=["accuracy", "auroc_ood"])
    assert no_c["n_classes"] is None
    own_mi = create(
        idle_api,
        primary_metric="auroc_ood",
        metrics=["auroc_ood"],
        params={"auroc_ood": {"estimator": "mutual_information"}},
    )
    members = ensemble(2.0, 1)
    probs = members.mean(axis=0)
    max_label = int(hidden()["labels"].max())
    narrow = _softmax(np.random.default_rng(3).normal(size=(N, max_label)))
    cases: list[tuple[dict[str, Any], int, str | None, str | None]] = [
        (ensemble_json(bid, members[:, :-1]), 422, "prediction.member_probs", "N = 79"),
        (probs_json("bench_unknown", probs), 404, "benchmark_id", None),
        (probs_json(bid, np.full((N, 5), 0.2)), 422, "prediction.probs", "C = 4"),
        (probs_json(no_c["id"], narrow), 422, "prediction.probs", "at least"),
        (probs_json(bid, probs, labels=hidden()["labels"].tolist()), 422, None, "labels"),
        (probs_json(bid, probs, ood=hidden()["ood"].tolist()), 422, None, "ood"),
        (
            probs_json(bid, probs, prediction={"kind": "gaussian", "mean": [0.0], "std": [1.0]}),
            422,
            "prediction.kind",
            None,
        ),
        # The primary metric's estimator is mutual information: a probs prediction has none.
        (probs_json(own_mi["id"], probs), 422, "prediction.kind", "mutual_information"),
    ]
    for body, status, field, text in cases:
        r = idle_api.post("/v1/submissions", json=body, headers=headers)
        assert r.status_code == status, r.text
        err = error_of(r)
        if field is not None:
            assert err["field"] == field, err
        if text is not None:
            assert text in err["message"], err
    # NPZ: the hidden targets cannot be sent along.
    req = {"kind": "ensemble", "model_name": "npz", "benchmark_id": bid}
    r = idle_api.post(
        "/v1/submissions",
        content=npz_bytes(req, member_probs=members, labels=hidden()["labels"]),
        headers={**headers, **NPZ},
    )
    assert r.status_code == 422 and error_of(r)["field"] == "labels"
    assert idle_api.get("/v1/submissions", headers=headers).json()["total"] == 0
    # A fitting one is accepted; its analyses carry the estimators the prediction provides.
    r = idle_api.post("/v1/submissions", json=probs_json(bid, probs), headers=headers)
    assert r.status_code == 202, r.text
    doc = idle_api.get(f"/v1/submissions/{r.json()['id']}", headers=headers).json()
    assert doc["analyses"]["estimators"] == ["entropy_bma"]  # probs: no mutual information
    assert doc["analyses"]["metrics"] == METRICS


# --------------------------------------------------------------------------------------------
# leaderboards, intervals, ranks
# --------------------------------------------------------------------------------------------


@pytest.fixture
def teams(api: TestClient) -> dict[str, dict[str, str]]:
    out = {}
    for name in ("red", "blue", "green", "gold"):
        team = api.post("/v1/admin/teams", json={"name": name}, headers=ADMIN).json()["team_id"]
        r = api.post("/v1/admin/keys", json={"name": name, "team_id": team}, headers=ADMIN)
        out[name] = {"Authorization": f"Bearer {r.json()['key']}", "team": team}
    return out


def _auth(key: dict[str, str]) -> dict[str, str]:
    return {"Authorization": key["Authorization"]}


def _post(api: TestClient, key: dict[str, str], **kwargs: Any) -> str:
    r = api.post("/v1/submissions", headers={**_auth(key), **kwargs.pop("headers", {})}, **kwargs)
    assert r.status_code == 202, r.text
    sub_id: str = r.json()["id"]
    doc = wait_terminal(api, _auth(key), sub_id, timeout_s=120)
    assert doc["status"] == "succeeded", doc
    return sub_id


def read(api: TestClient, bench_id: str, **params: Any) -> dict[str, Any]:
    r = api.get(f"/v1/benchmarks/{bench_id}/leaderboard", params=params, headers=ADMIN)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


def wait_ranks(api: TestClient, bench_id: str, **params: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        doc = read(api, bench_id, **params)
        if doc["ranks"]["status"] == "current":
            return doc
        assert time.monotonic() < deadline, doc["ranks"]
        time.sleep(0.1)


@pytest.fixture
def ranked(api: TestClient, teams: dict[str, dict[str, str]], worker) -> dict[str, Any]:
    """A classification benchmark with four public submissions: three ensembles (one as a
    float32 NPZ with the named estimate ``score``) and one probs prediction."""
    bench = create(api)
    bid = bench["id"]
    preds: dict[str, Any] = {}
    subs: dict[str, str] = {}
    for team, quality, seed in (("red", 3.0, 1), ("blue", 1.5, 2)):
        members = ensemble(quality, seed)
        subs[team] = _post(api, teams[team], json=ensemble_json(bid, members))
        preds[subs[team]] = PC.Ensemble(member_probs=members)
    members32 = ensemble(2.2, 3).astype(np.float32)
    request = {"kind": "ensemble", "model_name": "npz32", "benchmark_id": bid}
    request["visibility"] = "public"
    body = npz_bytes(request, member_probs=members32, **{"estimate:score": score(4)})
    subs["green"] = _post(api, teams["green"], content=body, headers=NPZ)
    preds[subs["green"]] = PC.Ensemble(member_probs=members32, estimates={"score": score(4)})
    probs = ensemble(1.0, 5).mean(axis=0)
    subs["gold"] = _post(api, teams["gold"], json=probs_json(bid, probs))
    preds[subs["gold"]] = PC.Probs(probs)
    return {"bench": bench, "subs": subs, "preds": preds}


def _ordered(values: dict[str, float], direction: str) -> list[str]:
    return sorted(values, key=lambda s: -values[s] if direction == "higher" else values[s])


def test_leaderboards_per_metric_and_estimator_in_both_directions(
    api: TestClient, ranked: dict[str, Any], teams: dict[str, dict[str, str]]
) -> None:
    bid, preds = ranked["bench"]["id"], ranked["preds"]
    cases = [
        ("accuracy", None, "higher"),
        ("nll", None, "lower"),
        ("auroc_ood", None, "higher"),
        ("auroc_ood", "mutual_information", "higher"),
        ("auroc_ood", "score", "higher"),
        ("aurc", "entropy_bma", "lower"),
        ("aurc", None, "lower"),
    ]
    for metric, est, direction in cases:
        params = {"metric": metric, **({"estimator": est} if est else {})}
        board = read(api, bid, **params)
        assert board["metric"] == metric
        assert board["direction"] == direction
        expected_est = est or (None if metric in ("accuracy", "nll") else "one_minus_max_prob_bma")
        assert board["estimator"] == expected_est
        values = {}
        for sub, pred in preds.items():
            if expected_est is not None and expected_est not in pred.estimator_names():
                continue
            rep = direct(pred, [metric], [expected_est] if expected_est else None)
            value = rep.by_estimator[metric][expected_est] if expected_est else rep.scalar(metric)
            values[sub] = value
        got = [e["submission_id"] for e in board["entries"]]
        assert set(got) == set(values) and board["total"] == len(values), (metric, est)
        shown = [e["value"] for e in board["entries"]]
        assert shown == sorted(shown, reverse=direction == "higher"), (metric, est)
        if len(set(values.values())) == len(values):  # no ties: one order
            assert got == _ordered(values, direction), (metric, est)
        for e in board["entries"]:
            assert e["value"] == pytest.approx(values[e["submission_id"]], rel=1e-9), (metric, est)
            assert e["low"] is not None and e["low"] <= e["high"]
    # The own estimator asked by name is the same board as none asked.
    named = read(api, bid, metric="auroc_ood", estimator="one_minus_max_prob_bma")
    default = read(api, bid, metric="auroc_ood")
    keep = ("submission_id", "value", "low", "high", "rank")
    assert [{k: e[k] for k in keep} for e in named["entries"]] == [
        {k: e[k] for k in keep} for e in default["entries"]
    ]
    # Only the submission carrying the named estimate ranks on its board.
    assert [
        e["submission_id"] for e in read(api, bid, metric="auroc_ood", estimator="score")["entries"]
    ] == [ranked["subs"]["green"]]

    for params, message in [
        ({"metric": "auroc_ood", "estimator": "nope"}, "unknown estimator 'nope'"),
        ({"metric": "auroc_ood", "estimator": "margin"}, "unknown estimator 'margin'"),
        ({"metric": "accuracy", "estimator": "entropy_bma"}, "does not take an estimator"),
    ]:
        r = api.get(f"/v1/benchmarks/{bid}/leaderboard", params=params, headers=ADMIN)
        assert r.status_code == 422, r.text
        assert error_of(r)["field"] == "estimator" and message in error_of(r)["message"]

    r = api.get(
        f"/v1/benchmarks/{bid}/leaderboard",
        params={"metric": "aurc", "estimator": "entropy_bma", "format": "csv"},
        headers=ADMIN,
    )
    assert r.status_code == 200
    assert "aurc-entropy_bma.csv" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["submission_id"] for row in rows] == [
        e["submission_id"]
        for e in read(api, bid, metric="aurc", estimator="entropy_bma")["entries"]
    ]

    # A private baseline is shown on an estimator board, not ranked, at the rank it would have.
    members = ensemble(2.6, 8)
    private = _post(api, ADMIN, json=ensemble_json(bid, members, visibility="private"))
    r = api.patch(f"/v1/benchmarks/{bid}", json={"baseline_id": private}, headers=ADMIN)
    assert r.status_code == 200, r.text
    board = read(api, bid, metric="auroc_ood", estimator="mutual_information")
    assert private not in [e["submission_id"] for e in board["entries"]]
    base = board["baseline"]
    assert "submission_id" not in base and base["is_baseline"] is True
    expected = direct(PC.Ensemble(member_probs=members), ["auroc_ood"], ["mutual_information"])
    value = expected.by_estimator["auroc_ood"]["mutual_information"]
    assert base["value"] == pytest.approx(value, rel=1e-9)
    assert base["rank"] == 1 + sum(e["value"] > value for e in board["entries"])

    # Deleting a submission takes it off its estimator boards too.
    red = ranked["subs"]["red"]
    assert api.delete(f"/v1/submissions/{red}", headers=_auth(teams["red"])).status_code == 204
    for est in ("mutual_information", "entropy_bma", None):
        params = {"metric": "auroc_ood", **({"estimator": est} if est else {})}
        assert red not in [e["submission_id"] for e in read(api, bid, **params)["entries"]]


def test_intervals_ranks_and_flags_equal_uqcore_with_the_same_seed(
    api: TestClient, ranked: dict[str, Any]
) -> None:
    bid, preds, subs = ranked["bench"]["id"], ranked["preds"], ranked["subs"]
    baseline = subs["blue"]
    r = api.patch(f"/v1/benchmarks/{bid}", json={"baseline_id": baseline}, headers=ADMIN)
    assert r.status_code == 200, r.text
    t = hidden()
    targets = {"ood": t["ood"], "soft_labels": t["soft_labels"]}
    for metric, est in [
        ("auroc_ood", "mutual_information"),
        ("aleatoric_rank_corr", None),  # needs the soft labels
        ("nll", None),
    ]:
        params = {"metric": metric, **({"estimator": est} if est else {})}
        doc = wait_ranks(api, bid, **params)
        assert doc["ranks"]["n_resamples"] == B and doc["ranks"]["seed"] == SEED
        assert doc["baseline"]["is_baseline"] is True
        assert [e["is_baseline"] for e in doc["entries"]].count(True) == 1
        entries = {e["submission_id"]: e for e in doc["entries"]}
        ordered = {s: preds[s] for s in entries}
        options = {"estimator": est} if est else {}
        rd = rank_distribution(
            ordered, t["labels"], metric=metric, params=options, n_resamples=B, seed=SEED, **targets
        )
        label = f"{metric}[{est}]" if est else metric
        for sub, e in entries.items():
            assert e["rank_low"] == rd[sub]["rank_low"], (metric, sub)
            assert e["rank_high"] == rd[sub]["rank_high"], (metric, sub)
            assert e["p_best"] == pytest.approx(rd[sub]["p_best"], abs=0)
            assert e["separable_from_leader"] == (rd[sub]["rank_low"] > 1)
            ci = bootstrap(
                preds[sub],
                t["labels"],
                [metric],
                n_resamples=B,
                seed=SEED,
                estimators=[est] if est else None,
                **targets,
            )[label]
            assert e["low"] == pytest.approx(ci["low"], rel=1e-9), (label, sub)
            assert e["high"] == pytest.approx(ci["high"], rel=1e-9), (label, sub)
            if sub == baseline:
                assert e["is_baseline"] and e["separable_from_baseline"] is None
                continue
            c = compare(
                preds[sub],
                preds[baseline],
                t["labels"],
                [metric],
                params={metric: options},
                n_resamples=B,
                seed=SEED,
                **targets,
            )[metric]
            assert e["separable_from_baseline"] == (not c["low"] <= 0.0 <= c["high"]), sub
            assert e["p_value_vs_baseline"] == pytest.approx(c["p_value"], abs=0)


def test_hidden_targets_are_unreadable(
    api: TestClient, ranked: dict[str, Any], teams: dict[str, dict[str, str]], store: Store
) -> None:
    bid, subs = ranked["bench"]["id"], ranked["subs"]
    key = _auth(teams["red"])
    bad = ensemble_json(bid, ensemble(1.0, 9)[:, :-1])
    texts = [api.post("/v1/submissions", json=bad, headers=key).text]
    paths = [
        f"/v1/benchmarks/{bid}",
        "/v1/benchmarks",
        f"/v1/submissions/{subs['red']}",
        f"/v1/submissions/{subs['green']}",
        "/v1/submissions",
    ]
    for metric, est in [("auroc_ood", None), ("auroc_ood", "score"), ("aleatoric_rank_corr", None)]:
        q = f"metric={metric}" + (f"&estimator={est}" if est else "")
        paths += [
            f"/v1/benchmarks/{bid}/leaderboard?{q}",
            f"/v1/benchmarks/{bid}/leaderboard?{q}&format=csv",
        ]
    for path in paths:
        r = api.get(path, headers=key)
        assert r.status_code == 200, path
        texts.append(r.text)
    blob = "\n".join(texts)
    t = hidden()
    for name in ("labels", "soft_labels", "ood", "label_max"):
        assert f'"{name}"' not in blob, name
    for flat in (t["labels"].tolist(), t["ood"].tolist(), t["ood"].astype(int).tolist()):
        for sep in (",", ", "):
            assert sep.join(map(json.dumps, flat[:12])) not in blob
    for value in t["soft_labels"][:5].ravel():
        for text in (repr(float(value)), json.dumps(float(value)), f"{value:.6f}"):
            assert text not in blob, text
    # The stored targets are the benchmark's, beside it and not in any record.
    arrays = store.load_benchmark_arrays(bid)
    assert arrays is not None and set(arrays) == {"labels", "soft_labels", "ood"}
    np.testing.assert_array_equal(arrays["labels"], t["labels"])


def test_comparison_estimators_are_those_with_leaderboards(
    api: TestClient, ranked: dict[str, Any]
) -> None:
    bid, subs = ranked["bench"]["id"], ranked["subs"]
    body = {
        "benchmark_id": bid,
        "submission_ids": [subs["red"], subs["blue"]],
        "metrics": ["auroc_ood", "accuracy"],
        "n_resamples": 20,
    }
    for fields, index, message in [
        ({"estimators": ["mutual_information", "margin"]}, 1, "unknown estimator 'margin'"),
        ({"estimators": ["entropy_bma", "entropy_bma"]}, 1, "listed twice"),
        ({"metrics": ["accuracy"], "estimators": ["entropy_bma"]}, None, "takes an estimator"),
    ]:
        r = api.post("/v1/comparisons", json={**body, **fields}, headers=ADMIN)
        assert r.status_code == 422, r.text
        err = error_of(r)
        assert (err["field"], err["index"]) == ("estimators", index)
        assert message in err["message"]
    ests = ["mutual_information", "one_minus_max_prob_bma"]
    r = api.post("/v1/comparisons", json={**body, "estimators": ests}, headers=ADMIN)
    assert r.status_code == 202, r.text
    doc = api.get(r.json()["status_url"], headers=ADMIN).json()
    assert doc["request"]["estimators"] == ests
    r = api.post("/v1/comparisons", json=body, headers=ADMIN)
    assert "estimators" not in api.get(r.json()["status_url"], headers=ADMIN).json()["request"]


def test_comparison_equals_uqcore_compare_with_the_same_seed(
    api: TestClient, ranked: dict[str, Any]
) -> None:
    bid, preds, subs = ranked["bench"]["id"], ranked["preds"], ranked["subs"]
    ids = [subs["red"], subs["blue"], subs["green"]]
    metrics = ["auroc_ood", "accuracy", "aleatoric_rank_corr"]
    body = {
        "benchmark_id": bid,
        "submission_ids": ids,
        "metrics": metrics,
        "estimators": ["mutual_information"],
        "n_resamples": 30,
        "seed": 5,
    }
    r = api.post("/v1/comparisons", json=body, headers=ADMIN)
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while True:
        doc = api.get(r.json()["status_url"], headers=ADMIN).json()
        if doc["status"] in ("succeeded", "failed"):
            break
        assert time.monotonic() < deadline, doc
        time.sleep(0.1)
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    t = hidden()
    targets = {"ood": t["ood"], "soft_labels": t["soft_labels"]}
    # Each metric that takes an estimator also under the requested one.
    entries = [*metrics, "auroc_ood[mutual_information]", "aleatoric_rank_corr[mutual_information]"]
    assert len(result["pairs"]) == 3
    for pair in result["pairs"]:
        want = compare(
            preds[pair["a"]],
            preds[pair["b"]],
            t["labels"],
            metrics,
            estimators=["mutual_information"],
            n_resamples=30,
            seed=5,
            **targets,
        )
        assert sorted(pair["metrics"]) == sorted(entries)
        for m in entries:
            got = pair["metrics"][m]
            for field in ("diff", "low", "high", "p_better", "p_value"):
                assert got[field] == pytest.approx(want[m][field], rel=1e-12), (m, field)
    models = {s: preds[s] for s in ids}
    for m, options in [("auroc_ood", {}), ("auroc_ood[mutual_information]", None)]:
        metric = m.split("[")[0]
        params = options if options is not None else {"estimator": "mutual_information"}
        rd = rank_distribution(
            models, t["labels"], metric=metric, params=params, n_resamples=30, seed=5, **targets
        )
        for s in ids:
            assert result["ranks"][m][s]["rank_low"] == rd[s]["rank_low"], (m, s)
            assert result["ranks"][m][s]["p_best"] == pytest.approx(rd[s]["p_best"], abs=1e-12)
