"""The NCZarr layer's wrappers pass the store conformance suite without a kernel: over objects
that are not NCZarr metadata each is transparent (a view shows what is stored, validation and
consolidation have nothing to check or follow, no dataset makes .nc files), and each wrapper
offers the fast paths it says it passes."""

from __future__ import annotations

import io
import json

import pytest

from nczfs.cache import CachingStore
from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
from nczfs.nczarr.validating import ValidatingStore
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.toolbox.errors import Conflict, InvalidArgument, KeyNotFound, NotSupported, ReadOnly
from nczfs.store.capabilities import Stages
from nczfs.store.values import Meta, Staged
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.wrapper import WrapperStore
from nczfs.store.threads import ThreadedStore
from nczfs.store import optional
from tests.store import test_memory


class TestValidatingStoreConformance(test_memory.TestMemoryStore):
    lists_trees = False  # not passed: wrappers above the cache list no trees

    @pytest.fixture
    async def store(self, sync_store):
        s = ValidatingStore(ThreadedStore(sync_store), "strict")
        yield s
        await s.close()


class TestConsolidatingStoreConformance(test_memory.TestMemoryStore):
    lists_trees = False

    @pytest.fixture
    async def store(self, sync_store):
        s = ConsolidatingStore(ThreadedStore(sync_store))
        yield s
        await s.close()


class TestPresentingStoreConformance(test_memory.TestMemoryStore):
    uploads_in_parts = False  # a view translates writes: every one goes through set
    lists_trees = False

    @pytest.fixture(params=["netcdf-4.10", "xarray"])
    async def store(self, sync_store, request):
        s = PresentingStore(ThreadedStore(sync_store), request.param, ttl=0)
        yield s
        await s.close()


class TestNcFilesStoreConformance(test_memory.TestMemoryStore):
    uploads_in_parts = False  # every write drops the files built from it: through set
    lists_trees = False

    @pytest.fixture
    async def store(self, sync_store):
        s = NcFilesStore(ThreadedStore(sync_store), ttl=0)
        yield s
        await s.close()


class StagingMemory(MemoryStore):
    """A memory store that stages: the data becomes the object at commit."""

    def stage(self, key: str, data: bytes) -> Staged:
        return Staged(key, lambda if_version=None: self.set(key, data, if_version), lambda: None)


async def test_each_wrapper_offers_staging_only_where_it_says_so():
    """Staged data bypasses set: the wrappers that watch set offer staging for the keys they do
    not watch (metadata is written through set), and those that translate writes not at all."""
    below = ThreadedStore(StagingMemory("staging"))
    assert isinstance(below, Stages)
    offering = [CachingStore(below, ttl=0), ValidatingStore(below), ConsolidatingStore(below)]
    refusing = [PresentingStore(below, "xarray", ttl=0), NcFilesStore(below, ttl=0), FaultyStore(below), WrapperStore(below)]
    assert all(isinstance(w, Stages) for w in offering)
    assert not any(isinstance(w, Stages) for w in refusing)
    for w in offering[1:]:
        assert await w.stage("g/v/.zarray", b"{}") is None  # metadata: through set
    staged = await ValidatingStore(ConsolidatingStore(CachingStore(below, ttl=0))).stage("g/v/0.0", b"chunk")
    await staged.commit()
    assert await below.get("g/v/0.0") == b"chunk"
    assert not isinstance(ValidatingStore(ThreadedStore(MemoryStore("plain"))), Stages)  # nothing below stages


# -- what each wrapper does on its write hook, without a kernel ----------------------------------

ZARRAY = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f4", "compressor": None,
          "fill_value": 0.0, "order": "C", "filters": None}


