"""The client without a server: what ``import uqeval`` loads, that the key never shows, where
the url and key come from, the typed results read from documents, and exit codes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.stack import ROOT
from uqeval import Client, errors
from uqeval.config import config_path, resolve, save_config
from uqeval.errors import ServerUnavailable
from uqeval.models import Result, Submission

SERVER_MODULES = (
    "fastapi",
    "starlette",
    "celery",
    "kombu",
    "redis",
    "uvicorn",
    "pydantic_settings",
)

SECRET = "uqe_very-secret-key-value"


def test_import_and_use_load_no_server_dependency() -> None:
    code = (
        "import sys, uqeval\n"
        f"c = uqeval.Client('http://127.0.0.1:1', {SECRET!r}, retries=0, timeout=2)\n"
        "try:\n"
        "    c.get('sub_x')\n"
        "except uqeval.errors.ServerUnavailable:\n"
        "    pass\n"
        "a = uqeval.AsyncClient('http://127.0.0.1:1', 'k')\n"
        f"print(','.join(m for m in {SERVER_MODULES!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_key_never_in_repr_or_errors() -> None:
    client = Client("http://127.0.0.1:1/", SECRET, retries=0, timeout=2)
    assert repr(client) == "Client(url='http://127.0.0.1:1')"
    with pytest.raises(ServerUnavailable) as info:
        client.submissions()
    assert info.value.exit_code == 6
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    client.close()


def test_url_and_key_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("UQEVAL_URL", "UQEVAL_KEY", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UQEVAL_CONFIG", str(tmp_path / "cfg" / "config.toml"))
    assert resolve() == ("http://127.0.0.1:8000", None)
    path = save_config("http://file:1", 'k"ey\\from-file')
    assert path == config_path() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve() == ("http://file:1", 'k"ey\\from-file')
    monkeypatch.setenv("UQEVAL_URL", "http://env:2/")
    monkeypatch.setenv("UQEVAL_KEY", "env-key")
    assert resolve() == ("http://env:2", "env-key")
    assert resolve("http://arg:3", "arg-key") == ("http://arg:3", "arg-key")
    monkeypatch.delenv("UQEVAL_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "uqeval" / "config.toml"


def test_typed_results_keep_unknown_fields() -> None:
    doc = {
        "id": "sub_1",
        "status": "succeeded",
        "progress": 100.0,
        "n": 3,
        "future_field": {"x": 1},
        "result": {
            "metrics": {
                "crps": {
                    "value": 0.5,
                    "direction": "lower",
                    "interval": {"low": 0.4, "high": 0.6, "n_valid": 99},
                },
                "nll": {"value": None},
            },
            "not_applicable": {"ause": "needs an uncertainty"},
            "new_section": [1, 2],
        },
    }
    sub = Submission.from_json(doc)
    assert sub.done and sub.succeeded and sub.raw["future_field"] == {"x": 1}
    result = sub.result
    assert isinstance(result, Result) and result.raw["new_section"] == [1, 2]
    assert result.table() == [("crps", 0.5, 0.4, 0.6, "lower"), ("nll", None, None, None, None)]
    assert result.metrics["crps"].interval is not None
    assert result.metrics["crps"].interval.n_valid == 99
    assert result.value("nll") is None
    with pytest.raises(KeyError, match="needs an uncertainty"):
        result.value("ause")


def test_exit_codes() -> None:
    codes = {
        errors.BadRequest: 2,
        errors.AuthError: 3,
        errors.NotFound: 4,
        errors.JobFailed: 5,
        errors.ServerUnavailable: 6,
        errors.RateLimited: 7,
    }
    for cls, code in codes.items():
        assert cls("x").exit_code == code == errors.exit_code(cls("x"))
    assert errors.exit_code(ValueError()) == 1 and errors.EXIT_OK == 0
