"""The store ("zmap") interface every backend implements.

Keys are ``/``-separated UTF-8 strings without a leading slash (``g/v/.zarray``). A
directory is nothing but the first segments under a prefix; ``list_dir`` returns the
immediate children of a prefix, objects and implied directories alike, as netCDF-C's
``zmap search`` does. A missing key raises :class:`~nczfs.errors.KeyNotFound`.

Backends are written as synchronous classes (:class:`SyncStore`) and lifted to the async
:class:`Store` used by the filesystem in one place, ``nczfs.threads.ThreadedStore``.

The contract: the methods of :class:`SyncStore` / :class:`Store`; the capabilities a store
declares (:data:`CAPABILITIES`, class attributes, which a wrapper answers from the store below);
and the optional fast paths, each a :class:`typing.Protocol` a store implements or not, asked
with ``isinstance``: :class:`Stages` (data sent now, made the object later), :class:`UploadsInParts`
(an object sent in parts as it is written), :class:`ListsTrees` (a whole tree in one request).
"""

from __future__ import annotations

import abc
import dataclasses
import stat as stat_mod
from dataclasses import dataclass
from typing import Any, Awaitable, BinaryIO, Callable, Iterable, Iterator, Protocol, runtime_checkable

from nczfs.errors import BackendError, InvalidArgument, InvalidKey, KeyNotFound, NameTooLong, NotSupported, ReadOnly


@dataclass(frozen=True)
class ByteRange:
    """Bytes ``start`` up to (not including) ``end``; ``end=None`` reads to the end.

    Ranges are clipped at the end of the object: reading past it returns fewer bytes.
    """

    start: int
    end: int | None = None

    def __post_init__(self) -> None:
        if self.start < 0 or (self.end is not None and self.end < self.start):
            raise ValueError(f"bad byte range {self.start}..{self.end}")

    def slice(self, data: bytes | bytearray | memoryview) -> bytes:
        return bytes(data[self.start : self.end])


@dataclass(frozen=True)
class Meta:
    """POSIX attributes the medium keeps for a key (None: not kept there; the mount shows its
    own default or what it was told this mount's life)."""

    #: ``st_mode``: the file type bits (regular, symlink, fifo, socket, device) and the permission bits
    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None
    ctime_ns: int | None = None
    nlink: int | None = None
    #: the device a character or block special file stands for
    rdev: int = 0
    #: the medium's identity of the file (a local directory: st_dev and st_ino): names of one
    #: identity are hard links of one file
    ident: tuple[int, int] | None = None

    @property
    def file_type(self) -> int:
        """The ``S_IFMT`` bits (0: not said)."""
        return stat_mod.S_IFMT(self.mode) if self.mode is not None else 0

    def merged(self, changes: Meta) -> Meta:
        """These attributes with every field ``changes`` says (not None) replaced."""
        return dataclasses.replace(self, **{f.name: getattr(changes, f.name) for f in dataclasses.fields(Meta)
                                            if getattr(changes, f.name) is not None and f.name not in ("rdev", "ident")})


@dataclass(frozen=True)
class ObjectInfo:
    """What ``stat`` knows about an object: size in bytes, mtime in ns, a version tag, and the
    POSIX attributes the medium keeps for it (None: none; a symlink's or special file's type is
    in ``meta.mode``)."""

    key: str
    size: int
    mtime_ns: int
    etag: str
    meta: Meta | None = None


@dataclass(frozen=True)
class DirEntry:
    """One child of a prefix: an object (with its info) or a directory (with the attributes
    the medium keeps for it, if any)."""

    name: str
    is_dir: bool
    info: ObjectInfo | None = None
    meta: Meta | None = None

    @property
    def attrs(self) -> Meta | None:
        """The POSIX attributes the medium keeps for this entry (a file's are in its info)."""
        return self.meta if self.is_dir or self.info is None else self.info.meta


