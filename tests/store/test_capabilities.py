"""The optional fast paths and features a store declares as Protocols: isinstance says what a
store, and a store lifted or wrapped over it, really offers."""

from __future__ import annotations

import pytest

from nczfs.store.capabilities import (ChecksContent, HasReadOnlyKeys, Hides, JournalsUploads, ListsTrees,
                                     ListsTreesBlocking, Stages, StagesBlocking, UploadsInParts,
                                     UploadsInPartsBlocking, check_content, checks_content, hides, read_only_key)
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.wrapper import WrapperStore


class Passing(WrapperStore):
    passes = ("open_upload", "list_tree", "stage")


def test_a_store_offers_its_fast_paths_and_a_wrapper_only_those_it_passes():
    mem = MemoryStore("caps")
    assert isinstance(mem, UploadsInPartsBlocking) and isinstance(mem, ListsTreesBlocking)
    assert not isinstance(mem, StagesBlocking)
    lifted = ThreadedStore(mem)
    assert isinstance(lifted, UploadsInParts) and isinstance(lifted, ListsTrees) and not isinstance(lifted, Stages)
    plain = WrapperStore(lifted)
    assert not any(isinstance(plain, p) for p in (UploadsInParts, ListsTrees, Stages))
    passing = Passing(lifted)
    assert isinstance(passing, UploadsInParts) and isinstance(passing, ListsTrees)
    assert not isinstance(passing, Stages)  # the store below has none to pass


def test_a_store_without_upload_journals_is_not_asked_for_its_scope():
    """The one that has them, S3's: ``tests/store/test_s3.py``."""
    assert not isinstance(MemoryStore("m"), JournalsUploads)


class Hiding(MemoryStore):
    """A sync store with a hidden, read-only tree (as Icechunk's ``.icechunk``)."""

    def hides(self, key: str) -> bool:
        return key == ".hidden"

    def read_only_key(self, key: str) -> bool:
        return key.startswith(".hidden")


class Checking(WrapperStore):
    """A wrapper that judges contents itself (as the NCZarr layer's)."""

    def checks_content(self, key: str) -> bool:
        return key.endswith(".json")

    async def check_content(self, key: str, data: bytes) -> None:
        if data != b"{}":
            raise ValueError(f"{key!r}: not {{}}")


async def test_the_nczarr_hooks_reach_the_top_of_a_stack_only_where_a_store_has_them():
    plain = WrapperStore(ThreadedStore(MemoryStore("plain")))
    assert not any(isinstance(plain, p) for p in (ChecksContent, HasReadOnlyKeys, Hides))
    assert not hides(plain, ".hidden") and not read_only_key(plain, ".hidden") and not checks_content(plain, "a.json")
    await check_content(plain, "a.json", b"anything")  # no hook: nothing refused
    top = WrapperStore(Checking(WrapperStore(ThreadedStore(Hiding("hiding")))))
    assert isinstance(top, Hides) and isinstance(top, HasReadOnlyKeys) and isinstance(top, ChecksContent)
    assert hides(top, ".hidden") and not hides(top, "x")
    assert read_only_key(top, ".hidden/refs") and not read_only_key(top, "x")
    assert checks_content(top, "a.json") and not checks_content(top, "a.bin")
    await check_content(top, "a.json", b"{}")
    with pytest.raises(ValueError, match="'a.json'"):
        await check_content(top, "a.json", b"[]")
