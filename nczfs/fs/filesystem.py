"""Filesystem logic over a Store: every FUSE operation, with plain dataclasses in and out.

Nothing in this package imports pyfuse3; ``ops.Operations`` is a thin adapter. Errors are
nczfs exceptions and reach the kernel through ``errors.to_errno``. This module holds the
operations on open files (open, create, read, write, flush, fsync, release) and setattr;
namespace.py and listing.py those on names; writeback.py how written files reach the store.

State kept in memory for the mount's life (the store keeps only objects and, for some
backends, directories): files being written (``Node.content``) until they are uploaded at
flush/fsync/close, files created but not uploaded yet (``Node.pending``), directories made
with mkdir on stores that cannot hold empty ones (``local_dirs``), and chmod/chown/utimens
results (``InodeTable.overrides``).
"""

from __future__ import annotations

import os
import stat
import time
from typing import Callable, cast

from nczfs.toolbox.errors import Exists, FileTooBig, InvalidArgument, IsADirectory, NotSupported, Stale
from nczfs.fs.attrs import SETTABLE, Attr, Attributes, Caller, SetattrRequest
from nczfs.fs.content import WriteMemory
from nczfs.fs.early_upload import EarlyUploads
from nczfs.fs.handles import FileHandle, Handles, ReadHandle, WriteHandle
from nczfs.fs.inodes import InodeTable, Node
from nczfs.fs.localdirs import LocalDirs
from nczfs.fs.namespace import Namespace
from nczfs.fs.options import FsOptions
from nczfs.fs.writeback import WriteBack
from nczfs.store.base import Store
from nczfs.store.capabilities import HoldsBytes
from nczfs.store.values import ABSENT, ByteRange, FsStats
from nczfs.store import optional

#: the largest file whose bytes, held by the store at its open, go to the kernel's page cache then
PAGES_AT_OPEN = 256 * 1024


