"""What tells the kernel that a file changed without a request for it: pyfuse3's notices.

:func:`invalidate_attrs` is the filesystem's ``attrs_changed`` (a file's size grew under an
open descriptor); :class:`KernelNotifier` the NCZarr layer's ``notify`` (an object the layer
changed on its own). Both write a notice to ``/dev/fuse``; neither waits for a request.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyfuse3
from nczfs.fuse.selfcalls import run_through_mount
from nczfs.toolbox import background

if TYPE_CHECKING:
    from nczfs.fs.filesystem import Filesystem

log = logging.getLogger(__name__)


def invalidate_attrs(ino: int) -> None:
    """Tell the kernel that what it holds of a file's attributes (its size) is out of date: its
    next read past that size, or stat, asks again. Only the attributes: a notice written to
    /dev/fuse that takes no lock a request could hold (writeback caching is off)."""
    try:
        pyfuse3.invalidate_inode(ino, attr_only=True)
    except OSError as exc:  # the kernel forgot the inode meanwhile: nothing to invalidate
        log.debug("inode %d: attributes not invalidated: %s", ino, exc)


class KernelNotifier:
    """The NCZarr layer's notifier (``nczarr.layer.Notify``) on a mount: an object the layer
    changed on its own (consolidated metadata, the .nc files of a dataset written to) is
    dropped from the filesystem's and the kernel's caches, so its new size shows at once."""

    def __init__(self) -> None:
        self.fs: Filesystem | None = None  # set once the filesystem over the layer is made

    def __call__(self, key: str) -> None:
        """The attributes at once, before the request that changed the object is answered (its
        next open or stat then asks for the new size; the kernel drops its pages when the size or
        mtime changed); the pages also in a worker thread, as dropping them may wait for a read
        this daemon has still to answer."""
        node = self.fs.table.at(key) if self.fs is not None else None
        if node is None:
            return
        node.fetched = -1.0
        invalidate_attrs(node.ino)
        background.start_soon(_invalidate_inode, node.ino, name=f"nczfs invalidate inode {node.ino}")


async def _invalidate_inode(ino: int) -> None:
    try:
        await run_through_mount(pyfuse3.invalidate_inode, ino)
    except Exception as exc:  # noqa: BLE001 - a background task must not raise; the cache then expires by TTL
        log.debug("invalidate inode %d: %s", ino, exc)
