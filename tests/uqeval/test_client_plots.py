"""The client's plots on a live server: ``Result.plots`` lists what the service serves, and
``Client.plot`` / ``AsyncClient.plot`` fetch each as PNG or SVG bytes."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.uqeval.conftest import Live
from uqcore import predictions as P
from uqeval import AsyncClient, Client
from uqeval.errors import NotFound

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_result_plots_load_through_the_client(live_server: Live) -> None:
    rng = np.random.default_rng(21)
    mean, std = rng.normal(size=120), rng.uniform(0.5, 2.0, size=120)
    y = mean + std * rng.normal(size=120)
    key = live_server.new_key("plots")
    with Client(live_server.url, key) as client:
        sub = client.submit(P.Gaussian(mean, std), y, metrics="crps,mae", stability=3, wait=True)
        assert sub.result is not None
        plots = sub.result.plots
        assert plots == sub.result.raw["plots"]
        for p in plots:
            assert p["url"] == f"/v1/submissions/{sub.id}/plots/{p['name']}"
            png = client.plot(sub, p["name"])
            assert png.startswith(PNG_MAGIC), p["name"]
            svg = client.plot(sub.id, p["name"], format="svg")
            assert b"<svg" in svg[:4000], p["name"]
        with pytest.raises(NotFound, match="no submission plot 'no_such_plot'"):
            client.plot(sub, "no_such_plot")
        with pytest.raises(ValueError, match="format"):
            client.plot(sub, "stability", format="gif")

        async def fetch() -> list[bytes]:
            async with AsyncClient(live_server.url, key) as aclient:
                return [await aclient.plot(sub.id, p["name"]) for p in plots]

        assert asyncio.run(fetch()) == [client.plot(sub, p["name"]) for p in plots]
