"""Intervals and prediction sets through the client and the command line: uqcore objects and
mappings packed as JSON and NPZ (an interval's level, sets as booleans), the kind inferred from
the field names, files (NPZ, CSV) submitted and evaluated locally, with values checked
against formulas written here."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.uqeval.cli_invoke import cli, loads, write_csv
from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqcore import registry
from uqeval import Client
from uqeval.arrays import encode_body, encode_json, infer_kind, prediction_arrays
from uqeval.errors import BadRequest

N, C = 50, 3


def set_data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(C), size=N)
    labels = np.array([rng.choice(C, p=p) for p in probs])
    return {"sets": probs >= 0.3, "probs": probs, "labels": labels}


def interval_data(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=N)
    return {
        "lower": centre - rng.uniform(0.1, 1.0, size=N),
        "upper": centre + rng.uniform(0.1, 1.0, size=N),
        "y": centre + rng.normal(size=N),
    }


def npz_members(body: Any) -> Any:
    """The archive of an encoded NPZ body (gzip-decoded when the client compressed it)."""
    raw = gzip.decompress(body.content) if body.gzipped else body.content
    return np.load(io.BytesIO(raw))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean over rows of sum_c (p_c - 1[c = label])^2."""
    return float(np.mean(((probs - np.eye(probs.shape[1])[labels]) ** 2).sum(axis=1)))


def interval_metrics() -> list[str]:
    """The regression metrics that apply to an interval with a level (none until the
    interval metrics exist)."""
    pred = P.Interval([0.0, 1.0], [1.0, 2.0], level=0.9)
    return [s.name for s in registry.specs("regression") if s.why_not(pred) is None]


# --------------------------------------------------------------------------------------------
# packing (no server)
# --------------------------------------------------------------------------------------------


def test_interval_packs_its_level() -> None:
    a = interval_data()
    kind, arrays = prediction_arrays(P.Interval(a["lower"], a["upper"], level=0.8))
    assert kind == "interval" and set(arrays) == {"lower", "upper", "level"}
    assert arrays["level"].shape == () and float(arrays["level"]) == 0.8
    kind, arrays = prediction_arrays(P.Interval(a["lower"], a["upper"]))
    assert set(arrays) == {"lower", "upper"}
    # JSON: the level is a number in the prediction, not a list
    doc = json.loads(encode_json("interval", {**arrays, "level": np.asarray(0.8)}, {}))
    assert doc["prediction"]["level"] == 0.8
    assert doc["prediction"]["lower"] == a["lower"].tolist()
    # NPZ: a 0-d member
    body = encode_body("interval", {**arrays, "level": np.asarray(0.8)}, {}, format="npz")
    with npz_members(body) as npz:
        assert npz["level"].shape == () and float(npz["level"]) == 0.8


def test_prediction_set_packs_sets_probs_and_estimates() -> None:
    a = set_data()
    score = np.linspace(0.0, 1.0, N)
    pred = P.PredictionSet(a["sets"], probs=a["probs"], estimates={"score": score})
    kind, arrays = prediction_arrays(pred)
    assert kind == "prediction_set"
    assert set(arrays) == {"sets", "probs", "estimate:score"}
    assert arrays["sets"].dtype == np.bool_
    doc = json.loads(encode_json(kind, arrays, {}))
    assert doc["prediction"]["sets"] == a["sets"].tolist()  # true/false
    assert doc["prediction"]["estimates"]["score"] == score.tolist()
    body = encode_body(kind, arrays, {}, format="npz")
    with npz_members(body) as npz:
        assert npz["sets"].dtype == np.bool_
        np.testing.assert_array_equal(npz["sets"], a["sets"])


def test_infer_kind_of_the_new_fields() -> None:
    assert infer_kind(["lower", "upper", "y"]) == "interval"
    assert infer_kind(["lower", "upper", "level", "y"]) == "interval"
    assert infer_kind(["sets", "labels"]) == "prediction_set"
    # sets with the probabilities they came from are one prediction set, not probs
    assert infer_kind(["sets", "probs", "labels"]) == "prediction_set"
    assert infer_kind(["probs", "labels"]) == "probs"
    with pytest.raises(BadRequest, match="cannot infer"):
        infer_kind(["lower", "y"])