@dataclass(frozen=True)
class Staged:
    """Data sent for ``key`` but not yet visible (S3: the parts of an unfinished multipart
    upload): ``commit()`` makes it the object at once, ``abort()`` drops it. The sync form's
    callables block; the async form's are coroutines."""

    key: str
    commit: Callable[[], ObjectInfo | Awaitable[ObjectInfo]]
    abort: Callable[[], None | Awaitable[None]]


@dataclass(frozen=True)
class Upload:
    """An object sent in parts while its data is still being written (S3: a multipart upload),
    invisible until ``complete(size)`` makes the parts sent the object ``key`` at once;
    ``send(number, data)`` sends part ``number`` (from 1; every part but the last is
    ``part_size`` bytes); ``abort()`` drops what was sent. The sync form's callables block; the
    async form's are coroutines."""

    key: str
    part_size: int
    send: Callable[[int, bytes], None | Awaitable[None]]
    complete: Callable[[int], ObjectInfo | Awaitable[ObjectInfo]]
    abort: Callable[[], None | Awaitable[None]]


@dataclass(frozen=True)
class FsStats:
    """Capacity figures for statfs, in bytes and objects."""

    total_bytes: int
    free_bytes: int
    total_files: int
    free_files: int


MAX_SEGMENT_BYTES = 255


def file_pieces(key: str, f: BinaryIO, size: int, piece: int = 8 * 1024 * 1024) -> Iterator[bytes]:
    """``size`` bytes of ``f`` from its position, at most ``piece`` bytes at a time (set_file of
    the zip and directory backends); BackendError naming ``key`` if ``f`` ends sooner."""
    left = size
    while left > 0:
        data = f.read(min(piece, left))
        if not data:
            raise BackendError(f"{key!r}: the data to store ends after {size - left} of {size} bytes")
        left -= len(data)
        yield data


def check_key(key: str) -> str:
    """Refuse keys that could escape a prefix or that no medium can hold."""
    if not isinstance(key, str) or not key:
        raise InvalidKey(repr(key), "empty key")
    if key.startswith("/") or key.endswith("/"):
        raise InvalidKey(key, "keys have no leading or trailing '/'")
    if "\x00" in key:
        raise InvalidKey(key, "NUL in key")
    for seg in key.split("/"):
        if seg in ("", ".", ".."):
            raise InvalidKey(key, f"bad path segment {seg!r}")
        if len(seg.encode("utf-8", "surrogateescape")) > MAX_SEGMENT_BYTES:
            raise NameTooLong(f"{key!r}: a segment is longer than {MAX_SEGMENT_BYTES} bytes")
    return key


def check_prefix(prefix: str) -> str:
    """A prefix is ``""`` (the root) or a valid key naming a directory."""
    return prefix if prefix == "" else check_key(prefix)


def join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def parent_of(key: str) -> str:
    return key.rpartition("/")[0]


def usable_name(name: str) -> bool:
    """Can ``name`` (one component of a key) be shown as a file name?"""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name and "\x00" not in name and len(name.encode()) <= 255


def tree_listings(prefix: str, objects: Iterable[tuple[str, ObjectInfo]]) -> dict[str, list[DirEntry]]:
    """The listings of ``prefix`` and of every directory below it, as ``list_dir`` gives each,
    from every object below ``prefix`` (its key relative to ``prefix``, and its info). A key
    ending in ``/`` is a directory marker; a name that cannot be shown hides what lies below
    it; an object and a directory of one name: the directory wins."""
    dirs: dict[str, dict[str, DirEntry]] = {prefix: {}}
    for rel, info in objects:
        parts = rel.split("/")
        here = prefix
        for depth, name in enumerate(parts):
            if not usable_name(name):
                break
            listing = dirs[here]
            if depth + 1 < len(parts):  # a directory on the way
                listing[name] = DirEntry(name, True)
                here = join(here, name)
                dirs.setdefault(here, {})
            elif name not in listing:
                listing[name] = DirEntry(name, False, info)
    return {d: [entries[n] for n in sorted(entries)] for d, entries in dirs.items()}


