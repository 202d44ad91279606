"""The content of a file being written: in memory, spilled to a temp file past a threshold.

One :class:`Content` per inode is shared by every handle open on it, so that reads through
one descriptor see writes through another (as the page cache would). It reaches the store
as one object at flush/fsync/close. A file spills when it grows past its own threshold, or
when growing in memory would take the pending writes of all files past the mount's
:class:`WriteMemory`.
"""

from __future__ import annotations

import bisect
import errno
import io
import itertools
import os
import tempfile
import weakref
from typing import BinaryIO, cast

import trio

from nczfs.store.threads import run_blocking


class WriteMemory:
    """The most bytes of pending writes that all files of a mount together keep in memory."""

    def __init__(self, limit: int):
        self.limit = limit
        self._used = 0
        #: the most bytes held at once so far, and the files that went to a temp file
        self.peak = 0
        self.spills = 0

    def used(self) -> int:
        return self._used

    def allows(self, growth: int) -> bool:
        return growth <= 0 or self._used + growth <= self.limit

    def charge(self, held: _Held, size: int) -> None:
        """A content now holds ``size`` bytes in memory (``held``: what it held until now)."""
        self._used += size - held.bytes
        held.bytes = size
        self.peak = max(self.peak, self._used)

    def counters(self) -> dict[str, int]:
        return {"write.bytes-in-memory": self._used, "write.bytes-in-memory-peak": self.peak,
                "write.memory-limit": self.limit, "write.spilled-files": self.spills}


class _Held:
    """Bytes one content counts in its WriteMemory (apart from the content, so that a content
    dropped without close() can be uncounted when it is collected)."""

    bytes = 0


class Content:
    """In memory, the content is either the list of the byte strings written one after another
    (what a sequential writer such as zarr produces: kept as received, joined once into the
    bytes that are uploaded) or, once a write lands anywhere but at the end, a truncate to a
    non-zero size or a read comes in between, one bytearray."""

    def __init__(
        self,
        data: bytes = b"",
        *,
        dirty: bool,
        spill_threshold: int = 64 * 1024 * 1024,
        spill_dir: str | None = None,
        memory: WriteMemory | None = None,
        base: str | None = None,
    ):
        self._parts: list[bytes] | None = [bytes(data)] if data else []
        self._mem: bytearray | None = None
        self._file: BinaryIO | None = None
        self._size = len(data)
        self._threshold = spill_threshold
        self._spill_dir = spill_dir
        #: set while the content is being moved to its temp file
        self._spilling: trio.Event | None = None
        self._closed = False
        #: the object version the content replaces: the ETag it was loaded or opened at, or last
        #: stored as; ABSENT for a file created where no object was; None: not known (its upload
        #: is unconditional). conflicts.py
        self.base = base
        #: bumped on every change; the flusher compares it to what it uploaded
        self.version = 0
        self.uploaded_version = -1 if dirty else 0
        #: the version whose upload last failed (that failure was already reported to a caller),
        #: and why
        self.failed_version: int | None = None
        self.failure: Exception | None = None
        #: why a write or truncate failed part way (its temp file could not take it, or the store
        #: refused what it would have made): the content no longer holds what its writer wrote,
        #: and is not stored until truncated to nothing
        self.write_error: OSError | None = None
        self._memory = memory
        self._held = _Held()
        if memory is not None:
            weakref.finalize(self, memory.charge, self._held, 0)
            self._account()

    @property
    def size(self) -> int:
        return self._size

    @property
    def in_memory(self) -> int:
        """Bytes of content held in memory (0 once spilled or closed)."""
        return self._size if self._parts is not None or self._mem is not None else 0

    def _account(self) -> None:
        """Tell the mount's WriteMemory what the content holds in memory now."""
        if self._memory is not None:
            self._memory.charge(self._held, self.in_memory)

    def _must_spill(self, size: int) -> bool:
        """Would holding ``size`` bytes in memory pass this file's threshold or the mount's budget?"""
        if self._file is not None:
            return False
        return size > self._threshold or (self._memory is not None and not self._memory.allows(size - self._size))

    async def fit(self) -> None:
        """Content loaded whole (to rewrite an object in place) goes to a temp file if it is
        more than this file's threshold or the mount's budget allows."""
        await self._settled()
        if not self.in_memory:
            return
        if self._size > self._threshold or (self._memory is not None and self._memory.used() > self._memory.limit):
            await self._spill()

    @property
    def dirty(self) -> bool:
        return self.version != self.uploaded_version

    def _buffer(self) -> bytearray:
        """The content as one bytearray, from now on."""
        if self._mem is None:
            assert self._parts is not None
            self._mem, self._parts = bytearray(b"".join(self._parts)), None
        return self._mem

    async def _spill(self) -> None:
        """Move the content to a temp file. Until it is there, the content stays in memory and
        every other operation on it waits (:meth:`_settled`); if it cannot be written, it stays."""
        done = self._spilling = trio.Event()
        try:
            pieces = self._parts if self._parts is not None else [self._mem]
            f = await run_blocking(_spill_file, self._spill_dir, pieces)
            if self._closed:
                f.close()
                return
            self._file, self._parts, self._mem = f, None, None
            self._account()
            if self._memory is not None:
                self._memory.spills += 1
        finally:
            self._spilling = None
            done.set()

    async def _settled(self) -> None:
        """Wait while the content is being moved to its temp file."""
        while self._spilling is not None:
            await self._spilling.wait()

    async def write(self, offset: int, data: bytes) -> None:
        await self._settled()
        end = offset + len(data)
        try:
            if self._must_spill(end):
                await self._spill()
            if self._file is not None:
                await run_blocking(_pwrite, self._file, offset, data)
        except OSError as exc:
            self.write_error = self.write_error or exc
            raise
        if self._file is None:
            if self._parts is not None and offset == self._size:
                self._parts.append(bytes(data))  # no copy of the bytes a FUSE write brings
            else:
                mem = self._buffer()
                if offset > len(mem):
                    mem.extend(bytes(offset - len(mem)))
                mem[offset:end] = data
        self._size = max(self._size, end)
        self.version += 1
        self._account()

    async def read(self, offset: int, size: int) -> bytes:
        await self._settled()
        if offset >= self._size:
            return b""
        size = min(size, self._size - offset)
        if self._file is not None:
            return await run_blocking(_pread, self._file, offset, size)
        return bytes(memoryview(self._buffer())[offset : offset + size])

    async def read_part(self, offset: int, size: int) -> bytes:
        """Like :meth:`read`, without joining what was written sequentially into one buffer
        (a part of a file still being appended to: the writes go on as they were)."""
        await self._settled()
        if self._parts is None:
            return await self.read(offset, size)
        reader = PiecesReader(list(self._parts))
        reader.seek(offset)
        return reader.read(size)

    async def truncate(self, size: int) -> None:
        await self._settled()
        try:
            if self._must_spill(size):
                await self._spill()
            if self._file is not None:
                await run_blocking(self._file.truncate, size)
        except OSError as exc:
            if exc.errno not in (errno.EFBIG, errno.EINVAL):  # those refused the size and changed nothing
                self.write_error = self.write_error or exc
            raise
        if size == 0:
            self.write_error = None  # nothing is left of what a failed write should have changed
        if self._file is None:
            if size == 0:
                self._parts, self._mem = [], None
            elif size != self._size:
                mem = self._buffer()
                if size < len(mem):
                    del mem[size:]
                else:
                    mem.extend(bytes(size - len(mem)))
        self._size = size
        self.version += 1
        self._account()

    @property
    def spilled(self) -> bool:
        return self._file is not None

    async def open_reader(self) -> tuple[BinaryIO, int]:
        """A private read-only file object on the content, and its size, for uploads that read
        it part by part: the temp file through its own descriptor, or the bytes in memory as
        they are now (what was written sequentially is not joined into one copy)."""
        await self._settled()
        if self._file is not None:
            size = self._size
            return await run_blocking(open, f"/proc/self/fd/{self._file.fileno()}", "rb"), size
        if self._parts is not None:
            # typeshed counts no io.RawIOBase as a BinaryIO; the upload only reads, seeks and closes it
            return cast(BinaryIO, PiecesReader(list(self._parts))), self._size
        assert self._mem is not None
        return io.BytesIO(bytes(self._mem)), self._size

    async def getvalue(self) -> bytes:
        """The whole content, as bytes (immutable: a store or cache may keep them). Written
        sequentially, that is the one join of what was written, done once per version."""
        await self._settled()
        if self._file is not None:
            return await run_blocking(_pread, self._file, 0, self._size)
        if self._parts is None:
            assert self._mem is not None
            return bytes(self._mem)
        if len(self._parts) != 1:
            self._parts = [b"".join(self._parts)]
        return self._parts[0]

    def close(self) -> None:
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None
        self._parts = self._mem = None
        self._account()


