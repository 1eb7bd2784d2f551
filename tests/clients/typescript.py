"""The TypeScript client's project (clients/typescript) as the tests drive it: Node and npm
found (or the tests failed or skipped with the way to install them), its dependencies installed
from the lockfile once, and copies of the project beside an OpenAPI document of the test's
choosing, where ``npm run generate`` and ``tsc`` run as they do in the project.

A missing Node fails the tests when ``CI=true`` or ``UQEVAL_REQUIRE_NODE=1`` (``scripts/test``
installs Node and sets it) and skips them with that reason otherwise (ad-hoc runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.readme import ROOT

#: The client's project, and the OpenAPI document its types are generated from.
PROJECT = ROOT / "clients" / "typescript"
DOCUMENT = ROOT / "openapi" / "openapi.json"
#: The project's files that a copy holds (its node_modules is linked, never copied).
PROJECT_FILES = ("package.json", "package-lock.json", "tsconfig.json", "src", "examples")

INSTALL_HINT = (
    "install Node.js 18+ and npm (Debian/Ubuntu, as root: apt-get install -y nodejs npm; "
    "`bash scripts/test` does it), then `npm ci` in clients/typescript"
)

#: Generous bounds: npm ci fetches from the registry; tsc takes a few seconds.
NPM_CI_TIMEOUT_S = 600
TOOL_TIMEOUT_S = 180


def node_required() -> bool:
    """Whether a missing Node fails the tests (CI, the test command) rather than skips them."""
    return (
        os.environ.get("CI", "").lower() == "true" or os.environ.get("UQEVAL_REQUIRE_NODE") == "1"
    )


def missing_node(reason: str) -> None:
    """Fail (when Node is required) or skip, saying why and how to install it."""
    message = f"{reason}: {INSTALL_HINT}"
    if node_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def run(
    args: list[str], cwd: Path, timeout: float = TOOL_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a Node tool; its output is kept for the assertion messages."""
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _installed_matches_lock() -> bool:
    """Whether node_modules holds every package of the lockfile at its locked version."""
    lock = json.loads((PROJECT / "package-lock.json").read_text(encoding="utf-8"))
    for path, entry in lock["packages"].items():
        if not path:  # the project itself
            continue
        manifest = PROJECT / path / "package.json"
        if not manifest.exists():
            if entry.get("optional"):
                continue
            return False
        if json.loads(manifest.read_text(encoding="utf-8")).get("version") != entry["version"]:
            return False
    return True


@contextlib.contextmanager
def _install_lock() -> Iterator[None]:
    # pytest-xdist workers start together: one runs npm ci, the others wait for it.
    with (PROJECT / ".install.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_installed() -> None:
    """Node and npm present and the lockfile's packages installed (``npm ci`` when not)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            missing_node(f"`{tool}` is not on PATH")
    version = run(["node", "--version"], PROJECT).stdout.strip()
    major = int(version.lstrip("v").split(".")[0]) if version.startswith("v") else 0
    if major < 18:
        missing_node(f"Node {version or '(unknown)'} is older than 18")
    with _install_lock():
        if _installed_matches_lock():
            return
        proc = run(
            ["npm", "ci", "--include=dev", "--no-audit", "--no-fund", "--loglevel=error"],
            PROJECT,
            timeout=NPM_CI_TIMEOUT_S,
        )
        assert proc.returncode == 0, f"npm ci failed:\n{proc.stdout}\n{proc.stderr}"
        assert _installed_matches_lock(), "npm ci left node_modules unlike package-lock.json"


@dataclass(frozen=True)
class Copy:
    """A copy of the project at ``root/clients/typescript`` with its document at
    ``root/openapi/openapi.json`` (the repository's layout, so ``npm run generate`` runs as is)."""

    root: Path

    @property
    def project(self) -> Path:
        return self.root / "clients" / "typescript"

    @property
    def document(self) -> Path:
        return self.root / "openapi" / "openapi.json"

    @property
    def schema(self) -> Path:
        return self.project / "src" / "schema.d.ts"

    def generate(self) -> subprocess.CompletedProcess[str]:
        """``npm run generate``: the types from the copy's document."""
        return run(["npm", "run", "--silent", "generate"], self.project)

    def tsc(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The project's ``tsc`` with its tsconfig.json and ``args``."""
        return run([str(self.project / "node_modules" / ".bin" / "tsc"), *args], self.project)


def copy_project(root: Path, document: dict[str, Any] | None = None) -> Copy:
    """A copy of the project under ``root`` whose document is ``document`` (default: the
    committed one), its node_modules a link to the project's installed one."""
    copy = Copy(root)
    copy.project.mkdir(parents=True)
    for name in PROJECT_FILES:
        source = PROJECT / name
        if source.is_dir():
            shutil.copytree(source, copy.project / name)
        else:
            shutil.copy2(source, copy.project / name)
    (copy.project / "node_modules").symlink_to(PROJECT / "node_modules", target_is_directory=True)
    copy.document.parent.mkdir(parents=True)
    if document is None:
        shutil.copy2(DOCUMENT, copy.document)
    else:
        copy.document.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return copy
