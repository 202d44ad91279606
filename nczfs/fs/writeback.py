"""Files written through the mount on their way to the store: the write-back path.

A file's writes go to its :class:`~nczfs.fs.content.Content` (one per inode, shared by its descriptors) and
reach the store as one object when its writer closes it (FLUSH), at fsync, at the last close of all (release),
or when every pending write is stored at once (unmount, ``nczfs sync``: :meth:`WriteBack.flush_all`). A big
file is sent in parts while it is written (early_upload.py). A temp file whose name tells its final one
(zarr's ``.partial``, rsync's) is not stored under its temp name: at close its data is staged under the final
key (S3: the parts of a multipart upload), and its rename commits it there, or uploads it then; an unlink
aborts it. An upload that fails is reported to the close (EIO) and logged, never only logged.
"""

from __future__ import annotations

import errno
import logging
import tempfile
from typing import Callable

import trio

from nczfs.toolbox.budgets import default_cache_size
from nczfs.toolbox.errors import Conflict, FileTooBig, NczfsError, OutcomeUnknown, Stale, WriteLost
from nczfs.fs.attrs import Attributes
from nczfs.fs.conflicts import Conflicts
from nczfs.fs.content import Content, WriteMemory
from nczfs.fs.early_upload import EarlyUploads
from nczfs.fs.handles import FileHandle, Handles
from nczfs.fs.inodes import Node
from nczfs.fs.names import final_name, is_temp_name
from nczfs.fs.options import FsOptions
from nczfs.fs.sentahead import Staging
from nczfs.toolbox.locks import Lock
from nczfs.store.base import Store
from nczfs.store.capabilities import check_content, checks_content
from nczfs.store.optional import describe
from nczfs.store.values import ABSENT, ByteRange, ObjectInfo
from nczfs.store.threads import run_blocking

log = logging.getLogger(__name__)

#: files stored at once when every pending write is (unmount, ``nczfs sync``)
FLUSH_PARALLEL = 8

#: a file's pending writes stay in memory up to a quarter of the mount's write memory, and at
#: least this much, unless the write memory is used up first (docs/PERFORMANCE.md)
MIN_SPILL_THRESHOLD = 64 * 1024 * 1024

#: content in memory larger than this is uploaded through a reader over the pieces written
#: (``set_file``: S3 reads it part by part), not joined into one copy first
UPLOAD_BY_READER_BYTES = 32 * 1024 * 1024

#: a closed file grown by truncate past this size is grown in a temp file (with a hole), not in memory
GROW_IN_MEMORY = 1024 * 1024

#: files the store checks (metadata) are checked at each write up to this size; larger ones at close
CHECKED_BYTES = 16 * 1024 * 1024


async def _written(content: Content, offset: int, data: bytes) -> bytes:
    """What ``content`` would hold after writing ``data`` at ``offset``."""
    old = await content.getvalue()
    pad = bytes(max(0, offset - len(old)))
    return old[:offset] + pad + bytes(data) + old[offset + len(data):]


def _too_big(exc: OSError, key: str, size: int) -> None:
    """A truncate its temp file refused (EFBIG: nothing changed) as the error the caller gets."""
    if exc.errno == errno.EFBIG:
        raise FileTooBig(f"{key!r}: {size} bytes is more than a temp file can hold") from None


