"""Fixtures of the client tests: the TypeScript project installed and compiled once per
session, and the live API of the command-line tests (uvicorn with the session's real Redis and
Celery worker; ``tests/uqeval/conftest.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.clients.typescript import PROJECT, copy_project, ensure_installed
from tests.uqeval.conftest import live_module, live_server

__all__ = ["live_module", "live_server"]


@pytest.fixture(scope="session")
def ts_project() -> Path:
    """clients/typescript with its locked dependencies installed (Node required or skipped)."""
    ensure_installed()
    return PROJECT


@pytest.fixture(scope="session")
def ts_compiled(
    ts_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The project compiled by its tsc (strict, which type-checks as it emits) into ``dist``
    of a copy whose package.json makes Node load the output as ES modules and whose
    node_modules is the project's; with tsc's outcome, which the type-check test reads (one
    run of tsc for both)."""
    copy = copy_project(tmp_path_factory.mktemp("ts-build"))
    proc = copy.tsc("--outDir", "dist")
    return copy.project / "dist", proc


@pytest.fixture(scope="session")
def ts_build(ts_compiled: tuple[Path, subprocess.CompletedProcess[str]]) -> Path:
    """The compiled project's ``dist`` (tsc must have succeeded)."""
    dist, proc = ts_compiled
    assert proc.returncode == 0, f"tsc failed:\n{proc.stdout}\n{proc.stderr}"
    return dist
