"""The client's calls for the public/private split, finals and benchmark suites on a live
server: each answer against the raw HTTP answer and an independent expectation (sync and
async)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import numpy as np
import pytest

from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqeval import AsyncClient, Client
from uqeval.errors import AuthError, BadRequest, NotFound

N, B = 60, 50


def _mask() -> np.ndarray:
    m = np.zeros(N, dtype=bool)
    m[np.random.default_rng(41).choice(N, 20, replace=False)] = True
    return m


@pytest.fixture(scope="module")
def setup(live_module: Live) -> dict[str, Any]:
    rng = np.random.default_rng(42)
    y = rng.normal(size=N)
    with Client(live_module.url, live_module.admin_key) as admin:
        split = admin.create_benchmark(
            "client-split", y=y, primary_metric="mae", private_mask=_mask(), max_final=1,
            bootstrap={"n_resamples": B},
        )  # fmt: skip
        plain = admin.create_benchmark("client-plain", y=y, primary_metric="mae",
                                       metrics="mae,crps", bootstrap={"n_resamples": B})  # fmt: skip
    keys = {t: live_module.new_team_key(t) for t in ("gold", "iron")}
    subs: dict[str, list[str]] = {}
    preds: dict[str, np.ndarray] = {}
    for i, (team, (_, key)) in enumerate(keys.items()):
        with Client(live_module.url, key) as c:
            for j in range(2):
                mean = y + rng.normal(scale=0.3 + 0.4 * (2 * i + j), size=N)
                sub = c.submit(P.Gaussian(mean, np.ones(N)), benchmark=split, model_name=f"m{j}",
                               visibility="public", wait=True)  # fmt: skip
                preds[sub.id] = mean
                subs.setdefault(team, []).append(sub.id)
            c.submit(P.Gaussian(y + 0.2 * (i + 1), np.ones(N)), benchmark=plain,
                     visibility="public", wait=True)  # fmt: skip
    return {
        "url": live_module.url, "admin": live_module.admin_key, "y": y, "split": split,
        "plain": plain, "keys": keys, "subs": subs, "preds": preds,
    }  # fmt: skip


def _raw(s: dict[str, Any], key: str, path: str, **params: Any) -> httpx.Response:
    r = httpx.get(
        s["url"] + path, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert r.status_code == 200, r.text
    return r


def _ranked(client: Client, bench: Any, part: str = "public") -> Any:
    """The board once its rank intervals are current (a worker computes them)."""
    deadline = time.monotonic() + 60
    while True:
        board = client.leaderboard(bench, part=part)
        if board.ranks.get("status") == "current":
            return board
        assert time.monotonic() < deadline, board.raw
        time.sleep(0.05)


def test_split_finals_close_and_private_board(setup: dict[str, Any]) -> None:
    s = setup
    mask, y = _mask(), s["y"]
    split = s["split"]
    assert split.status == "open" and split.closed_at is None and split.max_final == 1
    assert split.n_public == N - mask.sum() and split.private_fraction == pytest.approx(1 / 3)
    (gold_team, gold_key), (iron_team, _) = s["keys"]["gold"], s["keys"]["iron"]
    g0, g1 = s["subs"]["gold"]
    with Client(s["url"], gold_key) as gold, Client(s["url"], s["admin"]) as admin:
        # the public board: the public rows only (numpy on them, independently)
        board = _ranked(gold, split)
        assert board.part == "public"
        public = {
            sid: float(np.mean(np.abs(y[~mask] - pred[~mask]))) for sid, pred in s["preds"].items()
        }
        assert board.total == 2  # one entry per team
        for e in board.entries:
            assert e.value == pytest.approx(public[e.submission_id], rel=1e-12)
        assert board.raw == _raw(s, gold_key, f"/v1/benchmarks/{split.id}/leaderboard").json()
        marked = gold.mark_final(g1)
        assert marked.final and marked.id == g1 and not gold.get(g0).final
        assert marked.raw["final"] is True
        with pytest.raises(BadRequest) as err:  # max_final = 1
            gold.mark_final(g0)
        assert err.value.status == 409 and err.value.code == "too_many_finals"
        (own,) = gold.finals(split)
        assert own.team_id == gold_team
        assert [(f.id, f.chosen) for f in own.submissions] == [(g1, "explicit")]
        every = {t.team_id: t for t in admin.finals(split.id)}
        assert set(every) == {gold_team, iron_team}
        # iron marked none: its best public submission by the public mae
        iron_best = min(s["subs"]["iron"], key=public.__getitem__)
        assert [(f.id, f.chosen) for f in every[iron_team].submissions] == [(iron_best, "default")]
        raw = _raw(s, s["admin"], f"/v1/benchmarks/{split.id}/finals").json()
        assert [t.raw for t in admin.finals(split)] == raw["teams"]
        for call in (gold.leaderboard, gold.leaderboard_csv):
            with pytest.raises(BadRequest) as err:
                call(split, part="private")  # type: ignore[operator]
            assert err.value.status == 409 and err.value.code == "benchmark_open"
        assert gold.get(g1).private_result is None
        closed = admin.close_benchmark(split)
        assert closed.status == "closed" and closed.closed_at
        assert admin.close_benchmark(split.id).closed_at == closed.closed_at  # no change
        with pytest.raises(BadRequest) as err:
            gold.mark_final(g1, final=False)
        assert err.value.code == "benchmark_closed"
        private = {
            sid: float(np.mean(np.abs(y[mask] - s["preds"][sid][mask]))) for sid in (g1, iron_best)
        }
        board = _ranked(gold, split, "private")
        assert board.part == "private" and board.total == 2
        assert {e.submission_id: e.value for e in board.entries} == pytest.approx(private)
        path = f"/v1/benchmarks/{split.id}/leaderboard"
        assert board.raw == _raw(s, gold_key, path, part="private").json()
        csv = gold.leaderboard_csv(split, part="private")
        assert csv == _raw(s, gold_key, path, part="private", format="csv").text
        assert g1 in csv and iron_best in csv and csv.count("\n") == 3
        mine = gold.get(g1)
        assert mine.private_result is not None
        assert mine.private_result.value("mae") == pytest.approx(private[g1], rel=1e-12)


def _current_board(client: Client, suite_id: str, view: str) -> Any:
    deadline = time.monotonic() + 60
    while True:
        board = client.suite_leaderboard(suite_id, view=view)
        if board.status == "current":
            return board
        assert time.monotonic() < deadline, board.raw
        time.sleep(0.1)


def test_suite_crud_and_leaderboard(setup: dict[str, Any]) -> None:
    s = setup
    plain = s["plain"]
    with Client(s["url"], s["admin"]) as admin:
        suite = admin.create_suite(
            "client-suite", [plain, (s["split"], "mae")],
            description="d", n_resamples=B, seed=3,
        )  # fmt: skip
        assert [(t.benchmark_id, t.metric) for t in suite.tasks] == [
            (plain.id, "mae"), (s["split"].id, "mae"),
        ]  # fmt: skip
        assert suite.n_resamples == B and suite.missing == "exclude"
        assert suite.id in [x.id for x in admin.suites()]
        changed = admin.update_suite(suite, tasks=[(plain, "crps"), s["split"]], seed=4)
        assert changed.seed == 4 and changed.tasks[0].metric == "crps"
        assert admin.suite(suite.id).raw == changed.raw
        _, gold_key = s["keys"]["gold"]
        with Client(s["url"], gold_key) as gold:
            assert gold.suite(suite).name == "client-suite"
            with pytest.raises(AuthError):
                gold.update_suite(suite, seed=5)  # admin only (403)
            for view in ("rows", "tasks"):
                board = _current_board(gold, suite.id, view)
                path = f"/v1/suites/{suite.id}/leaderboard"
                raw = _raw(s, gold_key, path, view=view).json()
                assert [e.raw for e in board.entries] == raw["entries"]
                assert board.view == view and board.unit == raw["unit"]
                assert board.n_resamples == B and board.total == len(board.entries) == 2
                # each team's value on the crps task is its entry on that benchmark's board
                crps = {e.team_id: e.value for e in gold.leaderboard(plain, metric="crps").entries}
                assert {e.team_id: e.values[0] for e in board.entries} == pytest.approx(crps)
                for e in board.entries:
                    assert e.mean_rank.low is not None and e.mean_rank.high is not None
                    assert e.mean_rank.value == e.raw["mean_rank"]["value"]
                assert (
                    gold.suite_leaderboard_csv(suite, view=view, limit=1)
                    == _raw(s, gold_key, path, view=view, format="csv", limit=1).text
                )
        admin.delete_suite(suite)
        with pytest.raises(NotFound):
            admin.suite(suite.id)


def test_async_finals_boards_and_suites(setup: dict[str, Any]) -> None:
    s = setup
    iron_team, iron_key = s["keys"]["iron"]

    async def main() -> None:
        async with (
            AsyncClient(s["url"], iron_key) as iron,
            AsyncClient(s["url"], s["admin"]) as admin,
        ):
            bench = await admin.create_benchmark(
                "async-split", y=s["y"], primary_metric="mae", private_fraction=0.25
            )
            assert bench.private_fraction == pytest.approx(0.25) and bench.n_public == N - 15
            sub = await iron.submit({"mean": s["y"] + 0.5, "std": np.ones(N)}, benchmark=bench,
                                    visibility="public", wait=True)  # fmt: skip
            assert (await iron.mark_final(sub)).final
            (team,) = await iron.finals(bench)
            assert team.team_id == iron_team
            assert [(f.id, f.chosen) for f in team.submissions] == [(sub.id, "explicit")]
            assert not (await iron.mark_final(sub.id, final=False)).final
            (team,) = await iron.finals(bench)
            assert [(f.id, f.chosen) for f in team.submissions] == [(sub.id, "default")]
            with pytest.raises(BadRequest) as err:
                await iron.leaderboard(bench, part="private")
            assert err.value.code == "benchmark_open"
            assert (await admin.close_benchmark(bench)).status == "closed"
            with pytest.raises(BadRequest) as err:
                await iron.mark_final(sub)
            assert err.value.code == "benchmark_closed"
            board = await iron.leaderboard(bench, part="private")
            assert board.part == "private" and [e.submission_id for e in board.entries] == [sub.id]
            assert board.entries[0].value == pytest.approx(0.5, rel=1e-12)  # |y - (y + 0.5)|
            assert sub.id in await iron.leaderboard_csv(bench, part="private")
            suite = await admin.create_suite("async-suite", [s["plain"]], n_resamples=B)
            assert suite.id in [x.id for x in await iron.suites()]
            assert (await iron.suite(suite.id)).tasks[0].metric == "mae"
            raw = _raw(s, iron_key, f"/v1/suites/{suite.id}/leaderboard").json()
            got = await iron.suite_leaderboard(suite)
            assert [e.team_id for e in got.entries] == [e["team_id"] for e in raw["entries"]]
            assert "team_id" in await iron.suite_leaderboard_csv(suite.id)
            await admin.update_suite(suite, description="x")
            await admin.delete_suite(suite.id)
            with pytest.raises(NotFound):
                await iron.suite(suite.id)

    asyncio.run(main())
