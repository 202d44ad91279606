"""Open the store a :class:`~nczfs.source.Source` names."""

from __future__ import annotations

from nczfs.errors import SourceError
from nczfs.source import Source
from nczfs.store.base import SyncStore


def open_store(source: Source, read_only: bool = False) -> SyncStore:
    if source.backend == "directory":
        from nczfs.store.directory import DirectoryStore

        return DirectoryStore(source.location, read_only=read_only)
    if source.backend == "memory":
        from nczfs.store.memory import MemoryStore

        return MemoryStore(source.location, read_only=read_only)
    raise SourceError(f"{source.text}: the {source.backend} backend is not available in this version")
