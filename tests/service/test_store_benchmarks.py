"""The store's team, benchmark, quota and leaderboard parts against a real Redis server."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import uqcore
from service import keys
from service.analyses import Analyses
from service.store import (
    BenchmarkRecord,
    Quota,
    QuotaExceeded,
    Ranking,
    Store,
    SubmissionRecord,
    now_iso,
)
from tests.factories import submission_record


def record(
    team: str = "team_a", bench: str | None = "bench_1", ts: float = 0.0
) -> SubmissionRecord:
    return submission_record(
        n=3,
        analyses=Analyses(metrics=["mae"]),
        created_ts=ts,
        team=team,
        visibility="public",
        benchmark=bench,
    )


def arrays() -> dict[str, np.ndarray]:
    return {"mean": np.zeros(3), "std": np.ones(3)}


def benchmark(bench_id: str = "bench_1") -> BenchmarkRecord:
    return BenchmarkRecord(
        id=bench_id,
        name="b",
        task="regression",
        description="",
        primary_metric="mae",
        metrics=["mae"],
        rule="best",
        kinds=["gaussian"],
        n=3,
        has_groups=False,
        params={},
        bootstrap={"n_resamples": 10},
        seed=0,
        quota_per_day=None,
        quota_total=None,
        baseline=None,
        created_at=now_iso(),
        updated_at=now_iso(),
    )


def test_teams_and_team_keys(store: Store) -> None:
    team = store.create_team("red")
    assert store.get_team(team.team_id) == team
    assert store.list_teams() == [team]
    rec, token = store.create_api_key("member", team=team.team_id)
    assert rec.team == team.team_id
    assert store.authenticate(token) == rec
    with pytest.raises(ValueError, match="no team"):
        store.create_api_key("x", team="team_nope")


def test_team_names(store: Store) -> None:
    red, blue = store.create_team("red"), store.create_team("blue")
    names = store.team_names([red.team_id, "key_x", blue.team_id, None, red.team_id])
    assert names == {red.team_id: "red", blue.team_id: "blue"}
    assert store.team_names([]) == {} and store.team_names([None]) == {}


def test_team_index_listing_and_deletion(store: Store) -> None:
    a, b = record("team_a", None), record("team_b", None)
    for r in (a, b):
        store.create_submission(r, arrays())
    page, total = store.list_submissions(None, None, 0, 10, team="team_a")
    assert total == 1 and page[0].id == a.id and page[0].team == "team_a"
    assert page[0].visibility == "public"
    assert store.delete_submission(a.id)
    assert store.list_submissions(None, None, 0, 10, team="team_a")[1] == 0


def test_benchmark_crud_and_hidden_arrays(store: Store) -> None:
    bench = store.create_benchmark(
        benchmark(), {"y": np.arange(3.0), "groups": np.array([1, 1, 2])}
    )
    assert store.get_benchmark(bench.id) == bench
    assert store.list_benchmarks() == [bench]
    loaded = store.load_benchmark_arrays(bench.id)
    assert loaded is not None
    np.testing.assert_array_equal(loaded["y"], np.arange(3.0))
    updated = store.update_benchmark(bench.id, {"rule": "latest"})
    assert updated is not None and updated.rule == "latest" and updated.n == 3
    assert store.update_benchmark("bench_nope", {"rule": "latest"}) is None
    store.client.zadd(keys.quota(bench.id, "team_a"), {"s": 1.0})
    assert store.delete_benchmark(bench.id)
    assert store.get_benchmark(bench.id) is None
    assert store.load_benchmark_arrays(bench.id) is None
    assert not store.client.exists(keys.quota(bench.id, "team_a"))
    assert not store.delete_benchmark(bench.id)


def test_quota_refund_when_the_worker_is_lost_every_time(store: Store) -> None:
    quota = Quota(keys.quota("bench_1", "team_a"), None, 1)
    rec, _ = store.create_submission(record(), arrays(), quota=quota)
    with pytest.raises(QuotaExceeded, match="total quota of 1"):
        store.create_submission(record(), arrays(), quota=quota)
    store.mark_running(rec.id, "w1", 5.0, 1)
    store.client.delete(keys.heartbeat(rec.id))
    assert store.requeue_orphan(rec.id, 1, 5.0) == "failed"
    assert store.client.zcard(quota.key) == 0  # a system failure gives the slot back
    rec2, created = store.create_submission(record(), arrays(), quota=quota)
    assert created
    # A redelivered task past max_attempts is a system failure too.
    store.mark_running(rec2.id, "w1", 5.0, 1)
    store.client.delete(keys.heartbeat(rec2.id))
    assert store.mark_running(rec2.id, "w2", 5.0, 1) == ("terminal", "failed")
    assert store.client.zcard(quota.key) == 0
    # An input failure keeps it; a rollback (refund=True) removes it.
    rec3, _ = store.create_submission(record(), arrays(), quota=quota)
    store.fail(rec3.id, "invalid input")
    assert store.client.zcard(quota.key) == 1
    store.delete_submission(rec3.id, refund=True)
    assert store.client.zcard(quota.key) == 0


def _finish(store: Store, team: str, value: float, ts: float) -> str:
    rec, _ = store.create_submission(record(team, ts=ts), arrays())
    store.mark_running(rec.id, "w", 5.0, 3)
    ranking = Ranking("bench_1", team, ts, {"mae": (value, {"value": value})})
    assert store.finish(rec.id, {"metrics": {}}, 0.1, ranking=ranking) == "succeeded"
    return rec.id


def test_leaderboard_best_latest_ties_and_forget(store: Store) -> None:
    a_good = _finish(store, "team_a", 0.1, 1.0)
    a_late = _finish(store, "team_a", 0.5, 2.0)
    b = _finish(store, "team_b", 0.3, 1.5)
    c = _finish(store, "team_c", 0.3, 1.6)
    best, total = store.leaderboard_page("bench_1", "mae", "best", 0, 10)
    assert total == 3
    assert [(r["submission"], r["rank"]) for r in best] == [(a_good, 1), (b, 2), (c, 2)]
    latest, _ = store.leaderboard_page("bench_1", "mae", "latest", 0, 10)
    assert [(r["submission"], r["rank"]) for r in latest] == [(b, 1), (c, 1), (a_late, 3)]
    assert latest[0]["entry"] == {"value": 0.3}
    version = store.leaderboard_version("bench_1")
    # The benchmark submission keeps its arrays after it succeeded.
    assert store.load_arrays(a_good) is not None
    # Deleting the team's ranked submission falls back to its other one, on both boards.
    store.delete_submission(a_good)
    best, _ = store.leaderboard_page("bench_1", "mae", "best", 0, 10)
    assert [r["submission"] for r in best] == [b, c, a_late]
    store.delete_submission(a_late)
    assert store.leaderboard_page("bench_1", "mae", "latest", 0, 10)[1] == 2
    assert store.leaderboard_version("bench_1") == version + 2
    assert store.leaderboard_board("bench_1", "mae", "best") == [("team_b", b), ("team_c", c)]
    assert store.leaderboard_rank_of("bench_1", "mae", "best", 0.2) == 1
    assert store.leaderboard_rank_of("bench_1", "mae", "best", 0.4) == 3
    # Ranks cache and its claim.
    assert store.claim_ranks("bench_1", "mae", "best", 30)
    assert not store.claim_ranks("bench_1", "mae", "best", 30)
    store.put_ranks("bench_1", "mae", "best", {"version": 1})
    assert store.get_ranks("bench_1", "mae", "best") == {"version": 1}
    assert store.claim_ranks("bench_1", "mae", "best", 30)


def test_a_benchmark_job_error_never_quotes_the_targets() -> None:
    from uqcore import UQValidationError
    from uqcore import predictions as P
    from uqcore.predictions import classification as PC
    from worker.execution import _hide_targets

    def error_of(call: Any) -> UQValidationError:
        with pytest.raises(UQValidationError) as info:
            call()
        return info.value

    # The errors come from uqcore itself, as the worker sees them: their argument decides.
    bad_y = error_of(lambda: uqcore.evaluate(P.Gaussian([0.0] * 4, [1.0] * 4), [0, 1, 2, np.nan]))
    hidden = _hide_targets(bad_y)
    assert "nan" not in hidden and "hidden targets" in hidden
    bad_std = UQValidationError("std must be > 0; std[1] = -1", argument="std", index=1)
    assert _hide_targets(bad_std) == "invalid input: std must be > 0; std[1] = -1"
    # Classification: the labels, soft labels and OOD flags are hidden targets too.
    probs = PC.Probs([[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]])
    for call in (
        lambda: uqcore.evaluate(probs, [0, 1, 7], metrics=["accuracy"]),
        lambda: uqcore.evaluate(probs, [0, 1, 1], metrics=["auroc_ood"], ood=[0, 1, 5]),
        lambda: uqcore.evaluate(
            probs, [0, 1, 1], metrics=["brier"], soft_labels=[[0.5, 0.5, 0.0]] * 3
        ),
    ):
        exc = error_of(call)
        assert "hidden targets" in _hide_targets(exc), str(exc)
    needs = UQValidationError("auroc_ood needs estimates")
    assert "auroc_ood" in _hide_targets(needs)


def test_old_benchmark_records_load_as_regression_without_classes() -> None:
    import dataclasses
    import json

    doc = dataclasses.asdict(benchmark())
    for name in ("n_classes", "label_max", "has_soft_labels", "has_ood", "estimators"):
        del doc[name]
    old = BenchmarkRecord.from_json(json.dumps(doc))
    assert old.n_classes is None and old.estimators is None and old.targets == frozenset()
    assert "estimators" not in old.analyses(["mae"]).document()
    cls = dataclasses.replace(old, has_ood=True, estimators=["entropy_bma"])
    assert cls.targets == {"ood"}
    assert cls.analyses(["auroc_ood"], ["entropy_bma"]).estimators == ["entropy_bma"]


def test_classification_board_entries_targets_and_params() -> None:
    from service.leaderboard import badness, board_name, boards_of, parse_board, result_entries
    from worker.ranks import benchmark_targets, board_params

    result = {
        "metrics": {
            "accuracy": {"value": 0.8, "params": {}, "interval": {"low": 0.7, "high": 0.9}},
            # Both tasks have an nll; the classification one is looked up (task given).
            "nll": {"value": 0.5, "params": {}},
            "aurc": {"value": 0.2, "params": {"estimator": "one_minus_max_prob_bma"}},
            "auroc_ood": {"value": None, "params": {"estimator": "one_minus_max_prob_bma"}},
        },
        "by_estimator": {
            "aurc": {"one_minus_max_prob_bma": 0.2, "entropy_bma": 0.25, "score": None},
            "auroc_ood": {"one_minus_max_prob_bma": None, "mutual_information": {"value": 0.9}},
        },
        "by_estimator_intervals": {"aurc": {"entropy_bma": {"low": 0.2, "high": 0.3}}},
    }
    entries = result_entries(result, "classification")
    # Null values rank nowhere; the own estimator is the metric's own board.
    assert set(entries) == {
        "accuracy",
        "nll",
        "aurc",
        "aurc[entropy_bma]",
        "auroc_ood[mutual_information]",
    }
    assert entries["accuracy"] == (-0.8, {"value": 0.8, "low": 0.7, "high": 0.9, "std": None})
    assert entries["aurc[entropy_bma]"] == (
        0.25,
        {"value": 0.25, "low": 0.2, "high": 0.3, "std": None},
    )
    assert entries["auroc_ood[mutual_information]"][0] == -0.9
    assert badness("accuracy", 0.8, task="classification") == -0.8
    assert parse_board("aurc[entropy_bma]") == ("aurc", "entropy_bma")
    assert board_name("aurc", "entropy_bma", "entropy_bma") == "aurc"
    assert boards_of(["accuracy", "aurc"], ["score"], "classification") == [
        "accuracy",
        "aurc",
        "aurc[score]",
    ]

    labels = np.array([0, 2, 1])
    bench = BenchmarkRecord(
        **{
            **benchmark().__dict__,
            "task": "classification",
            "params": {"aurc": {"convention": "trapezoid"}},
        }
    )
    y, extra = benchmark_targets(bench, {"labels": labels, "ood": np.array([0, 1, 0], bool)})
    np.testing.assert_array_equal(y, labels)
    assert set(extra) == {"ood"}
    y, extra = benchmark_targets(benchmark(), {"y": np.ones(3), "groups": np.arange(3)})
    assert extra == {} and y.tolist() == [1.0, 1.0, 1.0]
    assert board_params(bench, "aurc[entropy_bma]") == (
        "aurc",
        {"convention": "trapezoid", "estimator": "entropy_bma"},
    )
    assert board_params(bench, "aurc") == ("aurc", {"convention": "trapezoid"})


def test_rank_job_limit_and_failure_are_stored_for_the_board_version(store: Store) -> None:
    from worker.ranks import compute_ranks

    store.create_benchmark(benchmark(), {"y": np.array([0.0, 1.0, 2.0])})
    subs = [_finish(store, f"team_{i}", 0.1 * (i + 1), float(i)) for i in range(3)]
    doc = compute_ranks(store, "bench_1", "mae", "best", limit=2)
    assert doc is not None
    assert doc["version"] == store.leaderboard_version("bench_1")
    assert set(doc["entries"]) == set(subs[:2])
    assert any("first 2 of 3 teams" in w for w in doc["warnings"])
    assert store.get_ranks("bench_1", "mae", "best") == doc
    # A computation that cannot run is stored with its reason (not retried for this version).
    store.update_benchmark("bench_1", {"params": {"mae": {"no_such_option": 1}}})
    failed = compute_ranks(store, "bench_1", "mae", "best")
    assert failed is not None and failed["entries"] == {}
    assert "rank intervals unavailable" in failed["warnings"][0]
    assert compute_ranks(store, "bench_gone", "mae", "best") is None
