"""``uqeval login``, ``benchmarks``, ``teams``, ``keys``, ``leaderboard`` and ``compare``
against a live server (real Redis, real worker)."""

from __future__ import annotations

import csv
import io
import stat
import tomllib
from pathlib import Path

import numpy as np
import pytest

import uqcore
from tests.uqeval.cli_invoke import cli, gaussian_data, loads
from tests.uqeval.conftest import Live
from uqcore import predictions as P


def test_login_checks_the_key_and_writes_the_config(live_server: Live, tmp_path: Path) -> None:
    key = live_server.new_key("login")
    config = tmp_path / "conf" / "config.toml"
    got = cli("login", "--url", live_server.url, "--key-stdin", input="wrong-key\n", config=config)
    assert got.exit_code == 3 and not config.exists()
    got = cli("login", "--url", live_server.url, "--key-stdin", input=key + "\n", config=config)
    assert got.exit_code == 0, got.stderr
    assert key not in got.stdout + got.stderr
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert tomllib.loads(config.read_text()) == {"url": live_server.url, "key": key}
    # The next commands find the server and the key there.
    got = cli("list", "--json", config=config)
    assert got.exit_code == 0 and loads(got.stdout)["total"] == 0


def test_benchmarks_teams_and_keys(live_server: Live, tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    admin = {"url": live_server.url, "key": live_server.admin_key}
    y = gaussian_data(n=12, seed=10)["y"]
    np.save(tmp_path / "y.npy", y)
    spec = tmp_path / "bench.yaml"
    spec.write_text("name: admin-bench\nprimary_metric: crps\nmetrics: [crps, mae]\n")
    got = cli("benchmarks", "create", str(spec), "--targets", str(tmp_path / "y.npy"), **admin)
    assert got.exit_code == 0, got.stderr
    bench = got.stdout.strip()
    shown = loads(cli("benchmarks", "show", bench, "--json", **admin).stdout)
    assert (shown["name"], shown["n"], shown["metrics"]) == ("admin-bench", 12, ["crps", "mae"])
    listed = loads(cli("benchmarks", "list", "--json", **admin).stdout)["benchmarks"]
    assert bench in [b["id"] for b in listed]
    got = cli("benchmarks", "update", bench, "--name", "renamed", "--json", **admin)
    assert got.exit_code == 0 and loads(got.stdout)["name"] == "renamed"
    assert "renamed" in cli("benchmarks", "list", **admin).stdout

    got = cli("teams", "create", "red team", **admin)
    assert got.exit_code == 0, got.stderr
    team = got.stdout.strip()
    teams = loads(cli("teams", "list", "--json", **admin).stdout)["teams"]
    assert {"team_id": team, "name": "red team"}.items() <= next(
        t for t in teams if t["team_id"] == team
    ).items()

    got = cli("keys", "create", "alice", "--team", team, **admin)
    assert got.exit_code == 0, got.stderr
    secret = got.stdout.strip()
    keys = loads(cli("keys", "list", "--json", **admin).stdout)["keys"]
    mine = [k for k in keys if k["name"] == "alice"]
    assert len(mine) == 1 and mine[0]["team_id"] == team
    assert secret not in cli("keys", "list", **admin).stdout
    # The new key works, is refused admin commands (403: exit 3), and stops once revoked.
    assert cli("list", url=live_server.url, key=secret).exit_code == 0
    assert cli("teams", "list", url=live_server.url, key=secret).exit_code == 3
    assert cli("keys", "revoke", mine[0]["key_id"], **admin).exit_code == 0
    assert cli("list", url=live_server.url, key=secret).exit_code == 3

    assert cli("benchmarks", "delete", bench, "--yes", **admin).exit_code == 0
    assert cli("benchmarks", "show", bench, **admin).exit_code == 4


def test_leaderboard_and_compare(live_server: Live, tmp_path: Path) -> None:
    """Two teams submit to a benchmark; the leaderboard ranks them by their values (lower
    CRPS first), as a table, JSON and CSV; compare gives A − B of the two values."""
    admin = {"url": live_server.url, "key": live_server.admin_key}
    data = gaussian_data(n=80, seed=11)
    np.save(tmp_path / "y.npy", data["y"])
    spec = tmp_path / "b.json"
    spec.write_text('{"name": "board", "primary_metric": "crps", "bootstrap": {"n_resamples": 50}}')
    bench = cli(
        "benchmarks", "create", str(spec), "--targets", str(tmp_path / "y.npy"), **admin
    ).stdout.strip()
    models = {"sharp": data["std"], "wide": data["std"] * 4}
    ids, values = {}, {}
    for name, std in models.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, mean=data["mean"], std=std)
        key = live_server.new_key(f"team-{name}")
        got = cli(
            "submit",
            str(path),
            "--benchmark",
            bench,
            "--public",
            "--model-name",
            name,
            "--wait",
            "--json",
            url=live_server.url,
            key=key,
        )
        assert got.exit_code == 0, got.stderr
        values[name] = loads(got.stdout)["metrics"]["crps"]["value"]
        ids[name] = cli("list", "--json", url=live_server.url, key=key).stdout
        ids[name] = loads(ids[name])["items"][0]["id"]
        want = uqcore.evaluate(P.Gaussian(data["mean"], std), data["y"], ["crps"]).scalar("crps")
        assert values[name] == pytest.approx(want, rel=1e-12)
    assert values["sharp"] < values["wide"]

    board = loads(cli("leaderboard", bench, "--json", **admin).stdout)
    assert [e["model_name"] for e in board["entries"]] == ["sharp", "wide"]
    assert [e["rank"] for e in board["entries"]] == [1, 2]
    assert [e["value"] for e in board["entries"]] == pytest.approx(
        [values["sharp"], values["wide"]], rel=1e-12
    )
    table = cli("leaderboard", bench, **admin).stdout
    rows = [line.split() for line in table.splitlines() if "sharp" in line or "wide" in line]
    assert [r[0] for r in rows] == ["1", "2"]
    # rank, team (its name, or its id from a server that does not send names), model, value
    for row, entry in zip(rows, board["entries"], strict=True):
        assert row[1] in (entry.get("team_name"), entry["team_id"])
        assert row[2:4] == [entry["model_name"], f"{entry['value']:.6g}"]
    text = cli("leaderboard", bench, "--csv", **admin).stdout
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [r["model_name"] for r in parsed] == ["sharp", "wide"]

    got = cli(
        "compare",
        ids["sharp"],
        ids["wide"],
        "--n-resamples",
        "200",
        "--seed",
        "1",
        "--wait",
        "--json",
        **admin,
    )
    assert got.exit_code == 0, got.stderr
    doc = loads(got.stdout)
    (pair,) = doc["result"]["pairs"]
    diff = pair["metrics"]["crps"]
    sign = 1 if (pair["a"], pair["b"]) == (ids["sharp"], ids["wide"]) else -1
    assert diff["diff"] == pytest.approx(sign * (values["sharp"] - values["wide"]), rel=1e-9)
    assert diff["low"] <= diff["diff"] <= diff["high"]
    got = cli("compare", ids["sharp"], ids["wide"], "--n-resamples", "200", "--wait", **admin)
    assert got.exit_code == 0 and "P(A better)" in got.stdout and "crps" in got.stdout