# --------------------------------------------------------------------------------------------
# against a live server
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "npz"])
def test_client_submits_prediction_sets(live_server: Live, fmt: str) -> None:
    a = set_data(seed=3)
    want = brier(a["probs"], a["labels"])
    with Client(live_server.url, live_server.new_key(f"sets-{fmt}")) as client:
        obj = client.submit(
            P.PredictionSet(a["sets"], probs=a["probs"]),
            a["labels"],
            metrics=["brier"],
            format=fmt,
            wait=True,
            timeout=60,
        )
        # a mapping of arrays named as in the API: the kind is inferred from them
        mapping = client.submit(
            {"sets": a["sets"].astype(np.int64), "probs": a["probs"]},
            a["labels"],
            metrics=["brier"],
            format=fmt,
            wait=True,
            timeout=60,
        )
        with pytest.raises(BadRequest) as info:
            client.submit(P.PredictionSet(a["sets"]), a["labels"], metrics=["brier"], format=fmt)
    for final in (obj, mapping):
        assert final.kind == "prediction_set" and final.result is not None
        assert final.result.value("brier") == pytest.approx(want, rel=1e-12)
    assert (info.value.code, info.value.field) == ("metric_not_applicable", "analyses.metrics")


def test_client_submits_an_interval(live_server: Live) -> None:
    a = interval_data(seed=4)
    pred = P.Interval(a["lower"], a["upper"], level=0.9)
    expected = interval_metrics()
    with Client(live_server.url, live_server.new_key("interval")) as client:
        if not expected:
            with pytest.raises(BadRequest) as info:
                client.submit(pred, a["y"], metrics="all")
            assert info.value.code == "metric_not_applicable"
            assert "interval prediction" in str(info.value)
            return
        final = client.submit(pred, a["y"], metrics="all", wait=True, timeout=60)
    assert final.kind == "interval" and final.result is not None
    assert sorted(final.result.metrics) == sorted(expected)


# --------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------


def test_cli_submits_a_csv_of_sets(live_server: Live, tmp_path: Path) -> None:
    """Columns sets_0.. (true/false) and probs_0.. gathered into matrices; the kind inferred."""
    a = set_data(seed=5)
    columns: dict[str, Any] = {"labels": a["labels"]}
    for c in range(C):
        columns[f"sets_{c}"] = np.where(a["sets"][:, c], "true", "false")
        columns[f"probs_{c}"] = a["probs"][:, c]
    path = write_csv(tmp_path / "sets.csv", columns)
    got = cli(
        "submit",
        str(path),
        "--metrics",
        "brier",
        "--wait",
        "--json",
        url=live_server.url,
        key=live_server.new_key("cli-sets"),
    )
    assert got.exit_code == 0, got.stderr
    doc = loads(got.stdout)
    assert doc["provenance"]["kind"] == "prediction_set"
    assert doc["metrics"]["brier"]["value"] == pytest.approx(
        brier(a["probs"], a["labels"]), rel=1e-9
    )


def test_cli_reads_a_level_column_as_one_number(tmp_path: Path) -> None:
    a = interval_data(seed=6)
    same = write_csv(tmp_path / "same.csv", {**a, "level": np.full(N, 0.9)})
    got = cli("evaluate", str(same), "--json")
    if interval_metrics():
        assert got.exit_code == 0, got.stderr
    else:
        # nothing to compute yet: the document says so rather than showing an empty table
        assert got.exit_code == 0, got.stderr
        doc = loads(got.stdout)
        assert doc["metrics"] == {}
        assert any("no regression metric applies to this interval" in w for w in doc["warnings"])
    level = np.full(N, 0.9)
    level[7] = 0.8
    varying = write_csv(tmp_path / "varying.csv", {**a, "level": level})
    got = cli("evaluate", str(varying), "--json")
    assert got.exit_code == 2
    assert "level" in got.stderr and "row 7" in got.stderr
