"""A Python client generated with openapi-python-client from the committed OpenAPI document
submits a batch, polls it and reads the results from the service running under uvicorn."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.service._api import ADMIN_KEY, LiveServer, gaussian_arrays

pytest_plugins = ["tests.service._api"]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "uqeval_generated_client"


@pytest.fixture(scope="module")
def client_package(tmp_path_factory: pytest.TempPathFactory) -> Any:
    exe = Path(sys.executable).parent / "openapi-python-client"
    generator = str(exe) if exe.exists() else shutil.which("openapi-python-client")
    assert generator, "openapi-python-client is not installed (dev extra)"
    out = tmp_path_factory.mktemp("client")
    config = out / "config.yaml"
    config.write_text(f"package_name_override: {PACKAGE}\npost_hooks: []\n")
    proc = subprocess.run(
        [
            generator,
            "generate",
            "--path",
            str(ROOT / "openapi" / "openapi.json"),
            "--output-path",
            str(out / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Warning" not in proc.stdout, proc.stdout
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_generated_client_round_trip(client_package: Any, live_server: LiveServer, worker):
    from uqeval_generated_client import AuthenticatedClient, Client
    from uqeval_generated_client.api.admin import create_api_key
    from uqeval_generated_client.api.metrics import list_metrics
    from uqeval_generated_client.api.submissions import (
        create_submission,
        get_submission,
        list_submissions,
    )
    from uqeval_generated_client.models import (
        ApiKeyCreate,
        ErrorResponse,
        GaussianPrediction,
        SubmissionAccepted,
        SubmissionCreate,
        SubmissionDetail,
    )

    anonymous = Client(base_url=live_server.url)
    catalogue = list_metrics.sync(client=anonymous)
    assert "crps" in [m.name for m in catalogue.metrics]

    admin = AuthenticatedClient(base_url=live_server.url, token=ADMIN_KEY)
    created = create_api_key.sync(client=admin, body=ApiKeyCreate(name="generated"))
    me = AuthenticatedClient(base_url=live_server.url, token=created.key)

    a = gaussian_arrays(500, seed=7)
    body = SubmissionCreate.from_dict(
        {
            "model_name": "generated-client",
            "prediction": {
                "kind": "gaussian",
                "mean": a["mean"].tolist(),
                "std": a["std"].tolist(),
            },
            "y": a["y"].tolist(),
            "analyses": {"metrics": ["mae", "crps"], "bootstrap": {"n_resamples": 20}},
        }
    )
    assert isinstance(body.prediction, GaussianPrediction)
    response = create_submission.sync_detailed(client=me, body=body, idempotency_key="gen-1")
    assert response.status_code == 202, response.content
    accepted = response.parsed
    assert isinstance(accepted, SubmissionAccepted)

    deadline = time.monotonic() + 60
    while True:
        detail = get_submission.sync(client=me, sub_id=accepted.id)
        assert isinstance(detail, SubmissionDetail)
        if detail.status in ("succeeded", "failed", "cancelled"):
            break
        assert time.monotonic() < deadline, detail.status
        time.sleep(0.05)
    assert detail.status == "succeeded", detail.error
    mae = detail.result.metrics["mae"]
    assert mae.value == pytest.approx(float(np.mean(np.abs(a["y"] - a["mean"]))), rel=1e-12)
    assert mae.interval.n_resamples == 20
    assert detail.result.provenance.n == 500

    page = list_submissions.sync(client=me)
    assert [s.id for s in page.items] == [accepted.id]

    # Errors parse into the error model.
    bad = SubmissionCreate.from_dict(
        {
            "model_name": "m",
            "prediction": {"kind": "gaussian", "mean": [0.0, 1.0], "std": [1.0, -1.0]},
            "y": [0.0, 1.0],
        }
    )
    rejected = create_submission.sync_detailed(client=me, body=bad)
    assert rejected.status_code == 422
    assert isinstance(rejected.parsed, ErrorResponse)
    assert (rejected.parsed.error.field, rejected.parsed.error.index) == ("prediction.std", 1)
