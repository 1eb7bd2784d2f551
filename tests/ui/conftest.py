"""A site for the web UI's tests: the API under uvicorn (a subprocess) with its own Celery
worker, on a Redis database of its own (the other tests empty database 0 after each test),
filled once per session with a benchmark, ranked submissions of three teams, a baseline, a
private submission, an inline submission and a comparison.

Every array is drawn from a seeded generator; the leaderboard's order and values are read
back from the API (the reference the pages are checked against), never copied into the tests.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest

from service.settings import Settings
from service.store import TERMINAL, Store
from tests.stack import Db, WorkerProcess, clear_store, db_url
from tests.uqeval.conftest import Live, start_api, stop_api

N = 160
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@dataclass
class Site:
    """The running site and the ids of its data."""

    live: Live
    url: str
    admin: str
    key_a: str
    key_b: str
    key_c: str
    bench: str
    public_bench: str
    cls_bench: str = ""
    subs: dict[str, str] = field(default_factory=dict)
    comparison: str = ""
    inline: str = ""

    def headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


def _gaussian(y: np.ndarray, noise: float, seed: int, spread: float = 1.0) -> dict[str, Any]:
    """A Gaussian prediction: the mean off by N(0, noise²), the std ``spread`` × about noise."""
    rng = np.random.default_rng(seed)
    mean = y + rng.normal(0.0, noise, y.shape)
    std = spread * np.full(y.shape, noise) * rng.uniform(0.8, 1.25, y.shape)
    return {"kind": "gaussian", "mean": mean.tolist(), "std": std.tolist()}


def _ensemble(labels: np.ndarray, ood: np.ndarray, quality: float, seed: int) -> dict[str, Any]:
    """3 members' class probabilities, peaked on the label by ``quality``; the members disagree
    more on the OOD rows."""
    rng = np.random.default_rng(seed)
    spread = np.where(ood, 2.0, 0.5)[None, :, None]
    logits = quality * np.eye(3)[labels][None] + spread * rng.normal(size=(3, labels.size, 3))
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return {"kind": "ensemble", "member_probs": (e / e.sum(axis=-1, keepdims=True)).tolist()}


def _ok(r: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert r.status_code == status, r.text
    doc: dict[str, Any] = r.json() if r.content else {}
    return doc


def _wait(http: httpx.Client, path: str, key: str, done: Any, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        doc = _ok(http.get(path, headers={"Authorization": f"Bearer {key}"}))
        if done(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not ready in {timeout_s} s: {doc}")
        time.sleep(0.2)


def _fill(live: Live) -> Site:
    rng = np.random.default_rng(20260101)
    y = rng.normal(0.0, 2.0, N)
    admin = live.admin_key
    _, key_a = live.new_team_key("team-alpha")
    _, key_b = live.new_team_key("team-beta")
    _, key_c = live.new_team_key("team-gamma")
    adm = {"Authorization": f"Bearer {admin}"}
    with httpx.Client(base_url=live.url, timeout=60) as http:
        bench = _ok(
            http.post(
                "/v1/benchmarks",
                headers=adm,
                json={
                    "name": "toy-regression",
                    "description": "A seeded toy benchmark <em>with markup</em>.",
                    "primary_metric": "crps",
                    "metrics": ["crps", "mae", "nll", "spearman"],
                    "bootstrap": {"n_resamples": 200},
                    "y": y.tolist(),
                },
            ),
            201,
        )["id"]
        public_bench = _ok(
            http.post(
                "/v1/benchmarks",
                headers=adm,
                json={
                    "name": "open-board",
                    "primary_metric": "mae",
                    "metrics": ["mae", "crps"],
                    "bootstrap": {"n_resamples": 100},
                    "public_board": True,
                    "y": y.tolist(),
                },
            ),
            201,
        )["id"]
        labels = rng.integers(0, 3, size=90)
        ood = rng.random(90) < 0.3
        cls_bench = _ok(
            http.post(
                "/v1/benchmarks",
                headers=adm,
                json={
                    "name": "toy-classification",
                    "task": "classification",
                    "primary_metric": "accuracy",
                    "metrics": ["accuracy", "auroc_ood", "ece"],
                    "estimators": ["entropy_bma"],
                    "bootstrap": {"n_resamples": 100},
                    "labels": labels.tolist(),
                    "ood": ood.tolist(),
                },
            ),
            201,
        )["id"]
        site = Site(live, live.url, admin, key_a, key_b, key_c, bench, public_bench, cls_bench)
        plan = [
            # beta: as good as alpha up to the draw, so that the two are not
            # separable; gamma clearly worse
            ("a_public", key_a, "ensemble-alpha", 0.5, 1.0, 100, "public", bench),
            ("b_public", key_b, "dropout-beta", 0.5, 1.0, 101, "public", bench),
            ("c_public", key_c, "baseline-gamma", 1.2, 1.0, 102, "public", bench),
            ("a_private", key_a, "secret-alpha", 0.3, 1.0, 103, "private", bench),
            ("a_open", key_a, "ensemble-alpha", 0.5, 1.0, 104, "public", public_bench),
            ("b_open", key_b, "dropout-beta", 0.9, 1.0, 105, "public", public_bench),
        ]
        for label, key, model, noise, spread, seed, visibility, on in plan:
            body = {
                "model_name": model,
                "benchmark_id": on,
                "visibility": visibility,
                "prediction": _gaussian(y, noise, seed, spread),
                "metadata": {"note": HOSTILE} if label == "a_public" else {},
            }
            site.subs[label] = _ok(
                http.post("/v1/submissions", headers=site.headers(key), json=body), 202
            )["id"]
        for label, key, quality, seed in (("a_cls", key_a, 2.0, 201), ("b_cls", key_b, 1.0, 202)):
            body = {
                "model_name": f"ensemble-{label[0]}",
                "benchmark_id": cls_bench,
                "visibility": "public",
                "prediction": _ensemble(labels, ood, quality, seed),
            }
            site.subs[label] = _ok(
                http.post("/v1/submissions", headers=site.headers(key), json=body), 202
            )["id"]
        site.inline = _ok(
            http.post(
                "/v1/submissions",
                headers=site.headers(key_a),
                json={
                    "model_name": HOSTILE,
                    "prediction": _gaussian(y, 0.7, 7),
                    "y": y.tolist(),
                    "analyses": {"metrics": "all", "bootstrap": {"n_resamples": 100}},
                },
            ),
            202,
        )["id"]
        for label, sub in [*site.subs.items(), ("inline", site.inline)]:
            key = (
                key_a
                if label.startswith("a_") or label == "inline"
                else (key_b if label.startswith("b_") else key_c)
            )
            doc = _wait(http, f"/v1/submissions/{sub}", key, lambda d: d["status"] in TERMINAL)
            assert doc["status"] == "succeeded", doc
        _ok(
            http.patch(
                f"/v1/benchmarks/{bench}", headers=adm, json={"baseline_id": site.subs["c_public"]}
            )
        )
        for b, metric in ((bench, "crps"), (public_bench, "mae")):
            _wait(
                http,
                f"/v1/benchmarks/{b}/leaderboard?metric={metric}",
                admin,
                lambda d: d["ranks"]["status"] == "current",
            )
        site.comparison = _ok(
            http.post(
                "/v1/comparisons",
                headers=site.headers(key_a),
                json={
                    "benchmark_id": bench,
                    "submission_ids": [
                        site.subs["a_public"],
                        site.subs["b_public"],
                        site.subs["c_public"],
                    ],
                    "metrics": ["crps", "mae"],
                    "n_resamples": 200,
                },
            ),
            202,
        )["id"]
        _wait(
            http,
            f"/v1/comparisons/{site.comparison}",
            key_a,
            lambda d: d["status"] in TERMINAL,
        )
    return site


@pytest.fixture(scope="session")
def ui_site(session_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The site with its data (see the module docstring)."""
    assert session_settings.redis_url is not None
    settings = session_settings.model_copy(
        update={"redis_url": db_url(session_settings.redis_url, Db.UI)}
    )
    assert settings.redis_url is not None
    store = Store.from_url(settings.redis_url, settings)
    store.client.flushdb()
    home = tmp_path_factory.mktemp("ui")
    worker = WorkerProcess(settings, f"ui-{os.getpid()}", home / "worker.log")
    try:
        worker.start(store)
        live = start_api(settings, home / "api.log")
        try:
            yield _fill(live)
        finally:
            stop_api(live.proc)
    finally:
        worker.stop()
        clear_store(store)
        store.client.flushdb()
        store.close()
