"""The store's Lua files: each declares its KEYS and ARGV, and the loader finds every one."""

from __future__ import annotations

from importlib import resources

import pytest

from service.store import Store, scripts


def lua_files() -> list[str]:
    folder = resources.files("service.store").joinpath(scripts.LUA)
    return sorted(f.name.removesuffix(".lua") for f in folder.iterdir() if f.name.endswith(".lua"))


def test_the_loader_finds_every_lua_file() -> None:
    assert lua_files() == sorted(scripts.names() + scripts.fragments())
    assert scripts.names() and scripts.fragments()


@pytest.mark.parametrize("name", lua_files())
def test_every_lua_file_declares_its_keys_and_argv(name: str) -> None:
    fields = scripts.header(name)
    assert fields.get("KEYS"), f"{name}.lua: no '-- KEYS:' line in its header"
    assert fields.get("ARGV"), f"{name}.lua: no '-- ARGV:' line in its header"
    first = resources.files("service.store").joinpath(scripts.LUA, f"{name}.lua").read_text()
    assert first.startswith(f"-- {name}: "), f"{name}.lua: the header does not open with its name"


def test_every_fragment_is_used_and_every_use_is_a_fragment() -> None:
    used = {part for name in scripts.names() for part in scripts.uses(name)}
    assert used == set(scripts.fragments())
    for name in scripts.fragments():
        assert "USES" not in scripts.header(name), f"{name}.lua: a fragment uses no other"


def test_a_script_is_its_fragments_then_its_own_code() -> None:
    finish = scripts.source("finish")
    at = [finish.index(f"local function {fn}(") for fn in ("end_as", "offer", "publish")]
    assert at == sorted(at)
    assert "-- KEYS:" not in finish  # headers are for readers, not sent to Redis
    with pytest.raises(KeyError):
        scripts.source("_end_helpers")


def test_every_script_is_registered_and_compiles(store: Store) -> None:
    assert sorted(store._scripts) == scripts.names()
    for name in scripts.names():
        sha = store.client.script_load(scripts.source(name))
        assert sha == store._scripts[name].sha
