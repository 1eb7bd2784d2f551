"""Shared fixtures: array backends (numpy, array_api_strict, torch CPU when installed) and,
through :mod:`tests.stack`, the running stack (Redis, store, Celery worker)."""

from __future__ import annotations

import importlib
import importlib.util
import time
from typing import Any

import pytest

#: The Redis server, settings, store and Celery worker fixtures (tests/stack.py), for every
#: directory that runs the service: service, worker, reliability, uqeval.
pytest_plugins = ["tests.stack"]


def _backends() -> list[Any]:
    out = [pytest.param("numpy", id="numpy"), pytest.param("array_api_strict", id="strict")]
    # torch is installed by the test command; absent only in ad-hoc runs. Found, not imported:
    # importing it (seconds) here would delay every pytest process, xdist's controller too,
    # before it starts a test; the torch cases import it (and fail if it is broken).
    if importlib.util.find_spec("torch") is not None:
        out.append(pytest.param("torch", id="torch"))
    return out


BACKENDS = _backends()

_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print where the web UI's tests saved their screenshots in this run (CI artifacts)."""
    from tests.ui.artifacts import screenshot_dir, taken_since

    taken = taken_since(_STARTED)
    if taken:
        names = ", ".join(p.name for p in taken)
        terminalreporter.write_line(f"UI screenshots ({len(taken)}) in {screenshot_dir()}: {names}")


@pytest.fixture(params=BACKENDS)
def xp(request: pytest.FixtureRequest) -> Any:
    """The array namespace under test."""
    name = request.param
    if name == "array_api_strict":
        import array_api_strict

        return array_api_strict
    if name == "torch":
        import torch

        return torch
    import numpy

    return numpy
