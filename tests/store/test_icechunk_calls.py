"""How many calls of Icechunk's store an Icechunk mount makes, and how many at once, for the
chunks of an array (docs/PERFORMANCE.md, "Issue 46: Icechunk's small chunks")."""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

import pytest

from nczfs.store.icechunk import tree as tree_module
from nczfs.store.icechunk.store import IcechunkStore
from nczfs.toolbox.errors import BackendError, KeyNotFound
from tests.store.test_icechunk import GROUP, array_meta, commit_elsewhere, local_repo, reopen

CHUNKS = {f"v/c/{i}": bytes([i % 256]) * (1 + i % 7) for i in range(100)}


class Counted:
    """Icechunk's store (``tree.py``), its calls counted by name and its coroutines in flight."""

    def __init__(self, py: Any):
        self._py = py
        self.calls: Counter[str] = Counter()
        self.now = self.most = 0
        #: calls that fail instead: (name, first argument) -> the error
        self.fail: dict[tuple[str, Any], Exception] = {}

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._py, name)
        if not callable(real):
            return real

        def call(*args: Any) -> Any:
            self.calls[name] += 1
            failure = self.fail.get((name, args[0] if args and isinstance(args[0], str) else None))
            got = self._failing(failure) if failure is not None else real(*args)
            return self._awaited(got) if inspect.isawaitable(got) else got

        return call

    @staticmethod
    async def _failing(failure: Exception) -> Any:
        raise failure

    async def _awaited(self, got: Any) -> Any:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            return await got
        finally:
            self.now -= 1


@pytest.fixture
def counted(tmp_path):
    path = tmp_path / "repo"
    local_repo(path)
    commit_elsewhere(path, {"zarr.json": GROUP, "v/zarr.json": array_meta((700,), (7,), "uint8"), **CHUNKS})
    store = IcechunkStore(reopen(path), read_only=True, where=str(path))
    calls = store.tree.py = Counted(store.tree.py)
    yield store, calls
    store.close()


def test_a_listing_asks_for_a_few_sizes_at_a_time(counted):
    """Before: every chunk's ``getsize`` at once (4,000 for 4,000 chunks), each taking a blocking
    thread of Icechunk's runtime, whose pool grew to 512 threads in the daemon."""
    store, calls = counted
    entries = store.list_dir("v/c")
    assert {f"v/c/{e.name}": e.info.size for e in entries} == {k: len(v) for k, v in CHUNKS.items()}
    assert calls.calls["getsize"] == len(CHUNKS)
    assert calls.most == tree_module.SIZES_AT_ONCE


def test_a_size_not_read_fails_the_listing_naming_its_chunk(counted):
    store, calls = counted
    calls.fail["getsize", "v/c/50"] = OSError("the manifest could not be read")
    with pytest.raises(BackendError, match=r"'v/c/50': size not read: .*manifest could not be read"):
        store.list_dir("v/c")


def test_a_stat_asks_icechunk_once(counted):
    """Before: ``exists``, then ``getsize``: two calls (two Python futures of Icechunk's) a lookup."""
    store, calls = counted
    assert store.stat("v/c/3").size == len(CHUNKS["v/c/3"])
    assert store.stat("v/zarr.json").size > 0
    assert calls.calls == {"getsize": 2}
    for missing in ("v/c/100", "w/c/0", "w/zarr.json"):
        with pytest.raises(KeyNotFound):
            store.stat(missing)
