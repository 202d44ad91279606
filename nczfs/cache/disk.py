"""DiskCache: object blocks kept in a local directory (``--cache-dir``), so they survive remounts.

The in-memory block cache (:mod:`nczfs.cache.store`) consults it before asking the backend and hands
it every block it fetched. An entry is one file, named by a hash of the mount's source identity
(backend, bucket/prefix or path, endpoint, region), the object key, its ETag, the block size and
the block index: a changed object (new ETag) never matches an old entry, and mounts of different
sources sharing one directory never collide.

File format: a 20-byte header (magic, data length, CRC-32 of the entry's name and data) then
the data. A reader checks all three; a truncated or corrupt entry is deleted and counts as a
miss, never served.

Bound. The bytes of the files under the directory (entries and the temp files being written)
never exceed ``limit``, even with several daemons sharing it. Every change of that total happens
under one lock (``flock`` on ``.lock``, plus a thread lock inside the process) and is recorded at
the start of ``.lock`` (:mod:`nczfs.cache.disktotal`): a writer reserves the entry's size first (creating its temp file at full size), then
writes and renames it into place. When a reservation would pass the limit, the directory is
scanned and the least recently used entries (oldest mtime; a hit touches its entry) are deleted
until the total is at most 90% of the limit, so scans are rare. Opening the cache scans once
(in a worker thread): the recorded total is rebuilt from the files and temp files left by a
daemon that died are removed.

Failures. All disk I/O runs in worker threads (its own CapacityLimiter). A disk error (ENOSPC,
EIO, EACCES...) never fails a read: it is counted, logged once per kind with the directory and
the reason, and the caller goes to the backend. A missing file (ENOENT: evicted by another
daemon) is a plain miss.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import json
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable
from typing import TypeVar

import trio

from nczfs.toolbox import background
from nczfs.toolbox.budgets import DEFAULT_CACHE_DIR_SIZE
from nczfs.cache.disktotal import SharedTotal

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_LIMIT = DEFAULT_CACHE_DIR_SIZE
MAGIC = b"nczfsbk1"
HEADER = struct.Struct("<8sQI")
#: an eviction frees the cache down to this fraction of the limit
LOW_WATER = 0.9
#: writes waiting for a worker thread; past this, new blocks are not written (the reader never waits)
MAX_PENDING = 16
#: temp files older than this (seconds) when the cache is opened are leftovers of a dead writer
STALE_TMP = 3600.0
#: worker threads doing disk I/O at once
THREADS = 4


def prepare_dir(path: str) -> str:
    """Create ``path`` if needed and prove entries can be written there; OSError with the reason if not."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot create it ({exc.strerror})") from None
    try:
        probe = os.path.join(path, f".probe.{os.getpid()}")
        with open(probe, "wb") as f:
            f.write(b"x")
        os.unlink(probe)
        os.close(os.open(os.path.join(path, ".lock"), os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write in it ({exc.strerror})") from None
    return path


class DiskCache:
    """Blocks on disk by (identity, key, etag, block size, index); at most ``limit`` bytes under ``root``."""

    def __init__(self, root: str, limit: int = DEFAULT_LIMIT, identity: str = ""):
        self.root = os.path.abspath(root)
        self.limit = limit
        self.identity = identity
        self.total = SharedTotal(self.root, lambda: self._scan()[0])
        self.stats: collections.Counter[str] = collections.Counter()
        self._limiter = trio.CapacityLimiter(THREADS)
        self._slock = threading.Lock()  # stats, counted from worker threads too
        self._started: trio.Event | None = None
        self._ok = False
        self._pending = 0
        self._idle: trio.Event | None = None
        self._logged: set[tuple[str, int | None]] = set()

    # ------------------------------------------------------------------ async API (trio thread)

    def counters(self) -> dict[str, int]:
        with self._slock:
            out = {f"diskcache.{k}": v for k, v in self.stats.items()}
        out["diskcache.bytes-held"] = self.total.held
        out["diskcache.bytes-limit"] = self.limit
        return out

    async def get(self, key: str, etag: str, block_size: int, index: int, length: int | None = None) -> bytes | None:
        """The block if a valid entry holds it (of ``length`` bytes, if given: what the object's
        size says it holds), else None (a miss, whatever went wrong)."""
        if not await self._start():
            return None
        data = await self._in_thread("reading", self._get_sync, self._name(key, etag, block_size, index), length)
        if data is None:
            self._count("misses")
        else:
            self._count("hits")
            self._count("bytes-served", len(data))
        return data

    def put_soon(self, key: str, etag: str, block_size: int, index: int, data: bytes) -> None:
        """Write the block in the background; the caller does not wait. Skipped when too many wait already."""
        if self._pending >= MAX_PENDING or HEADER.size + len(data) > self.limit:
            self._count("skipped")
            return
        self._pending += 1
        background.start_soon(self._put, self._name(key, etag, block_size, index), data,
                              name=f"nczfs diskcache write {key}")

    async def wait_idle(self) -> None:
        """Until every background write has finished (tests; unmount)."""
        while self._pending:
            self._idle = self._idle or trio.Event()
            await self._idle.wait()

    async def _put(self, name: str, data: bytes) -> None:
        try:
            if await self._start():
                await self._in_thread("writing", self._put_sync, name, data)
        finally:
            self._pending -= 1
            if self._pending == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def _start(self) -> bool:
        """Open the cache once (scan in a worker thread); False if the directory is unusable."""
        if self._started is None:
            self._started = trio.Event()
            try:
                self._ok = bool(await self._in_thread("opening", self._open_sync))
            finally:
                self._started.set()
        else:
            await self._started.wait()
        return self._ok

    async def _in_thread(self, what: str, fn: Callable[..., T], *args: object) -> T | None:
        """``fn(*args)`` in a worker thread; a bug in it (not an OSError: those are handled
        inside) is logged and counted, and gives None: it never fails a read nor the daemon."""
        def guarded() -> T | None:
            try:
                return fn(*args)
            except Exception:
                self._count("errors")
                log.exception("cache dir %s: %s failed", self.root, what)
                return None

        return await trio.to_thread.run_sync(guarded, limiter=self._limiter)

    def _name(self, key: str, etag: str, block_size: int, index: int) -> str:
        ident = json.dumps([self.identity, key, etag, block_size, index])
        return hashlib.blake2b(ident.encode(), digest_size=20).hexdigest()

    # ------------------------------------------------------------------ worker threads

    def _count(self, what: str, n: int = 1) -> None:
        with self._slock:
            self.stats[what] += n

    def _path(self, name: str) -> str:
        return os.path.join(self.root, name[:2], name)

    def _failed(self, what: str, exc: OSError) -> None:
        self._count("errors")
        kind = (what, exc.errno)
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("cache dir %s: %s failed (%s); reading from the backend instead",
                        self.root, what, exc.strerror or exc)

    def _scan(self, drop_stale: bool = False) -> tuple[int, list[tuple[float, int, str]]]:
        """Bytes of every entry and temp file, and the entries oldest first as (mtime, size, path)."""
        total, entries = 0, []
        now = time.time()
        for sub in os.scandir(self.root):
            if not sub.is_dir(follow_symlinks=False) or len(sub.name) != 2:
                continue
            for e in os.scandir(sub.path):
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if e.name.startswith(".tmp."):
                    if drop_stale and now - st.st_mtime > STALE_TMP:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(e.path)
                        continue
                else:
                    entries.append((st.st_mtime, st.st_size, e.path))
                total += st.st_size
        entries.sort()
        return total, entries

    def _open_sync(self) -> bool:
        try:
            self.total.open()
            with self.total.locked():
                total, entries = self._scan(drop_stale=True)
                self.total.write(self._evict(total, entries, self.limit))
        except OSError as exc:
            self._failed("opening", exc)
            return False
        log.info("cache dir %s: %d entries, %d bytes (limit %d)", self.root, len(entries), self.total.held, self.limit)
        return True

    def _evict(self, total: int, entries: list[tuple[float, int, str]], target: int) -> int:
        """Delete the oldest entries until ``total`` <= ``target``; the new total."""
        for _, size, path in entries:
            if total <= target:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:  # a directory in its place, a file of another user: the next one
                self._failed("deleting an entry", exc)
                continue
            self._count("evictions")
            total -= size
        return total

    def _reserve(self, size: int) -> bool:
        """Count ``size`` more bytes in the shared total, evicting first if it would pass the limit
        (under the lock); False if even then it would (temp files of other writers fill it)."""
        held = self.total.read()
        if held + size > self.limit:
            total, entries = self._scan()
            held = self._evict(total, entries, min(int(self.limit * LOW_WATER), self.limit - size))
            if held + size > self.limit:
                self.total.write(held)
                return False
        self.total.write(held + size)
        return True

    def _get_sync(self, name: str, want: int | None = None) -> bytes | None:
        path = self._path(name)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._failed("reading an entry", exc)
            return None
        data = memoryview(raw)[HEADER.size:]
        ok = len(raw) >= HEADER.size
        if ok:
            magic, length, digest = HEADER.unpack_from(raw)
            ok = (magic == MAGIC and length == len(data) and (want is None or length == want)
                  and digest == _digest(name, data))
        if not ok:
            self._count("corrupt")
            log.warning("cache dir %s: entry %s is truncated, corrupt or not the length of its block; deleted",
                        self.root, name)
            self._remove(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        return bytes(data)

    def _remove(self, path: str) -> None:
        """Delete a damaged entry; its size on disk may not be the size counted, so count again."""
        try:
            with self.total.locked():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                self.total.write(self._scan()[0])
        except OSError as exc:
            self._failed("deleting an entry", exc)

    def _put_sync(self, name: str, data: bytes) -> None:
        path = self._path(name)
        size = HEADER.size + len(data)
        tmp = os.path.join(os.path.dirname(path), f".tmp.{os.getpid()}.{threading.get_ident()}.{name}")
        reserved = False
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with self.total.locked():
                if not self._reserve(size):
                    self._count("skipped")
                    return
                reserved = True
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.ftruncate(fd, size)  # counted at full size by a concurrent scan
                finally:
                    os.close(fd)
            with open(tmp, "r+b") as f:
                f.write(HEADER.pack(MAGIC, len(data), _digest(name, data)))
                f.write(data)
            with self.total.locked():
                try:
                    replaced = os.stat(path).st_size
                except FileNotFoundError:
                    replaced = 0
                os.rename(tmp, path)
                reserved = False
                if replaced:  # another daemon wrote the same entry meanwhile
                    self.total.write(self.total.read() - replaced)
            self._count("writes")
            self._count("bytes-written", len(data))
        except OSError as exc:
            self._failed("writing an entry", exc)
            if reserved:
                self._unreserve(tmp, size)

    def _unreserve(self, tmp: str, size: int) -> None:
        try:
            with self.total.locked():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                self.total.write(self.total.read() - size)
        except OSError as exc:
            self._failed("cleaning up", exc)

    def close(self) -> None:
        self.total.close()


def _digest(name: str, data: bytes | memoryview) -> int:
    """CRC-32 (4x cheaper than blake2b, and only damage is guarded against, not forgery)."""
    return zlib.crc32(data, zlib.crc32(name.encode()))
