"""The committed OpenAPI document matches the app, and every operation is fully described."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "export_openapi.py"


def _export_module() -> Any:
    spec = importlib.util.spec_from_file_location("export_openapi", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return json.loads((ROOT / "openapi" / "openapi.json").read_text(encoding="utf-8"))


def test_committed_document_matches_the_app(doc: dict[str, Any]):
    export = _export_module()
    fresh = export.build()
    assert doc == fresh, "openapi/openapi.json is out of date: run python scripts/export_openapi.py"
    assert export.main(["--check"]) == 0


def test_drift_is_detected(tmp_path: Path, doc: dict[str, Any]):
    export = _export_module()
    stale = dict(doc, info={**doc["info"], "version": "0.0.0"})
    path = tmp_path / "openapi.json"
    path.write_text(export.render(stale), encoding="utf-8")
    assert export.main(["--check", "--output", str(path)]) == 1
    assert export.main(["--output", str(path)]) == 0
    assert export.main(["--check", "--output", str(path)]) == 0


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op) for path, item in doc["paths"].items() for method, op in item.items()
    ]


def test_every_operation_is_described(doc: dict[str, Any]):
    ids = set()
    for method, path, op in _operations(doc):
        where = f"{method.upper()} {path}"
        assert op.get("operationId", "").isidentifier(), where
        ids.add(op["operationId"])
        assert op.get("tags"), where
        assert op.get("summary") and op.get("description"), where
        success = [s for s in op["responses"] if s.startswith("2")]
        assert success, where
        for status, response in op["responses"].items():
            content = response.get("content")
            if status in ("204", "304"):  # no body: no content, not modified
                assert not content, where
                continue
            assert content, (where, status)
            for media in content.values():
                assert "schema" in media, (where, status)
            if (status.startswith("4") or status.startswith("5")) and path != "/readyz":
                ref = content["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorResponse"), (where, status)
            if status.startswith("2") and "application/json" in content:
                ref = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                assert doc["components"]["schemas"][ref].get("examples"), (where, ref)
    assert len(ids) == len(_operations(doc))
    assert "HTTPValidationError" not in doc["components"]["schemas"]


def test_response_and_request_models_carry_examples(doc: dict[str, Any]):
    schemas = doc["components"]["schemas"]
    for name in (
        "SubmissionCreate",
        "SubmissionRequest",
        "SubmissionAccepted",
        "SubmissionDetail",
        "MetricCatalogue",
        "ErrorResponse",
        "ApiKeyCreate",
        "ApiKeyCreated",
        "Readiness",
        "Analyses",
        "GaussianPrediction",
    ):
        assert schemas[name].get("examples"), name
    body = doc["paths"]["/v1/submissions"]["post"]["requestBody"]
    # application/x-npz is accepted too, as an alias documented in the description (listing
    # it would make client generators skip the operation's binary form).
    assert set(body["content"]) == {"application/json", "application/octet-stream"}
    assert "application/x-npz" in body["description"]
    assert "`request`" in body["description"]
    kinds = schemas["SubmissionCreate"]["properties"]["prediction"]["discriminator"]["mapping"]
    assert set(kinds) == {
        "gaussian",
        "laplace",
        "student_t",
        "mixture",
        "samples",
        "quantiles",
        "point_uncertainty",
        "interval",
        "probs",
        "logits",
        "ensemble",
        "dirichlet",
        "prediction_set",
    }
    ens = schemas["EnsemblePrediction"]
    assert set(ens["properties"]) == {"kind", "member_probs", "member_logits", "estimates"}
    assert ens["required"] == ["kind"]
    # optional fields are optional; a level is one number in (0, 1); sets hold booleans
    interval = schemas["IntervalPrediction"]
    assert sorted(interval["required"]) == ["kind", "lower", "upper"]
    level = next(s for s in interval["properties"]["level"]["anyOf"] if s.get("type") == "number")
    assert (level["exclusiveMinimum"], level["exclusiveMaximum"]) == (0, 1)
    sets = schemas["PredictionSetPrediction"]
    assert sorted(sets["required"]) == ["kind", "sets"]
    assert set(sets["properties"]) == {"kind", "sets", "probs", "estimates"}
    entry = sets["properties"]["sets"]["items"]["items"]
    assert {"type": "boolean"} in entry["anyOf"]
    assert {"labels", "soft_labels", "ood"} <= set(schemas["SubmissionCreate"]["properties"])


def test_metric_parameters_are_published_with_their_domains(doc: dict[str, Any]):
    from uqcore import registry

    params = doc["components"]["schemas"]["Analyses"]["properties"]["params"]["properties"]
    assert sorted(params) == sorted(registry.names())
    for spec in registry.specs():
        entry = params[spec.name]
        shapes = entry.get("anyOf", [entry])
        shape = next(s for s in shapes if s["title"] == f"{spec.task} {spec.name}")
        assert shape["additionalProperties"] is False
        assert shape["properties"] == {k: o.schema() for k, o in spec.options.items()}
