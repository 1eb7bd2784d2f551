"""Quality gates end to end: POST /v1/gates on a live server with the real worker, the
``uqeval gate`` process's exit codes, the decision against an independent bootstrap, and the
readability and validation rules."""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest

from tests.uqeval.cli_invoke import cli_process
from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqcore.stability.weights import Resampler
from uqeval import Client
from uqeval.errors import BadRequest, NotFound

N, B, SEED = 200, 199, 5


@pytest.fixture(scope="module")
def setup(live_module: Live) -> dict:
    rng = np.random.default_rng(21)
    mean, std = rng.normal(size=N), rng.uniform(0.5, 1.5, size=N)
    y = mean + std * rng.normal(size=N)
    with Client(live_module.url, live_module.admin_key) as admin:
        bench = admin.create_benchmark(
            "gate-bench", y=y, primary_metric="mae", metrics="mae,crps",
            bootstrap={"n_resamples": B}, seed=SEED,
        )  # fmt: skip
        other = admin.create_benchmark("gate-other", y=y, primary_metric="mae", metrics="mae")
    key_a, key_b = live_module.new_key("gate-a"), live_module.new_key("gate-b")
    with Client(live_module.url, key_a) as a, Client(live_module.url, key_b) as b:
        good = a.submit(P.Gaussian(mean, std), benchmark=bench, model_name="good", wait=True)
        bad = a.submit(P.Gaussian(mean + 1.0, std), benchmark=bench, model_name="bad", wait=True)
        near = a.submit(P.Gaussian(mean + 0.05, std), benchmark=bench, model_name="n", wait=True)
        elsewhere = a.submit(P.Gaussian(mean, std), benchmark=other, model_name="o", wait=True)
        private_b = b.submit(P.Gaussian(mean, std), benchmark=bench, model_name="b", wait=True)
    return {
        "url": live_module.url, "a": key_a, "b": key_b, "bench": bench.id, "y": y,
        "mean": mean, "good": good.id, "bad": bad.id, "near": near.id,
        "elsewhere": elsewhere.id, "private_b": private_b.id,
    }  # fmt: skip


def gate_cli(s: dict, cand: str, ref: str, *checks: str) -> tuple[int, dict]:
    args = ["gate", "--benchmark", s["bench"], "--candidate", cand, "--reference", ref]
    for c in checks:
        args += ["--check", c]
    proc = cli_process(*args, "--json", "--timeout", "120", url=s["url"], key=s["a"])
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc


@pytest.mark.slow
def test_worse_fails_better_passes_from_the_cli_process(setup: dict) -> None:
    s = setup
    code, doc = gate_cli(s, s["bad"], s["good"], "mae:0.1")
    assert code == 1 and doc["passed"] is False and doc["checks"][0]["outcome"] == "fail"
    code, doc = gate_cli(s, s["good"], s["bad"], "mae:0", "crps:0")
    assert code == 0 and doc["passed"] is True
    assert doc["checks"][0]["degradation"] < 0  # the candidate is better
    # relative: a shift of 1 raises the MAE by far more than 5 %, less than 300 %
    code, _ = gate_cli(s, s["bad"], s["good"], "mae:5%")
    assert code == 1
    code, doc = gate_cli(s, s["bad"], s["good"], "mae:300%")
    assert code == 0 and doc["checks"][0]["mode"] == "relative"
    assert doc["checks"][0]["allowance"] == pytest.approx(3.0 * doc["checks"][0]["reference"])
    # usage errors exit 2
    proc = cli_process("gate", "--benchmark", s["bench"], "--candidate", s["bad"],
                       "--reference", s["good"], "--check", "mae=0.1", url=s["url"], key=s["a"])  # fmt: skip
    assert proc.returncode == 2 and "metric:allowed" in proc.stderr
    code, _ = gate_cli(s, s["bad"], s["good"], "nll_skill:0.1")  # not a metric of the benchmark
    assert code == 2


def test_decision_and_bound_against_an_independent_bootstrap(setup: dict) -> None:
    s = setup
    with Client(s["url"], s["a"]) as a:
        g = a.gate(s["bench"], s["near"], s["good"], ["mae:0.3", "mae:0.001"], timeout=120)
    y, mean = s["y"], s["mean"]
    w = np.stack([Resampler(N).counts(SEED, i) for i in range(B)]).astype(float)
    d = (w @ np.abs(y - mean - 0.05) - w @ np.abs(y - mean)) / w.sum(1)
    j = math.floor(0.05 * (B + 1) + 1e-9)
    low = np.sort(d)[j - 1]
    ps = [(1 + np.sum(d <= a)) / (B + 1) for a in (0.3, 0.001)]
    holm = [min(1.0, 2 * min(ps)), max(min(1.0, 2 * min(ps)), max(ps))]
    holm = holm if ps[0] <= ps[1] else holm[::-1]
    assert g.evidence["n_resamples"] == B and g.evidence["seed"] == SEED
    assert g.evidence["correction"] == "holm" and g.evidence["level"] == 0.95
    for c, p, adj in zip(g.checks, ps, holm, strict=True):
        assert c["low"] == pytest.approx(low, rel=1e-9)
        # non-admin keys see p-values rounded up to 0.01
        assert c["p_value"] == pytest.approx(math.ceil(round(p * 100, 9)) / 100)
        assert c["p_value_adjusted"] == pytest.approx(math.ceil(round(adj * 100, 9)) / 100)
        assert c["passed"] == (adj > 0.05)
    # a small degradation within a generous allowance passes
    assert g.checks[0]["outcome"] == "pass"
    assert g.checks[0]["degradation"] == pytest.approx(float(d.mean()), abs=0.05)


def test_readability_and_validation(setup: dict) -> None:
    s = setup
    with Client(s["url"], s["a"]) as a:
        with pytest.raises(NotFound):  # another team's private submission
            a.gate(s["bench"], s["private_b"], s["good"], "mae:0.1")
        with pytest.raises(BadRequest) as err:
            a.gate(s["bench"], s["good"], s["good"], "mae:0.1")
        assert "same submission" in str(err.value)
        with pytest.raises(BadRequest) as err:
            a.gate(s["bench"], s["elsewhere"], s["good"], "mae:0.1")
        assert err.value.field == "candidate"
        with pytest.raises(BadRequest):
            a.gate(s["bench"], s["bad"], s["good"], "crps_unknown:0.1")
        with pytest.raises(BadRequest):
            a.gate(s["bench"], s["bad"], s["good"], "mae:0.1", n_resamples=50)
        g = a.gate(s["bench"], s["bad"], s["good"], "mae:0.1", wait=False)
    headers = {"Authorization": f"Bearer {s['a']}"}
    with httpx.Client(base_url=s["url"], headers=headers, timeout=30) as http:
        body = {"benchmark_id": s["bench"], "candidate": s["bad"], "reference": s["good"],
                "checks": [{"metric": "mae", "allowed": -0.1}]}  # fmt: skip
        r = http.post("/v1/gates", json=body)
        assert r.status_code == 422 and "allowed" in r.text
        assert http.get(f"/v1/comparisons/{g.id}").status_code == 404  # a gate, not a comparison
    with Client(s["url"], s["b"]) as b, pytest.raises(NotFound):
        b.get_gate(g.id)  # another team's gate
