"""A dict-backed store: the reference implementation and the tests' double.

Like S3 it keeps only objects; directories are implied by key prefixes.
"""

from __future__ import annotations

from dataclasses import replace
import dataclasses
import itertools
import stat
import threading
import time

from nczfs.store.capabilities import Capabilities
from nczfs.toolbox.errors import BackendError, Conflict, InvalidArgument, IsADirectory, KeyNotFound, NotADirectory, NotSupported, Stale
from nczfs.store.base import SyncStore, check_writable, rename_each
from nczfs.store.keys import check_key, check_prefix, tree_listings
from nczfs.store.values import ABSENT, ByteRange, DirEntry, Meta, ObjectInfo, Upload

_etags = itertools.count(1)


class MemoryStore(SyncStore):
    capabilities = Capabilities(non_blocking=True, checks_versions=True, checks_writes=True, checks_deletes=True)
    # objects keep POSIX attributes (KeepsMeta, as S3's metadata does: a ``set`` drops them, a
    # copy or rename keeps them); symlinks and special files are objects whose type is in them
    #: a directory moved key by key
    rename_dir = rename_each

    def __init__(self, name: str = "", read_only: bool = False, part_size: int = 8 * 1024 * 1024):
        self.name = name
        self.capabilities = replace(self.capabilities, read_only=read_only)
        #: the part size of its uploads (:meth:`open_upload`), as S3's
        self.part_size = part_size
        #: uploads opened and neither completed nor aborted (number: key), as S3 lists them
        self.open_uploads: dict[int, str] = {}
        self._uploads = itertools.count(1)
        self._objects: dict[str, tuple[bytes, ObjectInfo]] = {}
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"memory://{self.name}"

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return self.get_version(key, rng, None)

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        check_key(key)
        try:
            data, info = self._objects[key]
        except KeyError:
            raise KeyNotFound(key) from None
        if etag and info.etag != etag:
            raise Stale(f"{key!r}: changed (version {info.etag}, not {etag})")
        return data if rng is None else rng.slice(data)

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        try:
            return self._objects[key][1]
        except KeyError:
            raise KeyNotFound(key) from None

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        check_key(key)
        check_writable(self, key)
        with self._lock:
            self._check_version(key, if_version)
            # an object cannot sit where a directory is implied, nor below an object
            parts = key.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in self._objects:
                    raise NotADirectory(f"{key!r}: {'/'.join(parts[:i])!r} is an object")
            if any(k.startswith(key + "/") for k in self._objects):
                raise IsADirectory(f"{key!r}: a directory of that name exists")
            info = ObjectInfo(key, len(data), time.time_ns(), f"m{next(_etags)}")
            self._objects[key] = (bytes(data), info)
            return info

    def open_upload(self, key: str) -> Upload:
        """Parts kept aside until ``complete`` stores them joined, as S3's multipart upload does
        (every part but the last must be ``part_size`` bytes; the numbers must run 1..n)."""
        check_key(key)
        check_writable(self, key)
        number = next(self._uploads)
        with self._lock:
            self.open_uploads[number] = key
        parts: dict[int, bytes] = {}

        def send(n: int, data: bytes) -> None:
            if number not in self.open_uploads:
                raise BackendError(f"{key!r}: the upload was completed or aborted")
            parts[n] = bytes(data)

        def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            if self.open_uploads.pop(number, None) is None:
                raise BackendError(f"{key!r}: the upload was completed or aborted")
            ordered = [parts[n] for n in sorted(parts)]
            if (sorted(parts) != list(range(1, len(parts) + 1)) or any(len(p) != self.part_size for p in ordered[:-1])
                    or sum(map(len, ordered)) != size):
                raise BackendError(f"{key!r}: the parts sent do not make {size} bytes")
            return self.set(key, b"".join(ordered), if_version)

        def abort() -> None:
            self.open_uploads.pop(number, None)

        return Upload(key, self.part_size, send, complete, abort)

    def delete(self, key: str, if_version: str | None = None) -> None:
        check_key(key)
        check_writable(self, key)
        with self._lock:
            if if_version is not None and key in self._objects:
                self._check_version(key, if_version)
            self._objects.pop(key, None)

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        start = prefix + "/" if prefix else ""
        entries: dict[str, DirEntry] = {}
        for key, (_, info) in list(self._objects.items()):
            if not key.startswith(start):
                continue
            name, sep, _ = key[len(start) :].partition("/")
            if sep:
                entries[name] = DirEntry(name, True)
            elif name not in entries:
                entries[name] = DirEntry(name, False, info)
        return [entries[n] for n in sorted(entries)]

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        start = prefix + "/" if prefix else ""
        return sorted(k for k in list(self._objects) if k.startswith(start))

    def _check_version(self, key: str, if_version: str | None) -> None:
        """Conflict unless ``key`` is version ``if_version`` (ABSENT: no object; None: any)."""
        if if_version is None:
            return
        held = self._objects.get(key)
        found = held[1].etag if held is not None else ""
        if found != ("" if if_version == ABSENT else if_version):
            raise Conflict(key, if_version, found)

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """The bytes and the attributes (as S3's CopyObject copies an object's metadata)."""
        self.set(dst, self.get(src), if_version)
        meta = self.stat(src).meta
        if meta is not None:
            self.set_meta(dst, meta)
        return self.stat(dst)

    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        if is_dir:
            raise NotSupported(f"{key!r}: directories are only implied here")
        check_key(key)
        check_writable(self, key)
        with self._lock:
            try:
                data, info = self._objects[key]
            except KeyError:
                raise KeyNotFound(key) from None
            meta = (info.meta or Meta()).merged(changes)
            self._objects[key] = (data, dataclasses.replace(info, meta=meta))
            return meta

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        if not meta.file_type or stat.S_ISREG(meta.mode or 0) or stat.S_ISDIR(meta.mode or 0):
            raise InvalidArgument(f"{key!r}: not a special file type")
        self.set(key, (target or "").encode("utf-8", "surrogateescape"))
        self.set_meta(key, meta)
        return self.stat(key)

    def readlink(self, key: str) -> str:
        data = self.get(key)
        info = self.stat(key)
        if info.meta is None or not stat.S_ISLNK(info.meta.mode or 0):
            raise InvalidArgument(f"{key!r}: not a symlink")
        return data.decode("utf-8", "surrogateescape")

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        check_prefix(prefix)
        start = prefix + "/" if prefix else ""
        below = [(k[len(start) :], info) for k, (_, info) in list(self._objects.items()) if k.startswith(start)]
        return tree_listings(prefix, below) if len(below) <= limit else None
