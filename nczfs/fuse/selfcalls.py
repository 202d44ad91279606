"""Blocking calls that go through the kernel to this daemon's own mount.

A ``stat`` of the mountpoint, the getxattr probe, a notice that drops an inode's pages: each
waits for the kernel, and the kernel may wait for this daemon to answer a request. Once
pyfuse3's request loop has ended (a signal, an unmount) nothing answers it, and a worker
thread waiting there would hold the trio run open until someone else unmounted the mount. So
such a call is left behind when its task is cancelled: the unmount that follows the loop's
end aborts the connection, and the call returns (ENOTCONN) in its own time.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import trio

T = TypeVar("T")


async def run_through_mount(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread, abandoned (not waited for) if the task is cancelled."""
    return await trio.to_thread.run_sync(functools.partial(fn, *args), abandon_on_cancel=True)
