"""The archive file of the zip store: its central directory read into the index, members'
bytes read (stored ones by ``pread``, compressed ones inflated into a bounded cache), and a new
archive written at a commit (unchanged members copied raw, staged objects stored).

:class:`Archive` is a part of :class:`~nczfs.store.zip.store.ZipStore`.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import errno
import logging
import lzma
import os
import stat
import time
import zipfile
import zlib
from typing import Any, cast

from nczfs.toolbox.errors import BackendError, NczfsError, SourceError
from nczfs.store.keys import check_key
from nczfs.store.values import Meta
from nczfs.store.zip.index import Tree
from nczfs.store.zip.entries import ZIP_EPOCH, Entry, Member, StagedFile, member_meta, with_meta, zip_time_ns
from nczfs.store.zip.layout import LOCAL_HEADER, bad_member_name, check_no_overlap, detect_layout, top_name

log = logging.getLogger(__name__)

#: bytes of decompressed members kept in memory
CACHE_BYTES = 256 * 1024 * 1024
#: a compressed member larger than this once decompressed is refused (EIO), never inflated
MAX_INFLATED = CACHE_BYTES
#: deflate cannot compress better than ~1032:1; a header claiming more is lying (zip bomb)
MAX_DEFLATE_RATIO = 1100
COPY_CHUNK = 8 * 1024 * 1024
#: zipfile's private members the raw copy of a member uses (no public way to write a member's
#: compressed bytes unchanged), which typeshed does not declare
_ZIPFILE_PRIVATE: Any = zipfile


def inflate(zf: zipfile.ZipFile, key: str, info: zipfile.ZipInfo) -> bytes:
    """The member ``info`` of ``zf`` (the object ``key``) decompressed, checked first: no
    encrypted member, none over :data:`MAX_INFLATED` or beyond :data:`MAX_DEFLATE_RATIO` (zip
    bomb), and no more or fewer bytes than its header says; else a BackendError naming ``key``."""
    if info.flag_bits & 1:
        raise BackendError(f"{key!r}: encrypted zip members are not supported")
    if info.file_size > MAX_INFLATED:
        raise BackendError(f"{key!r}: {info.file_size} bytes once decompressed, more than the "
                           f"{MAX_INFLATED}-byte limit for compressed members")
    if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > MAX_DEFLATE_RATIO * max(info.compress_size, 1):
        raise BackendError(f"{key!r}: claims a decompression ratio beyond {MAX_DEFLATE_RATIO}:1 (zip bomb?)")
    try:
        with zf.open(info) as f:
            data = f.read(info.file_size + 1)
    except (zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError, NotImplementedError,
            RuntimeError, ValueError) as exc:
        raise BackendError(f"{key!r}: cannot decompress ({exc})") from exc
    if len(data) != info.file_size:
        raise BackendError(f"{key!r}: decompressed size differs from the header (corrupt or zip bomb)")
    return data


def _open(path: str) -> tuple[int, zipfile.ZipFile]:
    """A descriptor of the archive (for ``pread``) and a ZipFile reading it; SourceError if it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise SourceError(f"{path}: cannot open ({exc.strerror})") from exc
    try:
        return fd, zipfile.ZipFile(os.fdopen(os.dup(fd), "rb"))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        os.close(fd)
        raise SourceError(f"{path}: not a readable zip archive ({exc})") from exc


