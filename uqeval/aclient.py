"""The asynchronous client: :class:`AsyncClient` has the methods of :class:`uqeval.Client`,
as coroutines on an ``httpx.AsyncClient``.

>>> async with AsyncClient("http://127.0.0.1:8000", key) as client:   # doctest: +SKIP
...     sub = await client.submit({"mean": mean, "std": std}, y, metrics="crps", wait=True)
"""

from __future__ import annotations

import httpx

from uqeval._base import UPLOAD_THRESHOLD_BYTES
from uqeval._calls import Calls
from uqeval._transport import AsyncTransport

__all__ = ["AsyncClient"]


class AsyncClient(AsyncTransport, Calls):
    """An asynchronous client of the uq-eval API: the parameters and methods of
    :class:`uqeval.Client`, each method a coroutine (``async with`` closes it).
    """

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        npz_threshold: int = 64 * 1024,
        upload_threshold_bytes: int = UPLOAD_THRESHOLD_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            url,
            key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_retry_wait=max_retry_wait,
            npz_threshold=npz_threshold,
            upload_threshold_bytes=upload_threshold_bytes,
        )
        self._http = httpx.AsyncClient(transport=transport, **self._http_options())

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()