class Filesystem(Namespace):
    def __init__(self, store: Store, options: FsOptions | None = None):
        self.store = store
        self.opts = options or FsOptions()
        self.table = InodeTable()
        #: directories made by mkdir (or left empty by unlink/rename) on stores without directories
        self.local_dirs = LocalDirs()
        self.handles = Handles()
        self.attrs = Attributes(store, self.table, self.opts)
        self.writeback = WriteBack(store, self.opts, self.attrs, self.handles)
        #: the object version each inode had when it was last opened (keep_cache)
        self._opened_etag = {}

    # ------------------------------------------------------------------ what the mount reads and sets

    @property
    def early(self) -> EarlyUploads:
        return self.writeback.early

    @property
    def write_memory(self) -> WriteMemory:
        return self.writeback.write_memory

    @property
    def spill_threshold(self) -> int:
        return self.writeback.spill_threshold

    @property
    def stats(self) -> dict[str, int]:
        """The write path's counters; ``write.overwrite-checked``: 1 where writes replace only the
        version they started from (conflicts.py), 0 where the last writer wins;
        ``write.deletes-checked``: 1 where deletes remove only the version the mount saw."""
        return {**self.writeback.stats, **self.writeback.conflicts.stats,
                "write.overwrite-checked": int(self.store.capabilities.checks_writes),
                "write.deletes-checked": int(self.store.capabilities.checks_deletes)}

    @property
    def someone_elses_close(self) -> Callable[[int, int, list[int]], bool] | None:
        """``(opener, ino, openers) -> bool``: is a close of a description opened by thread
        ``opener`` another process's (holders.py)? None: cannot tell, every close stores."""
        return self.writeback.someone_elses_close

    @someone_elses_close.setter
    def someone_elses_close(self, check: Callable[[int, int, list[int]], bool] | None) -> None:
        self.writeback.someone_elses_close = check

    @property
    def attrs_changed(self) -> Callable[[int], None] | None:
        """``(ino)``: the kernel's attributes of that file (its size, its mtime) are out of date
        (the mount: fuse/notifier.py)."""
        return self.writeback.attrs_changed

    @attrs_changed.setter
    def attrs_changed(self, tell: Callable[[int], None] | None) -> None:
        self.writeback.attrs_changed = tell

    # ------------------------------------------------------------------ attributes

    async def setattr(self, ino: int, req: SetattrRequest, fh: int | None = None) -> Attr:
        node = self.table[ino]
        if req != SetattrRequest():  # it changes something
            self._writable(node.path)
        if req.size is not None:
            if node.is_dir:
                raise IsADirectory(f"{node.path!r}: is a directory")
            await self._truncate(node, req.size)
        changed = {f: getattr(req, f) for f in SETTABLE if getattr(req, f) is not None}
        if changed:
            if "mode" in changed:
                changed["mode"] = stat.S_IMODE(changed["mode"])
            await self.attrs.set(node, changed)
        return self.attrs.of(node)

    async def _truncate(self, node: Node, size: int) -> None:
        if size < 0:
            raise InvalidArgument(f"{node.path!r}: negative size")
        limit = self.store.capabilities.max_object_size
        if limit is not None and size > limit:
            raise FileTooBig(f"{node.path!r}: {size} bytes is more than the {limit} bytes an object can hold")
        self.writeback.early.drop(node.ino)
        if node.open_count > 0 or node.content is not None:
            await self.writeback.truncate(node, size)
            return
        # not open: change the object in the store right away; in place where it can (a local
        # file: extended with a hole), else rewritten whole, grown through a sparse temp file
        try:
            info = await self.writeback.conflicts.truncate(node.path, size, node.seen or node.etag)
        except NotSupported:
            info = await self.writeback.rewrite_truncated(node, size)
        self.attrs.record(node, info)
        node.seen = info.etag  # the mount's own version
        self.attrs.clear_mtime(node)
        await self.attrs.save(node)

    # ------------------------------------------------------------------ open files

    async def open(self, ino: int, flags: int, pid: int = 0) -> int:
        node = self.table[ino]
        if node.is_dir:
            raise IsADirectory(f"{node.path!r}: is a directory")
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        if writable or flags & os.O_TRUNC:
            self._writable(node.path)
        if not node.held and not node.detached and not self.attrs.fresh(node):
            await self.getattr(ino)  # fail now if the object vanished
        node.open_count += 1
        fh = self.handles.add(self._pinned(node, bool(writable or flags & os.O_TRUNC), writable, pid))
        if flags & os.O_TRUNC:  # libfuse asks for atomic O_TRUNC: the kernel sends no setattr
            try:
                await self._truncate(node, 0)
            except BaseException:
                await self.release(fh)
                raise
        return fh

    def _pinned(self, node: Node, writing: bool, writable: bool, pid: int) -> FileHandle:
        """A new handle of ``node``, pinned to the version it reads; ``writing``: it may change
        the file (opened for writing, or truncated)."""
        stored = not node.held and not node.detached and bool(node.etag)
        reading = stored and not writing
        keep = reading and self._opened_etag.get(node.ino) == node.etag
        first = node.ino not in self._opened_etag  # the kernel has no pages of it (forget drops the entry)
        # the kernel's pages of a file opened for writing may hold bytes that are never stored
        # (a refused upload): the next open does not keep them
        self._opened_etag[node.ino] = node.etag if reading else ""
        if reading:
            node.seen = node.etag
        # with keep_cache the kernel may hand out its pages of this version through the new
        # descriptor at once: it is pinned to that version as if it had read them
        return FileHandle.of(writable)(node, "" if node.pending else node.etag, keep_cache=keep, served=keep,
                                       opener=pid, pages_ours=reading and (keep or first))

    def keeps_cache(self, fh: int) -> bool:
        """Whether the kernel may keep the pages it cached for this file (unchanged since the last open)."""
        h = self.handles.get(fh)
        return isinstance(h, FileHandle) and h.keep_cache

    async def pages_at_open(self, fh: int) -> bytes | None:
        """The whole file a handle just opened (and not yet answered) reads, for the kernel's page
        cache, where the store holds it without fetching (:class:`HoldsBytes`), or will once a
        fetch of it already on its way (a read ahead) has ended: the read would wait for that
        fetch too. Only a small stored file opened read-only whose pages in the kernel can only
        be of its version, and that has no other handle, so that no read of it is in flight whose
        page locks the kernel's store would wait on (the kernel releases a file only after its
        last read, and an mmap keeps it open). Given, the adapter calls :meth:`pages_stored`, or
        answers the open as before."""
        store = self._pages_store(fh)
        if store is None:
            return None
        node = self.handles.file(fh).node
        data = store.held_object(node.path, node.etag, node.size)
        if data is not None or not await store.object_arrives(node.path, node.etag):
            return data
        # another open may have come while the fetch ended: its reads' page locks
        return None if self._pages_store(fh) is None else store.held_object(node.path, node.etag, node.size)

    def _pages_store(self, fh: int) -> HoldsBytes | None:
        """The store that may hold the file of ``fh`` for :meth:`pages_at_open`, if it may be handed over."""
        h = self.handles.get(fh)
        if not isinstance(h, ReadHandle) or not h.pages_ours or not h.etag:
            return None
        node = h.node
        if (node.open_count != 1 or node.held or node.detached or node.etag != h.etag
                or not 0 < node.size <= PAGES_AT_OPEN or not optional.offers(self.store, HoldsBytes)):
            return None
        return cast(HoldsBytes, self.store)

    def pages_stored(self, fh: int) -> None:
        """The kernel's page cache holds the whole file, of this handle's version, and may hand
        it out at once: the handle is pinned to it as if it had read it, and keeps those pages."""
        h = self.handles.file(fh)
        h.served = h.keep_cache = True

    async def create(self, parent_ino: int, name: str, mode: int, flags: int, pid: int = 0,
                     who: Caller | None = None) -> tuple[int, Attr]:
        parent = self.table[parent_ino]
        path = self._new_path(parent, name)
        self._writable(path)
        existing = await self._find(path)
        if existing is not None:
            if flags & os.O_EXCL:
                raise Exists(f"{path!r}: exists")
            if existing.is_dir:
                raise IsADirectory(f"{path!r}: is a directory")
            fh = await self.open(existing.ino, flags, pid)  # open() handles O_TRUNC
            existing.lookups += 1
            return fh, self.attrs.of(existing)
        node = self.table.node_for(path, False, stat.S_IFREG)
        node.detached = False
        self.table.set_pending(node, True)
        node.meta = None
        node.content = self.writeback.new_content(b"", dirty=True, base=ABSENT)
        node.size, node.mtime_ns, node.fetched = 0, time.time_ns(), self.attrs.now()
        uid, gid, _ = self.attrs.owner(who, parent)
        self.attrs.initial(path, stat.S_IFREG, mode, uid, gid)
        self.attrs.dir_changed(parent)
        node.lookups += 1
        node.open_count += 1
        self._opened_etag[node.ino] = ""  # its writes may leave pages in the kernel
        return self.handles.add(WriteHandle(node, opener=pid)), self.attrs.of(node)

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        h = self.handles.file(fh)
        node = h.node
        if node.content is not None:
            return await node.content.read(offset, size)
        if node.pending or size == 0:
            return b""
        asked = size
        if h.etag and h.etag == node.etag:  # the version read is the one whose size is known
            if offset >= node.size:
                return b""
            # a read across the end (direct I/O passes the reader's sizes on) asks for no bytes
            # past it: a block past the end would cost a GET and a HEAD
            size = min(size, node.size - offset)
        # pinned to the version seen at open: a remote rewrite gives ESTALE, never a mix of two
        if h.etag and node.etag and h.etag != node.etag:  # a newer version is known
            self._move_to_current(h)
        try:
            data = await self.store.get_version(node.path, ByteRange(offset, offset + size), h.etag or None)
        except Stale:
            if h.served:
                raise
            data = await self._read_current(h, offset, asked)
        h.served = True
        if h.etag != node.etag:  # the version changed meanwhile: the next open drops the kernel's pages
            self._opened_etag[node.ino] = ""  # not absent: the kernel holds pages of it
        return data

    def _move_to_current(self, h: FileHandle) -> None:
        """A handle whose version is no longer the object's reads the current one, if it has
        served nothing yet; else ESTALE."""
        if h.served:
            # not the old version's bytes either: they would enter the kernel's pages of
            # the file, which every descriptor shares
            raise Stale(f"{h.node.path!r}: the object changed in the store while open")
        h.etag = h.node.etag
        self._switched_version(h.node)

    async def _read_current(self, h: FileHandle, offset: int, size: int) -> bytes:
        """The object changed under a read: a handle that has read nothing yet may as well read the
        current version (``size`` bytes at ``offset`` of it, at most)."""
        node = h.node
        self.attrs.record(node, await self.store.stat(node.path))
        h.etag = node.etag
        self._switched_version(node)
        size = min(size, node.size - offset)  # of the new version
        if size <= 0:
            return b""
        return await self.store.get_version(node.path, ByteRange(offset, offset + size), h.etag or None)

    def _switched_version(self, node: Node) -> None:
        """A descriptor that had read nothing yet moved to the object's current version: the
        kernel may still hold the old version's size, and reads no further than that."""
        node.seen = node.etag  # the version read through the mount now
        if self.attrs_changed is not None:
            self.attrs_changed(node.ino)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        h = self.handles.file(fh)
        if not h.writable:
            raise InvalidArgument(f"{h.node.path!r}: not open for writing")
        await self.writeback.write(h.node, offset, data)
        return len(data)

    async def flush(self, fh: int) -> None:
        await self.writeback.flush(self.handles.file(fh))

    async def fsync(self, fh: int) -> None:
        await self.writeback.upload(self.handles.file(fh).node)
        await self.store.sync()

    async def release(self, fh: int) -> None:
        h = self.handles.pop(fh)
        if not isinstance(h, FileHandle):
            return
        h.node.open_count -= 1
        await self.writeback.release(h)
        self.table.release(h.node)

    # ------------------------------------------------------------------ whole mount

    async def statfs(self) -> FsStats:
        st = await optional.statfs(self.store)
        if st is None:
            big = 1 << 50
            st = FsStats(big, big, 1 << 32, 1 << 32)
        return st

    def pending_bytes(self) -> int:
        """Bytes of files written and not yet stored (``write.bytes-pending``)."""
        return self.writeback.pending_bytes(list(self.table.by_ino.values()))

    async def flush_all(self, retry_failed: bool = True) -> list[str]:
        """Upload every file with pending writes (writeback.py); returns the keys that could not
        be stored. ``retry_failed=False``: a file whose upload failed with its present content is
        reported without being tried again (a shutdown's second flush, after the signal's)."""
        return await self.writeback.flush_all(list(self.table.by_ino.values()), retry_failed)