class Archive(Tree):
    """Reads and writes of the archive at ``path``, read into its index (the :class:`Tree`)."""

    path: str
    staging: Any
    _requested_layout: str | None
    _cd: tuple[int, bytes] | None
    _note_central_directory: Any  # Behind's
    #: a descriptor of the archive (for ``pread``) and a ZipFile reading it (None: none open)
    _fd: int | None
    _zf: zipfile.ZipFile | None
    #: decompressed members, most recently read last, and their bytes
    _cache: collections.OrderedDict[str, bytes]
    _cache_bytes: int

    def _archive_ident(self, path: str | None = None) -> tuple[int, int, int] | None:
        try:
            st = os.stat(path or self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _load(self) -> None:
        """(Re)read the archive's central directory into the tree; refuse a broken archive."""
        self._close_archive()
        self._files: dict[str, Entry] = {}
        self._dirs: dict[str, set[str]] = {"": set()}
        #: attributes of directories (their entries', or set since)
        self._dir_meta: dict[str, Meta] = {}
        self._refs: collections.Counter[str] = collections.Counter()  # keys per staged file
        self._hidden: list[zipfile.ZipInfo] = []  # members outside the dataset directory: kept, not shown
        self._duplicates: list[str] = []  # member names that appear more than once
        self._comment = b""
        self._cache.clear()
        self._cache_bytes = 0
        #: each archive member's version (key: etag), as read: what another program may change
        self._archived: dict[str, str] = {}
        self._ident = self._archive_ident()
        self._cd = None
        if self._ident is None:
            self._take_layout(None)
            return
        self._fd, self._zf = _open(self.path)
        self._note_central_directory(self._fd, self._zf.start_dir)
        infos = self._zf.infolist()
        self._comment = self._zf.comment
        self._check_members(infos, self._zf.start_dir)
        check_no_overlap(self.path, infos)
        self._take_layout(detect_layout(infos, self.path))
        try:
            self._index(self._by_name(infos))
        except NczfsError as exc:
            self._close_archive()
            raise SourceError(f"{self.path}: {exc}") from exc
        self._archived = {k: e.etag for k, e in self._files.items()}
        if self._hidden:
            log.warning("%s: %d member(s) outside the dataset directory %r are kept but not shown",
                        self.path, len(self._hidden), self.top)

    def _check_members(self, infos: list[zipfile.ZipInfo], start_dir: int) -> None:
        """Refuse (closing the archive) a member name that could escape the mount, or a member
        whose data runs past the central directory."""
        for info in infos:
            why = bad_member_name(info.orig_filename)
            if why is not None:
                self._close_archive()
                raise SourceError(f"{self.path}: member {info.orig_filename!r} refused: {why}")
            if info.header_offset < 0 or info.header_offset + info.compress_size > start_dir:
                self._close_archive()
                raise SourceError(f"{self.path}: member {info.filename!r} runs past the central "
                                  "directory (truncated or corrupt archive)")

    def _take_layout(self, found: tuple[str, str] | None) -> None:
        """The archive's layout (``found`` in it), else the one asked for a new archive."""
        if found is None:
            self.layout = self._requested_layout or "netcdf"
            self.top = top_name(self.path) if self.layout == "netcdf" else ""
            return
        self.layout, self.top = found
        if self._requested_layout not in (None, self.layout):
            log.warning("%s: the archive has the %s layout, kept (zip_layout=%s applies to new archives)",
                        self.path, self.layout, self._requested_layout)

    def _by_name(self, infos: list[zipfile.ZipInfo]) -> dict[str, zipfile.ZipInfo]:
        """The last member of each name (a name given twice is noted in ``_duplicates``)."""
        by_name: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.filename in by_name and info.filename not in self._duplicates:
                self._duplicates.append(info.filename)
                log.warning("%s: member %r appears more than once; the last one is used", self.path, info.filename)
            by_name[info.filename] = info
        return by_name

    def _index(self, by_name: dict[str, zipfile.ZipInfo]) -> None:
        """The tree of the members in the dataset directory; the others are kept, hidden."""
        start = self.top + "/" if self.top else ""
        for name, info in by_name.items():
            if not name.startswith(start):
                self._hidden.append(info)
                continue
            key = name[len(start):].rstrip("/")
            if not key:
                continue
            check_key(key)
            meta = member_meta(info)
            if info.is_dir():
                self._add_dir(key)
                if meta is not None:
                    self._dir_meta[key] = meta
            else:
                mtime = meta.mtime_ns if meta is not None and meta.mtime_ns is not None else zip_time_ns(info)
                self._add_file(key, Member(info, mtime, meta=meta))

    def _close_archive(self) -> None:
        if self._zf is not None:
            self._zf.close()
            self._zf = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _data_offset(self, key: str, m: Member) -> int:
        if m.data_offset is None:
            assert self._fd is not None
            head = os.pread(self._fd, LOCAL_HEADER.size, m.info.header_offset)
            if len(head) != LOCAL_HEADER.size:
                raise BackendError(f"{key!r}: local header missing (truncated archive)")
            magic, n_name, n_extra = LOCAL_HEADER.unpack(head)
            if magic != b"PK\x03\x04":
                raise BackendError(f"{key!r}: bad local header (corrupt archive)")
            m.data_offset = m.info.header_offset + LOCAL_HEADER.size + n_name + n_extra
        return m.data_offset

    def _read_stored(self, key: str, m: Member, start: int, end: int) -> bytes:
        if m.info.compress_size != m.info.file_size:
            raise BackendError(f"{key!r}: stored member whose sizes disagree (corrupt archive)")
        assert self._fd is not None
        off = self._data_offset(key, m)
        data = os.pread(self._fd, end - start, off + start)
        if len(data) != end - start:
            raise BackendError(f"{key!r}: member data cut short (truncated archive)")
        return data

    def _inflate(self, key: str, m: Member) -> bytes:
        tag = m.etag
        data = self._cache.get(tag)
        if data is not None:
            self._cache.move_to_end(tag)
            return data
        assert self._zf is not None
        data = inflate(self._zf, key, m.info)
        self._cache[tag] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > CACHE_BYTES and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= len(old)
        return data

    def _write_archive(self, tmp: str) -> None:
        start = self.top + "/" if self.top else ""
        with open(tmp, "w+b") as f:
            zf = zipfile.ZipFile(f, "w", allowZip64=True)
            zf.comment = self._comment
            self._write_dirs(zf, start)
            for info in self._hidden:
                self._copy_raw(zf, f, info, info.filename)
            members = sorted(((k, s) for k, s in self._files.items() if isinstance(s, Member)),
                             key=lambda ks: ks[1].info.header_offset)
            for key, m in members:
                self._copy_raw(zf, f, m.info, start + key, m, m.meta if m.meta_changed else None)
            for key in sorted(k for k, s in self._files.items() if isinstance(s, StagedFile)):
                self._write_staged(zf, start + key, self._files[key])  # type: ignore[arg-type]  # the keys chosen are StagedFiles (isinstance above)
            zf.close()
            f.flush()
            os.fsync(f.fileno())

    def _write_dirs(self, zf: zipfile.ZipFile, start: str) -> None:
        """The directory entries of a new archive (``start``: the dataset directory's name and "/")."""
        if self.top:
            zf.mkdir(start, 0o755)
        dirs = sorted(d for d in self._dirs if d)
        if self.layout == "flat":
            # zarr-python's layout: only empty ones (and those with attributes of their own)
            dirs = [d for d in dirs if not self._dirs[d] or d in self._dir_meta]
        for d in dirs:
            info = zipfile.ZipInfo(start + d + "/", time.localtime()[:6])
            info.CRC = info.compress_size = info.file_size = 0
            with_meta(info, self._dir_meta.get(d), stat.S_IFDIR | 0o755)
            zf.mkdir(info)

    def _copy_raw(self, zf: zipfile.ZipFile, f, info: zipfile.ZipInfo, name: str, m: Member | None = None,
                  meta: Meta | None = None) -> None:
        """Copy a member's compressed bytes unchanged (no recompression) under ``name`` (with
        ``meta``: those attributes in its headers)."""
        m = m or Member(info, 0)
        off = self._data_offset(name, m)
        new = copy.copy(info)
        new.filename = name
        new.flag_bits &= ~_ZIPFILE_PRIVATE._MASK_USE_DATA_DESCRIPTOR  # sizes go in the local header
        new.extra = _ZIPFILE_PRIVATE._strip_extra(info.extra, (1,))
        if meta is not None:
            with_meta(new, meta, stat.S_IFREG | 0o644)
        zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
        f.seek(zf.start_dir)
        new.header_offset = f.tell()
        f.write(new.FileHeader(zip64))
        f.flush()
        pos = f.tell()
        copy_range(self._fd, f.fileno(), off, pos, info.compress_size)
        f.seek(pos + info.compress_size)
        zf.filelist.append(new)
        zf.NameToInfo[name] = new
        zf.start_dir = f.tell()
        cast(Any, zf)._didModify = True  # so its close writes the central directory (private, undeclared)

    def _write_staged(self, zf: zipfile.ZipFile, name: str, s: StagedFile) -> None:
        assert self.staging is not None
        info = zipfile.ZipInfo(name, time.localtime(max(s.mtime_ns / 1e9, ZIP_EPOCH))[:6])
        info.compress_type = zipfile.ZIP_STORED  # as netCDF-C writes them
        info.external_attr = 0o644 << 16
        if s.meta is not None:
            with_meta(info, dataclasses.replace(s.meta, mtime_ns=s.mtime_ns), stat.S_IFREG | 0o644)
        info.file_size = s.size
        with zf.open(info, "w") as out, \
                self.staging.open_data(s.file) as src:
            while chunk := src.read(COPY_CHUNK):
                out.write(chunk)


def copy_range(src: int | None, dst: int, src_off: int, dst_off: int, count: int) -> None:
    """Copy bytes between files in the kernel where it can, else through a buffer."""
    assert src is not None
    while count > 0:
        try:
            n = os.copy_file_range(src, dst, count, src_off, dst_off)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            data = os.pread(src, min(count, COPY_CHUNK), src_off)
            n = os.pwrite(dst, data, dst_off) if data else 0
        if n == 0:
            raise OSError(errno.EIO, "archive member cut short (truncated archive)")
        src_off, dst_off, count = src_off + n, dst_off + n, count - n
