"""The values a store speaks in: byte ranges, the facts of objects and directory entries, the
POSIX attributes a medium keeps, staged data and uploads in parts, capacity figures."""

from __future__ import annotations

import dataclasses
import stat as stat_mod
from dataclasses import dataclass
from typing import Awaitable, Callable


#: the version a conditional write (``if_version=``) expects where no object may be there yet
#: (S3's ``If-None-Match: *``); any other value is an ETag the object must still have (``If-Match``)
ABSENT = "*"


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

    def view(self, data: bytes | bytearray | memoryview) -> bytes | memoryview:
        """The range of ``data`` without copying it where ``data`` cannot change (bytes, a
        read-only view): a reply to a read, which pyfuse3 takes as any buffer; else a copy."""
        if isinstance(data, bytes) or (isinstance(data, memoryview) and data.readonly):
            return data if self.start == 0 and (self.end is None or self.end >= len(data)) else \
                memoryview(data)[self.start : self.end]
        return self.slice(data)


#: a read asked for among several (a burst): key, byte range (None: whole), version (None: any)
Ask = tuple[str, ByteRange | None, str | None]


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

    def is_object(self, live_meta: bool) -> bool:
        """Is this entry an object (a key ``list_prefix`` names)? The one rule for every store and
        view: not a directory, and where the medium holds symlinks and special files as
        themselves (``live_meta``: a local directory), a regular file; elsewhere they are objects."""
        if self.is_dir:
            return False
        attrs = self.attrs
        return not live_meta or attrs is None or attrs.file_type in (0, stat_mod.S_IFREG)


@dataclass(frozen=True)
class Staged:
    """Data sent for ``key`` but not yet visible (S3: the parts of an unfinished multipart
    upload): ``commit()`` makes it the object at once (``commit(if_version=V)``: only while the
    object is version V, as ``set`` takes it), ``abort()`` drops it. The sync form's callables
    block; the async form's are coroutines."""

    key: str
    commit: Callable[..., ObjectInfo | Awaitable[ObjectInfo]]
    abort: Callable[[], None | Awaitable[None]]


@dataclass(frozen=True)
class Upload:
    """An object sent in parts while its data is still being written (S3: a multipart upload),
    invisible until ``complete(size)`` makes the parts sent the object ``key`` at once (with
    ``if_version=V``: only while the object is version V, as ``set`` takes it);
    ``send(number, data)`` sends part ``number`` (from 1; every part but the last is
    ``part_size`` bytes); ``abort()`` drops what was sent. The sync form's callables block; the
    async form's are coroutines."""

    key: str
    part_size: int
    send: Callable[[int, bytes], None | Awaitable[None]]
    complete: Callable[..., ObjectInfo | Awaitable[ObjectInfo]]
    abort: Callable[[], None | Awaitable[None]]


@dataclass(frozen=True)
class FsStats:
    """Capacity figures for statfs, in bytes and objects."""

    total_bytes: int
    free_bytes: int
    total_files: int
    free_files: int
