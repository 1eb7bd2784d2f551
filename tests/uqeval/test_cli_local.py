"""``uqeval evaluate`` and ``uqeval metrics`` (uqcore on this machine, no server), the file
readers they share with ``submit``, and the program's own options (help, version)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import uqcore
from tests.stack import ROOT
from tests.uqeval.cli_invoke import cli, gaussian_data, loads, probs_data, write_csv
from uqcore import predictions as P
from uqcore import registry
from uqcore.predictions import classification as PC
from uqcore.stability import bootstrap


def values(doc: dict) -> dict[str, float | None]:
    return {name: entry["value"] for name, entry in doc["metrics"].items()}


def assert_same(got: dict, want: dict) -> None:
    """The same metrics; the same values to rounding (None where uqcore gives None)."""
    assert set(got) == set(want)
    assert {k for k, v in got.items() if v is None} == {k for k, v in want.items() if v is None}
    assert {k: v for k, v in got.items() if v is not None} == pytest.approx(
        {k: v for k, v in want.items() if v is not None}, rel=1e-12, abs=1e-300
    )


def expected(pred: object, y: np.ndarray, metrics: str | list[str] = "all") -> dict:
    report = uqcore.evaluate(pred, y, metrics)
    return {name: report.scalar(name) for name in report}


def test_evaluate_npz_gives_uqcores_values(tmp_path: Path) -> None:
    data = gaussian_data(n=50, seed=20)
    path = tmp_path / "p.npz"
    np.savez(path, mean=data["mean"], std=data["std"])
    np.save(tmp_path / "y.npy", data["y"])
    got = cli("evaluate", str(path), "--targets", str(tmp_path / "y.npy"), "--json")
    assert got.exit_code == 0, got.stderr
    doc = loads(got.stdout)
    want = expected(P.Gaussian(data["mean"], data["std"]), data["y"])
    assert_same(values(doc), want)
    assert (
        doc["not_applicable"]
        == uqcore.evaluate(P.Gaussian(data["mean"], data["std"]), data["y"]).not_applicable
    )
    assert doc["provenance"]["n"] == 50 and doc["curves"] == {}
    # the table shows every metric with its value and direction
    table = cli("evaluate", str(path), "--targets", str(tmp_path / "y.npy")).stdout
    rows = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    for name, value in want.items():
        spec = registry.get(name, "regression")
        assert rows[name].split()[1] == ("—" if value is None else f"{value:.6g}")
        assert spec.direction in rows[name]


def test_evaluate_bootstrap_intervals(tmp_path: Path) -> None:
    data = gaussian_data(n=40, seed=21)
    path = tmp_path / "p.npz"
    np.savez(path, **data)
    got = cli(
        "evaluate",
        str(path),
        "--metrics",
        "mae,crps",
        "--bootstrap",
        "100",
        "--seed",
        "2",
        "--json",
    )
    assert got.exit_code == 0, got.stderr
    doc = loads(got.stdout)
    ci = bootstrap(
        P.Gaussian(data["mean"], data["std"]), data["y"], ["mae", "crps"], n_resamples=100, seed=2
    )
    for name in ("mae", "crps"):
        interval = doc["metrics"][name]["interval"]
        assert (interval["low"], interval["high"]) == pytest.approx(
            (ci[name]["low"], ci[name]["high"]), rel=1e-12
        )
        assert interval["n_resamples"] == 100


def test_evaluate_tables_csv_and_parquet(tmp_path: Path) -> None:
    """The same quantiles prediction from a CSV (value columns values_0.., --levels) and a
    Parquet file with a list column (--col), and samples from positional --columns."""
    rng = np.random.default_rng(22)
    n, levels = 30, [0.1, 0.5, 0.9]
    y = rng.normal(size=n)
    vals = np.sort(rng.normal(size=(n, 3)), axis=1)
    want = expected(P.Quantiles(np.asarray(levels), vals), y, ["mae", "check_score", "coverage"])

    csv_path = write_csv(
        tmp_path / "q.csv", {f"values_{j}": vals[:, j] for j in range(3)} | {"truth": y}
    )
    got = cli(
        "evaluate",
        str(csv_path),
        "--levels",
        "0.1,0.5,0.9",
        "--y-col",
        "truth",
        "--metrics",
        "mae,check_score,coverage",
        "--json",
    )
    assert got.exit_code == 0, got.stderr
    assert_same(values(loads(got.stdout)), want)

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq_path = tmp_path / "q.parquet"
    pq.write_table(pa.table({"qs": vals.tolist(), "y": y}), pq_path)
    got = cli(
        "evaluate",
        str(pq_path),
        "--col",
        "values=qs",
        "--levels",
        "0.1,0.5,0.9",
        "--metrics",
        "mae,check_score,coverage",
        "--json",
    )
    assert got.exit_code == 0, got.stderr
    assert_same(values(loads(got.stdout)), want)

    draws = rng.normal(size=(n, 4))
    samples = write_csv(tmp_path / "s.csv", {f"c{j}": draws[:, j] for j in range(4)} | {"t": y})
    got = cli(
        "evaluate",
        str(samples),
        "--prefix",
        "draws=c",
        "--columns",
        "-,-,-,-,y",
        "--metrics",
        "crps,mae",
        "--json",
    )
    assert got.exit_code == 0, got.stderr
    assert_same(values(loads(got.stdout)), expected(P.Samples(draws), y, ["crps", "mae"]))


def test_evaluate_classification_csv(tmp_path: Path) -> None:
    data = probs_data(n=60, c=4, seed=23)
    path = write_csv(
        tmp_path / "c.csv",
        {f"p_{j}": data["probs"][:, j] for j in range(4)} | {"label": data["labels"]},
    )
    got = cli("evaluate", str(path), "--prob-prefix", "p_", "--labels-col", "label", "--json")
    assert got.exit_code == 0, got.stderr
    doc = loads(got.stdout)
    want = expected(PC.Probs(data["probs"]), data["labels"])
    assert_same(values(doc), want)
    assert doc["provenance"]["kind"] == "probs"


def test_evaluate_refuses_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = gaussian_data(n=10, seed=24)
    path = tmp_path / "p.npz"
    np.savez(path, mean=data["mean"], std=data["std"])
    got = cli("evaluate", str(path))
    assert got.exit_code == 2 and "--targets" in got.stderr
    np.savez(tmp_path / "none.npz", a=data["mean"])
    got = cli("evaluate", str(tmp_path / "none.npz"), "--targets", str(path))
    assert got.exit_code == 2 and "give --kind" in got.stderr
    bad = data["std"].copy()
    bad[4] = -1.0
    np.savez(path, mean=data["mean"], std=bad, y=data["y"])
    got = cli("evaluate", str(path))
    assert got.exit_code == 2 and "std[4]" in got.stderr
    got = cli("evaluate", str(tmp_path / "p.xlsx"))
    assert got.exit_code == 2
    (tmp_path / "p.parquet").write_bytes(b"PAR1")
    # A machine without the parquet extra: the import fails (made to, here).
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    got = cli("evaluate", str(tmp_path / "p.parquet"))
    assert got.exit_code == 2 and "uq-eval[parquet]" in got.stderr


def test_metrics_catalogue() -> None:
    got = cli("metrics", "--json")
    assert got.exit_code == 0
    names = [(m["task"], m["name"]) for m in loads(got.stdout)["metrics"]]
    assert sorted(names) == sorted(
        (s.task, s.name) for t in ("regression", "classification") for s in registry.specs(t)
    )
    got = cli("metrics", "--task", "classification", "--json")
    assert {m["task"] for m in loads(got.stdout)["metrics"]} == {"classification"}
    table = cli("metrics", "--task", "regression").stdout
    assert "crps" in table and "brier" not in table
    assert cli("metrics", "--task", "nope").exit_code == 2


def test_version_help_and_no_server_modules() -> None:
    """``--version`` prints the version; the user commands load none of the server's
    dependencies (a fresh interpreter runs ``evaluate --help`` and ``metrics``)."""
    got = cli("--version")
    assert (got.exit_code, got.stdout.strip()) == (0, uqcore.__version__)
    code = (
        "import sys\n"
        "from uqeval.cli import main\n"
        "assert main(['metrics', '--json']) == 0\n"
        "assert main(['submit', '--help']) == 0\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette',"
        " 'celery', 'redis', 'uvicorn', 'kombu', 'pydantic_settings'))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert done.returncode == 0, done.stderr[-2000:]
