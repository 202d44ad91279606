"""What the mount tells the kernel of an object the NCZarr layer changed on its own
(nczfs.fuse.notifier.KernelNotifier), without a kernel: pyfuse3's notice recorded."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from nczfs.fuse import notifier
from nczfs.toolbox import background


async def test_a_changed_objects_attributes_are_dropped_before_the_change_is_answered(monkeypatch):
    """CI once read a rewritten consolidated ``zarr.json`` cut at its old size: its notice ran in
    a worker thread after the close that changed it was answered. The attributes' notice is now
    sent at once (before any other task runs); the pages' follows from a worker thread."""
    notices: list[tuple[int, bool]] = []
    monkeypatch.setattr(notifier.pyfuse3, "invalidate_inode",
                        lambda ino, attr_only=False: notices.append((ino, attr_only)))
    node = SimpleNamespace(ino=7, fetched=12.5)
    told = notifier.KernelNotifier()
    told.fs = SimpleNamespace(table=SimpleNamespace(at=lambda key: node if key == "ds/zarr.json" else None))
    async with background.owned():
        told("ds/other.json")  # not a file the mount has shown: nothing to tell
        told("ds/zarr.json")
        assert notices == [(7, True)] and node.fetched == -1.0
        with trio.fail_after(10):
            while len(notices) < 2:
                await trio.sleep(0.01)
    assert notices == [(7, True), (7, False)]
