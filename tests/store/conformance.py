"""One body of store tests, run against every backend.

A backend's test module subclasses :class:`StoreConformance` (which runs the read-only subset,
:class:`~tests.store.readconformance.ReadConformance`, too) and provides:

- ``sync_store`` (fixture): a fresh, writable :class:`SyncStore` over an empty medium;
- ``read_only_store()``: a read-only store over the *same* medium;
- ``put_raw(key, data)`` / ``get_raw(key)``: touch the medium directly, bypassing the store
  (``get_raw`` returns None for a missing key).

The ``store`` fixture lifts ``sync_store`` to async (``lift``: with :class:`ThreadedStore`, as
the mount does, and the wrappers a subclass stacks above it). Behaviour that depends on a
capability (``stores_directories``) is checked in both of its forms (e.g. mkdir answers
NotSupported on a store without directories) instead of skipping.
"""

from __future__ import annotations

import errno
import random
import stat

import pytest
import trio

from nczfs.toolbox.errors import (
    BackendError,
    Conflict,
    InvalidArgument,
    DirectoryNotEmpty,
    Exists,
    InvalidKey,
    IsADirectory,
    KeyNotFound,
    NameTooLong,
    NotADirectory,
    NotPermitted,
    NotSupported,
    ReadOnly,
    to_errno,
)
from nczfs.store.base import SyncStore
from nczfs.store.capabilities import ListsTrees, Stages, UploadsInParts
from nczfs.store.values import ABSENT, ByteRange, DirEntry, FsStats, Meta, ObjectInfo
from nczfs.store import optional
from tests.store.readconformance import Held, ReadConformance