#: what a store says of itself, as class attributes of :class:`SyncStore` (documented there);
#: a wrapper answers each from the store below (:func:`forwards_capabilities`)
CAPABILITIES = ("supports_writes", "stores_directories", "read_only", "keys_form_a_tree", "checks_versions",
                "keeps_meta", "live_meta", "max_object_size")


def forwards_capabilities(cls: type) -> type:
    """Class decorator: each of :data:`CAPABILITIES` a property answering what ``self.below``
    (the store a wrapper wraps) says, unless the class sets it itself."""
    for name in CAPABILITIES:
        if name not in cls.__dict__:
            setattr(cls, name, property(lambda self, name=name: getattr(self.below, name)))
    return cls


# ---------------------------------------------------------------------- the optional fast paths
# Each is implemented by a store or not (isinstance tells); a sync store's method blocks, an
# async store's is a coroutine, and its Staged/Upload callables likewise.


@runtime_checkable
class Stages(Protocol):
    def stage(self, key: str, data: bytes) -> Any:
        """Send ``data`` for ``key`` without making it visible yet (see :class:`Staged`); None:
        not this time (an empty object), the caller stores the data with ``set`` when it is time."""


@runtime_checkable
class UploadsInParts(Protocol):
    def open_upload(self, key: str) -> Any:
        """Start sending an object ``key`` in parts (see :class:`Upload`); None: not this key,
        the caller stores the data with ``set`` or ``set_file`` when it is complete."""


@runtime_checkable
class ListsTrees(Protocol):
    def list_tree(self, prefix: str, limit: int) -> Any:
        """The listings of ``prefix`` and of every directory below it (see :func:`tree_listings`),
        where one request of at most ``limit`` keys fetches them all (S3: a ListObjectsV2 without
        a delimiter); None where the tree holds more keys (or, this time, cannot be listed so)."""


@runtime_checkable
class ReadsOnLoop(Protocol):
    """A sync store some of whose reads are awaited on the trio thread, without a worker thread
    (sent on an asyncio loop thread of its own: Icechunk's, large GETs over https)."""

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """``get_version``, awaited; None: this read is left to ``get_version`` in a worker thread."""


#: each fast path, by the name of its one method
FAST_PATHS: dict[str, type] = {"stage": Stages, "open_upload": UploadsInParts, "list_tree": ListsTrees}


