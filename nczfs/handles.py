"""The content of a file being written: in memory, spilled to a temp file past a threshold.

One :class:`Content` per inode is shared by every handle open on it, so that reads through
one descriptor see writes through another (as the page cache would). It reaches the store
as one object at flush/fsync/close.
"""

from __future__ import annotations

import os
import tempfile
from typing import BinaryIO

from nczfs.threads import run_blocking


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
    ):
        self._parts: list[bytes] | None = [bytes(data)] if data else []
        self._mem: bytearray | None = None
        self._file: BinaryIO | None = None
        self._size = len(data)
        self._threshold = spill_threshold
        self._spill_dir = spill_dir
        #: bumped on every change; the flusher compares it to what it uploaded
        self.version = 0
        self.uploaded_version = -1 if dirty else 0
        #: the version whose upload last failed (that failure was already reported to a caller)
        self.failed_version: int | None = None

    @property
    def size(self) -> int:
        return self._size

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
        # unbuffered: a streaming upload reads the file through its own descriptor
        f = tempfile.TemporaryFile(dir=self._spill_dir, prefix="nczfs-write-", buffering=0)
        pieces = self._parts if self._parts is not None else [self._mem]
        self._parts = self._mem = None
        await run_blocking(_pwrite_all, f, pieces)
        self._file = f

    async def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if self._file is None and end > self._threshold:
            await self._spill()
        if self._file is not None:
            await run_blocking(_pwrite, self._file, offset, data)
        elif self._parts is not None and offset == self._size:
            self._parts.append(bytes(data))  # no copy of the bytes a FUSE write brings
        else:
            mem = self._buffer()
            if offset > len(mem):
                mem.extend(bytes(offset - len(mem)))
            mem[offset:end] = data
        self._size = max(self._size, end)
        self.version += 1

    async def read(self, offset: int, size: int) -> bytes:
        if offset >= self._size:
            return b""
        size = min(size, self._size - offset)
        if self._file is not None:
            return await run_blocking(_pread, self._file, offset, size)
        return bytes(memoryview(self._buffer())[offset : offset + size])

    async def truncate(self, size: int) -> None:
        if self._file is None and size > self._threshold:
            await self._spill()
        if self._file is not None:
            await run_blocking(self._file.truncate, size)
        elif size == 0:
            self._parts, self._mem = [], None
        elif size != self._size:
            mem = self._buffer()
            if size < len(mem):
                del mem[size:]
            else:
                mem.extend(bytes(size - len(mem)))
        self._size = size
        self.version += 1

    @property
    def spilled(self) -> bool:
        return self._file is not None

    async def open_reader(self) -> BinaryIO:
        """A private read-only file object on the spilled content (own file offset), for streaming uploads."""
        assert self._file is not None
        return await run_blocking(open, f"/proc/self/fd/{self._file.fileno()}", "rb")

    async def getvalue(self) -> bytes:
        """The whole content, as bytes (immutable: a store or cache may keep them). Written
        sequentially, that is the one join of what was written, done once per version."""
        if self._file is not None:
            return await run_blocking(_pread, self._file, 0, self._size)
        if self._parts is None:
            assert self._mem is not None
            return bytes(self._mem)
        if len(self._parts) != 1:
            self._parts = [b"".join(self._parts)]
        return self._parts[0]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._parts = self._mem = None


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