BAD_KEYS = [
    pytest.param("/a", id="leading-slash"),
    pytest.param("a/", id="trailing-slash"),
    pytest.param("a/../b", id="dotdot"),
    pytest.param("..", id="bare-dotdot"),
    pytest.param("a/./b", id="dot"),
    pytest.param(".", id="bare-dot"),
    pytest.param("a//b", id="empty-segment"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("/", id="slash"),
]

BINARY = bytes(range(256)) * 4 + b"\x00\xff\r\n\x1a"
BIG = random.Random(1234).randbytes(5 * 1024 * 1024 + 17)


def names(entries: list[DirEntry]) -> list[str]:
    return [e.name for e in entries]


#: the objects the read-only tests (:class:`ReadConformance`) find in a writable backend's medium
READ_OBJECTS = {
    "a.txt": b"hello",
    "g/.zgroup": b'{"zarr_format": 2}',
    "g/v/0.0": BINARY,
    "g/v/0.1": bytes(range(7)) * 300,
    "deep/er/still/x": random.Random(47).randbytes(3000),
}


class StoreConformance(ReadConformance):
    # ------------------------------------------------------------------ backend hooks

    #: the store sends objects in parts while they are written (``UploadsInParts``)
    uploads_in_parts = False
    #: the store sends data now and makes it the object later (``Stages``)
    stages = False
    #: the store's writes take ``if_version`` (``checks_writes``)
    checks_writes = False
    #: the store's deletes take ``if_version`` (``checks_deletes``)
    checks_deletes = False
    #: the objects the read-only tests find in the medium (put there in this order)
    read_objects: dict[str, bytes] = READ_OBJECTS

    @pytest.fixture
    def sync_store(self) -> SyncStore:  # pragma: no cover - always overridden
        raise NotImplementedError

    def read_only_store(self) -> SyncStore:  # pragma: no cover
        raise NotImplementedError

    def put_raw(self, key: str, data: bytes) -> None:  # pragma: no cover
        raise NotImplementedError

    def get_raw(self, key: str) -> bytes | None:  # pragma: no cover
        raise NotImplementedError

    @pytest.fixture
    def held(self, sync_store: SyncStore) -> Held:
        """The read-only tests' medium: :attr:`read_objects` put there directly, seen read-only."""
        for key, data in self.read_objects.items():
            self.put_raw(key, data)
        return Held(self.read_only_store(), dict(self.read_objects))

    @pytest.fixture
    async def store(self, sync_store: SyncStore):
        s = self.lift(sync_store)
        yield s
        await s.close()

    # ------------------------------------------------------------------ get / set

    async def test_get_missing_raises_key_not_found(self, store):
        with pytest.raises(KeyNotFound) as info:
            await store.get("nope")
        assert to_errno(info.value) == errno.ENOENT
        with pytest.raises(KeyNotFound):
            await store.get("no/such/deep/key")
        with pytest.raises(KeyNotFound):
            await store.stat("nope")

    async def test_get_below_an_object_is_key_not_found(self, store):
        await store.set("f", b"x")
        with pytest.raises(KeyNotFound):
            await store.get("f/g")
        with pytest.raises(KeyNotFound):
            await store.stat("f/g")

    async def test_get_of_a_directory_is_key_not_found(self, store):
        await store.set("d/x", b"x")
        with pytest.raises(KeyNotFound):
            await store.get("d")
        with pytest.raises(KeyNotFound):
            await store.stat("d")

    @pytest.mark.parametrize("data", [b"", b"hello", BINARY], ids=["empty", "short", "binary"])
    async def test_set_get_round_trip(self, store, data):
        info = await store.set("g/v/obj", data)
        assert isinstance(info, ObjectInfo)
        assert (info.key, info.size) == ("g/v/obj", len(data))
        assert await store.get("g/v/obj") == data
        st = await store.stat("g/v/obj")
        assert (st.key, st.size, st.etag) == ("g/v/obj", len(data), info.etag)
        assert st.mtime_ns > 0

    async def test_big_object_round_trip(self, store):
        await store.set("big", BIG)
        assert (await store.stat("big")).size == len(BIG)
        got = await store.get("big")
        assert len(got) == len(BIG) and got == BIG
        assert await store.get("big", ByteRange(4 * 1024 * 1024, 4 * 1024 * 1024 + 10)) == BIG[4 << 20 : (4 << 20) + 10]

    async def test_big_object_from_a_file(self, store, tmp_path):
        """set_file stores ``size`` bytes from the file's position (the filesystem's spilled writes)."""
        path = tmp_path / "spilled"
        path.write_bytes(b"head" + BIG + b"tail")
        with open(path, "rb", buffering=0) as f:
            f.seek(4)
            info = await store.set_file("from-file", f, len(BIG))
        assert info.size == len(BIG)
        got = await store.get("from-file")
        assert len(got) == len(BIG) and got == BIG
        assert (await store.stat("from-file")).etag == info.etag

    @pytest.mark.parametrize("size", [2000, len(BIG)], ids=["small", "big"])
    async def test_a_file_shorter_than_its_size_stores_nothing(self, store, tmp_path, size):
        """(S3: one PutObject below its multipart threshold, a multipart upload above it.)"""
        path = tmp_path / "short"
        path.write_bytes(BIG[:1000])
        with open(path, "rb", buffering=0) as f, pytest.raises(BackendError, match="'short'"):
            await store.set_file("short", f, size)
        assert self.get_raw("short") is None
        with pytest.raises(KeyNotFound):
            await store.stat("short")

    async def test_an_object_sent_in_parts(self, store):
        """``open_upload`` (a store that is ``UploadsInParts``): parts sent in any order, one sent
        again (the later one counts), visible only once complete."""
        assert isinstance(store, UploadsInParts) == self.uploads_in_parts
        if not self.uploads_in_parts:
            return
        upload = await store.open_upload("parts/obj")
        part = upload.part_size
        data = random.Random(5).randbytes(2 * part + 1000)
        await upload.send(2, data[part : 2 * part])
        await upload.send(1, b"x" * part)
        await upload.send(3, data[2 * part :])
        await upload.send(1, data[:part])
        assert self.get_raw("parts/obj") is None
        info = await upload.complete(len(data))
        assert info.size == len(data) and self.get_raw("parts/obj") == data
        assert (await store.stat("parts/obj")).etag == info.etag

    async def test_staged_data_becomes_the_object_at_commit_only(self, store):
        """``stage`` (a store that ``Stages``): nothing visible until ``commit``, which makes the
        whole object at once; ``abort`` drops it."""
        assert isinstance(store, Stages) == self.stages
        if not self.stages:
            return
        data = random.Random(6).randbytes(3000)
        staged = await store.stage("staged/obj", data)
        assert self.get_raw("staged/obj") is None
        info = await staged.commit()
        assert self.get_raw("staged/obj") == data and (await store.stat("staged/obj")).etag == info.etag
        dropped = await store.stage("staged/gone", b"y" * 100)
        await dropped.abort()
        assert self.get_raw("staged/gone") is None

    async def test_an_aborted_upload_stores_nothing(self, store):
        if not self.uploads_in_parts:
            return
        upload = await store.open_upload("parts/gone")
        await upload.send(1, b"y" * upload.part_size)
        await upload.abort()
        with pytest.raises(BackendError, match="'parts/gone'"):
            await upload.complete(upload.part_size)
        assert self.get_raw("parts/gone") is None

    async def test_conditional_writes_replace_only_the_version_they_name(self, store):
        """``if_version`` (a store that ``checks_writes``): a write, upload or rename is made only
        while the object is that version (or, ABSENT, none is there); else Conflict (ESTALE),
        naming the version found, and nothing changes."""
        assert store.capabilities.checks_writes == self.checks_writes
        if not self.checks_writes:
            return
        first = await store.set("c/a", b"one", if_version=ABSENT)
        with pytest.raises(Conflict) as refused:
            await store.set("c/a", b"two", if_version=ABSENT)
        assert refused.value.found == first.etag and to_errno(refused.value) == errno.ESTALE
        self.put_raw("c/a", b"other")  # another client's write
        with pytest.raises(Conflict):
            await store.set("c/a", b"three", if_version=first.etag)
        assert self.get_raw("c/a") == b"other"
        now = (await store.stat("c/a")).etag
        with pytest.raises(Conflict):  # big: a multipart upload's completion
            await store.set("c/a", BIG, if_version=first.etag)
        assert self.get_raw("c/a") == b"other"
        big = await store.set("c/a", BIG, if_version=now)
        assert self.get_raw("c/a") == BIG
        await store.set("c/src", b"src")
        with pytest.raises(Conflict):
            await store.rename("c/src", "c/a", if_version=now)
        assert self.get_raw("c/src") == b"src" and self.get_raw("c/a") == BIG
        await store.rename("c/src", "c/a", if_version=big.etag)
        assert self.get_raw("c/src") is None and self.get_raw("c/a") == b"src"
        if self.uploads_in_parts:
            upload = await store.open_upload("c/new")
            await upload.send(1, b"p")
            self.put_raw("c/new", b"made meanwhile")
            with pytest.raises(Conflict):
                await upload.complete(1, ABSENT)
            assert self.get_raw("c/new") == b"made meanwhile"

    async def test_conditional_deletes_remove_only_the_version_they_name(self, store):
        """``delete(key, if_version=V)`` (a store that ``checks_deletes``): removed only while it is
        version V; else Conflict (ESTALE) naming the version found, and it stays; gone: no error."""
        assert store.capabilities.checks_deletes == self.checks_deletes
        if not self.checks_deletes:
            return
        first = await store.set("d/a", b"one")
        self.put_raw("d/a", b"other")  # another client's write
        with pytest.raises(Conflict) as refused:
            await store.delete("d/a", if_version=first.etag)
        now = (await store.stat("d/a")).etag
        assert to_errno(refused.value) == errno.ESTALE and refused.value.found == now
        assert self.get_raw("d/a") == b"other"
        await store.delete("d/a", if_version=now)
        assert self.get_raw("d/a") is None
        await store.delete("d/a", if_version=now)  # gone already: not an error

    async def test_set_accepts_bytearray_and_memoryview(self, store):
        await store.set("ba", bytearray(b"abc"))
        await store.set("mv", memoryview(b"xyzw")[1:3])
        assert await store.get("ba") == b"abc"
        assert await store.get("mv") == b"yz"

    async def test_unicode_keys(self, store):
        keys = ["grüße/数据/ø.bin", "ünï/çødé", "emoji/🐟", "space in/name .txt"]
        for i, k in enumerate(keys):
            await store.set(k, f"v{i}".encode())
        for i, k in enumerate(keys):
            assert await store.get(k) == f"v{i}".encode()
        assert await store.list_prefix("") == sorted(keys)
        assert names(await store.list_dir("grüße")) == ["数据"]
        assert names(await store.list_dir("grüße/数据")) == ["ø.bin"]

    async def test_overwrite_changes_size_and_etag(self, store):
        a = await store.set("k", b"first")
        b = await store.set("k", b"second!")
        assert (await store.get("k")) == b"second!"
        st = await store.stat("k")
        assert st.size == 7 and st.etag == b.etag and st.etag != a.etag
        # same length, other bytes: the etag must still change (caches key on it)
        c = await store.set("k", b"SECOND!")
        assert (await store.stat("k")).etag == c.etag != b.etag
        assert await store.get("k") == b"SECOND!"

    # ------------------------------------------------------------------ ranges

    async def test_ranged_get(self, store):
        data = bytes(range(100))
        await store.set("r", data)
        assert await store.get("r", ByteRange(10, 20)) == data[10:20]
        assert await store.get("r", ByteRange(0, 1)) == data[:1]
        assert await store.get("r", ByteRange(90, 150)) == data[90:]  # clipped at the end
        assert await store.get("r", ByteRange(40)) == data[40:]  # open end
        assert await store.get("r", ByteRange(100, 110)) == b""  # start at the end
        assert await store.get("r", ByteRange(500, 600)) == b""  # start past the end
        assert await store.get("r", ByteRange(500)) == b""
        assert await store.get("r", ByteRange(7, 7)) == b""

    async def test_ranged_get_missing_key(self, store):
        with pytest.raises(KeyNotFound):
            await store.get("missing", ByteRange(0, 10))

    def test_byte_range_rejects_bad_bounds(self):
        with pytest.raises(ValueError):
            ByteRange(-1, 3)
        with pytest.raises(ValueError):
            ByteRange(5, 4)

    # ------------------------------------------------------------------ delete

    async def test_delete_is_idempotent(self, store):
        await store.set("d/x", b"1")
        await store.set("d/y", b"2")
        await store.delete("d/x")
        with pytest.raises(KeyNotFound):
            await store.get("d/x")
        await store.delete("d/x")  # again
        await store.delete("never/was")
        await store.set("f", b"file")
        await store.delete("f/below")  # below an object: missing as well
        assert await store.get("d/y") == b"2"
        assert await store.get("f") == b"file"
        assert await store.list_prefix("") == ["d/y", "f"]

    async def test_delete_of_a_directory_key_removes_nothing(self, store):
        await store.set("dd/x", b"1")
        await store.delete("dd")
        assert await store.list_prefix("") == ["dd/x"]

    async def test_empty_directory_after_delete(self, store):
        await store.set("p/q/x", b"1")
        await store.delete("p/q/x")
        assert await store.list_prefix("") == []
        # a directory tree keeps the emptied directories; a key store has nothing left
        assert await optional.dir_exists(store, "p/q") is store.capabilities.stores_directories
        listed = names(await store.list_dir(""))
        if store.capabilities.emptied_dirs_may_linger:
            assert listed in (["p"], [])  # some S3 servers (SeaweedFS) keep an emptied folder a while
        else:
            assert listed == (["p"] if store.capabilities.stores_directories else [])

    # ------------------------------------------------------------------ listing

    async def _tree(self, store):
        for key in ["a/x", "a/y/z", "a/y/w", "ab/q", "b", "c/d/e/f", "a/0"]:
            await store.set(key, key.encode())

    async def test_list_dir_root(self, store):
        await self._tree(store)
        entries = await store.list_dir("")
        assert names(entries) == ["a", "ab", "b", "c"]
        by = {e.name: e for e in entries}
        assert by["a"].is_dir and by["a"].info is None
        assert by["c"].is_dir
        assert not by["b"].is_dir
        assert by["b"].info is not None and by["b"].info.size == 1 and by["b"].info.key == "b"

    async def test_list_dir_immediate_children_only(self, store):
        await self._tree(store)
        entries = await store.list_dir("a")
        assert [(e.name, e.is_dir) for e in entries] == [("0", False), ("x", False), ("y", True)]
        # deduplicated: two objects below a/y give one entry
        assert names(entries).count("y") == 1
        x = entries[1]
        assert x.info is not None and (x.info.key, x.info.size) == ("a/x", 3)
        assert names(await store.list_dir("a/y")) == ["w", "z"]
        assert names(await store.list_dir("c")) == ["d"]
        assert names(await store.list_dir("c/d/e")) == ["f"]
        # the prefix is never part of a name; a sibling sharing its spelling is not included
        for e in entries:
            assert "/" not in e.name and not e.name.startswith("a")

    async def test_list_dir_missing_or_object(self, store):
        await self._tree(store)
        assert await store.list_dir("nope") == []
        assert await store.list_dir("b") == []  # an object, not a directory
        assert await store.list_dir("a/x") == []

    async def test_list_dir_sorted(self, store):
        keys = ["s/b", "s/a", "s/C", "s/_", "s/é", "s/10", "s/9", "s/a.b/c"]
        for k in reversed(keys):
            await store.set(k, b"")
        got = names(await store.list_dir("s"))
        assert got == sorted(got)
        assert set(got) == {"b", "a", "C", "_", "é", "10", "9", "a.b"}

    #: the store lists a whole tree in one request (``list_tree``)
    lists_trees = False

    async def test_list_tree_gives_every_listing_below_a_prefix(self, store):
        """``list_tree``: the listings of a prefix and of every directory below it, each as
        ``list_dir`` gives it, if at most ``limit`` keys lie below; else (or where the store
        cannot) None."""
        assert isinstance(store, ListsTrees) == self.lists_trees
        if not self.lists_trees:
            return
        await self._tree(store)
        for prefix, limit in (("", 100), ("a", 4), ("c", 1), ("nope", 10)):
            trees = await store.list_tree(prefix, limit)
            assert trees is not None, prefix
            folders = {prefix}
            for key in await store.list_prefix(prefix):
                while (key := key.rpartition("/")[0]) != prefix:
                    folders.add(key)
            assert trees == {f: await store.list_dir(f) for f in folders}, prefix
        assert await store.list_tree("a", 3) is None  # four keys below "a"
        assert await store.list_tree("", 6) is None

    async def test_list_dir_empty_store(self, store):
        assert await store.list_dir("") == []
        assert await store.list_prefix("") == []

    async def test_list_prefix(self, store):
        await self._tree(store)
        assert await store.list_prefix("a") == ["a/0", "a/x", "a/y/w", "a/y/z"]
        assert await store.list_prefix("a/y") == ["a/y/w", "a/y/z"]
        assert await store.list_prefix("c") == ["c/d/e/f"]
        assert await store.list_prefix("") == ["a/0", "a/x", "a/y/w", "a/y/z", "ab/q", "b", "c/d/e/f"]
        assert await store.list_prefix("nope") == []
        assert await store.list_prefix("b") == []  # an object has nothing below it

    async def test_dir_exists(self, store):
        await self._tree(store)
        assert await optional.dir_exists(store, "")
        assert await optional.dir_exists(store, "a")
        assert await optional.dir_exists(store, "a/y")
        assert await optional.dir_exists(store, "c/d/e")
        assert not await optional.dir_exists(store, "b")  # an object
        assert not await optional.dir_exists(store, "a/x")
        assert not await optional.dir_exists(store, "nope")
        assert not await optional.dir_exists(store, "a/y/z/deeper")

    # ------------------------------------------------------------------ object vs directory

    async def test_object_cannot_shadow_a_directory(self, store):
        await store.set("n/x", b"1")
        if not store.capabilities.keys_form_a_tree:  # S3: both keys exist; the listing shows the directory
            await store.set("n", b"2")
            assert await store.list_prefix("") == ["n", "n/x"]
            assert [(e.name, e.is_dir) for e in await store.list_dir("")] == [("n", True)]
            assert (await store.entry("n")).is_dir
            return
        with pytest.raises(IsADirectory) as info:
            await store.set("n", b"2")
        assert to_errno(info.value) == errno.EISDIR
        assert await store.list_prefix("") == ["n/x"]

    async def test_no_object_below_an_object(self, store):
        await store.set("o", b"1")
        if not store.capabilities.keys_form_a_tree:  # S3: keys are independent of each other
            await store.set("o/x", b"2")
            assert await store.get("o") == b"1" and await store.get("o/x") == b"2"
            return
        with pytest.raises(NotADirectory) as info:
            await store.set("o/x", b"2")
        assert to_errno(info.value) == errno.ENOTDIR
        with pytest.raises(NotADirectory):
            await store.set("o/x/y", b"2")
        assert await store.get("o") == b"1"
        assert await store.list_prefix("") == ["o"]

    # ------------------------------------------------------------------ copy / rename

    async def test_copy(self, store):
        await store.set("src", b"payload")
        info = await store.copy("src", "dir/dst")
        assert (info.key, info.size) == ("dir/dst", 7)
        assert await store.get("src") == b"payload"
        assert await store.get("dir/dst") == b"payload"
        await store.set("src", b"changed")  # the copy is independent
        assert await store.get("dir/dst") == b"payload"
        with pytest.raises(KeyNotFound):
            await store.copy("missing", "x")

    async def test_rename(self, store):
        await store.set("r/src", b"moving")
        await store.rename("r/src", "s/t/dst")
        assert await store.get("s/t/dst") == b"moving"
        with pytest.raises(KeyNotFound):
            await store.get("r/src")
        assert "r/src" not in await store.list_prefix("")

    async def test_rename_replaces_destination(self, store):
        await store.set("one", b"1")
        await store.set("two", b"22")
        await store.rename("one", "two")
        assert await store.get("two") == b"1"
        assert (await store.stat("two")).size == 1
        assert await store.list_prefix("") == ["two"]

    async def test_rename_missing_source(self, store):
        await store.set("there", b"x")
        with pytest.raises(KeyNotFound):
            await store.rename("missing", "there")
        assert await store.get("there") == b"x"
        with pytest.raises(KeyNotFound):
            await store.rename("missing", "q/new")
        assert await store.list_prefix("") == ["there"]
        assert not await optional.dir_exists(store, "q")  # a failed rename leaves nothing behind

    async def test_rename_onto_itself_keeps_the_object(self, store):
        await store.set("same", b"keep me")
        await store.rename("same", "same")
        assert await store.get("same") == b"keep me"

    async def test_rename_onto_a_directory(self, store):
        await store.set("f", b"f")
        await store.set("d/x", b"x")
        if not store.capabilities.keys_form_a_tree:  # the filesystem checks this before it asks the store
            return
        with pytest.raises(IsADirectory):
            await store.rename("f", "d")
        with pytest.raises(NotADirectory):
            await store.rename("d/x", "f/x")
        assert await store.list_prefix("") == ["d/x", "f"]

    async def test_rename_of_a_directory_key_is_key_not_found(self, store):
        await store.set("d/x", b"x")
        with pytest.raises(KeyNotFound):
            await store.rename("d", "e")
        assert await store.list_prefix("") == ["d/x"]

    async def test_rename_dir(self, store):
        await self._tree(store)
        await optional.rename_dir(store, "a", "m/n")
        assert await store.list_prefix("m/n") == ["m/n/0", "m/n/x", "m/n/y/w", "m/n/y/z"]
        assert await store.get("m/n/y/z") == b"a/y/z"
        assert await store.list_prefix("a") == []
        assert not await optional.dir_exists(store, "a")
        assert await store.list_prefix("ab") == ["ab/q"]  # the sibling with a shared spelling stays
        assert await store.list_prefix("") == ["ab/q", "b", "c/d/e/f", "m/n/0", "m/n/x", "m/n/y/w", "m/n/y/z"]

    # ------------------------------------------------------------------ directories

    async def test_mkdir_rmdir(self, store):
        if not store.capabilities.stores_directories:
            for call in (optional.mkdir, optional.rmdir):
                with pytest.raises(NotSupported) as info:
                    await call(store, "e")
                assert to_errno(info.value) == errno.ENOTSUP
            return
        await optional.mkdir(store, "e/f")
        assert await optional.dir_exists(store, "e/f")
        assert [(e.name, e.is_dir) for e in await store.list_dir("e")] == [("f", True)]
        assert await store.list_prefix("e") == []
        with pytest.raises(Exists):
            await optional.mkdir(store, "e/f")
        await store.set("e/f/x", b"1")
        with pytest.raises(DirectoryNotEmpty) as info:
            await optional.rmdir(store, "e/f")
        assert to_errno(info.value) == errno.ENOTEMPTY
        await store.delete("e/f/x")
        await optional.rmdir(store, "e/f")
        assert not await optional.dir_exists(store, "e/f")
        assert await optional.dir_exists(store, "e")
        with pytest.raises(KeyNotFound):
            await optional.rmdir(store, "e/f")

    async def test_rename_dir_moves_subdirectories(self, store):
        if store.capabilities.stores_directories:
            await optional.mkdir(store, "t/empty")  # kept, and moved, only where directories are stored
        await store.set("t/x", b"1")
        await store.set("t/sub/y", b"2")
        await optional.rename_dir(store, "t", "u")
        assert await optional.dir_exists(store, "u/empty") is store.capabilities.stores_directories
        assert await optional.dir_exists(store, "u/sub")
        assert await store.list_prefix("u") == ["u/sub/y", "u/x"]
        assert not await optional.dir_exists(store, "t")
        assert not await optional.dir_exists(store, "t/sub")
        assert await store.list_dir("t") == []

    # ------------------------------------------------------------------ keys

    @pytest.mark.parametrize("key", BAD_KEYS)
    async def test_invalid_keys_rejected(self, store, key):
        calls = [
            lambda: store.get(key),
            lambda: store.stat(key),
            lambda: store.set(key, b"x"),
            lambda: store.delete(key),
            lambda: store.list_dir(key),
            lambda: store.list_prefix(key),
            lambda: store.copy("ok", key),
            lambda: store.rename("ok", key),
            lambda: store.rename(key, "ok2"),
        ]
        await store.set("ok", b"fine")
        for call in calls:
            with pytest.raises(InvalidKey) as info:
                await call()
            assert to_errno(info.value) == errno.EINVAL
        assert await store.list_prefix("") == ["ok"]
        assert await store.get("ok") == b"fine"

    async def test_empty_key_rejected(self, store):
        for call in (lambda: store.get(""), lambda: store.set("", b"x"), lambda: store.delete("")):
            with pytest.raises(InvalidKey):
                await call()

    async def test_segment_too_long(self, store):
        with pytest.raises(NameTooLong) as info:
            await store.set("d/" + "x" * 256, b"1")
        assert to_errno(info.value) == errno.ENAMETOOLONG
        await store.set("d/" + "x" * 255, b"1")  # the longest allowed
        assert await store.get("d/" + "x" * 255) == b"1"

    # ------------------------------------------------------------------ read-only

    async def test_read_only_store_refuses_writes(self, store):
        await store.set("keep/a", b"A")
        await store.set("keep/b", b"B")
        if store.capabilities.stores_directories:
            await optional.mkdir(store, "keep/empty")
        ro = self.lift(self.read_only_store())
        assert ro.capabilities.read_only
        attempts = [
            lambda: ro.set("keep/a", b"changed"),
            lambda: ro.set("new", b"x"),
            lambda: ro.delete("keep/a"),
            lambda: ro.rename("keep/a", "moved"),
            lambda: ro.copy("keep/a", "copied"),
            lambda: optional.rename_dir(ro, "keep", "gone"),
        ]
        if ro.capabilities.stores_directories:
            attempts += [lambda: optional.mkdir(ro, "newdir"), lambda: optional.rmdir(ro, "keep/empty")]
        for attempt in attempts:
            with pytest.raises(ReadOnly) as info:
                await attempt()
            assert to_errno(info.value) == errno.EROFS
        # nothing changed, and reading still works
        assert await ro.get("keep/a") == b"A"
        assert await ro.list_prefix("") == ["keep/a", "keep/b"]
        assert self.get_raw("keep/a") == b"A"
        assert self.get_raw("moved") is None and self.get_raw("copied") is None
        assert names(await ro.list_dir("")) == ["keep"]
        assert await optional.dir_exists(ro, "keep/empty") is ro.capabilities.stores_directories

    # ------------------------------------------------------------------ backdoor

    async def test_writes_reach_the_medium(self, store):
        await store.set("w/one", b"through the store")
        assert self.get_raw("w/one") == b"through the store"
        await store.rename("w/one", "w/two")
        assert self.get_raw("w/one") is None
        assert self.get_raw("w/two") == b"through the store"
        await store.delete("w/two")
        assert self.get_raw("w/two") is None

    async def test_medium_writes_reach_the_store(self, store):
        self.put_raw("bd/x", b"from the backdoor")
        self.put_raw("bd/sub/y", b"yy")
        assert await store.get("bd/x") == b"from the backdoor"
        assert (await store.stat("bd/x")).size == 17
        assert [(e.name, e.is_dir) for e in await store.list_dir("bd")] == [("sub", True), ("x", False)]
        assert await store.list_prefix("") == ["bd/sub/y", "bd/x"]
        self.put_raw("bd/x", b"changed")
        assert await store.get("bd/x") == b"changed"

    # ------------------------------------------------------------------ concurrency, statfs

    async def test_concurrent_writes(self, store):
        async def put(i: int) -> None:
            await store.set(f"c/{i % 5}/k{i}", str(i).encode() * 100)

        async with trio.open_nursery() as nursery:
            for i in range(40):
                nursery.start_soon(put, i)
        keys = await store.list_prefix("c")
        assert len(keys) == 40
        for i in range(40):
            assert await store.get(f"c/{i % 5}/k{i}") == str(i).encode() * 100

    async def test_statfs(self, store):
        st = await optional.statfs(store)
        assert st is None or (isinstance(st, FsStats) and 0 <= st.free_bytes <= st.total_bytes)

    async def test_describe(self, store):
        assert isinstance(optional.describe(store), str) and optional.describe(store)

    # ------------------------------------------------------------------ POSIX attributes

    async def test_attributes_kept_for_objects_and_special_files(self, store):
        """set_meta keeps modes, owners and mtimes (the bytes stay); make_node makes symlinks
        and fifos whose type stat and listings report; readlink gives a symlink's target."""
        if not optional.offers(store, optional.KeepsMeta):
            with pytest.raises(NotSupported):
                await optional.set_meta(store, "k", Meta(mode=0o100600))
            return
        # S3 reads metadata (a HEAD of its own) only with -o posix_meta
        reads_meta = store.capabilities.reads_meta
        await store.set("d/f", b"bytes")
        kept = await optional.set_meta(store, "d/f", Meta(mode=stat.S_IFREG | 0o640, uid=1234, gid=5678, mtime_ns=2_000_000_000))
        assert (stat.S_IMODE(kept.mode), kept.uid, kept.gid) == (0o640, 1234, 5678)
        if reads_meta:
            meta = (await store.stat("d/f")).meta
            assert (stat.S_IMODE(meta.mode), meta.uid, meta.gid, meta.mtime_ns) == (0o640, 1234, 5678, 2_000_000_000)
        assert await store.get("d/f") == b"bytes"
        if reads_meta:
            info = await optional.make_node(store, "d/link", Meta(mode=stat.S_IFLNK | 0o777, uid=1, gid=2), "f")
            assert stat.S_ISLNK(info.meta.mode)
            assert await optional.readlink(store, "d/link") == "f"
        else:  # a symlink's type would be lost at the next listing: refused
            with pytest.raises(NotPermitted, match="posix_meta"):
                await optional.make_node(store, "d/link", Meta(mode=stat.S_IFLNK | 0o777, uid=1, gid=2), "f")
        await optional.make_node(store, "d/fifo", Meta(mode=stat.S_IFIFO | 0o600, uid=1, gid=2))
        if reads_meta:
            listed = {e.name: e.attrs for e in await store.list_dir("d")}
            assert stat.S_IFMT(listed["link"].mode) == stat.S_IFLNK and stat.S_IFMT(listed["fifo"].mode) == stat.S_IFIFO
            assert stat.S_ISFIFO((await store.stat("d/fifo")).meta.mode)
        assert await store.list_prefix("d") == (["d/f"] if store.capabilities.live_meta else
                                                ["d/f", "d/fifo", "d/link"] if reads_meta else ["d/f", "d/fifo"])
        with pytest.raises(InvalidArgument):
            await optional.readlink(store, "d/f")