def offer_fast_paths(store: object, below: object, names: Iterable[str]) -> None:
    """Give ``store`` (a wrapper) each fast path of ``names`` that ``below`` offers: its method
    ``NAME`` is then ``store._NAME`` (which answers it through ``below``); the others it lacks,
    so that ``isinstance(store, Stages)`` and the like say what it really offers."""
    for name in names:
        if isinstance(below, FAST_PATHS[name]):
            setattr(store, name, getattr(store, f"_{name}"))


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
        """``get``, but raise :class:`~nczfs.errors.Stale` if the object is no longer version ``etag``.

        Stores that cannot tell versions apart cheaply read the current bytes.
        """
        return self.get(key, rng)

    @abc.abstractmethod
    def stat(self, key: str) -> ObjectInfo: ...

    @abc.abstractmethod
    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo: ...

    def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        """Store ``size`` bytes read from ``f`` (a private file object) at its position; S3, zip
        and directories copy them in pieces. A file that ends sooner stores nothing and raises
        BackendError naming the key."""
        data = f.read(size)
        if len(data) != size:
            raise BackendError(f"{key!r}: the data to store ends after {len(data)} of {size} bytes")
        return self.set(key, data)

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object; removing a missing key is not an error."""

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
            else:
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

    def copy(self, src: str, dst: str) -> ObjectInfo:
        return self.set(dst, self.get(src))

    def rename(self, src: str, dst: str) -> None:
        """Move one object, replacing ``dst``. Never loses ``src`` if the copy fails."""
        if src == dst:  # copy-then-delete would delete the only copy
            self.stat(src)
            return
        self.copy(src, dst)
        self.delete(src)

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

    def truncate(self, key: str, size: int) -> ObjectInfo:
        """Cut or extend (with a hole where the medium has them) the object ``key`` in place.
        NotSupported where objects are only written whole (the caller rewrites it)."""
        raise NotSupported(f"{key!r}: objects are written whole")

    def forget_dir(self, prefix: str) -> None:
        """An empty directory was removed on a store that keeps none: drop any trace of it (S3 markers)."""

    def statfs(self) -> FsStats | None:
        return None

    def hides(self, key: str) -> bool:
        """Does ``key`` exist without being listed (Icechunk's ``.icechunk``)? Then its parent's
        listing does not tell that it is missing."""
        return False

    def read_only_key(self, key: str) -> bool:
        """``Store.read_only_key``: also a directory whose whole tree refuses writes although the
        store takes others (Icechunk's ``.icechunk`` history)."""
        return False

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
    keeps_meta: bool = False
    live_meta: bool = False
    max_object_size: int | None = None

    @abc.abstractmethod
    async def get(self, key: str, rng: ByteRange | None = None) -> bytes: ...

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self.get(key, rng)

    @abc.abstractmethod
    async def stat(self, key: str) -> ObjectInfo: ...

    async def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        return await self.set(key, f.read(size))

    async def forget_dir(self, prefix: str) -> None:
        pass

    def checks_content(self, key: str) -> bool:
        """Does ``set(key, ...)`` refuse some contents (metadata the NCZarr layer checks)? Then the
        filesystem calls :meth:`check_content` at every write() of that file, so that a refusal
        reaches a writer that ignores what close() returns (netCDF-C does)."""
        return False

    async def check_content(self, key: str, data: bytes) -> None:
        """Raise what ``set(key, data)`` would raise because of ``data``, storing nothing; content
        still being written (not yet a whole object) is not judged."""

    def read_only_key(self, key: str) -> bool:
        """Is ``key`` an object nothing may change (a file a wrapper makes up, as ``-o nc_files``
        does)? Only keys already shown by ``entry``/``stat``/``list_dir`` are asked about."""
        return False

    def check_new_key(self, key: str) -> None:
        """``SyncStore.check_new_key`` (no I/O)."""
        check_key(key)

    async def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        raise NotSupported(f"{key!r}: this store keeps no file attributes")

    async def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        raise NotSupported(f"{key!r}: this store holds regular files only")

    async def readlink(self, key: str) -> str:
        raise InvalidArgument(f"{key!r}: not a symlink")

    async def link(self, src: str, dst: str) -> ObjectInfo:
        raise NotSupported(f"{src!r}: this store has no hard links")

    async def truncate(self, key: str, size: int) -> ObjectInfo:
        raise NotSupported(f"{key!r}: objects are written whole")

    def counters(self) -> dict[str, int]:
        return {}

    def hides(self, key: str) -> bool:
        """``SyncStore.hides``."""
        return False

    @abc.abstractmethod
    async def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo: ...

    @abc.abstractmethod
    async def delete(self, key: str) -> None: ...

    @abc.abstractmethod
    async def list_dir(self, prefix: str) -> list[DirEntry]: ...

    @abc.abstractmethod
    async def list_prefix(self, prefix: str) -> list[str]: ...

    @abc.abstractmethod
    async def dir_exists(self, prefix: str) -> bool: ...

    @abc.abstractmethod
    async def entry(self, key: str) -> DirEntry | None: ...

    @abc.abstractmethod
    async def copy(self, src: str, dst: str) -> ObjectInfo: ...

    @abc.abstractmethod
    async def rename(self, src: str, dst: str) -> None: ...

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
