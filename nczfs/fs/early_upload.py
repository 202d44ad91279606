"""Files sent in parts while they are still being written (S3: a multipart upload started early).

A file written through the mount is stored at close (or fsync). For a big one that upload is
the whole wait of the close. Once a file that is being written reaches
:data:`EARLY_FROM_BYTES`, its complete parts (the store's part size, from the start of the
file) are sent in the background while the writer goes on; the close then sends only the
parts not sent yet and completes the upload. A write into a part already sent (a header
rewritten at the end, as netCDF does) makes the close send that part again: a part sent again
replaces the one sent before. A truncate, a rename or an unlink drops the early upload
(aborted: nothing becomes visible), and the close stores the file the ordinary way; so does a
part that fails to send: an early upload never decides what the close reports, the ordinary
upload does.

The parts are read from the file's :class:`~nczfs.fs.content.Content` (in memory or its temp
file) without changing how it is held; at most :data:`PARTS_IN_FLIGHT` are in memory at once
while the file is written, :data:`PARTS_AT_CLOSE` at its close.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

import trio

from nczfs.toolbox import background
from nczfs.toolbox.errors import Conflict
from nczfs.store.base import Store
from nczfs.store.capabilities import UploadsInParts
from nczfs.store.values import ObjectInfo, Staged, Upload

if TYPE_CHECKING:
    from nczfs.fs.content import Content

log = logging.getLogger(__name__)

#: files are sent early from this size on (S3's default multipart threshold: a smaller file is
#: one PUT at close, which an early upload would turn into three requests)
EARLY_FROM_BYTES = 32 * 1024 * 1024
#: parts of one file sent at once while it is being written (each a copy in memory)
PARTS_IN_FLIGHT = 4
#: parts sent at once by the close
PARTS_AT_CLOSE = 8


class _Early:
    """One file's early upload."""

    def __init__(self, key: str, content: Content):
        self.key = key
        self.content = content
        self.upload: Upload | None = None
        #: set once the store answered ``open_upload`` (``upload`` is then set, or ``broken``)
        self.opened = trio.Event()
        #: bytes [0, covered) are sent or being sent
        self.covered = 0
        #: parts being sent, and an event set while there are none
        self.running = 0
        self.idle = trio.Event()
        self.idle.set()
        #: parts read and being sent at once (more wait: the close starts all that are left)
        self.slots = trio.CapacityLimiter(PARTS_AT_CLOSE)
        #: never to be completed: a part failed, or the file was truncated, moved or unlinked
        self.broken = False
        #: the close is sending the rest: no more parts from writes
        self.finishing = False
        #: numbers of parts sent that later writes changed: the close sends them again
        self.resend: set[int] = set()


