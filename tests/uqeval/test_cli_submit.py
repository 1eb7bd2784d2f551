"""``uqeval submit``, ``status``, ``results``, ``list``, ``delete`` against a live server (real
Redis, real worker): NPZ, CSV and Parquet files, the values checked against uqcore."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import uqcore
from tests.uqeval.cli_invoke import cli, cli_process, gaussian_data, loads, probs_data, write_csv
from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqcore.predictions import classification as PC


def reference(pred: object, y: np.ndarray, metrics: list[str]) -> dict[str, float | None]:
    report = uqcore.evaluate(pred, y, metrics)
    return {m: report.scalar(m) for m in metrics}


def test_submit_npz_wait_json_in_a_subprocess(live_server: Live, tmp_path: Path) -> None:
    """The console entry point end to end: an NPZ with members named as in the API, --wait
    --json gives the result document alone on stdout, the values those of uqcore."""
    key = live_server.new_key("npz")
    data = gaussian_data(n=60, seed=1)
    path = tmp_path / "model.npz"
    np.savez(path, **data)
    got = cli_process(
        "submit",
        str(path),
        "--metrics",
        "mae,crps",
        "--bootstrap",
        "50",
        "--seed",
        "3",
        "--wait",
        "--json",
        url=live_server.url,
        key=key,
    )
    assert got.returncode == 0, got.stderr
    doc = loads(got.stdout)
    want = reference(P.Gaussian(data["mean"], data["std"]), data["y"], ["mae", "crps"])
    assert set(doc["metrics"]) == {"mae", "crps"}
    assert doc["metrics"]["mae"]["value"] == pytest.approx(
        float(np.mean(np.abs(data["y"] - data["mean"]))), rel=1e-12
    )
    for name, value in want.items():
        entry = doc["metrics"][name]
        assert entry["value"] == pytest.approx(value, rel=1e-12)
        assert entry["interval"]["n_resamples"] == 50
        assert entry["interval"]["low"] <= entry["value"] <= entry["interval"]["high"]
    assert doc["provenance"]["kind"] == "gaussian" and doc["provenance"]["n"] == 60
    assert "Idempotency key: " in got.stderr
    assert key not in got.stdout + got.stderr


def test_submit_csv_with_column_flags(live_server: Live, tmp_path: Path) -> None:
    """A CSV whose columns are named otherwise, mapped with --col and --y-col (and a column
    that maps to nothing); without --wait the id alone is printed; status, results (table and
    --json) and list follow it."""
    key = live_server.new_key("csv")
    data = gaussian_data(n=30, seed=2)
    path = write_csv(
        tmp_path / "preds.csv",
        {"row": np.arange(30.0), "mu": data["mean"], "sigma": data["std"], "target": data["y"]},
    )
    got = cli(
        "submit",
        str(path),
        "--col",
        "mean=mu",
        "--col",
        "std=sigma",
        "--y-col",
        "target",
        "--metrics",
        "mae,nll",
        "--model-name",
        "csv-model",
        "--metadata",
        '{"source": "csv"}',
        url=live_server.url,
        key=key,
    )
    assert got.exit_code == 0, got.stderr
    sub_id = got.stdout.strip()
    assert sub_id.startswith("sub_") and "\n" not in sub_id
    assert f"uqeval status {sub_id}" in got.stderr

    got = cli("results", sub_id, "--wait", "--json", url=live_server.url, key=key)
    assert got.exit_code == 0, got.stderr
    doc = loads(got.stdout)
    want = reference(P.Gaussian(data["mean"], data["std"]), data["y"], ["mae", "nll"])
    assert {m: doc["metrics"][m]["value"] for m in want} == pytest.approx(want, rel=1e-12)

    status = loads(cli("status", sub_id, "--json", url=live_server.url, key=key).stdout)
    assert (status["status"], status["model_name"], status["metadata"]) == (
        "succeeded",
        "csv-model",
        {"source": "csv"},
    )
    table = cli("results", sub_id, url=live_server.url, key=key)
    assert table.exit_code == 0
    lines = {line.split()[0]: line for line in table.stdout.splitlines() if line.strip()}
    assert f"{want['mae']:.6g}" in lines["mae"] and "lower ↓" in lines["mae"]
    assert f"{want['nll']:.6g}" in lines["nll"]

    page = loads(cli("list", "--json", url=live_server.url, key=key).stdout)
    assert [s["id"] for s in page["items"]] == [sub_id]
    assert sub_id in cli("list", "--status", "succeeded", url=live_server.url, key=key).stdout
    assert (
        cli("list", "--status", "failed", "--json", url=live_server.url, key=key).stdout.count(
            "sub_"
        )
        == 0
    )


def test_submit_parquet_classification_wait_table(live_server: Live, tmp_path: Path) -> None:
    """Parquet with one column per class (--prob-prefix) and a labels column; --wait prints
    the progress on stderr and the result table on stdout."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    key = live_server.new_key("parquet")
    data = probs_data(n=50, c=3, seed=4)
    table = {f"p_{j}": data["probs"][:, j] for j in range(3)} | {"label": data["labels"]}
    path = tmp_path / "preds.parquet"
    pq.write_table(pa.table(table), path)
    got = cli(
        "submit",
        str(path),
        "--prob-prefix",
        "p_",
        "--labels-col",
        "label",
        "--metrics",
        "accuracy,brier,nll",
        "--wait",
        url=live_server.url,
        key=key,
    )
    assert got.exit_code == 0, got.stderr
    want = reference(PC.Probs(data["probs"]), data["labels"], ["accuracy", "brier", "nll"])
    rows = {line.split()[0]: line.split() for line in got.stdout.splitlines() if line.strip()}
    for name, value in want.items():
        assert rows[name][1] == f"{value:.6g}"
    assert "probs" in got.stdout  # the title names the kind
    assert "succeeded" in got.stderr  # the job's progress bar


def test_submit_twice_with_one_idempotency_key_then_delete(
    live_server: Live, tmp_path: Path
) -> None:
    key = live_server.new_key("idem")
    path = tmp_path / "m.npz"
    np.savez(path, **gaussian_data(n=20, seed=5))
    args = ("submit", str(path), "--metrics", "mae", "--idempotency-key", "fixed-key-1")
    first = cli(*args, url=live_server.url, key=key)
    second = cli(*args, url=live_server.url, key=key)
    assert first.exit_code == second.exit_code == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout
    assert "Idempotency key:" not in first.stderr  # given, so not printed
    assert "already submitted" in second.stderr
    sub_id = first.stdout.strip()
    refused = cli("delete", sub_id, url=live_server.url, key=key)  # no terminal to ask
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert cli("delete", sub_id, "--yes", url=live_server.url, key=key).exit_code == 0
    gone = cli("status", sub_id, url=live_server.url, key=key)
    assert gone.exit_code == 4 and sub_id in gone.stderr
