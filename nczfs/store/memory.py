"""A dict-backed store: the reference implementation and the tests' double.

Like S3 it keeps only objects; directories are implied by key prefixes.
"""

from __future__ import annotations

import itertools
import threading
import time

from nczfs.errors import IsADirectory, KeyNotFound, NotADirectory, Stale
from nczfs.store.base import ByteRange, DirEntry, ObjectInfo, SyncStore, check_key, check_prefix

_etags = itertools.count(1)


class MemoryStore(SyncStore):
    non_blocking = True
    checks_versions = True

    def __init__(self, name: str = "", read_only: bool = False):
        self.name = name
        self.read_only = read_only
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

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        check_key(key)
        self.check_writable(key)
        with self._lock:
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

    def delete(self, key: str) -> None:
        check_key(key)
        self.check_writable(key)
        with self._lock:
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
