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
(see :mod:`.staging`). The index: :mod:`.tree`; the archive file: :mod:`.archive`;
entries and their attributes: :mod:`.entries`; layouts and member names: :mod:`.layout`.

Concurrency: one lock serialises every call (index, staging writes, inflating, commit), in the
worker threads ``ThreadedStore`` runs them in; a commit blocks other calls until it is done.

Layouts: netCDF-C's (every key below one top directory named after the archive, with
directory entries) and zarr-python's (keys at the archive root); both mount with the dataset
at the mount root, and an existing archive keeps its layout.
"""

from __future__ import annotations

from dataclasses import replace
import collections
import dataclasses
import errno
import logging
import os
import stat
import threading
import time
import zipfile
from typing import BinaryIO, Iterable

from nczfs.store.capabilities import Capabilities
from nczfs.toolbox.errors import (BackendError, DirectoryNotEmpty, Exists, InvalidArgument, InvalidKey, IsADirectory,
                          KeyNotFound, NczfsError, NotADirectory, NotSupported, SourceError, option_error)
from nczfs.store.base import SyncStore, check_writable
from nczfs.store.keys import check_key, check_prefix, join
from nczfs.store.pieces import file_pieces
from nczfs.store.values import ByteRange, DirEntry, FsStats, Meta, ObjectInfo
from nczfs.store.zip.archive import COPY_CHUNK, Archive
from nczfs.store.zip.behind import Behind
from nczfs.store.zip.entries import Entry, StagedFile, crc_of, meta_record
from nczfs.store.zip.layout import LAYOUTS, check_member_key
from nczfs.store.zip.staging import Staging
from nczfs.store.zip.index import Tree

log = logging.getLogger(__name__)


class ZipStore(Archive, Tree, Behind, SyncStore):
    # modes, owners and mtimes in the entries' external attributes and extra fields (KeepsMeta);
    # symlinks and special files as entries of their type
    #: writes take ``if_version``, and a commit never overwrites another program's archive: :mod:`.behind`
    capabilities = Capabilities(stores_directories=True, checks_writes=True, checks_deletes=True)

    def __init__(self, path: str, read_only: bool = False, layout: str | None = None):
        if layout is not None and layout not in LAYOUTS:
            raise option_error("zip_layout", layout, f"must be one of {', '.join(LAYOUTS)}")
        self.path = os.path.abspath(path)
        self.capabilities = replace(self.capabilities, read_only=read_only)
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
            self._open_staging()

    def _open_staging(self) -> None:
        """Take the staging directory and replay what an interrupted mount left there."""
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

    # ------------------------------------------------------------------ reads

    def _info(self, key: str, src: Entry) -> ObjectInfo:
        return ObjectInfo(key, src.size, src.mtime_ns, src.etag, src.meta)

    def _source(self, key: str) -> Entry:
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
            return self._read_entry(key, src, start, end) if start < end else b""

    def _read_entry(self, key: str, src: Entry, start: int, end: int) -> bytes:
        if isinstance(src, StagedFile):
            assert self.staging is not None
            return self.staging.read(src.file, start, end - start)
        if src.info.compress_type == zipfile.ZIP_STORED and not src.info.flag_bits & 1:
            return self._read_stored(key, src, start, end)
        return self._inflate(key, src)[start:end]

    # ------------------------------------------------------------------ writes (staged)

    def _writable(self, key: str) -> Staging:
        check_writable(self, key)
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

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        return self._stage(key, [data], len(data), if_version=if_version)

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        return self._stage(key, file_pieces(key, f, size, COPY_CHUNK), size, if_version=if_version)

    def _stage(self, key: str, chunks: Iterable[bytes | bytearray | memoryview], size: int,
               meta: Meta | None = None, if_version: str | None = None) -> ObjectInfo:
        """Stage the object ``key``: with ``meta``, or the attributes of the one it replaces (a
        rewrite keeps a file's mode and owner, its mtime is now); ``if_version``: only over that
        version (checked again when staged)."""
        check_key(key)
        with self._lock:
            staging = self._writable(key)
            self._check_new_file(key)
            self._check_version(key, if_version)
            now = time.time_ns()
            if meta is None and key in self._files and (old := self._files[key].meta) is not None:
                meta = dataclasses.replace(old, mtime_ns=None)
            crc = [0]
            try:
                name, written = staging.store(crc_of(chunks, crc))
            except OSError as exc:
                raise _medium_error(key, exc) from exc
            if written != size:
                staging.release({name})
                raise BackendError(f"{key!r}: {written} bytes arrived, {size} expected")
            rec = {"op": "set", "key": key, "file": name, "size": size, "mtime": now, "crc": crc[0]}
            if meta is not None:
                rec["meta"] = meta_record(meta)
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
            self._record({"op": "meta", "key": key, "meta": meta_record(meta), "dir": is_dir})
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

    def delete(self, key: str, if_version: str | None = None) -> None:
        check_key(key)
        with self._lock:
            self._writable(key)
            if key in self._files:
                self._check_version(key, if_version)
                self._record({"op": "del", "key": key})

    def _move_or_copy(self, op: str, src: str, dst: str, if_version: str | None) -> None:
        check_key(src)
        check_key(dst)
        self._writable(dst)
        if src not in self._files:
            raise KeyNotFound(src)
        self._check_new_file(dst)
        self._check_version(dst, if_version)
        if src != dst:
            self._record({"op": op, "src": src, "dst": dst})

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        with self._lock:
            self._move_or_copy("cp", src, dst, if_version)
            return self._info(dst, self._files[dst])

    def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        with self._lock:
            self._move_or_copy("mv", src, dst, if_version)
            return self._info(dst, self._files[dst])

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

    def _commit(self) -> bool:
        """Write the new archive and rename it over the old one, unless another program changed
        the old one meanwhile (then False, nothing changed)."""
        assert self.staging is not None
        mtimes = {k: (s.mtime_ns, s.meta) for k, s in self._files.items()}
        tmp = self.staging.new_archive_path()
        try:
            self._write_archive(tmp)
            # changed while the new one was written, or between that check and the swap
            if not self._unchanged() or not self.staging.install(tmp, self.path, self._unchanged, self._ident is None):
                self.staging.discard_new_archive()
                return False
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
        return True

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



def _medium_error(key: str, exc: OSError) -> BackendError:
    """A failed write to the staging directory, with the medium's errno (EPERM, ENOSPC, ...)."""
    err = BackendError(f"{key!r}: cannot stage the write ({exc.strerror or exc})")
    err.errno = exc.errno or errno.EIO
    return err

