"""The Python client of the uq-eval service: submit predictions, wait for results, read
leaderboards, compare submissions, and the admin calls.

>>> from uqeval import Client                                       # doctest: +SKIP
>>> with Client("http://127.0.0.1:8000", "uqe_...") as client:      # doctest: +SKIP
...     sub = client.submit(Gaussian(mean, std), y, metrics="crps,nll", wait=True)
...     print(sub.result.value("crps"))
"""

from __future__ import annotations

import httpx

from uqeval._base import UPLOAD_THRESHOLD_BYTES
from uqeval._calls import Calls
from uqeval._transport import SyncTransport

__all__ = ["Client"]


class Client(SyncTransport, Calls):
    """A synchronous client of the uq-eval API.

    Parameters
    ----------
    url : str, optional
        The server, e.g. ``http://127.0.0.1:8000``. Default: ``$UQEVAL_URL``, else ``url`` in
        the config file (``uqeval login``), else ``http://127.0.0.1:8000``.
    key : str, optional
        The API key. Default: ``$UQEVAL_KEY``, else ``key`` in the config file. It is sent
        as ``Authorization: Bearer`` and never shown in a repr, a message or a log.
    timeout : float
        Seconds allowed for connecting and for each read or write of one request.
    retries : int
        How many times a request is repeated after 429, 502, 503, 504 or a failed
        connection. A submission is repeated with the same Idempotency-Key, so it is never
        made twice; other writes are repeated only when the server did nothing (429, 503,
        or no connection).
    backoff : float
        The first wait (seconds) of the exponential backoff with jitter, when the server
        gives no Retry-After.
    max_retry_wait : float
        The longest wait before a repeat; a 429 whose Retry-After is longer (a spent daily
        quota) raises :class:`~uqeval.errors.RateLimited` at once.
    npz_threshold : int
        ``format="auto"`` sends NPZ when the arrays take this many bytes or more.
    upload_threshold_bytes : int
        An NPZ body of this many bytes or more (default 64 MiB) goes by the resumable upload
        (``POST /v1/uploads``): sent in parts, each checked by its SHA-256 and sent again
        (up to ``retries`` times) when it fails; an upload that stops midway raises
        :class:`~uqeval.errors.UploadInterrupted`, and :meth:`resume_upload` sends the rest.
    transport : httpx.BaseTransport, optional
        An httpx transport (for proxies, custom TLS or tests).

    Examples
    --------
    >>> with Client("http://127.0.0.1:8000", key) as client:      # doctest: +SKIP
    ...     sub = client.submit({"mean": mean, "std": std}, y, metrics="mae,crps", wait=True)
    ...     sub.result.value("crps")
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
        transport: httpx.BaseTransport | None = None,
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
        self._http = httpx.Client(transport=transport, **self._http_options())

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()
