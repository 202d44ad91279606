"""The ``trio`` that pyfuse3's request loop runs on: trio itself, but for its ``Lock`` and its
wait for the FUSE device.

pyfuse3 looks trio up as its module attribute ``pyfuse3.trio`` (``pyfuse3.asyncio`` swaps in an
asyncio shim the same way). Before each wait for the next FUSE request, its loop takes a
``trio.Lock``, which yields to the scheduler even when it is free: one more pass of trio's run
loop for every request. With :class:`nczfs.toolbox.locks.Lock` it yields only when it has to wait.

The wait itself is ``trio.lowlevel.wait_readable`` on the FUSE device: a pass of trio's run loop
(an ``epoll_ctl`` to re-arm the device, an ``epoll_wait``, a task switch) even when the next
request is already queued, as it mostly is when a program reads many small files with several
threads (a zarr read of 10,000 chunk files: 5 of 6 waits). :class:`FuseWaits` asks the device
first (``poll`` with no timeout) and returns at once when a request is waiting, up to
:data:`AT_ONCE_IN_A_ROW` times in a row; the next wait goes through trio whatever the device
holds, so that trio's other tasks (fetches, uploads, timers) run at least that often.
"""

from __future__ import annotations

import select
import types

import pyfuse3
import trio

from nczfs.toolbox.locks import Lock

#: waits answered at once in a row before one goes through trio's run loop (so that fetches and
#: uploads keep running; what it saves: docs/PERFORMANCE.md)
AT_ONCE_IN_A_ROW = 8


class FuseWaits:
    """``wait_readable`` for pyfuse3's loop, which waits on one file descriptor: the device."""

    def __init__(self) -> None:
        self._fd = -1
        self._poll = select.poll()
        self._in_a_row = 0
        self.at_once = 0
        self.waited = 0

    async def wait_readable(self, fd: int) -> None:
        if fd != self._fd:
            self._poll = select.poll()
            self._poll.register(fd, select.POLLIN)
            self._fd = fd
        if self._in_a_row < AT_ONCE_IN_A_ROW and any(ev & select.POLLIN for _, ev in self._poll.poll(0)):
            self._in_a_row += 1
            self.at_once += 1
            return
        self._in_a_row = 0
        self.waited += 1
        await trio.lowlevel.wait_readable(fd)

    def counters(self) -> dict[str, int]:
        return {"fuse.next-request-waiting": self.at_once, "fuse.next-request-waits": self.waited}


#: the waits of the daemon's one FUSE session
WAITS = FuseWaits()


def trio_for_pyfuse3(waits: FuseWaits = WAITS) -> types.ModuleType:
    """A module that is ``trio`` but for ``Lock`` and ``lowlevel.wait_readable``."""
    lowlevel = types.ModuleType("nczfs.fuse.trio_loop.trio.lowlevel")
    lowlevel.__dict__.update({k: v for k, v in vars(trio.lowlevel).items() if not k.startswith("__")})
    lowlevel.wait_readable = waits.wait_readable  # type: ignore[attr-defined]  # pyfuse3 reads trio through this shim
    shim = types.ModuleType("nczfs.fuse.trio_loop.trio")
    shim.__dict__.update({k: v for k, v in vars(trio).items() if not k.startswith("__")})
    shim.Lock = Lock  # type: ignore[attr-defined]  # pyfuse3 reads trio through this shim
    shim.lowlevel = lowlevel  # type: ignore[attr-defined]  # pyfuse3 reads trio through this shim
    return shim


def install() -> None:
    """Make pyfuse3's loop use :func:`trio_for_pyfuse3` (before ``pyfuse3.main``)."""
    pyfuse3.trio = trio_for_pyfuse3()  # type: ignore[attr-defined]  # pyfuse3's module global, replaced
