"""The read-only part of the store tests, run against every backend, read-only ones included.

A backend's test module subclasses :class:`ReadConformance` (``StoreConformance`` does, for the
writable backends) and provides ``held`` (fixture): a :class:`Held`, a store over a medium and
every object that medium holds with its bytes. The ``ro`` fixture lifts it to async (``lift``:
with :class:`ThreadedStore`, as the mount does, and the wrappers a subclass stacks above it).
Every test only reads, or tries a write of a store that is read-only and checks that nothing
changed.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

import pytest

from nczfs.toolbox.errors import InvalidKey, KeyNotFound, ReadOnly, to_errno
from nczfs.store.base import Store, SyncStore
from nczfs.store.keys import parent_of
from nczfs.store.threads import ThreadedStore
from nczfs.store.optional import OPTIONAL, ReportsProblems
from nczfs.store.values import ByteRange
from nczfs.store import optional
from tests.store.offers import assert_each_layer_offers


@dataclass
class Held:
    """A store, and every object its medium holds (key -> bytes)."""

    store: SyncStore
    objects: dict[str, bytes]


def directories(keys: list[str]) -> dict[str, set[tuple[str, bool]]]:
    """Every directory the keys imply (``""``: the root) -> its children (name, is a directory)."""
    out: dict[str, set[tuple[str, bool]]] = {"": set()}
    for key in keys:
        is_dir = False
        while True:
            parent = parent_of(key)
            out.setdefault(parent, set()).add((key.rpartition("/")[2], is_dir))
            if parent == "":
                break
            key, is_dir = parent, True
    return out


class ReadConformance:
    #: the optional operations (async forms, :data:`nczfs.store.optional.OPTIONAL`) the backend
    #: has: each backend's test class gives its row of tests/store/offers.py
    optional: frozenset[type] | None = None
    #: a listing gives each object's size (and version): False where it names objects only (a
    #: web server's Zarr, whose tree comes from the metadata)
    listings_carry_info = True

    @pytest.fixture
    def held(self) -> Held:  # pragma: no cover - always overridden
        raise NotImplementedError

    def lift(self, store: SyncStore) -> Store:
        """``store`` as the tests use it: on worker threads, as the mount does (a subclass adds
        the wrappers a mount stacks above them)."""
        return ThreadedStore(store)

    @pytest.fixture
    async def ro(self, held: Held):
        s = self.lift(held.store)
        yield s
        await s.close()

    async def test_the_optional_operations_are_the_backends_through_every_layer(self, ro, held):
        """The backend implements the Protocols its test class says (their blocking forms), and
        each layer of the store the tests use (ThreadedStore and the wrappers a subclass stacks)
        has exactly those of the layer below, and those it answers itself (its own counters, a
        cache's refresh)."""
        assert self.optional is not None, f"{type(self).__name__} says which optional operations its backend has"
        for protocol, (blocking, _) in OPTIONAL.items():
            assert isinstance(held.store, blocking) is (protocol in self.optional), protocol.__name__
        assert isinstance(held.store, ReportsProblems) is (ReportsProblems in self.optional)
        assert_each_layer_offers(ro, self.optional)

    async def test_reading_every_object_whole_and_in_ranges(self, ro, held):
        assert held.objects, "the medium of a read test holds objects"
        for key, data in held.objects.items():
            assert await ro.get(key) == data, key
            assert (await ro.stat(key)).size == len(data), key
            n = len(data)
            assert await ro.get(key, ByteRange(0, 1)) == data[:1], key
            assert await ro.get(key, ByteRange(n // 2, n + 100)) == data[n // 2 :], key  # clipped at the end
            assert await ro.get(key, ByteRange(n // 3)) == data[n // 3 :], key  # open end
            assert await ro.get(key, ByteRange(n, n + 5)) == b"", key
            assert await ro.get(key, ByteRange(n + 10)) == b"", key

    async def test_reading_the_current_version_by_its_etag(self, ro, held):
        for key, data in held.objects.items():
            etag = (await ro.stat(key)).etag
            assert await ro.get_version(key, None, etag) == data, key
            assert await ro.get_version(key, ByteRange(1, 3), etag) == data[1:3], key

    async def test_listings_show_the_objects_and_the_directories_they_imply(self, ro, held):
        keys = sorted(held.objects)
        assert await ro.list_prefix("") == keys
        for prefix, children in directories(keys).items():
            got = await ro.list_dir(prefix)
            assert [e.name for e in got] == sorted(name for name, _ in children), prefix
            assert {(e.name, e.is_dir) for e in got} == children, prefix
            assert await optional.dir_exists(ro, prefix), prefix
            if prefix:
                below = [k for k in keys if k.startswith(prefix + "/")]
                assert await ro.list_prefix(prefix) == below, prefix

    async def test_what_a_listing_says_of_an_object_is_what_stat_says(self, ro, held):
        checked = 0
        for prefix in directories(sorted(held.objects)):
            for entry in await ro.list_dir(prefix):
                if entry.is_dir or entry.info is None:
                    continue
                key = f"{prefix}/{entry.name}" if prefix else entry.name
                st = await ro.stat(key)
                assert entry.info.size == st.size == len(held.objects[key]), key
                if entry.info.etag and st.etag:
                    assert entry.info.etag == st.etag, key
                checked += 1
        if self.listings_carry_info:
            assert checked > 0, "no listed object carried its info"
        else:
            assert checked == 0, "listings carry info here: set listings_carry_info"

    async def test_entry_names_an_object_a_directory_or_nothing(self, ro, held):
        for key, data in held.objects.items():
            found = await ro.entry(key)
            assert found is not None and not found.is_dir and found.name == key.rpartition("/")[2], key
            assert found.info is not None and found.info.size == len(data), key
        for prefix in directories(sorted(held.objects)):
            if prefix:
                found = await ro.entry(prefix)
                assert found is not None and found.is_dir, prefix
        assert await ro.entry("no-such-name") is None
        assert await ro.entry("no/such/deep/name") is None
        assert not await optional.dir_exists(ro, "no-such-name")

    async def test_missing_keys_directories_and_keys_below_objects_are_key_not_found(self, ro, held):
        key = sorted(held.objects)[0]
        dirs = [d for d in directories(sorted(held.objects)) if d]
        asked = ["no-such-name", "no/such/deep/name", f"{key}/below", *dirs[:1]]
        for name in asked:
            with pytest.raises(KeyNotFound) as info:
                await ro.get(name)
            assert to_errno(info.value) == errno.ENOENT, name
            with pytest.raises(KeyNotFound):
                await ro.stat(name)
            with pytest.raises(KeyNotFound):
                await ro.get(name, ByteRange(0, 10))

    @pytest.mark.parametrize("bad", ["/a", "a/", "a/../b", "a//b", "a\x00b"])
    async def test_malformed_keys_are_invalid(self, ro, bad):
        with pytest.raises(InvalidKey):
            await ro.get(bad)

    async def test_a_read_only_store_refuses_every_write_with_erofs(self, ro, held):
        assert ro.capabilities.read_only or not ro.capabilities.supports_writes
        key = sorted(held.objects)[0]
        attempts = [
            lambda: ro.set(key, b"changed"),
            lambda: ro.set("new-object", b"x"),
            lambda: ro.delete(key),
            lambda: ro.copy(key, "copied"),
            lambda: ro.rename(key, "moved"),
        ]
        for attempt in attempts:
            with pytest.raises(ReadOnly) as info:
                await attempt()
            assert to_errno(info.value) == errno.EROFS
        assert await ro.get(key) == held.objects[key]
        assert await ro.list_prefix("") == sorted(held.objects)
