"""A zip archive (netCDF-C's ``zip`` map, zarr-python's ZipStore): indexed reads, staged writes.

Reading: the central directory is read once into an in-memory tree (no lookup or listing
touches the archive). Stored members are served by ``pread`` straight from the archive;
compressed members are decompressed once into a bounded LRU cache, after checks that bound
memory (zip bombs fail with EIO).

Writing: every change goes to a staging directory beside the archive (``.NAME.nczfs/``):
object data as files, and one line per change appended to a journal. :meth:`ZipStore.sync`
commits: a new archive is written inside the staging directory (unchanged members copied
raw, new ones stored uncompressed), fsynced and renamed over the archive. A kill at any point
leaves the old or the new archive; the next mount finishes or replays the staged changes
(see ``staging.py``).

Concurrency: one lock serialises every call (index, staging writes, inflating, commit), in the
worker threads ``ThreadedStore`` runs them in; a commit blocks other calls until it is done.

Layouts: netCDF-C's (every key below one top directory named after the archive, with
directory entries) and zarr-python's (keys at the archive root); both mount with the dataset
at the mount root, and an existing archive keeps its layout.
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
import struct
import threading
import time
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterable

from nczfs.errors import (
    BackendError,
    DirectoryNotEmpty,
    Exists,
    InvalidArgument,
    InvalidKey,
    IsADirectory,
    KeyNotFound,
    NczfsError,
    NotADirectory,
    NotSupported,
    SourceError,
)
from nczfs.store.base import (
    ByteRange,
    DirEntry,
    FsStats,
    Meta,
    ObjectInfo,
    SyncStore,
    check_key,
    check_prefix,
    file_pieces,
    join,
    parent_of,
)
from nczfs.store.zip.staging import Staging

log = logging.getLogger(__name__)

LAYOUTS = ("netcdf", "flat")
#: bytes of decompressed members kept in memory
CACHE_BYTES = 256 * 1024 * 1024
#: a compressed member larger than this once decompressed is refused (EIO), never inflated
MAX_INFLATED = CACHE_BYTES
#: deflate cannot compress better than ~1032:1; a header claiming more is lying (zip bomb)
MAX_DEFLATE_RATIO = 1100
_LOCAL_HEADER = struct.Struct("<4s22xHH")
_COPY_CHUNK = 8 * 1024 * 1024
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
        return f"z{self.info.CRC:08x}-{self.info.header_offset:x}-{self.info.file_size:x}"


@dataclass
class Staged:
    """An object written since the last commit: its bytes are a file in the staging directory."""

    file: str
    size: int
    mtime_ns: int
    meta: Meta | None = None
    meta_changed: bool = True

    @property
    def etag(self) -> str:
        return f"s-{self.file}"


Source = Member | Staged


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


def member_meta(info: zipfile.ZipInfo) -> Meta | None:
    """The POSIX attributes a zip entry carries (None: none)."""
    mode = info.external_attr >> 16 if info.create_system == _UNIX else 0
    uid = gid = mtime = None
    rdev = 0
    for kind, data in _extra_fields(info.extra):
        if kind == _EXTRA_TIME and len(data) >= 5 and data[0] & 1:
            mtime = struct.unpack_from("<i", data, 1)[0] * 1_000_000_000
        elif kind == _EXTRA_UNIX and len(data) >= 3 and data[0] == 1:
            n = data[1]
            if len(data) >= 3 + n:
                uid = int.from_bytes(data[2 : 2 + n], "little")
                m = data[2 + n]
                if len(data) >= 3 + n + m:
                    gid = int.from_bytes(data[3 + n : 3 + n + m], "little")
        elif kind == _EXTRA_ASI and len(data) >= 14:
            rdev = struct.unpack_from("<I", data, 6)[0]
    if uid is None and stat.S_IFMT(mode) in (0, stat.S_IFREG, stat.S_IFDIR):
        # the permission bits of an entry that names no owner are not taken: Python's zipfile
        # gives every entry it writes from bytes 0600 (the mount's -o umask decides instead)
        mode = 0
    if not mode and uid is None and mtime is None:
        return None
    return Meta(mode=mode or None, uid=uid, gid=gid, mtime_ns=mtime,
                rdev=rdev if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else 0)


def with_meta(info: zipfile.ZipInfo, meta: Meta | None, default_mode: int) -> None:
    """Write ``meta`` into an entry's external attributes and Info-ZIP extra fields."""
    info.create_system = _UNIX
    info.external_attr = ((meta.mode if meta is not None and meta.mode else default_mode) & 0xFFFF) << 16
    if stat.S_ISDIR(info.external_attr >> 16):
        info.external_attr |= 0x10  # MS-DOS directory bit, as zipfile sets it
    kept = b"".join(struct.pack("<HH", k, len(d)) + d for k, d in _extra_fields(info.extra)
                    if k not in (_EXTRA_TIME, _EXTRA_UNIX))
    if meta is not None and meta.mtime_ns is not None:
        kept += struct.pack("<HHBi", _EXTRA_TIME, 5, 1, max(-(2**31), min(2**31 - 1, meta.mtime_ns // 1_000_000_000)))
    if meta is not None and (meta.uid is not None or meta.gid is not None):
        kept += struct.pack("<HHBBIBI", _EXTRA_UNIX, 11, 1, 4, (meta.uid or 0) & 0xFFFFFFFF, 4, (meta.gid or 0) & 0xFFFFFFFF)
    if meta is not None and meta.rdev:
        body = struct.pack("<HIHH", (meta.mode or 0) & 0xFFFF, meta.rdev & 0xFFFFFFFF, (meta.uid or 0) & 0xFFFF,
                           (meta.gid or 0) & 0xFFFF)
        kept += struct.pack("<HHI", _EXTRA_ASI, 4 + len(body), zlib.crc32(body)) + body
    info.extra = kept


def _meta_record(meta: Meta | None) -> dict | None:
    if meta is None:
        return None
    return {k: v for k, v in dataclasses.asdict(meta).items() if v is not None and k != "ident"}


def _meta_from_record(rec: dict | None) -> Meta | None:
    return None if rec is None else Meta(**rec)


def _zip_time_ns(info: zipfile.ZipInfo) -> int:
    try:
        return int(time.mktime((*info.date_time, 0, 0, -1)) * 1e9)
    except (OverflowError, ValueError):
        return 0


def bad_member_name(name: str) -> str | None:
    """Why a member name is refused (zip-slip and friends), or None if it is fine."""
    if "\x00" in name:
        return "NUL in the name"
    if "\\" in name:
        return "backslash in the name"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    segs = name.rstrip("/").split("/")
    if ".." in segs:
        return "'..' in the path"
    if any(s in ("", ".") for s in segs):
        return "empty or '.' path segment"
    return None


def check_member_key(key: str) -> str:
    """A key that can be a member name: valid, UTF-8, and not one zip-slip checks would refuse."""
    check_key(key)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKey(key, "zip member names must be valid UTF-8") from None
    if "\\" in key:
        raise InvalidKey(key, "a backslash in a zip member name is refused (zip-slip)")
    return key


def top_name(path: str) -> str:
    """netCDF-C's dataset directory for an archive: its base name minus the last extension."""
    return os.path.splitext(os.path.basename(path))[0]


def detect_layout(infos: list[zipfile.ZipInfo], archive: str) -> tuple[str, str] | None:
    """(layout, top directory) of an archive's members; None when there are none."""
    if not infos:
        return None
    first = infos[0].filename
    if first.endswith("/") and first.count("/") == 1:
        return "netcdf", first[:-1]  # netCDF-C: entry 0 names the dataset
    top = top_name(archive)
    if all(i.filename.startswith(top + "/") for i in infos):
        return "netcdf", top
    return "flat", ""


class ZipStore(SyncStore):
    stores_directories = True
    #: modes, owners and mtimes in the entries' external attributes and extra fields; symlinks
    #: and special files as entries of their type
    keeps_meta = True

    def __init__(self, path: str, read_only: bool = False, layout: str | None = None):
        if layout is not None and layout not in LAYOUTS:
            raise SourceError(f"-o zip_layout={layout}: use one of {', '.join(LAYOUTS)}")
        self.path = os.path.abspath(path)
        self.read_only = read_only
        if not os.path.isdir(os.path.dirname(self.path)):
            raise SourceError(f"{self.path}: the directory it should be in does not exist")
        if os.path.isdir(self.path):
            raise SourceError(f"{self.path}: is a directory, not a zip archive")
        if read_only and not os.path.exists(self.path):
            raise SourceError(f"{self.path}: no such zip archive (a read-only mount cannot create one)")
        self._lock = threading.RLock()
        self._requested_layout = layout
        self._fd: int | None = None
        self._zf: zipfile.ZipFile | None = None
        self._cache: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._cache_bytes = 0
        self._load()
        self.staging: Staging | None = None
        if read_only:
            Staging.report_leftovers(self.path)
        else:
            self.staging = Staging.acquire(self.path, self._ident)
            replay = self.staging.recover(self._ident)
            try:
                for record in replay:
                    self._apply(record)
                self.staging.drop_unreferenced(self._staged_files())
            except (NczfsError, KeyError, ValueError) as exc:
                self.staging.orphan(f"replaying them failed: {exc}")
                self._load()
                replay = []
            if replay:
                log.warning("%s: recovered %d staged change(s) from an interrupted mount; "
                            "they are committed at the next sync or unmount", self.path, len(replay))

    def describe(self) -> str:
        return f"file://{self.path}#mode=zip"

    def problems(self) -> list[str]:
        return [f"{self.path}: member {name!r} appears more than once; the last one is used" for name in self._duplicates]

    # ------------------------------------------------------------------ the archive and its index

    def _archive_ident(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _load(self) -> None:
        """(Re)read the archive's central directory into the tree; refuse a broken archive."""
        self._close_archive()
        self._files: dict[str, Source] = {}
        self._dirs: dict[str, set[str]] = {"": set()}
        #: attributes of directories (their entries', or set since)
        self._dir_meta: dict[str, Meta] = {}
        self._refs: collections.Counter[str] = collections.Counter()  # keys per staged file
        self._hidden: list[zipfile.ZipInfo] = []  # members outside the dataset directory: kept, not shown
        self._duplicates: list[str] = []  # member names that appear more than once
        self._comment = b""
        self._cache.clear()
        self._cache_bytes = 0
        self._ident = self._archive_ident()
        if self._ident is None:
            self.layout = self._requested_layout or "netcdf"
            self.top = top_name(self.path) if self.layout == "netcdf" else ""
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot open ({exc.strerror})") from exc
        try:
            zf = zipfile.ZipFile(os.fdopen(os.dup(fd), "rb"))
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
            os.close(fd)
            raise SourceError(f"{self.path}: not a readable zip archive ({exc})") from exc
        self._fd, self._zf = fd, zf
        infos = zf.infolist()
        self._comment = zf.comment
        for info in infos:
            why = bad_member_name(info.orig_filename)
            if why is not None:
                self._close_archive()
                raise SourceError(f"{self.path}: member {info.orig_filename!r} refused: {why}")
            if info.header_offset < 0 or info.header_offset + info.compress_size > zf.start_dir:
                self._close_archive()
                raise SourceError(f"{self.path}: member {info.filename!r} runs past the central "
                                  "directory (truncated or corrupt archive)")
        _check_no_overlap(self.path, infos)
        found = detect_layout(infos, self.path)
        if found is None:
            self.layout = self._requested_layout or "netcdf"
            self.top = top_name(self.path) if self.layout == "netcdf" else ""
        else:
            self.layout, self.top = found
            if self._requested_layout not in (None, self.layout):
                log.warning("%s: the archive has the %s layout, kept (zip_layout=%s applies to new archives)",
                            self.path, self.layout, self._requested_layout)
        by_name: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.filename in by_name and info.filename not in self._duplicates:
                self._duplicates.append(info.filename)
                log.warning("%s: member %r appears more than once; the last one is used", self.path, info.filename)
            by_name[info.filename] = info
        start = self.top + "/" if self.top else ""
        try:
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
                    mtime = meta.mtime_ns if meta is not None and meta.mtime_ns is not None else _zip_time_ns(info)
                    self._add_file(key, Member(info, mtime, meta=meta))
        except NczfsError as exc:
            self._close_archive()
            raise SourceError(f"{self.path}: {exc}") from exc
        if self._hidden:
            log.warning("%s: %d member(s) outside the dataset directory %r are kept but not shown",
                        self.path, len(self._hidden), self.top)

    def _close_archive(self) -> None:
        if self._zf is not None:
            self._zf.close()
            self._zf = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _check_archive(self) -> None:
        """If another program replaced the archive: reload its index, staged changes on top."""
        if self._archive_ident() == self._ident:
            return
        records = list(self.staging.records) if self.staging is not None else []
        log.info("%s: the archive changed behind the mount; reloading its index (%d staged changes "
                 "replayed on top)", self.path, len(records))
        self._load()
        if self.staging is None:
            return
        try:
            for record in records:
                self._apply(record)
        except (NczfsError, KeyError) as exc:
            self.staging.orphan(f"they conflict with the archive's new contents: {exc}")
            self._load()
            return
        self.staging.rebase(self._ident)

    # ------------------------------------------------------------------ the tree (no I/O)

    def _add_dir(self, path: str) -> None:
        while path not in self._dirs:
            if path in self._files:
                raise NotADirectory(f"{path!r} is both a file and a directory")
            self._dirs[path] = set()
            parent = parent_of(path)
            self._add_dir(parent)
            self._dirs[parent].add(path.rpartition("/")[2])

    def _add_file(self, key: str, src: Source) -> None:
        if key in self._dirs:
            raise IsADirectory(f"{key!r} is both a file and a directory")
        parent = parent_of(key)
        self._add_dir(parent)
        self._files[key] = src
        self._dirs[parent].add(key.rpartition("/")[2])
        if isinstance(src, Staged):
            self._refs[src.file] += 1

    def _remove_file(self, key: str) -> None:
        src = self._files.pop(key, None)
        if src is not None:
            self._dirs[parent_of(key)].discard(key.rpartition("/")[2])
            if isinstance(src, Staged):
                self._refs[src.file] -= 1

    def _subtree(self, prefix: str) -> tuple[list[str], list[str]]:
        """Directories (prefix first) and files at or below a directory."""
        dirs, files, todo = [], [], [prefix]
        while todo:
            d = todo.pop()
            dirs.append(d)
            for name in self._dirs[d]:
                child = join(d, name)
                (todo if child in self._dirs else files).append(child)
        return dirs, files

    def _apply(self, rec: dict) -> None:
        """Apply one journal record to the tree (also used to replay a journal)."""
        op = rec["op"]
        if op == "set":
            self._remove_file(rec["key"])
            self._add_file(rec["key"], Staged(rec["file"], rec["size"], rec["mtime"], _meta_from_record(rec.get("meta"))))
        elif op == "meta":
            meta = _meta_from_record(rec["meta"])
            if rec.get("dir"):
                if rec["key"] not in self._dirs:
                    raise KeyError(rec["key"])
                self._dir_meta[rec["key"]] = meta  # type: ignore[assignment]
            else:
                src = copy.copy(self._files[rec["key"]])
                src.meta, src.meta_changed = meta, True
                if meta is not None and meta.mtime_ns is not None:
                    src.mtime_ns = meta.mtime_ns
                self._remove_file(rec["key"])
                self._add_file(rec["key"], src)
        elif op == "del":
            self._remove_file(rec["key"])
        elif op in ("mv", "cp"):
            src = self._files[rec["src"]]
            if op == "mv":
                self._remove_file(rec["src"])
            else:
                src = copy.copy(src)
            self._remove_file(rec["dst"])
            self._add_file(rec["dst"], src)
        elif op == "mkdir":
            self._add_dir(rec["key"])
        elif op == "rmdir":
            del self._dirs[rec["key"]]
            self._dir_meta.pop(rec["key"], None)
            self._dirs[parent_of(rec["key"])].discard(rec["key"].rpartition("/")[2])
        elif op == "mvdir":
            src, dst = rec["src"], rec["dst"]
            dirs, files = self._subtree(src)
            moved = {f: self._files[f] for f in files}
            for f in files:
                self._remove_file(f)
            metas = {d: self._dir_meta.pop(d) for d in dirs if d in self._dir_meta}
            for d in dirs:
                del self._dirs[d]
            self._dirs[parent_of(src)].discard(src.rpartition("/")[2])
            for d in dirs:
                self._add_dir(dst + d[len(src):])
            for d, meta in metas.items():
                self._dir_meta[dst + d[len(src):]] = meta
            for f, s in moved.items():
                self._add_file(dst + f[len(src):], s)
        else:
            raise ValueError(f"unknown journal record {rec!r}")

    def _record(self, rec: dict) -> None:
        """Apply a change and journal it; then drop staged data no key refers to any more."""
        assert self.staging is not None
        try:
            self.staging.append(rec)
        except OSError as exc:
            raise _medium_error(rec.get("key") or rec["dst"], exc) from exc
        self._apply(rec)
        dead = {f for f, n in self._refs.items() if n <= 0}
        if dead:
            self.staging.release(dead)
            for f in dead:
                del self._refs[f]

    def _staged_files(self) -> set[str]:
        return {f for f, n in self._refs.items() if n > 0}

    # ------------------------------------------------------------------ reads

    def _info(self, key: str, src: Source) -> ObjectInfo:
        return ObjectInfo(key, src.size, src.mtime_ns, src.etag, src.meta)

    def _source(self, key: str) -> Source:
        check_member_key(key)
        self._check_archive()
        src = self._files.get(key)
        if src is None:
            raise KeyNotFound(key)
        return src

    def stat(self, key: str) -> ObjectInfo:
        with self._lock:
            return self._info(key, self._source(key))

    def entry(self, key: str) -> DirEntry | None:
        check_member_key(key)
        with self._lock:
            self._check_archive()
            name = key.rpartition("/")[2]
            src = self._files.get(key)
            if src is not None:
                return DirEntry(name, False, self._info(key, src))
            return DirEntry(name, True, meta=self._dir_meta.get(key)) if key in self._dirs else None

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        with self._lock:
            self._check_archive()
            out = []
            for name in sorted(self._dirs.get(prefix, ())):
                key = join(prefix, name)
                src = self._files.get(key)
                out.append(DirEntry(name, True, meta=self._dir_meta.get(key)) if src is None
                           else DirEntry(name, False, self._info(key, src)))
            return out

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        with self._lock:
            self._check_archive()
            if prefix not in self._dirs:
                return []
            return sorted(self._subtree(prefix)[1])

    def dir_exists(self, prefix: str) -> bool:
        check_prefix(prefix)
        with self._lock:
            self._check_archive()
            return prefix in self._dirs

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        with self._lock:
            src = self._source(key)
            start = 0 if rng is None else rng.start
            end = src.size if rng is None or rng.end is None else min(rng.end, src.size)
            if start >= end:
                return b""
            if isinstance(src, Staged):
                assert self.staging is not None
                return self.staging.read(src.file, start, end - start)
            if src.info.compress_type == zipfile.ZIP_STORED and not src.info.flag_bits & 1:
                return self._read_stored(key, src, start, end)
            return self._inflate(key, src)[start:end]

    def _data_offset(self, key: str, m: Member) -> int:
        if m.data_offset is None:
            assert self._fd is not None
            head = os.pread(self._fd, _LOCAL_HEADER.size, m.info.header_offset)
            if len(head) != _LOCAL_HEADER.size:
                raise BackendError(f"{key!r}: local header missing (truncated archive)")
            magic, n_name, n_extra = _LOCAL_HEADER.unpack(head)
            if magic != b"PK\x03\x04":
                raise BackendError(f"{key!r}: bad local header (corrupt archive)")
            m.data_offset = m.info.header_offset + _LOCAL_HEADER.size + n_name + n_extra
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
        info = m.info
        if info.flag_bits & 1:
            raise BackendError(f"{key!r}: encrypted zip members are not supported")
        if info.file_size > MAX_INFLATED:
            raise BackendError(f"{key!r}: {info.file_size} bytes once decompressed, more than the "
                               f"{MAX_INFLATED}-byte limit for compressed members")
        if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > MAX_DEFLATE_RATIO * max(info.compress_size, 1):
            raise BackendError(f"{key!r}: claims a decompression ratio beyond {MAX_DEFLATE_RATIO}:1 (zip bomb?)")
        assert self._zf is not None
        try:
            with self._zf.open(info) as f:
                data = f.read(info.file_size + 1)
        except (zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError, OSError, NotImplementedError,
                RuntimeError, ValueError) as exc:
            raise BackendError(f"{key!r}: cannot decompress ({exc})") from exc
        if len(data) != info.file_size:
            raise BackendError(f"{key!r}: decompressed size differs from the header (corrupt or zip bomb)")
        self._cache[tag] = data
        self._cache_bytes += len(data)
        while self._cache_bytes > CACHE_BYTES and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= len(old)
        return data

    # ------------------------------------------------------------------ writes (staged)

    def _writable(self, key: str) -> Staging:
        self.check_writable(key)
        assert self.staging is not None
        self._check_archive()
        return self.staging

    def _check_new_file(self, key: str) -> None:
        check_member_key(key)
        if key in self._dirs:
            raise IsADirectory(f"{key!r}: is a directory")
        parts = key.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in self._files:
                raise NotADirectory(f"{key!r}: a parent is a file")

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        return self._stage(key, [data], len(data))

    def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        return self._stage(key, file_pieces(key, f, size, _COPY_CHUNK), size)

    def _stage(self, key: str, chunks: Iterable[bytes | bytearray | memoryview], size: int,
               meta: Meta | None = None) -> ObjectInfo:
        """Stage the object ``key``: with ``meta``, or the attributes of the one it replaces (a
        rewrite keeps a file's mode and owner, its mtime is now)."""
        check_key(key)
        with self._lock:
            staging = self._writable(key)
            self._check_new_file(key)
            now = time.time_ns()
            if meta is None and key in self._files and self._files[key].meta is not None:
                meta = dataclasses.replace(self._files[key].meta, mtime_ns=None)  # type: ignore[arg-type]
            try:
                name, written = staging.store(chunks)
            except OSError as exc:
                raise _medium_error(key, exc) from exc
            if written != size:
                staging.release({name})
                raise BackendError(f"{key!r}: {written} bytes arrived, {size} expected")
            rec = {"op": "set", "key": key, "file": name, "size": size, "mtime": now}
            if meta is not None:
                rec["meta"] = _meta_record(meta)
            self._record(rec)
            return self._info(key, self._files[key])

    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        check_prefix(key) if is_dir else check_member_key(key)
        with self._lock:
            self._writable(key)
            if is_dir:
                if key not in self._dirs:
                    raise KeyNotFound(key)
                if not key:
                    raise NotSupported("the archive's own directory keeps no attributes")
                meta = self._dir_meta.get(key, Meta()).merged(changes)
            else:
                if key not in self._files:
                    raise KeyNotFound(key)
                meta = (self._files[key].meta or Meta()).merged(changes)
            self._record({"op": "meta", "key": key, "meta": _meta_record(meta), "dir": is_dir})
            return meta

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """An entry of the symlink's or special file's type (a symlink's target as its data)."""
        if not meta.file_type or stat.S_ISREG(meta.mode or 0) or stat.S_ISDIR(meta.mode or 0):
            raise InvalidKey(key, "not a special file type")
        data = (target or "").encode("utf-8", "surrogateescape") if stat.S_ISLNK(meta.mode or 0) else b""
        with self._lock:
            if key in self._files or key in self._dirs:
                raise Exists(f"{key!r}: exists")
            return self._stage(key, [data], len(data), meta)

    def readlink(self, key: str) -> str:
        with self._lock:
            src = self._source(key)
            if src.meta is None or not stat.S_ISLNK(src.meta.mode or 0):
                raise InvalidArgument(f"{key!r}: not a symlink")
        return self.get(key).decode("utf-8", "surrogateescape")

    def delete(self, key: str) -> None:
        check_key(key)
        with self._lock:
            self._writable(key)
            if key in self._files:
                self._record({"op": "del", "key": key})

    def _move_or_copy(self, op: str, src: str, dst: str) -> None:
        check_key(src)
        check_key(dst)
        self._writable(dst)
        if src not in self._files:
            raise KeyNotFound(src)
        self._check_new_file(dst)
        if src != dst:
            self._record({"op": op, "src": src, "dst": dst})

    def copy(self, src: str, dst: str) -> ObjectInfo:
        with self._lock:
            self._move_or_copy("cp", src, dst)
            return self._info(dst, self._files[dst])

    def rename(self, src: str, dst: str) -> None:
        with self._lock:
            self._move_or_copy("mv", src, dst)

    def rename_dir(self, src: str, dst: str) -> None:
        check_key(src)
        check_key(dst)
        with self._lock:
            self._writable(dst)
            if src not in self._dirs:
                raise KeyNotFound(src)
            if dst in self._files or dst in self._dirs:
                raise Exists(f"{dst!r}: exists")
            self._check_new_file(dst)
            self._record({"op": "mvdir", "src": src, "dst": dst})

    def mkdir(self, prefix: str) -> None:
        check_key(prefix)
        with self._lock:
            self._writable(prefix)
            if prefix in self._dirs or prefix in self._files:
                raise Exists(f"{prefix!r}: exists")
            self._check_new_file(prefix)
            self._record({"op": "mkdir", "key": prefix})

    def rmdir(self, prefix: str) -> None:
        check_key(prefix)
        with self._lock:
            self._writable(prefix)
            if prefix in self._files:
                raise NotADirectory(f"{prefix!r}: not a directory")
            if prefix not in self._dirs:
                raise KeyNotFound(prefix)
            if self._dirs[prefix]:
                raise DirectoryNotEmpty(f"{prefix!r}: directory not empty")
            self._record({"op": "rmdir", "key": prefix})

    def statfs(self) -> FsStats:
        st = os.statvfs(os.path.dirname(self.path))
        return FsStats(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, st.f_files, st.f_favail)

    # ------------------------------------------------------------------ commit

    def sync(self) -> None:
        """Commit staged changes: a new archive, fsynced, atomically renamed over the old one."""
        with self._lock:
            if self.staging is None or not self.staging.dirty:
                return
            mtimes = {k: (s.mtime_ns, s.meta) for k, s in self._files.items()}
            tmp = self.staging.new_archive_path()
            try:
                self._write_archive(tmp)
                self.staging.install(tmp, self.path)
            except (OSError, NczfsError, zipfile.LargeZipFile, ValueError) as exc:
                self.staging.discard_new_archive()
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                err = BackendError(f"{self.path}: commit failed, staged writes kept ({reason})")
                err.errno = getattr(exc, "errno", None) or errno.EIO
                raise err from exc
            self._load()
            for key, src in self._files.items():
                if key in mtimes:  # zip times have 2 s (1 s) resolution: keep what was shown
                    src.mtime_ns, shown = mtimes[key]
                    if shown is not None:
                        src.meta = dataclasses.replace(shown, mtime_ns=src.mtime_ns)
            self.staging.committed(self._ident)
            log.info("%s: committed (%d objects)", self.path, len(self._files))

    def _write_archive(self, tmp: str) -> None:
        start = self.top + "/" if self.top else ""
        with open(tmp, "w+b") as f:
            zf = zipfile.ZipFile(f, "w", allowZip64=True)
            zf.comment = self._comment
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
            for info in self._hidden:
                self._copy_raw(zf, f, info, info.filename)
            members = sorted(((k, s) for k, s in self._files.items() if isinstance(s, Member)),
                             key=lambda ks: ks[1].info.header_offset)
            for key, m in members:
                self._copy_raw(zf, f, m.info, start + key, m, m.meta if m.meta_changed else None)
            for key in sorted(k for k, s in self._files.items() if isinstance(s, Staged)):
                self._write_staged(zf, start + key, self._files[key])  # type: ignore[arg-type]
            zf.close()
            f.flush()
            os.fsync(f.fileno())

    def _copy_raw(self, zf: zipfile.ZipFile, f, info: zipfile.ZipInfo, name: str, m: Member | None = None,
                  meta: Meta | None = None) -> None:
        """Copy a member's compressed bytes unchanged (no recompression) under ``name`` (with
        ``meta``: those attributes in its headers)."""
        m = m or Member(info, 0)
        off = self._data_offset(name, m)
        new = copy.copy(info)
        new.filename = name
        new.flag_bits &= ~zipfile._MASK_USE_DATA_DESCRIPTOR  # sizes go in the local header
        new.extra = zipfile._strip_extra(info.extra, (1,))  # type: ignore[attr-defined]
        if meta is not None:
            with_meta(new, meta, stat.S_IFREG | 0o644)
        zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
        f.seek(zf.start_dir)
        new.header_offset = f.tell()
        f.write(new.FileHeader(zip64))
        f.flush()
        pos = f.tell()
        _copy_range(self._fd, f.fileno(), off, pos, info.compress_size)
        f.seek(pos + info.compress_size)
        zf.filelist.append(new)
        zf.NameToInfo[name] = new
        zf.start_dir = f.tell()
        zf._didModify = True  # type: ignore[attr-defined]

    def _write_staged(self, zf: zipfile.ZipFile, name: str, s: Staged) -> None:
        assert self.staging is not None
        info = zipfile.ZipInfo(name, time.localtime(max(s.mtime_ns / 1e9, ZIP_EPOCH))[:6])
        info.compress_type = zipfile.ZIP_STORED  # as netCDF-C writes them
        info.external_attr = 0o644 << 16
        if s.meta is not None:
            with_meta(info, dataclasses.replace(s.meta, mtime_ns=s.mtime_ns), stat.S_IFREG | 0o644)
        info.file_size = s.size
        with zf.open(info, "w") as out, \
                self.staging.open_data(s.file) as src:
            while chunk := src.read(_COPY_CHUNK):
                out.write(chunk)

    # ------------------------------------------------------------------ end of the mount

    def close(self) -> None:
        with self._lock:
            if self.staging is not None:
                try:
                    self.sync()
                except NczfsError as exc:
                    log.error("%s", exc)
                self.staging.close()
                self.staging = None
            self._close_archive()


def _check_no_overlap(path: str, infos: list[zipfile.ZipInfo]) -> None:
    """Members whose data would overlap the next member: bytes are missing (a cut archive)."""
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for a, b in zip(ordered, ordered[1:]):
        name = a.orig_filename.encode("utf-8" if a.flag_bits & 0x800 else "cp437", "replace")
        if a.header_offset + _LOCAL_HEADER.size + len(name) + a.compress_size > b.header_offset:
            raise SourceError(f"{path}: member {a.filename!r} overlaps the next one (truncated or corrupt archive)")


def _medium_error(key: str, exc: OSError) -> BackendError:
    """A failed write to the staging directory, with the medium's errno (EPERM, ENOSPC, ...)."""
    err = BackendError(f"{key!r}: cannot stage the write ({exc.strerror or exc})")
    err.errno = exc.errno or errno.EIO
    return err


def _copy_range(src: int | None, dst: int, src_off: int, dst_off: int, count: int) -> None:
    """Copy bytes between files in the kernel where it can, else through a buffer."""
    assert src is not None
    while count > 0:
        try:
            n = os.copy_file_range(src, dst, count, src_off, dst_off)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            data = os.pread(src, min(count, _COPY_CHUNK), src_off)
            n = os.pwrite(dst, data, dst_off) if data else 0
        if n == 0:
            raise OSError(errno.EIO, "archive member cut short (truncated archive)")
        src_off, dst_off, count = src_off + n, dst_off + n, count - n
