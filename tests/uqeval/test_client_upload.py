"""What the client sends: arrays from numpy, lists, torch and CuPy-like objects moved to the
host, JSON or NPZ chosen by size and dtype, gzip only where it pays, and the upload streamed in
chunks with its progress reported. The requests go to a real server and are evaluated."""

from __future__ import annotations

import gzip
import io
import itertools
import json

import httpx
import numpy as np
import pytest
import torch

import uqcore
from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqeval import Client
from uqeval.arrays import encode_body, infer_kind, prediction_arrays, to_host
from uqeval.errors import BadRequest


class Recorder(httpx.BaseTransport):
    """Forwards to the real server; keeps each request's headers and body size."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[tuple[str, dict[str, str], int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        self.requests.append((request.url.path, dict(request.headers), len(body)))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


class HostCopy:
    """Stands in for a CuPy array (CuPy is not installed): device memory reached only through
    ``.get()``, which copies it to a numpy array."""

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    def get(self) -> np.ndarray:
        return self._data.copy()


def test_to_host_takes_numpy_lists_torch_and_cupy_like() -> None:
    a = np.arange(4.0)
    assert to_host(a) is a
    assert to_host([1, 2]).dtype == np.int64
    t = torch.arange(3, dtype=torch.float32, requires_grad=True) * 2
    h = to_host(t)
    assert isinstance(h, np.ndarray) and h.dtype == np.float32 and h.tolist() == [0, 2, 4]
    assert to_host(torch.ones(2, dtype=torch.bfloat16)).dtype == np.float32
    assert to_host(HostCopy(np.ones(3))).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(BadRequest, match="std"):
        to_host([[1.0], [1.0, 2.0]], "std")


def test_infer_kind_from_member_names() -> None:
    assert infer_kind(["mean", "std", "y"]) == "gaussian"
    assert infer_kind(["loc", "scale"]) == "laplace"
    assert infer_kind(["loc", "scale", "df", "sample_weight"]) == "student_t"
    assert infer_kind(["member_logits", "labels", "estimate:x"]) == "ensemble"
    assert infer_kind(["levels", "values"]) == "quantiles"
    with pytest.raises(BadRequest, match="kind") as info:
        infer_kind(["mu", "sigma"])
    assert info.value.field == "kind" and info.value.exit_code == 2


def test_torch_prediction_and_tensors_are_evaluated(live_server: Live) -> None:
    rng = np.random.default_rng(5)
    mean, std = rng.normal(size=64), rng.uniform(0.5, 2.0, size=64)
    y = mean + std * rng.normal(size=64)
    want = float(uqcore.metric("crps", P.Gaussian(mean, std), y))
    pred_t = P.Gaussian(torch.tensor(mean), torch.tensor(std))
    assert prediction_arrays(pred_t)[1]["mean"].tolist() == mean.tolist()
    with Client(live_server.url, live_server.new_key("torch")) as client:
        a = client.submit(pred_t, torch.tensor(y), metrics=["crps"], wait=True, timeout=60)
        b = client.submit(
            {"mean": torch.tensor(mean), "std": HostCopy(std), "y": y.tolist()},
            metrics="crps",
            wait=True,
            timeout=60,
        )
    for sub in (a, b):
        assert sub.result is not None
        assert sub.result.value("crps") == pytest.approx(want, rel=1e-12)


def test_format_choice_and_gzip_where_it_pays(live_server: Live) -> None:
    rng = np.random.default_rng(6)
    n = 20_000
    recorder = Recorder()
    with Client(live_server.url, live_server.new_key("gzip"), transport=recorder) as client:
        # Few distinct values: compresses well.
        mean = np.round(rng.normal(size=n), 1)
        std = np.full(n, 1.5)
        y = np.round(mean + rng.normal(size=n), 1)
        packed = client.submit({"mean": mean, "std": std}, y, metrics="mae")
        # Random float64: incompressible.
        mean_r, std_r = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
        y_r = mean_r + rng.normal(size=n)
        plain = client.submit({"mean": mean_r, "std": std_r}, y_r, metrics="mae")
        small = client.submit({"mean": mean[:10], "std": std[:10]}, y[:10], metrics="mae")
        results = [client.result(s.id, wait=True) for s in (packed, plain, small)]
    posts = [r for r in recorder.requests if r[0] == "/v1/submissions" and r[2]]
    (_, h_packed, n_packed), (_, h_plain, n_plain), (_, h_small, _) = posts
    assert h_packed["content-type"] == "application/x-npz"
    assert h_packed.get("content-encoding") == "gzip" and n_packed < 0.5 * 3 * 8 * n
    assert h_plain["content-type"] == "application/x-npz"
    assert "content-encoding" not in h_plain and n_plain > 3 * 8 * n
    assert h_small["content-type"] == "application/json"
    wants = [
        np.mean(np.abs(mean - y)),
        np.mean(np.abs(mean_r - y_r)),
        np.mean(np.abs(mean[:10] - y[:10])),
    ]
    for result, want in zip(results, wants, strict=True):
        assert result.value("mae") == pytest.approx(want, rel=1e-12)


def test_upload_progress_is_monotone_and_ends_at_total(live_server: Live) -> None:
    rng = np.random.default_rng(8)
    n = 60_000  # about 1.4 MB of NPZ: many chunks
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    calls: list[tuple[int, int]] = []
    recorder = Recorder()
    with Client(live_server.url, live_server.new_key("upload"), transport=recorder) as client:
        sub = client.submit(
            {"mean": mean, "std": std},
            mean + rng.normal(size=n),
            metrics="mae",
            upload_progress=lambda sent, total: calls.append((sent, total)),
        )
    assert sub.status in ("queued", "running", "succeeded")
    sent_bytes = next(r[2] for r in recorder.requests if r[0] == "/v1/submissions")
    assert len(calls) > 10
    assert calls[0] == (0, sent_bytes) and calls[-1] == (sent_bytes, sent_bytes)
    assert all(total == sent_bytes for _, total in calls)
    assert all(a[0] < b[0] for a, b in itertools.pairwise(calls))


def test_encode_body_keeps_float32_and_the_request_member() -> None:
    x = np.linspace(0, 1, 50, dtype=np.float32)
    body = encode_body("gaussian", {"mean": x, "std": x + 1, "y": x}, {"model_name": "m"})
    assert body.content_type == "application/x-npz"  # float32 is never widened to JSON
    raw = body.content if not body.gzipped else gzip.decompress(body.content)
    with np.load(io.BytesIO(raw)) as npz:
        assert npz["mean"].dtype == np.float32 and np.array_equal(npz["mean"], x)
        assert json.loads(str(npz["request"])) == {"kind": "gaussian", "model_name": "m"}
    forced = encode_body("gaussian", {"mean": x, "std": x + 1}, {}, format="json")
    assert forced.content_type == "application/json"
    with pytest.raises(BadRequest, match="format"):
        encode_body("gaussian", {"mean": x}, {}, format="csv")


def test_nan_goes_as_npz_and_the_server_names_the_row(live_server: Live) -> None:
    mean = np.zeros(8)
    std = np.ones(8)
    std[3] = np.nan
    key = live_server.new_key("nan")
    with Client(live_server.url, key) as client, pytest.raises(BadRequest) as info:
        client.submit({"mean": mean, "std": std}, np.zeros(8))
    err = info.value
    assert err.status == 422 and err.field is not None and "std" in err.field
    assert err.index == 3 and "[3]" in str(err)