def _dataset(store) -> None:
    """A Zarr v2 dataset ``ds`` of one array ``v`` of one chunk (a sync store)."""
    store.set("ds/.zgroup", b'{"zarr_format": 2}')
    store.set("ds/v/.zarray", json.dumps(ZARRAY).encode())
    store.set("ds/v/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["x"]}).encode())
    store.set("ds/v/0", bytes(16))


async def test_consolidated_metadata_follows_each_write_of_a_watched_object(tmp_path):
    below = DirectoryStore(str(tmp_path))  # it has hard links
    below.set("ds/.zmetadata", json.dumps({"metadata": {}, "zarr_consolidated_format": 1}).encode())
    s = ConsolidatingStore(ThreadedStore(below))

    def entries() -> dict:
        return json.loads(below.get("ds/.zmetadata"))["metadata"]

    await s.set("ds/a/.zarray", json.dumps(ZARRAY).encode())
    await s.set_file("ds/b/.zattrs", io.BytesIO(b'{"x": 1}'), 8)  # read whole, stored through set
    await s.copy("ds/a/.zarray", "ds/c/.zarray")
    await optional.link(s, "ds/a/.zarray", "ds/b/.zarray")  # into a folder that exists
    assert entries() == {"a/.zarray": ZARRAY, "b/.zattrs": {"x": 1}, "c/.zarray": ZARRAY, "b/.zarray": ZARRAY}
    await s.rename("ds/c/.zarray", "ds/e/.zarray")
    await s.delete("ds/b/.zarray")
    await optional.rename_dir(s, "ds/a", "ds/f")
    assert entries() == {"b/.zattrs": {"x": 1}, "e/.zarray": ZARRAY, "f/.zarray": ZARRAY}
    with pytest.raises(NotSupported):  # rewritten whole by the filesystem, through set
        await optional.truncate(s, "ds/f/.zarray", 0)
    assert await s.get("ds/f/.zarray") == json.dumps(ZARRAY).encode()
    await s.set("ds/f/0", b"chunk")
    await optional.truncate(s, "ds/f/0", 2)  # not watched: truncated below
    assert entries() == {"b/.zattrs": {"x": 1}, "e/.zarray": ZARRAY, "f/.zarray": ZARRAY}


async def test_validation_checks_what_is_copied_renamed_or_linked_onto_a_metadata_name(tmp_path):
    below = DirectoryStore(str(tmp_path))
    below.set("tmp", b'{"zarr_format": 2, "shape": "four"}')
    s = ValidatingStore(ThreadedStore(below), "strict")
    for op in (s.copy, s.rename, s.link):
        with pytest.raises(InvalidArgument, match="v/.zarray"):
            await op("tmp", "v/.zarray")
    with pytest.raises(InvalidArgument, match="w/.zarray"):  # a file's content: checked whole, by set
        await s.set_file("w/.zarray", io.BytesIO(below.get("tmp")), len(below.get("tmp")))
    assert below.list_prefix("") == ["tmp"]  # nothing stored
    below.set("ok", json.dumps(ZARRAY).encode())
    await s.copy("ok", "a/.zarray")
    await optional.link(s, "ok", ".zarray")  # into a folder that exists
    await s.rename("ok", "c/.zarray")
    with pytest.raises(NotSupported):  # metadata is rewritten whole, through set
        await optional.truncate(s, "c/.zarray", 0)
    await optional.truncate(s, "tmp", 2)  # not metadata: truncated below
    assert below.get("c/.zarray") == json.dumps(ZARRAY).encode() and below.get("tmp") == b'{"'


def _refusals(s) -> dict:
    return {
        "set": lambda: s.set("ds.nc", b"x"),
        "set_file": lambda: s.set_file("ds.nc", io.BytesIO(b"x"), 1),
        "delete": lambda: s.delete("ds.nc"),
        "truncate": lambda: optional.truncate(s, "ds.nc", 0),
        "set_meta": lambda: optional.set_meta(s, "ds.nc", Meta(mode=0o100600)),
        "make_node": lambda: optional.make_node(s, "ds.nc", Meta(mode=0o120777), "other"),
        "copy onto": lambda: s.copy("other", "ds.nc"),
        "rename from": lambda: s.rename("ds.nc", "moved.nc"),
        "rename onto": lambda: s.rename("other", "ds.nc"),
        "link from": lambda: optional.link(s, "ds.nc", "linked.nc"),
        "link onto": lambda: optional.link(s, "other", "ds.nc"),
    }


async def test_nc_files_made_from_a_dataset_are_read_only(tmp_path):
    # a directory has every operation (links, truncate): each is refused
    for below in (DirectoryStore(str(tmp_path)), MemoryStore()):
        _dataset(below)
        below.set("other", b"x")
        s = NcFilesStore(ThreadedStore(below), ttl=60)
        shown = await s.get("ds.nc")
        for name, op in _refusals(s).items():
            # the memory store has no links and no truncate: nor has the wrapper (NotSupported)
            lacks = isinstance(below, MemoryStore) and name.split()[0] in ("truncate", "link")
            with pytest.raises(NotSupported) if lacks else pytest.raises(ReadOnly, match="ds.nc"):
                await op()
            assert sorted(below.list_prefix("")) == ["ds/.zgroup", "ds/v/.zarray", "ds/v/.zattrs", "ds/v/0",
                                                     "other"], name
    await s.copy("ds.nc", "copy.nc")  # a copy of one is an object of its bytes
    assert below.get("copy.nc") == shown
    below.set("ds.nc/x", b"x")  # a folder the store holds is shown instead, and is no file made here
    with pytest.raises(NotSupported):  # the memory store keeps no folder attributes: it got there
        await optional.set_meta(s, "ds.nc", Meta(mode=0o040700), is_dir=True)
    await s.set("ds.nc/y", b"y")


async def test_a_write_into_a_dataset_makes_its_nc_files_new_at_once(tmp_path):
    below = DirectoryStore(str(tmp_path))  # it has every operation
    _dataset(below)
    below.set("other", b"x")
    changed: list[str] = []
    s = NcFilesStore(ThreadedStore(below), ttl=60, on_change=changed.append)  # not rebuilt by age
    writes = {
        "set": lambda: s.set("ds/v/0", b"\x01" * 16),
        "set_file": lambda: s.set_file("ds/v/0", io.BytesIO(bytes(16)), 16),
        "copy": lambda: s.copy("ds/v/0", "ds/v/0.bak"),
        "rename": lambda: s.rename("ds/v/0.bak", "ds/v/0.old"),
        "delete": lambda: s.delete("ds/v/0.old"),
        "rename_dir": lambda: optional.rename_dir(s, "ds/v", "ds/w"),
        "mkdir": lambda: optional.mkdir(s, "ds/u"),  # forgotten even where the medium refuses
        "rmdir": lambda: optional.rmdir(s, "ds/u"),
        "truncate": lambda: optional.truncate(s, "ds/w/0", 0),
        "make_node": lambda: optional.make_node(s, "ds/w/1", Meta(mode=0o010644)),
        "link onto": lambda: optional.link(s, "other", "ds/w/2"),
    }
    for name, op in writes.items():
        before = await s.stat("ds.nc")
        changed.clear()
        try:
            await op()
        except NotSupported:
            pass
        assert changed == ["ds.nc"], name
        assert (await s.stat("ds.nc")).etag != before.etag or name not in ("set", "rename_dir"), name
    unchanged = {
        "set_meta": lambda: optional.set_meta(s, "ds/w/0", Meta(mode=0o100600)),  # attributes: no content
        "link from": lambda: optional.link(s, "ds/w/0", "elsewhere"),  # the source's content is as it was
        "copy from": lambda: s.copy("ds/w/0", "elsewhere"),
        "forget_dir": lambda: optional.forget_dir(s, "ds/gone"),
    }
    for name, op in unchanged.items():
        await s.stat("ds.nc")
        changed.clear()
        try:
            await op()
        except NotSupported:
            pass
        assert changed == [], name


async def test_a_view_makes_links_as_copies_and_truncates_by_rewriting(tmp_path):
    below = DirectoryStore(str(tmp_path))  # it could link and truncate
    _dataset(below)
    s = PresentingStore(ThreadedStore(below), "xarray", ttl=60)
    with pytest.raises(NotSupported, match="ds/v/1"):
        await optional.link(s, "ds/v/0", "ds/v/1")
    with pytest.raises(NotSupported, match="ds/v/0"):
        await optional.truncate(s, "ds/v/0", 0)
    assert below.get("ds/v/0") == bytes(16) and "ds/v/1" not in below.list_prefix("ds")


async def test_a_view_moves_a_folder_only_where_the_dataset_is_shown_as_stored():
    below = MemoryStore()
    _dataset(below)  # stored as zarr-v2: the xarray view's flavor, not netcdf-4.10's
    translated = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    with pytest.raises(ReadOnly, match="cannot move"):
        await optional.rename_dir(translated, "ds/v", "ds/w")
    assert "ds/v/0" in below.list_prefix("ds")
    below.set("ds2/.zgroup", b'{"zarr_format": 2}')
    s = PresentingStore(ThreadedStore(below), "xarray", ttl=60)
    assert (await s.stat("ds/v/.zarray")).size > 0
    assert [e.name for e in await s.list_dir("ds2")] == [".zgroup"]
    await optional.rename_dir(s, "ds/v", "ds2/v")  # into another dataset
    with pytest.raises(KeyNotFound):  # the views built before the move are forgotten: both
        await s.stat("ds/v/.zarray")
    assert (await s.stat("ds2/v/.zarray")).size > 0
    assert [e.name for e in await s.list_dir("ds2")] == [".zgroup", "v"]


async def test_a_write_back_through_a_view_replaces_only_the_stored_version_it_was_built_from():
    """Metadata written through a view that translates is stored back only while each stored
    object is still the version the view was read from; another writer's change in between is
    refused (Conflict: ESTALE) and stays, and the view is built again from it."""
    below = MemoryStore()  # it checks versions, as S3 does
    _dataset(below)  # zarr-v2: netcdf-4.10 shows it translated
    s = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    shown = json.loads(await s.get("ds/v/.zattrs"))
    types = shown["_nczarr_attr"]["types"]

    def titled(title: str) -> bytes:
        return json.dumps({**shown, "title": title, "_nczarr_attr": {"types": {**types, "title": ">S1"}}}).encode()

    await s.set("ds/v/.zattrs", titled("mine"))  # no one else wrote: stored back
    assert json.loads(below.get("ds/v/.zattrs"))["title"] == "mine"
    shown = json.loads(await s.get("ds/v/.zattrs"))  # the view, built again after the write
    below.set("ds/v/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["x"], "title": "theirs"}).encode())
    with pytest.raises(Conflict) as refused:
        await s.set("ds/v/.zattrs", titled("late"))
    assert refused.value.key == "ds/v/.zattrs"
    assert json.loads(below.get("ds/v/.zattrs"))["title"] == "theirs"
    assert json.loads(await s.get("ds/v/.zattrs"))["title"] == "theirs"  # not the 60 s old view
    shown = json.loads(await s.get("ds/v/.zattrs"))
    await s.set("ds/v/.zattrs", titled("after"))  # from the version it now shows: stored
    assert json.loads(below.get("ds/v/.zattrs"))["title"] == "after"


async def test_a_read_of_a_recoded_chunk_is_a_view_of_the_made_chunk_not_a_copy():
    """A view's recoded chunk is made once and kept; each read of a part of it (the kernel's
    1 MiB reads) answers a read-only view of it, which pyfuse3 writes out as it is."""
    import numcodecs
    import numpy as np

    from nczfs.store.values import ByteRange

    below = MemoryStore()
    below.set("ds/.zgroup", b'{"zarr_format": 2}')
    zarray = {**ZARRAY, "shape": [1024], "chunks": [1024], "compressor": {"id": "lz4", "acceleration": 1}}
    below.set("ds/v/.zarray", json.dumps(zarray).encode())
    below.set("ds/v/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["x"]}).encode())
    values = np.arange(1024, dtype=ZARRAY["dtype"]).tobytes()
    below.set("ds/v/0", numcodecs.LZ4().encode(values))
    s = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)  # the wheel has no lz4: recoded
    assert json.loads(await s.get("ds/v/.zarray"))["compressor"] is None
    first = await s.get("ds/v/0", ByteRange(0, 2048))
    second = await s.get("ds/v/0", ByteRange(2048, 4096))
    assert bytes(first) + bytes(second) == values
    assert isinstance(first, memoryview) and first.readonly and first.obj is second.obj
    assert ByteRange(4, 8).view(bytearray(16)) == bytes(4) and isinstance(ByteRange(4, 8).view(bytearray(16)), bytes)
