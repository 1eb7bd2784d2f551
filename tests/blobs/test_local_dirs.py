"""The local blob store's directories: a delete removes the directories it empties (not the
root, not one still holding an object), listing a prefix lists exactly the keys under it,
and writers racing deletes in one directory never fail for a directory removed under them."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from service.blobs import LocalBlobStore

KEYS = [
    "a/b/one.npy",
    "a/b/two.npy",
    "a/bc/three.npy",
    "a/four",
    "uploads/upl_1/part-1",
    "uploads/upl_1/part-2",
    "uploads/upl_12/part-1",
    "z",
]


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    s = LocalBlobStore(tmp_path / "blobs")
    for key in KEYS:
        s.put_bytes(key, key.encode())
    (tmp_path / "blobs" / "a" / "b" / ".tmp-writer").write_bytes(b"half")  # a writer's file
    return s


def dirs(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir())


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "a",
        "a/",
        "a/b",
        "a/b/",
        "a/bc/",
        "a/b/one",
        "uploads/upl_1",
        "uploads/upl_1/",
        "zz/",
        "z",
    ],
)
def test_a_prefix_lists_exactly_the_keys_under_it(store: LocalBlobStore, prefix: str) -> None:
    listed = sorted(info.key for info in store.list(prefix))
    assert listed == sorted(k for k in KEYS if k.startswith(prefix))


def test_a_prefix_outside_the_store_is_refused(store: LocalBlobStore) -> None:
    with pytest.raises(ValueError, match="invalid blob key"):
        list(store.list("../"))


def test_a_delete_removes_the_directories_it_empties(store: LocalBlobStore) -> None:
    root = store.root
    store.delete_prefix("uploads/upl_1/")
    assert "uploads/upl_1" not in dirs(root)
    assert "uploads/upl_12" in dirs(root)  # still holds its part
    store.delete("uploads/upl_12/part-1")
    assert not (root / "uploads").exists()
    store.delete("a/bc/three.npy")
    assert dirs(root) == ["a", "a/b"]
    store.delete("a/b/one.npy")
    store.delete("a/b/two.npy")
    assert dirs(root) == ["a", "a/b"]  # a writer's temporary file is still there
    store.delete("a/four")
    assert dirs(root) == ["a", "a/b"]
    assert store.sweep_temp(older_than_s=-1.0) == 1  # the dead writer's file, swept
    assert dirs(root) == []
    store.delete("z")
    assert root.is_dir()  # the root stays
    assert list(store.list()) == []
    store.put_bytes("a/b/again", b"x")  # and the directories come back when needed
    assert store.get_bytes("a/b/again") == b"x"


def test_writers_racing_deletes_in_one_directory_never_fail(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    errors: list[BaseException] = []
    rounds = 300

    def churn(name: str) -> None:
        array = np.arange(16.0)
        try:
            for i in range(rounds):
                key = f"sub/s1/{name}-{i % 3}"
                if i % 3 == 0:
                    store.put_bytes(key, b"x")
                elif i % 3 == 1:
                    store.put_npy(key, array, tmp_path)
                else:
                    src = tmp_path / f"{name}.src"
                    src.write_bytes(b"y")
                    store.put_file(key, src, move=True)
                store.delete(key)  # empties the directory, racing the other writer
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert list(store.list()) == []