class WriteBack:
    """The pending writes of one mount: their content, staging, upload, commit and abort."""

    def __init__(self, store: Store, opts: FsOptions, attrs: Attributes, handles: Handles):
        self.store = store
        self.attrs = attrs
        self.handles = handles
        self.spill_dir = opts.spill_dir
        limit = opts.write_memory
        self.write_memory = WriteMemory(default_cache_size() if limit is None else limit)
        threshold = opts.spill_threshold
        self.spill_threshold = max(MIN_SPILL_THRESHOLD, self.write_memory.limit // 4) if threshold is None else threshold
        #: big files sent in parts while they are being written
        self.early = EarlyUploads(store)
        #: ``(ino)``: the kernel's attributes of that file are out of date (set by the mount)
        self.attrs_changed: Callable[[int], None] | None = None
        #: closed temp files whose data is already sent under their final key
        self.staging = Staging(store, self.early)
        self._locks: dict[int, Lock] = {}
        #: ``(opener, ino, openers) -> bool``: is a close of a description opened by thread
        #: ``opener`` another process's (holders.py)? None: cannot tell, every close stores
        self.someone_elses_close: Callable[[int, int, list[int]], bool] | None = None
        self.stats = {"write.closes-not-storing": 0}
        #: the conditions of uploads, and the data of those another client got in before
        self.conflicts = Conflicts(store, self.store_content)

    def lock(self, node: Node) -> Lock:
        lock = self._locks.get(node.ino)
        if lock is None:
            lock = self._locks[node.ino] = Lock()
        return lock

    def forget(self, ino: int) -> None:
        """The inode is gone from the table."""
        self._locks.pop(ino, None)

    def deferred(self, node: Node) -> bool:
        """A never-stored temp file (zarr's ``.partial``) waits for its rename to be uploaded once
        (from memory, or streamed from its spill file)."""
        return node.pending and node.content is not None and is_temp_name(node.path)

    # ------------------------------------------------------------------ content

    def new_content(self, data: bytes, dirty: bool, base: str | None = None) -> Content:
        return Content(data, dirty=dirty, spill_threshold=self.spill_threshold, spill_dir=self.spill_dir,
                       memory=self.write_memory, base=base)

    @staticmethod
    def base_of(node: Node) -> str | None:
        """The version a content made now for ``node`` replaces: none for a file not stored yet."""
        return ABSENT if node.pending else (node.etag or None)

    async def content(self, node: Node) -> Content:
        """The node's writable content, loading the object on first use (O_RDWR rewrites): the
        version the mount knows (its upload replaces only that one), or, if that changed
        meanwhile, the current one."""
        if node.content is None:
            data = b"" if node.pending else await self._load(node)
            if node.content is None:
                node.content = self.new_content(data, dirty=False, base=self.base_of(node))
                await node.content.fit()
        return node.content

    async def _load(self, node: Node, rng: ByteRange | None = None) -> bytes:
        """The object's bytes (``rng`` of them) at the version the mount knows, or, if that
        changed meanwhile, at the current one, which the node then knows (what its upload replaces)."""
        try:
            data = await self.store.get_version(node.path, rng, node.etag or None)
        except Stale:
            self.attrs.record(node, await self.store.stat(node.path))
            data = await self.store.get_version(node.path, rng, node.etag or None)
        node.seen = node.etag
        return data

    async def keep_open_content(self, node: Node) -> None:
        """Before a file's object is deleted or replaced: open descriptors keep its bytes (POSIX)."""
        if node.open_count > 0 and not node.is_dir:
            await self.content(node)

    async def write(self, node: Node, offset: int, data: bytes) -> None:
        content = await self.content(node)
        if checks_content(self.store, node.path) and max(content.size, offset + len(data)) <= CHECKED_BYTES:
            try:
                await check_content(self.store, node.path, await _written(content, offset, data))
            except NczfsError as exc:
                # refused content: the file is not stored at close either (the store keeps its object)
                content.write_error = content.write_error or OSError(exc.errno, str(exc))
                raise
        self.early.writing(node.ino, offset, len(data))
        try:
            await content.write(offset, data)
        except OSError as exc:
            self.log_lost_write(node.path, exc)
            raise
        self.attrs.touched(node)
        if self.early.watches(node.ino, content) and not node.detached:
            key = final_name(node.path) if self.deferred(node) else node.path  # a temp file's: its final name
            if key is not None:
                self.early.wrote(node.ino, key, content)

    async def truncate(self, node: Node, size: int) -> None:
        """Cut or extend an open file's content (or one being written)."""
        if node.content is None and size == 0:
            node.content = self.new_content(b"", dirty=True, base=self.base_of(node))
        content = await self.content(node)
        try:
            await content.truncate(size)
        except OSError as exc:
            _too_big(exc, node.path, size)
            self.log_lost_write(node.path, exc)
            raise
        self.attrs.touched(node)

    async def rewrite_truncated(self, node: Node, size: int) -> ObjectInfo:
        """A stored object cut or extended to ``size`` and stored again: what is kept of it is
        read into a file buffer, which a big size sends to a temp file with a hole for the rest
        (nothing but the old bytes is ever held in memory), and stored from there."""
        old = b"" if size == 0 else await self._load(node, ByteRange(0, size))
        # past what it holds now, the content goes to a temp file, where the rest is a hole
        content = Content(old, dirty=True, spill_threshold=min(self.spill_threshold, max(len(old), GROW_IN_MEMORY)),
                          spill_dir=self.spill_dir, memory=self.write_memory, base=self.base_of(node))
        try:
            try:
                await content.truncate(size)
            except OSError as exc:
                _too_big(exc, node.path, size)
                raise
            return await self.conflicts.guarded(content, node.path, self.conflicts.condition(content), self.store_content)
        finally:
            content.close()

    def log_lost_write(self, key: str, exc: OSError) -> None:
        log.error("write to %r failed: %s (temp files go to %s); the file will not be stored until truncated to "
                  "nothing", key, exc.strerror or exc, self.spill_dir or tempfile.gettempdir())

    # ------------------------------------------------------------------ closes

    async def flush(self, h: FileHandle) -> None:
        """A close (FLUSH): the writer's stores the file (a temp file's stages it)."""
        node = h.node
        if not node.unstored:
            return
        if not await self._closer_is_the_writer(h):
            self.stats["write.closes-not-storing"] += 1
            return
        content = node.content
        assert content is not None  # unstored, and the handle h holds it (release frees it)
        if content.failed_version == content.version and isinstance(content.failure, OutcomeUnknown):
            # unchanged since its last upload (an fsync's) got no answer at all: the same answer at once,
            # not another round of attempts against a store that just answered none (S3 stopped: minutes)
            raise content.failure
        if not self.deferred(node):
            await self.upload(node)
        else:
            await self._stage(node)

    async def _closer_is_the_writer(self, h: FileHandle) -> bool:
        """May this close (FLUSH) be the writer's, which stores the file? Not if the descriptor
        was opened read-only (a reader's close does not store another's half-written data), nor
        if the process that opened it still holds it (holders.py): the close is of a copy a
        child inherited (fork, exec) or of a duplicate; the opener's own close stores the file,
        and the last close of all (release) does if the opener never closes it."""
        if not h.writable:
            return False
        if not h.opener or self.someone_elses_close is None:
            return True
        openers = [o.opener for o in self.handles.on(h.node)]
        return not await run_blocking(self.someone_elses_close, h.opener, h.node.ino, openers)

    async def release(self, h: FileHandle) -> None:
        """The last close of a descriptor (its open count already taken down): what no close
        stored is stored now, and the content is freed once no descriptor is open."""
        node = h.node
        content = node.content
        failed = False
        # a reader's release leaves a writer's file to the writer (or to the last release of all)
        if (content is not None and node.unstored and not self.deferred(node)
                and (h.writable or node.open_count == 0)):
            failed = await self._store_at_release(node, content)
        if node.open_count == 0 and node.content is not None and not (self.deferred(node) and not node.detached):
            self.early.drop(node.ino)
            node.content.close()
            node.content = None
            node.fetched = -1.0
            if failed and node.pending:
                self.attrs.table.set_pending(node, False)
                self.attrs.table.detach(node)

    async def _store_at_release(self, node: Node, content: Content) -> bool:
        """Store a released file's content; True if it is not stored (and that is logged)."""
        # the close() before this release already tried and reported a failure: retrying
        # here could store data its writer was told was not stored, at a random later time
        if content.failed_version != content.version:
            try:
                await self.upload(node)
                return False
            except Exception:  # noqa: BLE001 - logged below; no caller is left to tell
                pass
        if isinstance(content.failure, Conflict):
            pass  # logged with where its data is kept
        elif isinstance(content.failure, OutcomeUnknown):
            log.error("%r: data written through the mount may or may not have been stored: the store never "
                      "answered its upload (outcome unknown; the object may still change to it)", node.path)
        else:
            log.error("%r: data written through the mount was not stored and is lost", node.path)
        return True

    # ------------------------------------------------------------------ uploads

    async def upload(self, node: Node) -> None:
        """Send a node's pending content to the store as one object; errors propagate."""
        async with self.lock(node):
            content = node.content
            if content is None or not node.unstored:
                return
            version = content.version
            try:
                info = await self._send(node, content)
            except Exception as exc:
                content.failed_version, content.failure = version, exc
                log.error("write of %r failed: %s", node.path, str(exc) or repr(exc))
                raise
            content.uploaded_version = version
            log.debug("stored %r: %d bytes", node.path, info.size)
            self.attrs.kept_mtime(node, info)
            self.attrs.stored(node, info)
            self.handles.repin(node)
            if node.mtime_ns < info.mtime_ns:  # the store's time of the upload: what a new mount shows
                node.mtime_ns = info.mtime_ns
                if self.attrs_changed is not None:  # the kernel holds create's or the last write's mtime
                    self.attrs_changed(node.ino)
            await self.attrs.save(node, info.meta)

    async def _send(self, node: Node, content: Content) -> ObjectInfo:
        """Store the content under each name of the node: the early upload completed, or whole."""
        if content.write_error is not None:
            raise WriteLost(node.path, content.write_error)

        async def send(content: Content, key: str, condition: str | None) -> ObjectInfo:
            return await self.early.finish(node.ino, key, content, condition) or await self.store_content(content, key, condition)

        with self.attrs.sent_with_upload(node):
            info = await self.conflicts.guarded(content, node.path, self.conflicts.condition(content), send)
        for other in self.attrs.other_names(node):  # a hard link kept by the mount: a copy per name
            await self.store.copy(node.path, other)
        return info

    async def store_content(self, content: Content, key: str, if_version: str | None = None) -> ObjectInfo:
        """Store ``content`` as the object ``key`` (``if_version``: as ``Store.set``): from memory, or
        read part by part from its spill file or (large) its pieces in memory (S3: a multipart upload)."""
        if content.spilled or content.size > UPLOAD_BY_READER_BYTES:
            f, size = await content.open_reader()
            with f:
                return await self.store.set_file(key, f, size, if_version=if_version)
        return await self.store.set(key, await content.getvalue(), if_version=if_version)

    def pending_bytes(self, nodes: list[Node]) -> int:
        """Bytes of ``nodes``' files written and not yet stored (``write.bytes-pending``)."""
        return sum(n.content.size for n in nodes if n.content is not None and n.unstored)

    async def flush_all(self, nodes: list[Node], retry_failed: bool = True) -> list[str]:
        """Upload every file of ``nodes`` with pending writes, :data:`FLUSH_PARALLEL` at once (a
        stalled store costs one round of retries, not one a file); returns the keys that could not
        be stored. ``retry_failed=False``: a file whose upload failed with its present content is
        reported without being tried again (a shutdown's second flush, after the signal's)."""
        pending = [n for n in nodes if n.unstored]
        stored: set[int] = set()
        limit = trio.CapacityLimiter(FLUSH_PARALLEL)

        async def store(node: Node) -> None:
            async with limit:
                try:
                    await self.upload(node)
                except Exception:  # noqa: BLE001 - upload logged it; the key is reported below
                    return
                stored.add(node.ino)

        async with trio.open_nursery() as nursery:
            for node in pending:
                assert node.content is not None
                if retry_failed or node.content.failed_version != node.content.version:
                    nursery.start_soon(store, node)
        failed = [n.path for n in pending if n.ino not in stored]
        try:
            await self.store.sync()
        except Exception as exc:
            log.error("%s: %s", describe(self.store), str(exc) or repr(exc))
            failed.append(describe(self.store))
        return failed

    # ------------------------------------------------------------------ temp files: stage, commit, abort

    async def _stage(self, node: Node) -> None:
        """A closed temp file whose name tells its final one (zarr's ``.partial``): its data is
        sent now, invisibly (staging.py). Best effort: if the store cannot, the rename uploads it."""
        final = final_name(node.path)
        if final is None:
            return
        async with self.lock(node):
            content = node.content
            if content is None or node.detached or not self.deferred(node) or content.write_error is not None:
                return
            await self.staging.stage(node.ino, content, final)

    async def store_as(self, node: Node, key: str, condition: str | None = None) -> None:
        """Upload a closed, never-stored file under ``key`` (its rename target), or complete the
        upload its close staged there, only while ``key`` is version ``condition``; errors fail
        the rename (a refused one's data is kept beside ``key``: conflicts.py)."""
        async with self.lock(node):
            content = node.content
            assert content is not None

            async def send(content: Content, key: str, condition: str | None) -> ObjectInfo:
                return await self.staging.commit(node.ino, node.path, content, key, self.store_content, condition)

            try:
                info = await self.conflicts.guarded(content, key, condition, send)
            except Exception as exc:
                log.error("write of %r (renamed from %r) failed: %s", key, node.path, str(exc) or repr(exc))
                raise
            log.debug("stored %r (renamed from %r): %d bytes", key, node.path, info.size)
            node.mtime_ns = max(node.mtime_ns, info.mtime_ns)
            self.attrs.stored(node, info)
            content.close()
            node.content = None

    async def drop_staged(self, ino: int) -> None:
        """Abort what a closed temp file staged (unlinked, or staged anew)."""
        await self.staging.drop(ino)
