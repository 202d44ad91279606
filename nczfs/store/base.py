"""The store ("zmap") interface every backend implements: :class:`SyncStore` and :class:`Store`.

A missing key raises :class:`~nczfs.toolbox.errors.KeyNotFound`. Keys and prefixes: :mod:`.keys`; the
values the methods take and return: :mod:`.values`; the capabilities a store declares, the
optional fast paths it may offer and the NCZarr layer's hooks (Protocols a store implements or
not): :mod:`.capabilities`.

Backends are written as synchronous classes (:class:`SyncStore`) and lifted to the async
:class:`Store` used by the filesystem in one place, ``nczfs.store.threads.ThreadedStore``.
"""

from __future__ import annotations

import abc
from typing import BinaryIO

from nczfs.toolbox.errors import BackendError, InvalidArgument, KeyNotFound, NotSupported, ReadOnly
from nczfs.store.keys import check_key, join
from nczfs.store.values import ByteRange, DirEntry, FsStats, Meta, ObjectInfo


class SyncStore(abc.ABC):
    """A blocking backend. Every method may block; none is ever called on the trio thread."""

    #: the medium accepts writes at all (a read-only mount sets ``read_only`` instead)
    supports_writes: bool = True
    #: empty directories persist in the medium (a directory tree), instead of being implied by keys
    stores_directories: bool = False
    #: calls may run inline on the event loop because they never block (memory)
    non_blocking: bool = False
    #: the medium refuses an object named like a directory and objects below an object (a
    #: file tree); S3 does not: there "n" and "n/x" may both exist, and listings show "n" as
    #: a directory (the filesystem never creates such pairs itself)
    keys_form_a_tree: bool = True
    #: ``get_version`` really refuses another version (S3: If-Match), so a successful one
    #: confirms that the version is current (stores without that read the current bytes)
    checks_versions: bool = False
    #: writes take ``if_version=`` and refuse (:class:`~nczfs.toolbox.errors.Conflict`) to replace an
    #: object that is no longer that version, or (:data:`~nczfs.store.values.ABSENT`) to make one
    #: where another appeared (S3: If-Match, If-None-Match: *); stores without it ignore the
    #: argument, the last writer wins there
    checks_writes: bool = False
    #: ``delete`` takes ``if_version=`` (an ETag) and refuses (Conflict) to remove an object that
    #: is no longer that version (S3: DeleteObject's If-Match); stores without it are never given one
    checks_deletes: bool = False
    #: ``set_meta`` keeps POSIX attributes of objects in the medium (modes, owners, times)
    keeps_meta: bool = False
    #: every ``stat``, ``entry`` and listing reports the attributes the medium holds, for
    #: objects and directories alike, and changes made in the medium show there (a local
    #: directory): the mount shows them and keeps none of its own
    live_meta: bool = False
    #: the largest object the medium can hold (None: no bound of its own; its writes fail)
    max_object_size: int | None = None
    #: calls that may run at once (ThreadedStore's slots; S3: its connection pool's size)
    max_concurrency: int = 8

    read_only: bool = False

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
            elif entry.is_object(self.live_meta):
                out.append(key)
        return sorted(out)

    def dir_exists(self, prefix: str) -> bool:
        """True if ``prefix`` is a directory: the root, a stored directory, or a key prefix."""
        return prefix == "" or bool(self.list_dir(prefix))

    def entry(self, key: str) -> DirEntry | None:
        """What ``key`` names: an object (with its info), a directory, or nothing (None).

        One call answers a lookup; backends override it to ask the medium once.
        """
        name = key.rpartition("/")[2]
        try:
            return DirEntry(name, False, self.stat(key))
        except KeyNotFound:
            pass
        return DirEntry(name, True) if self.dir_exists(key) else None

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

    def rename_dir(self, src: str, dst: str) -> None:
        """Move every key under ``src`` to ``dst``; ``dst`` holds no keys (checked by the caller)."""
        for key in self.list_prefix(src):
            self.rename(key, dst + key[len(src) :])

    def mkdir(self, prefix: str) -> None:
        raise NotSupported(f"{prefix!r}: this store keeps no empty directories")

    def rmdir(self, prefix: str) -> None:
        raise NotSupported(f"{prefix!r}: this store keeps no empty directories")

    def check_new_key(self, key: str) -> None:
        """Refuse, before anything is written, a key the medium could not name (S3: longer than
        1,024 bytes) with the error its write would give."""
        check_key(key)

    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        """Keep the attributes ``changes`` says (the others as they are) for the object (or, with
        ``is_dir``, the directory) ``key``; returns all the attributes it now has in the medium.
        NotSupported where the medium keeps none (for that kind of entry)."""
        raise NotSupported(f"{key!r}: this store keeps no file attributes")

    def write_meta(self, key: str, meta: Meta | None) -> None:
        """The attributes the writes of ``key`` store with its object from now on (None: none
        again), where the object holds them (S3: its user metadata); a write that stored them
        says so in its ``ObjectInfo.meta``. Other stores ignore it (no I/O)."""

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """Create a symlink to ``target`` (``meta.mode`` says S_IFLNK) or a special file (fifo,
        socket, device: ``meta.mode`` and ``meta.rdev``) at ``key``, with these attributes.
        NotSupported where the medium cannot hold it."""
        raise NotSupported(f"{key!r}: this store holds regular files only")

    def readlink(self, key: str) -> str:
        """The target of the symlink ``key``."""
        raise InvalidArgument(f"{key!r}: not a symlink")

    def link(self, src: str, dst: str) -> ObjectInfo:
        """Make ``dst`` a second name of the object ``src`` (a hard link). NotSupported where the
        medium has none (the caller may copy instead)."""
        raise NotSupported(f"{src!r}: this store has no hard links")

    def truncate(self, key: str, size: int, if_version: str | None = None) -> ObjectInfo:
        """Cut or extend (with a hole where the medium has them) the object ``key`` in place, only
        while it is version ``if_version`` (None: any; else Conflict). NotSupported where objects
        are only written whole (the caller rewrites it)."""
        raise NotSupported(f"{key!r}: objects are written whole")

    def forget_dir(self, prefix: str) -> None:
        """An empty directory was removed on a store that keeps none: drop any trace of it (S3 markers)."""

    def statfs(self) -> FsStats | None:
        return None

    def sync(self) -> None:
        """Make every accepted write part of the medium (zip: commit the staged changes)."""

    def close(self) -> None:
        pass

    def counters(self) -> dict[str, int]:
        """Request counts by kind, for ``nczfs stats`` (stores that count nothing say so with {})."""
        return {}

    def problems(self) -> list[str]:
        """What is wrong with the medium itself, one line each (``nczfs validate``; warned at
        mount time): duplicate zip members, reference targets no read may reach."""
        return []

    def describe(self) -> str:
        return type(self).__name__

    def check_writable(self, key: str) -> None:
        if self.read_only or not self.supports_writes:
            raise ReadOnly(f"{key!r}: the store is read-only")


