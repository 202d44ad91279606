"""The memory backend's registry entry: ``memory://NAME``, a dict-backed store (the tests'). A
module of its own so that finding the backend does not import the store (:mod:`.store`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nczfs.toolbox.errors import SourceError
from nczfs.store.opening import Given, Located
from nczfs.store.registry import Backend, register

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore
    from nczfs.store.opening import Opening


def _memory(opening: Opening) -> SyncStore:
    from nczfs.store.memory.store import MemoryStore

    return MemoryStore(opening.source.location, read_only=opening.read_only)


def _memory_location(given: Given) -> Located:
    assert given.parts is not None
    if given.chosen is not None:
        raise SourceError(f"{given.text}: mode {given.words} does not fit memory://")
    return Located(given.parts.netloc + given.parts.path)


MEMORY = register(Backend("memory", _memory, schemes=("memory",), locate=_memory_location,
                          forms="memory://NAME (an in-memory store, for tests)"))
