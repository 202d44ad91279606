"""Closed temp files sent ahead under their final key, waiting for their rename.

A temp file whose name tells its final one (zarr's ``.partial``, rsync's) is not stored under
its temp name. At its close its data is sent, invisibly, under the final key (S3: the parts of a
multipart upload), so that the rename only has to complete the upload: renames in one directory
run one at a time in the kernel, uploads at close do not. The rename commits it; an unlink, or
new data, aborts it. What the store cannot stage, the rename uploads as before.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from nczfs.toolbox.errors import WriteLost
from nczfs.fs.content import Content
from nczfs.fs.early_upload import EarlyUploads
from nczfs.store.base import Store
from nczfs.store.capabilities import Stages
from nczfs.store.values import ObjectInfo, Staged

log = logging.getLogger(__name__)

#: smaller temp files are not staged: staging costs two more requests (S3: create and complete a
#: multipart upload), which pays only when sending the data takes longer than they do
STAGE_MIN_BYTES = 1024 * 1024


class Staging:
    """By inode: (content version sent, the staged write) of each closed temp file sent ahead."""

    def __init__(self, store: Store, early: EarlyUploads):
        self.store = store
        self.early = early
        self._staged: dict[int, tuple[int, Staged]] = {}

    async def stage(self, ino: int, content: Content, final: str) -> None:
        """Send ``content`` under ``final``: the parts sent while it was written, or (big enough,
        in memory) the whole of it; a spilled file is not read back, its rename streams it."""
        early = await self.early.stage(ino, final, content)
        if early is not None:
            await self.drop(ino)
            self._staged[ino] = (content.version, early)
        elif content.size >= STAGE_MIN_BYTES and not content.spilled:
            await self._stage_whole(ino, content, final)

    async def commit(self, ino: int, path: str, content: Content, key: str,
                     store: Callable[[Content, str, str | None], Awaitable[ObjectInfo]],
                     if_version: str | None = None) -> ObjectInfo:
        """The staged upload of ``content`` committed under ``key``, or (none, or of another
        version or key: aborted) ``store(content, key, if_version)`` now; ``if_version``: only
        while ``key`` is that version (as ``Store.set``)."""
        staged = self._staged.pop(ino, None)
        if staged is not None and (content.write_error is not None or not _stages(staged, content, key)):
            await self._abort(staged[1])
            staged = None
        if content.write_error is not None:
            raise WriteLost(path, content.write_error)
        if staged is not None:
            return await staged[1].commit(if_version)  # type: ignore[misc]  # the async form of Staged (a Store's)
        return await store(content, key, if_version)

    async def drop(self, ino: int) -> None:
        """Abort what the file staged (unlinked, or staged anew)."""
        staged = self._staged.pop(ino, None)
        if staged is not None:
            await self._abort(staged[1])

    async def _stage_whole(self, ino: int, content: Content, final: str) -> None:
        """Send ``content`` under ``final`` with the store's ``stage``, unless that is done already."""
        old = self._staged.pop(ino, None)
        if old is not None:
            if _stages(old, content, final):
                self._staged[ino] = old
                return
            await self._abort(old[1])
        try:
            staged = await self.store.stage(final, await content.getvalue()) if isinstance(self.store, Stages) else None
        except Exception as exc:  # noqa: BLE001 - the rename stores it, and reports what fails then
            log.debug("not staged under %r: %s", final, exc)
            return
        if staged is not None:
            self._staged[ino] = (content.version, staged)

    async def _abort(self, staged: Staged) -> None:
        try:
            await staged.abort()  # type: ignore[misc]  # the async form of Staged (a Store's)
        except Exception as exc:  # noqa: BLE001 - invisible parts; the store's close aborts what is left
            log.warning("%r: staged upload not aborted: %s", staged.key, exc)


def _stages(staged: tuple[int, Staged], content: Content, key: str) -> bool:
    """Is ``staged`` (content version, upload) the current ``content`` on its way to ``key``?"""
    return staged[0] == content.version and staged[1].key == key
