"""Where the client finds the server and the key: an explicit argument, else the environment
(``UQEVAL_URL``, ``UQEVAL_KEY``), else the config file written by ``uqeval login``.

The file is ``$UQEVAL_CONFIG`` if set, else ``${XDG_CONFIG_HOME:-~/.config}/uqeval/config.toml``,
with the keys ``url`` and ``key``; it is written with mode 0600 (it holds the secret).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_URL", "config_path", "load_config", "resolve", "save_config"]

DEFAULT_URL = "http://127.0.0.1:8000"


def config_path() -> Path:
    """The config file's path (it need not exist)."""
    explicit = os.environ.get("UQEVAL_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "uqeval" / "config.toml"


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The config file's contents (an empty dict when there is none).

    Raises
    ------
    ValueError
        If the file exists but is not valid TOML (the message names the file, never its
        contents).
    """
    p = path or config_path()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        return tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{p} is not a valid TOML file: {exc}") from None


def save_config(url: str | None, key: str | None, path: Path | None = None) -> Path:
    """Write ``url`` and ``key`` (those not None) to the config file, readable by its owner
    only (mode 0600), keeping its other entries; returns the path."""
    p = path or config_path()
    doc = load_config(p)
    if url is not None:
        doc["url"] = url
    if key is not None:
        doc["key"] = key
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{name} = {json.dumps(value)}"  # a JSON string is a valid TOML basic string
        for name, value in doc.items()
        if isinstance(value, str)
    ]
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, p)
    return p


def resolve(url: str | None = None, key: str | None = None) -> tuple[str, str | None]:
    """The server URL and the API key: each from the argument, else the environment, else the
    config file; the URL defaults to :data:`DEFAULT_URL`, the key to None (no key)."""
    file: dict[str, Any] | None = None

    def from_file(name: str) -> str | None:
        nonlocal file
        if file is None:
            file = load_config()
        value = file.get(name)
        return value if isinstance(value, str) and value else None

    u = url or os.environ.get("UQEVAL_URL") or from_file("url") or DEFAULT_URL
    k = key or os.environ.get("UQEVAL_KEY") or from_file("key")
    return u.rstrip("/"), k
