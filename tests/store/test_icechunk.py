"""The Icechunk backend: the conformance suite over a local repository, then Icechunk's own behaviour.

Icechunk holds Zarr v3 keys of existing nodes only; the suite's free-form keys ("g/v/obj") are
files Icechunk cannot hold, which wait in the writable session (and keep a commit from being
made until they are gone). The backdoor tests, which need the medium to hold such keys, are run
here with Zarr keys instead.
"""

from __future__ import annotations

import json

import icechunk
import numpy as np
import pytest
import zarr

from nczfs.errors import BackendError, InvalidArgument, KeyNotFound, ReadOnly
from nczfs.store.base import ByteRange
from nczfs.store.icechunk import IcechunkStore
from nczfs.threads import ThreadedStore
from tests.store.conformance import StoreConformance

icechunk.set_logs_filter("error")

GROUP = json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}).encode()


def array_meta(shape=(4,), chunks=(2,), dtype="int32", **extra) -> bytes:
    return json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, **extra,
    }).encode()


def local_repo(path):
    return icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))


def reopen(path):
    return icechunk.Repository.open(icechunk.local_filesystem_storage(str(path)))


def commit_elsewhere(path, writes: dict[str, bytes], message="elsewhere", branch="main") -> str:
    """Write ``writes`` in a session of another repository handle and commit them."""
    session = reopen(path).writable_session(branch)
    store = session.store
    for key, data in writes.items():
        zarr.core.sync.sync(store.set(key, zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(data)))
    return session.commit(message)


def read_branch(path, key: str, branch="main") -> bytes | None:
    store = reopen(path).readonly_session(branch=branch).store
    buf = zarr.core.sync.sync(store.get(key, zarr.core.buffer.default_buffer_prototype()))
    return None if buf is None else buf.to_bytes()


class TestIcechunkStore(StoreConformance):
    @pytest.fixture
    def sync_store(self, tmp_path) -> IcechunkStore:
        self.path = tmp_path / "repo"
        store = IcechunkStore(local_repo(self.path))
        yield store
        store.close()

    def read_only_store(self) -> IcechunkStore:
        return IcechunkStore(reopen(self.path), read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        commit_elsewhere(self.path, {key: data})

    def get_raw(self, key: str) -> bytes | None:
        try:
            return read_branch(self.path, key)
        except Exception:  # noqa: BLE001 - not a key Icechunk can hold: not in the medium
            return None

    # the backdoor tests, with keys Icechunk holds (the suite's own need free-form keys there)

    async def test_read_only_store_refuses_writes(self, store):
        for key, data in (("zarr.json", GROUP), ("keep/zarr.json", array_meta()), ("keep/c/0", b"A" * 8)):
            await store.set(key, data)
        await store.sync()
        ro = ThreadedStore(self.read_only_store())
        assert ro.read_only
        for attempt in (lambda: ro.set("keep/c/0", b"changed!"), lambda: ro.set("keep/c/1", b"x" * 8),
                        lambda: ro.delete("keep/c/0"), lambda: ro.rename("keep/c/0", "keep/c/1"),
                        lambda: ro.copy("keep/c/0", "keep/c/1"), lambda: ro.rename_dir("keep", "gone")):
            with pytest.raises(ReadOnly):
                await attempt()
        assert await ro.get("keep/c/0") == b"A" * 8
        assert await ro.list_prefix("") == ["keep/c/0", "keep/zarr.json", "zarr.json"]
        assert self.get_raw("keep/c/1") is None
        await ro.close()

    async def test_writes_reach_the_medium(self, store):
        await store.set("w/zarr.json", array_meta())
        await store.set("w/c/0", b"through!")
        assert self.get_raw("w/c/0") is None  # not before the commit
        await store.sync()
        assert self.get_raw("w/c/0") == b"through!"
        await store.rename("w/c/0", "w/c/1")
        await store.sync()
        assert self.get_raw("w/c/0") is None and self.get_raw("w/c/1") == b"through!"
        await store.delete("w/c/1")
        await store.sync()
        assert self.get_raw("w/c/1") is None

    async def test_medium_writes_reach_the_store(self, store):
        self.put_raw("zarr.json", GROUP)
        commit_elsewhere(self.path, {"bd/zarr.json": array_meta(), "bd/c/0": b"backdoor", "bd/c/1": b"yy"})
        await store.sync()  # a session sees the commits made elsewhere once it follows its branch
        assert await store.get("bd/c/0") == b"backdoor"
        assert (await store.stat("bd/c/0")).size == 8
        assert [(e.name, e.is_dir) for e in await store.list_dir("bd")] == [("c", True), ("zarr.json", False)]
        assert [(e.name, e.is_dir) for e in await store.list_dir("bd/c")] == [("0", False), ("1", False)]
        assert await store.list_prefix("") == ["bd/c/0", "bd/c/1", "bd/zarr.json", "zarr.json"]
        commit_elsewhere(self.path, {"bd/c/0": b"changed!"})
        await store.sync()
        assert await store.get("bd/c/0") == b"changed!"
