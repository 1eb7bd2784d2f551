"""Shared fixtures: array backends (numpy, array_api_strict, torch CPU when installed) and,
through :mod:`tests.stack`, the running stack (Redis, store, Celery worker)."""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

import pytest

#: The Redis server, settings, store and Celery worker fixtures (tests/stack.py), for every
#: directory that runs the service: service, worker, reliability, uqeval.
pytest_plugins = ["tests.stack"]


def _backends() -> list[Any]:
    out = [pytest.param("numpy", id="numpy"), pytest.param("array_api_strict", id="strict")]
    try:
        importlib.import_module("torch")
        out.append(pytest.param("torch", id="torch"))
    except ImportError:  # torch is installed by the test command; absent only in ad-hoc runs
        pass
    return out


BACKENDS = _backends()

_STARTED = time.time()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's work stealing (``--dist worksteal``, as ``scripts/test`` runs it), order the tests so that no test
    process ends its run with a long test while another idles.

    ``worksteal`` first hands each of the k test processes one contiguous 1/k of the
    collection, in order; a process that runs out steals the second half of the longest queue.
    So each share is laid out as the slow tests of the service (whole modules of ``tests/``
    outside ``tests/uqcore``, which start servers, workers and browsers: a module's tests stay
    together, as its fixtures expect), dealt in turn to the k shares, followed by uqcore's
    quick in-process tests: the tails that are stolen, and that end the run, are quick ones.
    Every process orders the same collection the same way (xdist requires it); a run without
    xdist keeps the collection's order."""
    # (a test process of xdist's knows how many there are, not how they are scheduled; the
    # order is harmless under its other modes)
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2:
        return
    tests = config.rootpath / "tests"
    quick: list[pytest.Item] = []
    slow_modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        path = item.path
        if path.is_relative_to(tests) and not path.is_relative_to(tests / "uqcore"):
            slow_modules.setdefault(path, []).append(item)
        else:
            quick.append(item)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for i, module in enumerate(slow_modules.values()):
        shares[i % workers].extend(module)
    size, rest = divmod(len(items), workers)
    ordered: list[pytest.Item] = []
    for i, share in enumerate(shares):
        # the share's quick tests fill it up to the size xdist hands out (the last share
        # takes what the division leaves)
        want = size + (rest if i == workers - 1 else 0)
        take = max(0, want - len(share))
        ordered.extend(share)
        ordered.extend(quick[:take])
        del quick[:take]
    ordered.extend(quick)
    assert len(ordered) == len(items)
    items[:] = ordered


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
