"""Fixtures of the client tests: the TypeScript project installed and compiled once per
session, and the live API of the command-line tests (uvicorn with the session's real Redis and
Celery worker; ``tests/uqeval/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.typescript import PROJECT, copy_project, ensure_installed
from tests.uqeval.conftest import live_server

__all__ = ["live_server"]


@pytest.fixture(scope="session")
def ts_project() -> Path:
    """clients/typescript with its locked dependencies installed (Node required or skipped)."""
    ensure_installed()
    return PROJECT


@pytest.fixture(scope="session")
def ts_build(ts_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project compiled by its tsc (strict) into ``dist`` of a copy whose package.json
    makes Node load the output as ES modules and whose node_modules is the project's."""
    copy = copy_project(tmp_path_factory.mktemp("ts-build"))
    proc = copy.tsc("--outDir", "dist")
    assert proc.returncode == 0, f"tsc failed:\n{proc.stdout}\n{proc.stderr}"
    return copy.project / "dist"
