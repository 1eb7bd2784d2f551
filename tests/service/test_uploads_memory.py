"""The API's memory while it takes a large NPZ body: a 2·10^7-point float32 Gaussian (~240 MB)
posted to uvicorn in a subprocess, whose peak resident memory (VmHWM, reset before the upload
through /proc/<pid>/clear_refs) may grow by less than 256 MB."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.lib.format as npy_format
import pytest

from service.settings import Settings
from service.store import Store
from tests.service._api import NPZ, error_of, new_key
from tests.uqeval.conftest import start_api, stop_api

# ~20-25 s on 2 shared cores (uvicorn's start, a 240 MB body written and posted): in CI.
pytestmark = pytest.mark.slow

N = 20_000_000
BLOCK = 1 << 20
LIMIT = 256 << 20


def write_gaussian_npz(path: Path, n: int, *, bad_last_std: bool) -> None:
    """A float32 Gaussian NPZ (mean, std, y and the request) written block by block (seeded),
    never whole in this process' memory; with ``bad_last_std`` the last std is -1."""
    rng = np.random.default_rng(20)
    request = {"kind": "gaussian", "model_name": "large", "analyses": {"metrics": ["mae"]}}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name in ("mean", "std", "y"):
            with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                npy_format.write_array_header_1_0(
                    fh,
                    {"descr": "<f4", "fortran_order": False, "shape": (n,)},
                )
                for start in range(0, n, BLOCK):
                    m = min(BLOCK, n - start)
                    if name == "std":
                        block = rng.uniform(0.5, 1.5, size=m).astype(np.float32)
                        if bad_last_std and start + m == n:
                            block[-1] = -1.0
                    else:
                        block = rng.normal(size=m).astype(np.float32)
                    fh.write(block.tobytes())
        with zf.open("request.npy", "w") as fh:
            npy_format.write_array(fh, np.array(json.dumps(request)))


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            out[name] = int(value.split()[0]) * 1024
    return out


@pytest.fixture
def api_process(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """uvicorn serving the app in a subprocess, on a Redis database no worker consumes."""
    assert settings.redis_url is not None
    base = (
        settings.redis_url.rsplit("/", 1)[0]
        if settings.redis_url.count("/") > 2
        else settings.redis_url
    )
    idle = settings.model_copy(update={"redis_url": f"{base}/9", "data_dir": tmp_path / "data"})
    live = start_api(idle, tmp_path / "api.log")
    try:
        yield live.url, live.proc.pid
    finally:
        stop_api(live.proc)
        store = Store.from_url(idle.redis_url or "", idle)
        store.client.flushdb()
        store.close()


def _peak_growth(url: str, pid: int, body: Path, key: dict[str, str]) -> tuple[int, httpx.Response]:
    # warm up: the first NPZ request imports what the upload path needs
    small = body.parent / "small.npz"
    write_gaussian_npz(small, 1000, bad_last_std=True)
    with httpx.Client(base_url=url, timeout=300) as http:
        assert (
            http.post(
                "/v1/submissions", content=small.read_bytes(), headers={**key, **NPZ}
            ).status_code
            == 422
        )
        base = _status(pid)["VmRSS"]
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        with open(body, "rb") as fh:
            r = http.post(
                "/v1/submissions",
                content=iter(lambda: fh.read(1 << 20), b""),
                headers={**key, **NPZ, "Content-Length": str(body.stat().st_size)},
            )
        peak = _status(pid)["VmHWM"]
    return peak - base, r


def test_large_refused_body_keeps_api_memory_bounded(
    api_process: tuple[str, int], tmp_path: Path, record_property: Any
) -> None:
    """Streamed, extracted and validated to its last row (refused there): memory bounded."""
    url, pid = api_process
    body = tmp_path / "large.npz"
    write_gaussian_npz(body, N, bad_last_std=True)
    assert body.stat().st_size > 12 * N
    with httpx.Client(base_url=url, timeout=60) as http:
        key = new_key(http, "memory")
    growth, r = _peak_growth(url, pid, body, key)
    assert r.status_code == 422, r.text
    assert (error_of(r)["field"], error_of(r)["index"]) == ("std", N - 1)
    record_property("api_peak_rss_growth_bytes", growth)
    assert growth < LIMIT, f"peak RSS grew by {growth / 2**20:.0f} MiB"


def test_large_accepted_body_keeps_api_memory_bounded(
    api_process: tuple[str, int], tmp_path: Path, record_property: Any
) -> None:
    url, pid = api_process
    body = tmp_path / "large.npz"
    write_gaussian_npz(body, N, bad_last_std=False)
    with httpx.Client(base_url=url, timeout=60) as http:
        key = new_key(http, "memory")
    growth, r = _peak_growth(url, pid, body, key)
    assert r.status_code == 202, r.text
    record_property("api_peak_rss_growth_bytes", growth)
    assert growth < LIMIT, f"peak RSS grew by {growth / 2**20:.0f} MiB"
