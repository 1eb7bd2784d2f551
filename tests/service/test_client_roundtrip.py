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

from tests.factories import gaussian_arrays
from tests.service._api import ADMIN_KEY, LiveServer

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

    _benchmark_round_trip(live_server, admin)


def _benchmark_round_trip(live_server: LiveServer, admin: Any) -> None:
    """Create a benchmark, a team and its key, submit against the benchmark, poll, read the
    leaderboard and compare two submissions, all through the generated client."""
    from uqeval_generated_client import AuthenticatedClient
    from uqeval_generated_client.api.admin import create_api_key, create_team
    from uqeval_generated_client.api.benchmarks import create_benchmark, get_leaderboard
    from uqeval_generated_client.api.comparisons import create_comparison, get_comparison
    from uqeval_generated_client.api.submissions import create_submission, get_submission
    from uqeval_generated_client.models import (
        ApiKeyCreate,
        BenchmarkCreate,
        ComparisonCreate,
        ComparisonDetail,
        ErrorResponse,
        Leaderboard,
        SubmissionCreate,
        SubmissionDetail,
        TeamCreate,
    )

    y = gaussian_arrays(100, seed=1)["y"]
    bench = create_benchmark.sync(
        client=admin,
        body=BenchmarkCreate.from_dict(
            {
                "name": "generated",
                "primary_metric": "crps",
                "metrics": ["crps", "mae"],
                "bootstrap": {"n_resamples": 30},
                "y": y.tolist(),
            }
        ),
    )
    assert bench.n == 100
    team = create_team.sync(client=admin, body=TeamCreate(name="gen-team"))
    created = create_api_key.sync(
        client=admin, body=ApiKeyCreate(name="gen-member", team_id=team.team_id)
    )
    member = AuthenticatedClient(base_url=live_server.url, token=created.key)

    ids = []
    for scale in (0.2, 0.6):
        rng = np.random.default_rng(int(scale * 10))
        body = SubmissionCreate.from_dict(
            {
                "model_name": f"noise-{scale}",
                "benchmark_id": bench.id,
                "visibility": "public",
                "prediction": {
                    "kind": "gaussian",
                    "mean": (y + scale * rng.normal(size=100)).tolist(),
                    "std": [0.5] * 100,
                },
            }
        )
        accepted = create_submission.sync(client=member, body=body)
        deadline = time.monotonic() + 60
        while True:
            detail = get_submission.sync(client=member, sub_id=accepted.id)
            assert isinstance(detail, SubmissionDetail)
            if detail.status in ("succeeded", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, detail.status
            time.sleep(0.05)
        assert detail.status == "succeeded", detail.error
        ids.append(accepted.id)

    board = get_leaderboard.sync(client=member, bench_id=bench.id)
    assert isinstance(board, Leaderboard)
    assert board.direction == "lower"
    assert board.estimator is None
    assert [e.submission_id for e in board.entries] == [ids[0]]  # best of the team
    # An estimator applies to classification benchmarks only.
    refused = get_leaderboard.sync(client=member, bench_id=bench.id, estimator="entropy_bma")
    assert isinstance(refused, ErrorResponse)
    assert refused.error.field == "estimator"

    started = create_comparison.sync(
        client=member,
        body=ComparisonCreate.from_dict({"benchmark_id": bench.id, "submission_ids": ids}),
    )
    deadline = time.monotonic() + 60
    while True:
        cmp = get_comparison.sync(client=member, cmp_id=started.id)
        assert isinstance(cmp, ComparisonDetail)
        if cmp.status in ("succeeded", "failed"):
            break
        assert time.monotonic() < deadline, cmp.status
        time.sleep(0.05)
    assert cmp.status == "succeeded", cmp.error
    pair = cmp.result["pairs"][0]
    assert pair["metrics"]["crps"]["diff"] < 0