class Store(abc.ABC):
    """The async face of a store, used by the filesystem and by wrappers (cache, NCZarr); its
    capabilities are a SyncStore's (:data:`CAPABILITIES`)."""

    supports_writes: bool
    stores_directories: bool
    read_only: bool
    keys_form_a_tree: bool = True
    checks_versions: bool = False
    checks_writes: bool = False
    checks_deletes: bool = False
    keeps_meta: bool = False
    live_meta: bool = False
    max_object_size: int | None = None

    @abc.abstractmethod
    async def get(self, key: str, rng: ByteRange | None = None) -> bytes: ...

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self.get(key, rng)

    @abc.abstractmethod
    async def stat(self, key: str) -> ObjectInfo: ...

    async def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        return await self.set(key, f.read(size), if_version=if_version)

    async def forget_dir(self, prefix: str) -> None:
        pass

    async def refresh(self, key: str) -> None:
        """Forget what is cached about ``key`` (a cache's), so the next read of it asks the medium."""

    def check_new_key(self, key: str) -> None:
        """``SyncStore.check_new_key`` (no I/O)."""
        check_key(key)

    async def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        raise NotSupported(f"{key!r}: this store keeps no file attributes")

    def write_meta(self, key: str, meta: Meta | None) -> None:
        """``SyncStore.write_meta`` (no I/O)."""

    async def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        raise NotSupported(f"{key!r}: this store holds regular files only")

    async def readlink(self, key: str) -> str:
        raise InvalidArgument(f"{key!r}: not a symlink")

    async def link(self, src: str, dst: str) -> ObjectInfo:
        raise NotSupported(f"{src!r}: this store has no hard links")

    async def truncate(self, key: str, size: int, if_version: str | None = None) -> ObjectInfo:
        raise NotSupported(f"{key!r}: objects are written whole")

    def counters(self) -> dict[str, int]:
        return {}

    @abc.abstractmethod
    async def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        """``SyncStore.set``, ``if_version`` included."""

    @abc.abstractmethod
    async def delete(self, key: str, if_version: str | None = None) -> None:
        """``SyncStore.delete``; ``if_version`` only where :attr:`checks_deletes`."""

    @abc.abstractmethod
    async def list_dir(self, prefix: str) -> list[DirEntry]: ...

    @abc.abstractmethod
    async def list_prefix(self, prefix: str) -> list[str]: ...

    @abc.abstractmethod
    async def dir_exists(self, prefix: str) -> bool: ...

    @abc.abstractmethod
    async def entry(self, key: str) -> DirEntry | None: ...

    @abc.abstractmethod
    async def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo: ...

    @abc.abstractmethod
    async def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """``SyncStore.rename``: the moved object's info."""

    @abc.abstractmethod
    async def rename_dir(self, src: str, dst: str) -> None: ...

    @abc.abstractmethod
    async def mkdir(self, prefix: str) -> None: ...

    @abc.abstractmethod
    async def rmdir(self, prefix: str) -> None: ...

    @abc.abstractmethod
    async def statfs(self) -> FsStats | None: ...

    async def sync(self) -> None:
        """Make every accepted write part of the medium; most stores have nothing to do."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    def describe(self) -> str: ...
