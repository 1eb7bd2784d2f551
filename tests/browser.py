"""A real browser for tests: headless Chromium driven by Playwright, with the network blocked.

Test modules load it with ``pytest_plugins = ["tests.browser"]``. ``browser`` is one Chromium
process per pytest process (session scope, a fresh profile directory); :func:`open_page`
connects Playwright to it and opens a page in a fresh context in which every request to a host
other than the loopback one is aborted and recorded, as are the console errors and uncaught
page errors, so a test can assert that a page works with no network at all. Playwright's sync
API marks its event loop as running in the calling thread while it is connected (any
``asyncio.run`` there would fail), so it is connected only inside :func:`open_page`, never
between tests.

Chromium is the system's (Debian's ``chromium`` package; ``scripts/test`` installs it), or the
executable named by ``UQEVAL_BROWSER``: Playwright's own browser download is never used (test
machines may have no internet). When Chromium or Playwright is missing the browser tests fail
with the way to install it if ``CI=true`` or ``UQEVAL_REQUIRE_BROWSER=1`` (``scripts/test``
sets it), and are skipped with that reason otherwise (ad-hoc runs).

PYTEST_DONT_REWRITE: test modules import :func:`open_page` before pytest registers this module
as a plugin.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

#: Hosts a page may reach: the live test server's.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

#: Chromium flags: headless, no sandbox (tests run as root in containers), and nothing that
#: phones home (component updates, sync, field trials, QUIC probes). The host-resolver rule
#: makes every name but the loopback address unresolvable, a second barrier behind the
#: request interception of :func:`open_page` (which also sees requests DNS would not).
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)

INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu, as root: apt-get install -y chromium; `bash scripts/test` "
    "does it) or set UQEVAL_BROWSER to a Chromium executable, and `pip install -e '.[dev]'` "
    "for Playwright"
)


def browser_required() -> bool:
    """Whether a missing browser fails the tests (CI, the test command) rather than skips them."""
    return (
        os.environ.get("CI", "").lower() == "true"
        or os.environ.get("UQEVAL_REQUIRE_BROWSER") == "1"
    )


def chromium_path() -> str | None:
    """``UQEVAL_BROWSER``, else Chromium on PATH or at Debian's place; None when absent."""
    override = os.environ.get("UQEVAL_BROWSER")
    if override:
        return override
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


def _unavailable(reason: str) -> None:
    message = f"browser tests need Chromium and Playwright: {reason}; {INSTALL_HINT}"
    if browser_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@dataclass(frozen=True)
class Chromium:
    """A running Chromium: its executable and the address of its DevTools endpoint."""

    executable: str
    endpoint: str


def _start_chromium(
    executable: str, profile: Path, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                executable,
                *CHROMIUM_ARGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # its own process group: the renderers and helpers go with it at the end
            start_new_session=True,
            # nothing of the user's (certificates, caches) is read or written
            env={**os.environ, "HOME": str(profile)},
        )
    port_file = profile / "DevToolsActivePort"  # written by Chromium once it listens
    deadline = time.monotonic() + 60
    while not port_file.is_file() or not port_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(
                f"Chromium at {executable} did not start: {log.read_text()[-3000:]}",
                pytrace=False,
            )
        time.sleep(0.05)
    port = int(port_file.read_text().split()[0])
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """A headless Chromium with a fresh profile, for :func:`open_page`."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright package is not installed")
    executable = chromium_path()
    if executable is None:
        _unavailable("no chromium executable found (PATH, /usr/bin/chromium, UQEVAL_BROWSER)")
    assert executable is not None
    if not Path(executable).is_file():
        _unavailable(f"UQEVAL_BROWSER={executable} is not a file")
    home = tmp_path_factory.mktemp("chromium")
    profile = home / "profile"
    profile.mkdir()
    proc, endpoint = _start_chromium(executable, profile, home / "chromium.log")
    try:
        yield Chromium(executable=executable, endpoint=endpoint)
    finally:
        _stop(proc)


@dataclass
class OfflinePage:
    """A page whose requests leave only for loopback, with what went wrong recorded."""

    page: Any  # playwright.sync_api.Page
    blocked: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Every blocked request, console error, page error and failed loopback request."""
        return (
            [f"blocked request: {u}" for u in self.blocked]
            + [f"console error: {m}" for m in self.console_errors]
            + [f"page error: {m}" for m in self.page_errors]
            + [f"failed request: {m}" for m in self.failed]
        )

    def wait_until(self, predicate: str, arg: Any = None, *, timeout_ms: int = 30_000) -> None:
        """Wait for the JavaScript ``predicate`` (a function of ``arg``) to hold in the page.

        On time-out the test fails with what went wrong in the page (a blocked script leaves
        the page blank, and that is the message to see, not a bare time-out).
        """
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.page.wait_for_function(predicate, arg=arg, timeout=timeout_ms)
        except PlaywrightTimeout:
            raise AssertionError(
                f"{self.page.url}: {predicate} did not hold within {timeout_ms} ms; "
                f"problems in the page: {self.problems()}"
            ) from None


@contextlib.contextmanager
def open_page(
    browser: Chromium, *, allowed_hosts: frozenset[str] = LOOPBACK_HOSTS, timeout_ms: int = 30_000
) -> Iterator[OfflinePage]:
    """A new page in its own context; requests to hosts outside ``allowed_hosts`` are aborted.

    Every such request is recorded in ``blocked`` (the URL), whatever its kind (script, style,
    font, image, fetch, websocket), before it is aborted; console errors, uncaught exceptions
    and loopback requests that failed are recorded too. The caller asserts on
    :meth:`OfflinePage.problems`.
    """
    from playwright.sync_api import sync_playwright

    out = OfflinePage(page=None)

    def route(r: Any) -> None:
        url = r.request.url
        scheme = urlsplit(url).scheme
        host = urlsplit(url).hostname or ""
        if scheme in ("data", "blob", "about") or host in allowed_hosts:
            r.continue_()
        else:
            out.blocked.append(url)
            r.abort("blockedbyclient")

    def on_failed(request: Any) -> None:
        if request.url not in out.blocked:
            out.failed.append(f"{request.url} ({request.failure})")

    with sync_playwright() as pw:
        connection = pw.chromium.connect_over_cdp(browser.endpoint, timeout=timeout_ms)
        context = connection.new_context(
            service_workers="block", viewport={"width": 1280, "height": 900}
        )
        context.set_default_timeout(timeout_ms)
        context.route("**/*", route)
        try:
            page = context.new_page()
            page.on("console", lambda m: m.type == "error" and out.console_errors.append(m.text))
            page.on("requestfailed", on_failed)
            page.on("pageerror", lambda exc: out.page_errors.append(str(exc)))
            out.page = page
            yield out
        finally:
            context.close()
