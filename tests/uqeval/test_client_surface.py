"""Client and AsyncClient offer the same calls: each public method of one is a method of the
other with the same parameters, defaults and documentation, a coroutine (or an async iterator
where the synchronous one is an iterator) on AsyncClient. No server: only the classes are
read, and a connection to a loopback port that nothing listens on."""

from __future__ import annotations

import asyncio
import inspect
import socket
import subprocess
import sys

import pytest

from uqeval import AsyncClient, Client
from uqeval.errors import ServerUnavailable

#: The methods that only one of them has: how each closes its connections.
OWN = {"close", "aclose"}


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))} - OWN


def test_both_clients_have_the_same_calls_with_the_same_signatures() -> None:
    assert public(Client) == public(AsyncClient)
    assert {"submit", "wait", "resume_upload", "compare", "gate", "events"} <= public(Client)
    for name in sorted(public(Client)):
        sync, asynchronous = getattr(Client, name), getattr(AsyncClient, name)
        got, want = inspect.signature(asynchronous), inspect.signature(sync)
        assert list(got.parameters.values()) == list(want.parameters.values()), name
        assert sync.__doc__ and asynchronous.__doc__, name
        if inspect.isgeneratorfunction(sync):
            assert inspect.isasyncgenfunction(asynchronous), name
        else:
            assert inspect.iscoroutinefunction(asynchronous), name
            assert not inspect.iscoroutinefunction(sync), name


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_fails_the_same_on_both_clients() -> None:
    """The operation decides the outcome of a failed connection once: ServerUnavailable from
    the synchronous client at once, from the asynchronous one when the coroutine is awaited."""
    url = f"http://127.0.0.1:{closed_port()}"
    with (
        Client(url, "k", retries=0) as client,
        pytest.raises(ServerUnavailable, match="cannot reach the server"),
    ):
        client.health()

    async def main() -> None:
        async with AsyncClient(url, "k", retries=0) as client:
            pending = client.health()
            assert inspect.iscoroutine(pending)
            with pytest.raises(ServerUnavailable, match="cannot reach the server"):
                await pending

    asyncio.run(main())


def test_the_client_and_the_command_line_load_without_the_metric_library() -> None:
    """``import uqeval`` and the command line read the kinds' tables (service.kinds) without
    loading uqcore, scipy or the service's server side: a client's start-up (each ``uqeval``
    command) costs a fraction of a second, not the seconds those imports take. In a fresh
    interpreter, as a user's script or shell starts."""
    heavy = ("uqcore", "scipy", "numba", "worker", "celery", "redis", "fastapi", "matplotlib")
    code = (
        "import sys, uqeval, uqeval.client, uqeval.aclient, uqeval.arrays, uqeval.cli\n"
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"loaded at import: {proc.stdout.strip()}"
