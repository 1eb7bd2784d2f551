"""A benchmark's baseline row shows only what the admin set for it (its display name), never
the baseline submission's id, model name, metadata or team — in the JSON and CSV answers, the
web page and the benchmark's metadata — even when the baseline is a team's private
submission; admins still see the baseline's id in the benchmark's metadata."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import pytest

from tests.service._api import ADMIN, TestClient, wait_terminal

pytest_plugins = ["tests.service._api"]

N = 60
SECRET_MODEL = "secret-model-name"
SECRET_META = "secret-metadata-value"


@pytest.fixture
def setup(api: TestClient, worker: Any) -> dict[str, Any]:
    y = np.random.default_rng(5).normal(size=N)
    r = api.post(
        "/v1/benchmarks",
        json={
            "name": "b",
            "primary_metric": "mae",
            "metrics": ["mae", "r2"],
            "y": y.tolist(),
            "public_board": True,
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    bid = r.json()["id"]
    keys = {}
    for name in ("owner", "other"):
        team = api.post("/v1/admin/teams", json={"name": name}, headers=ADMIN).json()["team_id"]
        k = api.post("/v1/admin/keys", json={"name": name, "team_id": team}, headers=ADMIN)
        keys[name] = {"Authorization": f"Bearer {k.json()['key']}"}

    def submit(key: dict[str, str], model: str, visibility: str, scale: float) -> str:
        rng = np.random.default_rng(int(scale * 100))
        body = {
            "model_name": model,
            "metadata": {"note": SECRET_META if visibility == "private" else "open"},
            "visibility": visibility,
            "benchmark_id": bid,
            "prediction": {
                "kind": "gaussian",
                "mean": (y + scale * rng.normal(size=N)).tolist(),
                "std": [1.0] * N,
            },
        }
        r = api.post("/v1/submissions", json=body, headers=key)
        assert r.status_code == 202, r.text
        sub = r.json()["id"]
        assert wait_terminal(api, key, sub)["status"] == "succeeded"
        return str(sub)

    public = submit(keys["other"], "public-model", "public", 0.5)
    private = submit(keys["owner"], SECRET_MODEL, "private", 0.3)
    r = api.patch(f"/v1/benchmarks/{bid}", json={"baseline_id": private}, headers=ADMIN)
    assert r.status_code == 200, r.text
    return {"bid": bid, "keys": keys, "private": private, "public": public}


def _secrets(s: dict[str, Any]) -> list[str]:
    return [SECRET_MODEL, SECRET_META, s["private"], "owner"]


def test_private_baseline_shows_nothing_of_its_submission(api: TestClient, setup: dict) -> None:
    bid, other = setup["bid"], setup["keys"]["other"]
    doc = api.get(f"/v1/benchmarks/{bid}/leaderboard", headers=other).json()
    base = doc["baseline"]
    assert base is not None and base["model_name"] == "baseline"
    assert base["is_baseline"] is True and base["value"] is not None
    for field in ("submission_id", "team_id", "team_name", "metadata", "created_at"):
        assert base.get(field) in (None, {}), field
    answers = [
        api.get(f"/v1/benchmarks/{bid}/leaderboard", headers=other).text,
        api.get(f"/v1/benchmarks/{bid}/leaderboard", params={"format": "csv"}, headers=other).text,
        api.get(f"/v1/benchmarks/{bid}", headers=other).text,
        api.get("/v1/benchmarks", headers=other).text,
        api.get(f"/ui/benchmarks/{bid}", headers=other).text,
        api.get(f"/ui/benchmarks/{bid}").text,  # a public board, without a key
    ]
    for text in answers:
        for secret in _secrets(setup):
            assert secret not in text, (secret, text[:2000])
    assert api.get(f"/v1/benchmarks/{bid}", headers=other).json()["baseline_id"] is None
    # the admin still sees which submission is the baseline
    assert (
        api.get(f"/v1/benchmarks/{bid}", headers=ADMIN).json()["baseline_id"] == (setup["private"])
    )
    # the CSV holds the baseline row under its display name, with no id, team or metadata
    rows = list(
        csv.DictReader(
            io.StringIO(
                api.get(
                    f"/v1/benchmarks/{bid}/leaderboard", params={"format": "csv"}, headers=other
                ).text
            )
        )
    )
    base_rows = [r for r in rows if r["is_baseline"] == "True"]
    assert len(base_rows) == 1 and base_rows[0]["model_name"] == "baseline"
    assert base_rows[0]["submission_id"] == "" and base_rows[0]["team_id"] == ""


def test_display_name_is_the_baseline_row_model_name(api: TestClient, setup: dict) -> None:
    bid, other = setup["bid"], setup["keys"]["other"]
    r = api.patch(f"/v1/benchmarks/{bid}", json={"baseline_name": "Reference MC"}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["baseline_name"] == "Reference MC"
    # the cached answer of the board is not served after the change
    doc = api.get(f"/v1/benchmarks/{bid}/leaderboard", headers=other).json()
    assert doc["baseline"]["model_name"] == "Reference MC"
    page = api.get(f"/ui/benchmarks/{bid}", headers=other).text
    assert "Reference MC" in page and SECRET_MODEL not in page
    assert api.get(f"/v1/benchmarks/{bid}", headers=other).json()["baseline_name"] == (
        "Reference MC"
    )
    # the owner of the baseline also reads it anonymised: one answer for all readers
    owner = setup["keys"]["owner"]
    text = api.get(f"/v1/benchmarks/{bid}/leaderboard", headers=owner).text
    assert SECRET_MODEL not in text and setup["private"] not in text


def test_entries_show_their_skill_against_the_baseline(api: TestClient, setup: dict) -> None:
    """skill_vs_baseline = 1 − value / baseline value on a board of a score (mae), in JSON and
    CSV; null on a board of a metric that is not a score."""
    bid, other = setup["bid"], setup["keys"]["other"]
    doc = api.get(f"/v1/benchmarks/{bid}/leaderboard", headers=other).json()
    assert doc["metric"] == "mae"
    base = doc["baseline"]["value"]
    (entry,) = doc["entries"]  # the public submission (the private baseline is not ranked)
    assert entry["skill_vs_baseline"] == pytest.approx(1.0 - entry["value"] / base, rel=1e-12)
    assert entry["value"] > base and entry["skill_vs_baseline"] < 0  # noisier than the baseline
    text = api.get(
        f"/v1/benchmarks/{bid}/leaderboard", params={"format": "csv"}, headers=other
    ).text
    row = next(r for r in csv.DictReader(io.StringIO(text)) if r["is_baseline"] == "False")
    assert float(row["skill_vs_baseline"]) == pytest.approx(entry["skill_vs_baseline"])
    shown = api.get(f"/v1/benchmarks/{bid}", headers=other).json()["metrics"]
    not_scores = [m for m in shown if m in ("r2", "corr", "spearman", "coverage", "nll")]
    assert not_scores, shown
    board = api.get(
        f"/v1/benchmarks/{bid}/leaderboard", params={"metric": not_scores[0]}, headers=other
    ).json()
    assert [e["skill_vs_baseline"] for e in board["entries"]] == [None]
