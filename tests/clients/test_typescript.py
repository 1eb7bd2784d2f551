"""The TypeScript client (clients/typescript): its types never drift from the OpenAPI document,
its code type-checks under strict tsc, a change of the document that the code relies on fails
the type check, the README's block is the example that tsc checks, and the compiled round trip
and example work against the API served by uvicorn with a real Redis and Celery worker.

The live tests check what the client printed against the service's own answers read here with
httpx, and the metric values against their closed forms.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from scipy import stats

from tests.clients.typescript import DOCUMENT, PROJECT, Copy, copy_project, run
from tests.factories import gaussian_arrays
from tests.readme import README_URL, readme_block
from tests.uqeval.conftest import Live

N = 40
SEED = 21


def _crps(mean: np.ndarray, std: np.ndarray, y: np.ndarray) -> float:
    # Gneiting & Raftery (2007), eq. 21: the CRPS of N(mean, std²) in closed form.
    z = (y - mean) / std
    return float(
        np.mean(
            std * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
        )
    )


# ---------------------------------------------------------------------------- the types


def test_schema_is_generated_from_the_committed_document(ts_project: Path, tmp_path: Path) -> None:
    """src/schema.d.ts equals a fresh `npm run generate` of openapi/openapi.json."""
    fresh = copy_project(tmp_path)
    fresh.schema.unlink()
    proc = fresh.generate()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    committed = (PROJECT / "src" / "schema.d.ts").read_text(encoding="utf-8")
    generated = fresh.schema.read_text(encoding="utf-8")
    diff = "".join(
        list(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                generated.splitlines(keepends=True),
                "committed",
                "generated",
            )
        )[:60]
    )
    assert generated == committed, (
        "clients/typescript/src/schema.d.ts is out of date with openapi/openapi.json: run "
        f"`npm run generate` in clients/typescript\n{diff}"
    )


def test_client_type_checks(ts_compiled: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """tsc (strict) over the client, the round trip and the README's example (the files of
    tsconfig.json's ``include``, in a copy of the project): no error, no output. The run is the
    one that compiles them for the live tests (``ts_compiled``)."""
    _, proc = ts_compiled
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "", proc.stdout


def _rename_metric_value(doc: dict[str, Any]) -> None:
    # MetricResult allows extra members: the old name then reads as `unknown`, not a number.
    metric = doc["components"]["schemas"]["MetricResult"]
    metric["properties"]["estimate"] = metric["properties"].pop("value")
    metric["required"] = ["estimate" if r == "value" else r for r in metric["required"]]


def _drop_leaderboard_entries(doc: dict[str, Any]) -> None:
    board = doc["components"]["schemas"]["Leaderboard"]
    del board["properties"]["entries"]
    board["required"].remove("entries")


def _retype_submission_id(doc: dict[str, Any]) -> None:
    accepted = doc["components"]["schemas"]["SubmissionAccepted"]
    accepted["properties"]["id"] = {"type": "integer", "title": "Id"}


#: Changes of the document under fields the code uses, and where and how tsc must object.
CHANGES: list[tuple[Callable[[dict[str, Any]], None], str, str]] = [
    (_rename_metric_value, "src/roundtrip.ts", "'unknown'"),
    (_drop_leaderboard_entries, "src/roundtrip.ts", "'entries'"),
    (_retype_submission_id, "src/roundtrip.ts", "'number'"),
]


def test_type_check_fails_when_the_document_changes_under_the_code(
    ts_project: Path, tmp_path: Path
) -> None:
    """A copy of the project with a document in which fields the code uses are renamed,
    removed and retyped: regenerated, its type check fails at each use (tsc reports every
    error of a run, so one run checks them all)."""
    doc = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    changed = copy.deepcopy(doc)
    for change, _, _ in CHANGES:
        before = copy.deepcopy(changed)
        change(changed)
        assert changed != before, change.__name__
    project: Copy = copy_project(tmp_path, changed)
    proc = project.generate()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert project.schema.read_text(encoding="utf-8") != (
        PROJECT / "src" / "schema.d.ts"
    ).read_text(encoding="utf-8")
    proc = project.tsc("--noEmit")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"tsc accepted the changed document:\n{output}"
    errors = [line for line in output.splitlines() if "error TS" in line]
    for change, where, what in CHANGES:
        assert any(where in line and what in line for line in errors), (change.__name__, output)


def test_readme_block_is_the_type_checked_example() -> None:
    """The README's TypeScript block is examples/quickstart.ts, which tsc checks (above) and
    the live test runs."""
    example = (PROJECT / "examples" / "quickstart.ts").read_text(encoding="utf-8")
    assert readme_block("typescript") == example.rstrip("\n")
    assert README_URL in example


# ---------------------------------------------------------------------------- live


def _admin(live: Live) -> httpx.Client:
    return httpx.Client(
        base_url=live.url, headers={"Authorization": f"Bearer {live.admin_key}"}, timeout=30
    )


def _wait_succeeded(http: httpx.Client, sub_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    for _ in range(int(timeout_s / 0.05)):
        r = http.get(f"/v1/submissions/{sub_id}")
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        if doc["status"] in ("succeeded", "failed", "cancelled"):
            assert doc["status"] == "succeeded", doc
            return doc
        time.sleep(0.05)
    raise AssertionError(f"submission {sub_id} did not end in {timeout_s} s")


@pytest.fixture(scope="module")
def benchmark(live_module: Live) -> dict[str, Any]:
    """A regression benchmark with hidden seeded targets and one public rival entry."""
    a = gaussian_arrays(N, SEED)
    with _admin(live_module) as admin:
        r = admin.post(
            "/v1/benchmarks",
            json={
                "name": "ts-client-board",
                "primary_metric": "crps",
                "metrics": ["crps", "mae", "nll"],
                "bootstrap": {"n_resamples": 50},
                "seed": 3,
                "y": a["y"].tolist(),
            },
        )
        assert r.status_code == 201, r.text
        bench: dict[str, Any] = r.json()
    rival = {"Authorization": f"Bearer {live_module.new_key('ts-rival')}"}
    with httpx.Client(base_url=live_module.url, headers=rival, timeout=30) as http:
        r = http.post(
            "/v1/submissions",
            json={
                "model_name": "rival",
                "benchmark_id": bench["id"],
                "visibility": "public",
                "prediction": {
                    "kind": "gaussian",
                    "mean": (a["mean"] + 0.5).tolist(),
                    "std": (2 * a["std"]).tolist(),
                },
            },
        )
        assert r.status_code == 202, r.text
        _wait_succeeded(http, r.json()["id"])
    return bench


def _node(script: Path, *args: str, **env_vars: str) -> str:
    """The standard output of a compiled script run by node (which must succeed quietly)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
    env.update(env_vars)
    proc = run(["node", str(script), *args], script.parent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "", proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_roundtrip_against_a_live_server(
    ts_build: Path, live_server: Live, benchmark: dict[str, Any], tmp_path: Path
) -> None:
    """The compiled round trip submits to the benchmark, waits, reads the metrics and the
    board; each printed value is the server's own answer, and the metrics their closed forms."""
    a = gaussian_arrays(N, SEED)
    prediction = tmp_path / "prediction.json"
    prediction.write_text(json.dumps({"mean": a["mean"].tolist(), "std": a["std"].tolist()}))
    key = live_server.new_key("ts-client")
    out = _node(
        ts_build / "src" / "roundtrip.js",
        str(prediction),
        benchmark["id"],
        UQEVAL_URL=live_server.url,
        UQEVAL_KEY=key,
    )
    printed = json.loads(out)
    assert key not in out

    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as http:
        detail = http.get(f"/v1/submissions/{printed['submission_id']}").json()
        board = http.get(f"/v1/benchmarks/{benchmark['id']}/leaderboard").json()

    assert printed["status"] == detail["status"] == "succeeded"
    assert detail["model_name"] == "typescript-roundtrip"
    assert detail["benchmark_id"] == benchmark["id"]
    served = {name: m["value"] for name, m in detail["result"]["metrics"].items()}
    assert printed["metrics"] == served
    assert set(served) == {"crps", "mae", "nll"}
    assert served["crps"] == pytest.approx(_crps(a["mean"], a["std"], a["y"]), rel=1e-9)
    assert served["mae"] == pytest.approx(float(np.mean(np.abs(a["y"] - a["mean"]))), rel=1e-9)

    assert printed["leaderboard"] == {
        "benchmark_id": board["benchmark_id"],
        "metric": board["metric"],
        "direction": board["direction"],
        "ranks_status": board["ranks"]["status"],
        "total": board["total"],
        "entries": board["entries"],
    }
    assert board["metric"] == "crps"
    assert board["ranks"]["status"] == "current"
    # the honest forecast beats the shifted, widened rival
    assert [e["model_name"] for e in board["entries"]] == ["typescript-roundtrip", "rival"]
    assert board["entries"][0]["submission_id"] == printed["submission_id"]
    assert board["entries"][0]["value"] == served["crps"]


@pytest.mark.slow
def test_readme_example_against_a_live_server(
    ts_build: Path, live_server: Live, benchmark: dict[str, Any]
) -> None:
    """The README's example, compiled, with the live server's address: it prints the CRPS of
    its three rows, the board's entries and the size of the metric catalogue."""
    compiled = ts_build / "examples" / "quickstart.js"
    source = compiled.read_text(encoding="utf-8")
    assert README_URL in source
    live = compiled.with_name("quickstart_live.js")
    live.write_text(source.replace(README_URL, live_server.url), encoding="utf-8")
    key = live_server.new_key("ts-readme")
    out = _node(live, UQEVAL_KEY=key, BENCHMARK_ID=benchmark["id"])
    lines = out.splitlines()

    mean, std, y = np.array([0.1, 0.5, -0.2]), np.array([1.0, 0.8, 1.2]), np.array([0.0, 1.0, -1.0])
    label, value = lines[0].split()
    assert label == "crps"
    assert float(value) == pytest.approx(_crps(mean, std, y), rel=1e-9)

    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as http:
        board = http.get(f"/v1/benchmarks/{benchmark['id']}/leaderboard").json()
        catalogue = http.get("/v1/metrics").json()
    assert board["entries"], board
    rows = [line.split() for line in lines[1 : 1 + len(board["entries"])]]
    assert [(int(r), m, float(v)) for r, m, v in rows] == [
        (e["rank"], e["model_name"], e["value"]) for e in board["entries"]
    ]
    assert lines[1 + len(board["entries"]) :] == [f"{len(catalogue['metrics'])} metrics"]
