"""The optional fast paths and features a store declares as Protocols: isinstance says what a
store, and a store lifted or wrapped over it, really offers."""

from __future__ import annotations

from nczfs.store.capabilities import (JournalsUploads, ListsTrees, ListsTreesBlocking, Stages, StagesBlocking,
                                     UploadsInParts, UploadsInPartsBlocking)
from nczfs.store.memory import MemoryStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.wrapper import WrapperStore


class Journaling(MemoryStore):
    """A store whose uploads a dead mount may leave (as S3's)."""

    upload_log = None

    @property
    def scope(self) -> str:
        return "memory:journaling"

    def abort_uploads(self, uploads: dict[str, str]) -> dict[str, str]:
        return {}


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


def test_only_a_store_that_journals_its_uploads_is_asked_for_its_scope():
    assert isinstance(Journaling("j"), JournalsUploads)
    assert not isinstance(MemoryStore("m"), JournalsUploads)
