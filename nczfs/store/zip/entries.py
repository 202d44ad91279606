"""What the zip store's index holds for an object, and the POSIX attributes of zip entries.

An object is a :class:`Member` of the current archive or a :class:`StagedFile` written since
the last commit. Attributes are kept as Info-ZIP's ``zip -y`` stores them: the mode in the
external attributes, mtime, owner and device numbers in extra fields (:func:`member_meta`
reads them, :func:`with_meta` writes them).
"""

from __future__ import annotations

import dataclasses
import stat
import struct
import time
import zipfile
import zlib
from dataclasses import dataclass
from typing import Iterable, Iterator

from nczfs.store.values import Meta

#: zip times start in 1980
ZIP_EPOCH = 315532800 + 86400


@dataclass
class Member:
    """An object whose bytes are a member of the current archive."""

    info: zipfile.ZipInfo
    mtime_ns: int
    data_offset: int | None = None  # found in the local header on first use
    #: its POSIX attributes (external attributes, Info-ZIP's extra fields), or None
    meta: Meta | None = None
    #: set since the archive was written: a commit writes them into its headers
    meta_changed: bool = False

    @property
    def size(self) -> int:
        return self.info.file_size

    @property
    def etag(self) -> str:
        return content_version(self.info.CRC, self.info.file_size)


@dataclass
class StagedFile:
    """An object written since the last commit: its bytes are a file in the staging directory."""

    file: str
    size: int
    mtime_ns: int
    meta: Meta | None = None
    meta_changed: bool = True
    #: the CRC-32 of its bytes (None: staged by a version that did not keep it)
    crc: int | None = None

    @property
    def etag(self) -> str:
        return f"s-{self.file}" if self.crc is None else content_version(self.crc, self.size)


def content_version(crc: int, size: int) -> str:
    """An object's version: the CRC-32 and size of its bytes, the same staged and, after a commit,
    as a member wherever it lands in the archive (a commit is no change of the objects it keeps)."""
    return f"z{crc:08x}-{size:x}"


Entry = Member | StagedFile


#: Info-ZIP's extra fields: extended timestamp (mtime, seconds since the epoch, UTC), Unix
#: owner ("ux": uid and gid) and ASi Unix (a device node's device number); an entry's mode is
#: the top 16 bits of its external attributes (made on Unix), a symlink's target is its data,
#: as ``zip -y`` stores them
_EXTRA_TIME, _EXTRA_UNIX, _EXTRA_ASI = 0x5455, 0x7875, 0x756E
_UNIX = 3


def _extra_fields(extra: bytes) -> Iterable[tuple[int, bytes]]:
    pos = 0
    while pos + 4 <= len(extra):
        kind, size = struct.unpack_from("<HH", extra, pos)
        yield kind, extra[pos + 4 : pos + 4 + size]
        pos += 4 + size


def _unix_owner(data: bytes) -> tuple[int | None, int | None]:
    """uid and gid of an Info-ZIP "ux" extra field (version 1)."""
    uid = gid = None
    n = data[1]
    if len(data) >= 3 + n:
        uid = int.from_bytes(data[2 : 2 + n], "little")
        m = data[2 + n]
        if len(data) >= 3 + n + m:
            gid = int.from_bytes(data[3 + n : 3 + n + m], "little")
    return uid, gid


def _read_fields(extra: bytes) -> tuple[int | None, int | None, int | None, int]:
    """mtime (ns), uid, gid and device number from an entry's Info-ZIP extra fields."""
    uid = gid = mtime = None
    rdev = 0
    for kind, data in _extra_fields(extra):
        if kind == _EXTRA_TIME and len(data) >= 5 and data[0] & 1:
            mtime = struct.unpack_from("<i", data, 1)[0] * 1_000_000_000
        elif kind == _EXTRA_UNIX and len(data) >= 3 and data[0] == 1:
            uid, gid = _unix_owner(data)
        elif kind == _EXTRA_ASI and len(data) >= 14:
            rdev = struct.unpack_from("<I", data, 6)[0]
    return mtime, uid, gid, rdev


def member_meta(info: zipfile.ZipInfo) -> Meta | None:
    """The POSIX attributes a zip entry carries (None: none)."""
    mode = info.external_attr >> 16 if info.create_system == _UNIX else 0
    mtime, uid, gid, rdev = _read_fields(info.extra)
    if uid is None and stat.S_IFMT(mode) in (0, stat.S_IFREG, stat.S_IFDIR):
        # the permission bits of an entry that names no owner are not taken: Python's zipfile
        # gives every entry it writes from bytes 0600 (the mount's -o umask decides instead)
        mode = 0
    if not mode and uid is None and mtime is None:
        return None
    return Meta(mode=mode or None, uid=uid, gid=gid, mtime_ns=mtime,
                rdev=rdev if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else 0)


def _meta_fields(meta: Meta) -> bytes:
    """Info-ZIP's extra fields holding ``meta``'s mtime, owner and device number (those it has)."""
    out = b""
    if meta.mtime_ns is not None:
        out += struct.pack("<HHBi", _EXTRA_TIME, 5, 1, max(-(2**31), min(2**31 - 1, meta.mtime_ns // 1_000_000_000)))
    if meta.uid is not None or meta.gid is not None:
        out += struct.pack("<HHBBIBI", _EXTRA_UNIX, 11, 1, 4, (meta.uid or 0) & 0xFFFFFFFF, 4, (meta.gid or 0) & 0xFFFFFFFF)
    if meta.rdev:
        body = struct.pack("<HIHH", (meta.mode or 0) & 0xFFFF, meta.rdev & 0xFFFFFFFF, (meta.uid or 0) & 0xFFFF,
                           (meta.gid or 0) & 0xFFFF)
        out += struct.pack("<HHI", _EXTRA_ASI, 4 + len(body), zlib.crc32(body)) + body
    return out


def with_meta(info: zipfile.ZipInfo, meta: Meta | None, default_mode: int) -> None:
    """Write ``meta`` into an entry's external attributes and Info-ZIP extra fields."""
    info.create_system = _UNIX
    info.external_attr = ((meta.mode if meta is not None and meta.mode else default_mode) & 0xFFFF) << 16
    if stat.S_ISDIR(info.external_attr >> 16):
        info.external_attr |= 0x10  # MS-DOS directory bit, as zipfile sets it
    kept = b"".join(struct.pack("<HH", k, len(d)) + d for k, d in _extra_fields(info.extra)
                    if k not in (_EXTRA_TIME, _EXTRA_UNIX))
    info.extra = kept + (_meta_fields(meta) if meta is not None else b"")


def meta_record(meta: Meta | None) -> dict | None:
    if meta is None:
        return None
    return {k: v for k, v in dataclasses.asdict(meta).items() if v is not None and k != "ident"}


def meta_from_record(rec: dict | None) -> Meta | None:
    return None if rec is None else Meta(**rec)


def zip_time_ns(info: zipfile.ZipInfo) -> int:
    try:
        return int(time.mktime((*info.date_time, 0, 0, -1)) * 1e9)
    except (OverflowError, ValueError):
        return 0


def crc_of(chunks: Iterable[bytes | bytearray | memoryview], crc: list[int]) -> Iterator[bytes | bytearray | memoryview]:
    """``chunks`` as they are, their CRC-32 summed into ``crc[0]`` on the way."""
    for chunk in chunks:
        crc[0] = zlib.crc32(chunk, crc[0])
        yield chunk
