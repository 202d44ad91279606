"""The store ("zmap") interface every backend implements: :class:`SyncStore` and :class:`Store`.

A missing key raises :class:`~nczfs.toolbox.errors.KeyNotFound`. Keys and prefixes: :mod:`.keys`; the
values the methods take and return: :mod:`.values`. The ABCs hold the dozen operations every
store has (get, get_version, stat, entry, set, set_file, delete, list_dir, list_prefix, copy,
rename, sync, close) and the capabilities it declares; the optional operations (POSIX
attributes, special files, links, truncate, directories as entries, statfs...) are Protocols a
store implements or not (:mod:`.optional`), as are its fast paths and the NCZarr layer's hooks
(:mod:`.capabilities`).

Backends are written as synchronous classes (:class:`SyncStore`) and lifted to the async
:class:`Store` used by the filesystem in one place, ``nczfs.store.threads.ThreadedStore``.
"""

from __future__ import annotations

import abc
from typing import BinaryIO, cast

from nczfs.toolbox.errors import BackendError, KeyNotFound, ReadOnly
from nczfs.store.capabilities import Capabilities
from nczfs.store.keys import join
from nczfs.store.optional import TellsDirectoriesBlocking, offers
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo


class SyncStore(abc.ABC):
    """A blocking backend. Every method may block; none is ever called on the trio thread."""

    #: what it says of itself (a class's, or one ``__init__`` sets where an option decides it)
    capabilities: Capabilities = Capabilities()

    @abc.abstractmethod
    def get(self, key: str, rng: ByteRange | None = None) -> bytes: ...

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        """``get``, but raise :class:`~nczfs.toolbox.errors.Stale` if the object is no longer version ``etag``.

        Stores that cannot tell versions apart cheaply read the current bytes.
        """
        return self.get(key, rng)

    @abc.abstractmethod
    def stat(self, key: str) -> ObjectInfo: ...

    @abc.abstractmethod
    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        """Store ``data`` as the object ``key``. ``if_version`` (where :attr:`checks_writes`): only
        while the object is still that version (an ETag), or absent (:data:`~nczfs.store.values.ABSENT`);
        else :class:`~nczfs.toolbox.errors.Conflict` and nothing changes."""

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """Store ``size`` bytes read from ``f`` (a private file object) at its position; S3, zip
        and directories copy them in pieces. A file that ends sooner stores nothing and raises
        BackendError naming the key. ``if_version``: as :meth:`set`."""
        data = f.read(size)
        if len(data) != size:
            raise BackendError(f"{key!r}: the data to store ends after {len(data)} of {size} bytes")
        return self.set(key, data, if_version=if_version)

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object; removing a missing key is not an error. Where :attr:`checks_deletes`:
        ``delete(key, if_version=V)`` removes it only while it is version V (gone: not an error)."""

    @abc.abstractmethod
    def list_dir(self, prefix: str) -> list[DirEntry]:
        """Immediate children of ``prefix`` (objects and implied directories), sorted by name."""

    def list_prefix(self, prefix: str) -> list[str]:
        """Every object key below ``prefix`` (all depths), sorted."""
        out: list[str] = []
        for entry in self.list_dir(prefix):
            key = join(prefix, entry.name)
            if entry.is_dir:
                out.extend(self.list_prefix(key))
            elif entry.is_object(self.capabilities.live_meta):
                out.append(key)
        return sorted(out)

    def entry(self, key: str) -> DirEntry | None:
        """What ``key`` names: an object (with its info), a directory, or nothing (None).

        One call answers a lookup; backends override it to ask the medium once.
        """
        name = key.rpartition("/")[2]
        try:
            return DirEntry(name, False, self.stat(key))
        except KeyNotFound:
            pass
        if offers(self, TellsDirectoriesBlocking):
            found = cast(TellsDirectoriesBlocking, self).dir_exists(key)
        else:
            found = key == "" or bool(self.list_dir(key))
        return DirEntry(name, True) if found else None

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """``dst`` made a copy of ``src``; ``if_version``: of ``dst``, as :meth:`set`."""
        return self.set(dst, self.get(src), if_version=if_version)

    def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """Move one object, replacing ``dst`` (``if_version``: only while ``dst`` is that version,
        as :meth:`set`); the moved object's info (a store that copies: the copy's version). Never
        loses ``src`` if the copy fails."""
        if src == dst:  # copy-then-delete would delete the only copy
            return self.stat(src)
        info = self.copy(src, dst, if_version=if_version)
        self.delete(src)
        return info

    def sync(self) -> None:
        """Make every accepted write part of the medium (zip: commit the staged changes)."""

    def close(self) -> None:
        pass


def check_writable(store: SyncStore, key: str) -> None:
    """ReadOnly naming ``key`` where ``store`` takes no writes (read-only, or a medium without them)."""
    if store.capabilities.read_only or not store.capabilities.supports_writes:
        raise ReadOnly(f"{key!r}: the store is read-only")


def rename_each(store: SyncStore, src: str, dst: str) -> None:
    """``rename_dir`` key by key: every key under ``src`` renamed to ``dst``."""
    for key in store.list_prefix(src):
        store.rename(key, dst + key[len(src):])


class Store(abc.ABC):
    """The async face of a store, used by the filesystem and by wrappers (cache, NCZarr): a
    SyncStore's dozen operations, awaited; its capabilities are a SyncStore's (:class:`~.capabilities.Capabilities`),
    its optional operations the same Protocols' async forms (:mod:`.optional`)."""

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities:
        """What the SyncStore at the bottom says of itself (a wrapper's: the store below's)."""

    @abc.abstractmethod
    async def get(self, key: str, rng: ByteRange | None = None) -> bytes: ...

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self.get(key, rng)

    @abc.abstractmethod
    async def stat(self, key: str) -> ObjectInfo: ...

    @abc.abstractmethod
    async def entry(self, key: str) -> DirEntry | None: ...

    @abc.abstractmethod
    async def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        """``SyncStore.set``, ``if_version`` included."""

    async def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        return await self.set(key, f.read(size), if_version=if_version)

    @abc.abstractmethod
    async def delete(self, key: str, if_version: str | None = None) -> None:
        """``SyncStore.delete``; ``if_version`` only where :attr:`checks_deletes`."""

    @abc.abstractmethod
    async def list_dir(self, prefix: str) -> list[DirEntry]: ...

    @abc.abstractmethod
    async def list_prefix(self, prefix: str) -> list[str]: ...

    @abc.abstractmethod
    async def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo: ...

    @abc.abstractmethod
    async def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """``SyncStore.rename``: the moved object's info."""

    async def sync(self) -> None:
        """Make every accepted write part of the medium; most stores have nothing to do."""

    @abc.abstractmethod
    async def close(self) -> None: ...
