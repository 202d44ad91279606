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
    def __init__(
        self,
        data: bytes = b"",
        *,
        dirty: bool,
        spill_threshold: int = 64 * 1024 * 1024,
        spill_dir: str | None = None,
    ):
        self._mem: bytearray | None = bytearray(data)
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

    async def _spill(self) -> None:
        assert self._mem is not None
        # unbuffered: a streaming upload reads the file through its own descriptor
        f = tempfile.TemporaryFile(dir=self._spill_dir, prefix="nczfs-write-", buffering=0)
        data, self._mem = self._mem, None
        await run_blocking(_pwrite, f, 0, data)
        self._file = f

    async def write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if self._mem is not None and end > self._threshold:
            await self._spill()
        if self._mem is not None:
            if offset > len(self._mem):
                self._mem.extend(bytes(offset - len(self._mem)))
            self._mem[offset:end] = data
        else:
            await run_blocking(_pwrite, self._file, offset, data)
        self._size = max(self._size, end)
        self.version += 1

    async def read(self, offset: int, size: int) -> bytes:
        if offset >= self._size:
            return b""
        size = min(size, self._size - offset)
        if self._mem is not None:
            return bytes(self._mem[offset : offset + size])
        return await run_blocking(_pread, self._file, offset, size)

    async def truncate(self, size: int) -> None:
        if self._mem is not None:
            if size > self._threshold:
                await self._spill()
            else:
                if size < len(self._mem):
                    del self._mem[size:]
                else:
                    self._mem.extend(bytes(size - len(self._mem)))
        if self._file is not None:
            await run_blocking(self._file.truncate, size)
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
        if self._mem is not None:
            return bytes(self._mem)
        return await run_blocking(_pread, self._file, 0, self._size)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._mem = None


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