class PiecesReader(io.RawIOBase):
    """A read-only, seekable file object over byte strings laid end to end, read without
    joining them first: a read of ``n`` bytes copies just those."""

    def __init__(self, pieces: list[bytes]):
        self._pieces = pieces
        #: where each piece starts, and (last) the size
        self._starts = list(itertools.accumulate((len(p) for p in pieces), initial=0))
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._starts[-1]}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._starts[-1] if size is None or size < 0 else min(self._pos + size, self._starts[-1])
        out = []
        i = bisect.bisect_right(self._starts, self._pos) - 1
        while self._pos < end:
            piece, start = self._pieces[i], self._starts[i]
            take = memoryview(piece)[self._pos - start : min(end - start, len(piece))]
            out.append(take)
            self._pos += len(take)
            i += 1
        return b"".join(out)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]  # RawIOBase's Buffer: what callers pass is one of these
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _spill_file(spill_dir: str | None, pieces: list[bytes] | list[bytearray]) -> BinaryIO:
    """A new temp file holding ``pieces``, one after another (none left behind on failure)."""
    # unbuffered: a streaming upload reads the file through its own descriptor
    f = tempfile.TemporaryFile(dir=spill_dir, prefix="nczfs-write-", buffering=0)
    try:
        _pwrite_all(f, pieces)
    except BaseException:
        f.close()
        raise
    return f


def _pwrite_all(f: BinaryIO, pieces: list[bytes] | list[bytearray]) -> None:
    offset = 0
    for piece in pieces:
        _pwrite(f, offset, piece)
        offset += len(piece)


def _pwrite(f: BinaryIO, offset: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(f.fileno(), view, offset)
        view, offset = view[n:], offset + n


def _pread(f: BinaryIO, offset: int, size: int) -> bytes:
    parts = []
    while size > 0:
        chunk = os.pread(f.fileno(), size, offset)
        if not chunk:
            break
        parts.append(chunk)
        offset, size = offset + len(chunk), size - len(chunk)
    return b"".join(parts)