class EarlyUploads:
    """The early uploads of one mount, by inode."""

    def __init__(self, store: Store):
        self.store = store
        #: asked once: an ``isinstance`` of a Protocol costs ~12 us, and ``wrote`` runs per write
        self._in_parts: UploadsInParts | None = store if isinstance(store, UploadsInParts) else None
        self._by_ino: dict[int, _Early] = {}
        #: contents whose early upload was dropped: not sent early again (the next drop would
        #: only send the same parts once more), the close stores them whole
        self._dropped: weakref.WeakSet[Content] = weakref.WeakSet()
        self.started = self.completed = self.dropped = self.parts = 0

    def counters(self) -> dict[str, int]:
        return {"write.early-uploads": self.started, "write.early-uploads-completed": self.completed,
                "write.early-uploads-dropped": self.dropped, "write.early-parts": self.parts}

    def watches(self, ino: int, content: Content) -> bool:
        """Whether :meth:`wrote` has anything to do after a write (a cheap test for every write)."""
        return ino in self._by_ino or content.size >= EARLY_FROM_BYTES

    def writing(self, ino: int, offset: int, size: int) -> None:
        """Before a write of ``size`` bytes at ``offset``: the parts sent (or being sent) that it
        changes are sent again by the close (a part sent again replaces the one sent before)."""
        early = self._by_ino.get(ino)
        if early is None or offset >= early.covered or early.upload is None:
            return
        part = early.upload.part_size
        early.resend.update(range(offset // part + 1, (min(offset + max(size, 1), early.covered) - 1) // part + 2))

    def wrote(self, ino: int, key: str, content: Content) -> None:
        """After a write: start the file's early upload once it is big enough, and send the parts
        that are complete now (as many as :data:`PARTS_IN_FLIGHT` allows)."""
        early = self._by_ino.get(ino)
        if early is None:
            if self._in_parts is None:
                return  # a store without uploads in parts: the close stores the file whole
            if content.size < EARLY_FROM_BYTES or not content.dirty or content in self._dropped:
                return
            early = self._by_ino[ino] = _Early(key, content)
            background.start_soon(self._open, early, name=f"nczfs early upload {key}")
            return
        if early.content is not content or early.key != key:
            self.drop(ino)
            return
        self._more(early)

    def _more(self, early: _Early) -> None:
        """Send the parts complete now, as many as :data:`PARTS_IN_FLIGHT` allows."""
        if early.upload is None or early.broken or early.finishing:
            return
        size = early.upload.part_size
        while early.running < PARTS_IN_FLIGHT and early.covered + size <= early.content.size:
            self._start_part(early, early.covered, size)
            early.covered += size

    def _start_part(self, early: _Early, start: int, size: int) -> None:
        """Send the part at ``start`` (``size`` bytes) in a task of its own."""
        assert early.upload is not None
        if early.running == 0:
            early.idle = trio.Event()
        early.running += 1
        number = start // early.upload.part_size + 1
        background.start_soon(self._part, early, number, start, size, name=f"nczfs early part {early.key}")

    async def _open(self, early: _Early) -> None:
        assert self._in_parts is not None  # wrote() starts early uploads on such a store alone
        try:
            early.upload = await self._in_parts.open_upload(early.key)
        except Exception as exc:  # noqa: BLE001 - the close stores the file the ordinary way
            log.debug("%r: no early upload: %s", early.key, exc)
        if early.upload is None:
            early.broken = True  # a store without such uploads: not counted
        else:
            self.started += 1
        early.opened.set()  # a drop meanwhile waits for this to abort it
        self._more(early)

    async def _part(self, early: _Early, number: int, start: int, size: int) -> None:
        try:
            async with early.slots:
                if early.broken:
                    return
                data = await early.content.read_part(start, size)
                if len(data) != size:
                    raise ValueError(f"{len(data)} bytes at {start}, not {size}")
                assert early.upload is not None
                await early.upload.send(number, data)  # type: ignore[misc]  # the async form of Upload (a Store's)
                self.parts += 1
        except Exception as exc:  # noqa: BLE001 - the close stores the file the ordinary way
            log.debug("%r: early part %d not sent: %s", early.key, number, exc)
            early.broken = True
        finally:
            early.running -= 1
            if early.running == 0:
                early.idle.set()
        self._more(early)

    def drop(self, ino: int) -> None:
        """Forget a file's early upload (if any) and abort it: the close uploads the file whole."""
        early = self._by_ino.pop(ino, None)
        if early is None:
            return
        self._forget(early)
        background.start_soon(self._abort, early, name=f"nczfs early abort {early.key}")

    def _forget(self, early: _Early) -> None:
        early.broken = True
        self._dropped.add(early.content)

    async def _abort(self, early: _Early) -> None:
        await early.opened.wait()
        await early.idle.wait()
        if early.upload is not None:
            self.dropped += 1
            try:
                await early.upload.abort()  # type: ignore[misc]  # the async form of Upload (a Store's)
            except Exception as exc:  # noqa: BLE001 - invisible parts; the store's close aborts what is left
                log.warning("%r: early upload not aborted: %s", early.key, exc)

    async def finish(self, ino: int, key: str, content: Content, if_version: str | None = None) -> ObjectInfo | None:
        """At close or fsync: send the parts not sent yet and complete the upload, which makes the
        file's content as it is now the object ``key`` (``if_version``: only while it is that
        version, else Conflict); None if the file has no early upload or it cannot be completed
        (it is then aborted, and the caller uploads the file whole)."""
        staged = await self.stage(ino, key, content)
        if staged is None:
            return None
        try:
            return await staged.commit(if_version)  # type: ignore[misc]  # the async form of Staged (a Store's)
        except Conflict:
            raise  # whole, it would be refused too
        except Exception as exc:  # noqa: BLE001 - the caller uploads the file whole
            log.warning("%r: early upload not completed, storing the file whole: %s", key, exc)
            return None

    async def stage(self, ino: int, key: str, content: Content) -> Staged | None:
        """At close: send the parts not sent yet, and return the upload as staged: its commit
        makes the file's content as it is now the object ``key`` (a temp file's close stages it
        under its final name, and the rename commits it). None if the file has no early upload
        or it cannot be completed (it is then aborted)."""
        early = self._by_ino.get(ino)
        if early is None:
            return None
        if early.content is not content or early.key != key:
            self.drop(ino)
            return None
        early.finishing = True
        await early.opened.wait()
        size = content.size
        upload = early.upload
        if size < early.covered:  # only a truncate shrinks a file, and it drops the upload
            early.broken = True
        if upload is not None and not early.broken:
            await self._send_rest(early, upload.part_size, size)
        await early.idle.wait()
        if self._by_ino.get(ino) is not early:
            return None  # dropped meanwhile
        del self._by_ino[ino]
        if early.broken or upload is None:
            self._forget(early)
            await self._abort(early)
            return None
        return self._staged(early, upload, size)

    async def _send_rest(self, early: _Early, part: int, size: int) -> None:
        """Send the parts of the first ``size`` bytes not sent yet, then those changed after they were sent."""
        rest = range(early.covered, size, part)
        early.covered = size  # from now on, every write below the end is sent again
        for start in rest:
            self._start_part(early, start, min(part, size - start))
        await early.idle.wait()
        while early.resend and not early.broken:  # changed after they were sent
            numbers, early.resend = sorted(early.resend), set()
            for number in numbers:
                start = (number - 1) * part
                self._start_part(early, start, min(part, size - start))
            await early.idle.wait()

    def _staged(self, early: _Early, upload: Upload, size: int) -> Staged:
        """The sent parts as a staged write of ``size`` bytes: committed, or aborted."""

        async def commit(if_version: str | None = None) -> ObjectInfo:
            try:
                info = await upload.complete(size, if_version)  # type: ignore[misc]  # the async form of Upload (a Store's)
            except Exception:
                self._forget(early)
                await self._abort(early)  # S3 aborts a failed completion itself; a second abort is harmless
                raise
            self.completed += 1
            return info

        async def abort() -> None:
            self._forget(early)
            await self._abort(early)

        return Staged(early.key, commit, abort)
