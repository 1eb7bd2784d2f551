"""The client's calls on a live server: benchmarks, leaderboards and comparisons, the admin
calls, listing, cancelling and deleting, errors as typed exceptions, and the async client."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import uqcore
from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqeval import AsyncClient, Client
from uqeval.errors import AuthError, BadRequest, JobFailed, NotFound


def regression(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    return mean, std, mean + std * rng.normal(size=n)


def test_benchmark_leaderboard_and_comparison(live_server: Live) -> None:
    mean, std, y = regression(200, 11)
    with Client(live_server.url, live_server.admin_key) as admin:
        bench = admin.create_benchmark(
            "client-bench", y=y, primary_metric="crps", metrics="crps,mae",
            bootstrap={"n_resamples": 50},
        )  # fmt: skip
        assert bench.n == 200 and bench.metrics == ["crps", "mae"]
        assert bench.id in [b.id for b in admin.benchmarks()]
        assert admin.update_benchmark(bench, description="d").description == "d"
        team_a, key_a = live_server.new_team_key("alpha")
        _, key_b = live_server.new_team_key("beta")
    good, bad = P.Gaussian(mean, std), P.Gaussian(mean, std * 3)
    with Client(live_server.url, key_a) as a, Client(live_server.url, key_b) as b:
        sa = a.submit(good, benchmark=bench, model_name="good", visibility="public", wait=True)
        sb = b.submit(bad, benchmark=bench.id, model_name="bad", visibility="public", wait=True)
        assert sa.benchmark_id == bench.id and sa.result is not None
        assert sa.result.value("crps") == pytest.approx(float(uqcore.metric("crps", good, y)))
        board = a.leaderboard(bench)
        assert [e.submission_id for e in board.entries] == [sa.id, sb.id]
        assert board.metric == "crps" and board.entries[0].team_id == team_a
        if "team_name" in board.entries[0].raw:
            assert board.entries[0].team_name == "alpha"
        csv = a.leaderboard_csv(bench, metric="mae")
        assert sa.id in csv and sb.id in csv
        seen: list[str] = []
        with pytest.raises(BadRequest) as err:  # only admins choose a comparison's bootstrap
            a.compare([sa, sb], n_resamples=100, seed=1)
        assert err.value.field == "n_resamples"
        cmp = a.compare([sa, sb], wait=True, progress=lambda c: seen.append(c.status))
        assert cmp.result is not None and cmp.result["n_resamples"] == 50
        assert cmp.succeeded and cmp.result is not None and seen[-1] == "succeeded"
        pair = cmp.result["pairs"][0]
        diff = float(uqcore.metric("crps", good, y)) - float(uqcore.metric("crps", bad, y))
        assert pair["metrics"]["crps"]["diff"] == pytest.approx(diff, rel=1e-9)
        assert a.submissions(benchmark=bench).total == 1
        # b's private submission is invisible to a once made private.
        b.set_visibility(sb, "private")
        with pytest.raises(NotFound):
            a.get(sb.id)
    with Client(live_server.url, live_server.admin_key) as admin:
        admin.delete_benchmark(bench)
        with pytest.raises(NotFound):
            admin.benchmark(bench.id)


def test_admin_calls_and_auth_errors(live_server: Live) -> None:
    with Client(live_server.url, live_server.admin_key) as admin:
        team = admin.create_team("gamma")
        assert team.team_id in [t.team_id for t in admin.teams()]
        key = admin.create_key("gamma-key", team_id=team.team_id)
        assert key.key and key.team_id == team.team_id and key.role == "submitter"
        assert key.key not in repr(key) and "key" not in key.raw
        records = admin.keys()
        assert key.key_id in [k.key_id for k in records]
        with Client(live_server.url, key.key) as user:
            assert user.submissions().total == 0
            with pytest.raises(AuthError) as info:
                user.teams()
            assert info.value.status == 403 and info.value.exit_code == 3
        admin.revoke_key(key.key_id)
        with Client(live_server.url, key.key) as user, pytest.raises(AuthError) as info:
            user.submissions()
        assert info.value.status == 401
        assert key.key not in str(info.value) and key.key not in repr(info.value)
        catalogue = admin.metrics("regression")
        assert "crps" in {m["name"] for m in catalogue}
        assert admin.health() == {"status": "ok"}
        assert admin.ready()["status"] == "ready"


def test_errors_wait_cancel_delete(live_server: Live) -> None:
    mean, std, y = regression(30, 12)
    with Client(live_server.url, live_server.new_key("errors")) as client:
        with pytest.raises(BadRequest) as info:
            client.submit({"mean": mean, "std": -std}, y)
        assert info.value.status == 422 and info.value.field == "prediction.std"
        assert info.value.index == 0 and str(info.value).endswith("(field prediction.std[0])")
        with pytest.raises(BadRequest, match="unknown metric"):
            client.submit({"mean": mean, "std": std}, y, metrics="nope")
        with pytest.raises(NotFound) as nf:
            client.get("sub_doesnotexist")
        assert nf.value.exit_code == 4
        # A long job (bootstrap on a large batch) is cancelled: wait raises JobFailed.
        big_mean, big_std, big_y = regression(50_000, 13)
        sub = client.submit(
            {"mean": big_mean, "std": big_std}, big_y, metrics="crps,nll,mae", bootstrap=2000
        )
        with pytest.raises(BadRequest) as early:
            client.result(sub)
        assert early.value.code == "not_finished"
        client.cancel(sub)
        with pytest.raises(JobFailed) as failed:
            client.wait(sub, timeout=60)
        assert failed.value.submission is not None
        assert failed.value.submission.status == "cancelled" and failed.value.exit_code == 5
        with pytest.raises(JobFailed):
            client.result(sub.id)
        client.delete(sub)
        with pytest.raises(NotFound):
            client.get(sub.id)
        slow = client.submit({"mean": big_mean, "std": big_std}, big_y, bootstrap=2000)
        with pytest.raises(TimeoutError):
            client.wait(slow, timeout=0.1)
        client.cancel(slow)


def test_async_client(live_server: Live) -> None:
    mean, std, y = regression(40, 14)
    key = live_server.new_key("async")

    async def run() -> tuple[float | None, int]:
        async with AsyncClient(live_server.url, key) as client:
            subs = await asyncio.gather(
                client.submit(P.Gaussian(mean, std), y, metrics="crps", wait=True, timeout=60),
                client.submit({"mean": mean, "std": std * 2}, y, metrics="crps"),
            )
            result = await client.result(subs[1], wait=True)
            assert result.value("crps") == pytest.approx(
                float(uqcore.metric("crps", P.Gaussian(mean, std * 2), y)), rel=1e-12
            )
            page = await client.submissions()
            assert subs[0].result is not None
            return subs[0].result.value("crps"), page.total

    value, total = asyncio.run(run())
    assert value == pytest.approx(float(uqcore.metric("crps", P.Gaussian(mean, std), y)))
    assert total == 2
