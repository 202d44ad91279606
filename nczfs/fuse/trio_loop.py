"""The ``trio`` that pyfuse3's request loop runs on: trio itself, but for its ``Lock`` and its
wait for the FUSE device.

pyfuse3 looks trio up as its module attribute ``pyfuse3.trio`` (``pyfuse3.asyncio`` swaps in an
asyncio shim the same way). Before each wait for the next FUSE request, its loop takes a
``trio.Lock``, which yields to the scheduler even when it is free: one more pass of trio's run
loop for every request. :class:`ReadLock` yields only when it has to wait, and is not handed to
the next waiting task at release: pyfuse3 lets the lock go as soon as a request is read, and the
task that read it mostly answers it without waiting (a lookup or a read the cache answers) and
takes the lock again. A task woken at each release would only queue again behind it: two task
steps more per request, the request-loop tasks taking turns. The lock is handed over at the end
of the run loop's pass instead (trio's ``before_io_wait``), when its last holder is still
waiting on something else (a fetch): then another task waits for the next request, as before.

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

#: waits answered at once in a row before one goes through trio's run loop (so that fetches and
#: uploads keep running; what it saves: docs/PERFORMANCE.md)
AT_ONCE_IN_A_ROW = 8


class ReadLock(trio.abc.Instrument):
    """pyfuse3's lock around the wait for the next request, for the tasks of one trio run
    (``async with lock:``). Taken at once when free, whoever waits for it; released, it stays
    free until trio's run loop has run every task it can, and only then goes to the task that
    has waited longest. It hands itself over from trio's ``before_io_wait`` hook, which
    :meth:`__aenter__` installs in each trio run it is taken in (pyfuse3 makes its lock once and
    keeps it from one run to the next)."""

    def __init__(self) -> None:
        self._held = False
        self._lot = trio.lowlevel.ParkingLot()
        self._token: trio.lowlevel.TrioToken | None = None
        #: the lock given to a waiting task at the end of a pass (its holder waited elsewhere)
        self.handed_over = 0

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        token = trio.lowlevel.current_trio_token()
        if token is not self._token:  # pyfuse3 keeps its lock from one trio run to the next
            self._token = token
            trio.lowlevel.add_instrument(self)
        if not self._held:
            self._held = True
            return
        await self._lot.park()  # woken by before_io_wait with the lock already its own

    async def __aexit__(self, *exc: object) -> None:
        self._held = False

    def before_io_wait(self, timeout: float) -> None:
        """Every task that could run has run: a lock still free goes to its first waiter."""
        if self._held or not self._lot:
            return
        self._held = True
        self.handed_over += 1
        self._lot.unpark()
        if timeout > 0 and self._token is not None:
            # the task woken runs after the I/O wait: wake that wait at once
            self._token.run_sync_soon(_nothing)


def _nothing() -> None:
    pass


class FuseWaits:
    """``wait_readable`` for pyfuse3's loop, which waits on one file descriptor: the device."""

    def __init__(self) -> None:
        self._fd = -1
        self._poll = select.poll()
        self._in_a_row = 0
        self.at_once = 0
        self.waited = 0
        #: pyfuse3's lock around these waits, once its loop has made it
        self.lock: ReadLock | None = None

    def make_lock(self) -> ReadLock:
        """pyfuse3's ``trio.Lock()``: a :class:`ReadLock`, counted with these waits."""
        self.lock = ReadLock()
        return self.lock

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
        return {"fuse.next-request-waiting": self.at_once, "fuse.next-request-waits": self.waited,
                "fuse.read-lock-handovers": self.lock.handed_over if self.lock is not None else 0}


#: the waits of the daemon's one FUSE session
WAITS = FuseWaits()


def trio_for_pyfuse3(waits: FuseWaits = WAITS) -> types.ModuleType:
    """A module that is ``trio`` but for ``Lock`` and ``lowlevel.wait_readable``."""
    lowlevel = types.ModuleType("nczfs.fuse.trio_loop.trio.lowlevel")
    lowlevel.__dict__.update({k: v for k, v in vars(trio.lowlevel).items() if not k.startswith("__")})
    lowlevel.wait_readable = waits.wait_readable  # type: ignore[attr-defined]  # pyfuse3 reads trio through this shim
    shim = types.ModuleType("nczfs.fuse.trio_loop.trio")
    shim.__dict__.update({k: v for k, v in vars(trio).items() if not k.startswith("__")})
    shim.Lock = waits.make_lock  # type: ignore[attr-defined]  # pyfuse3 reads trio through this shim
    shim.lowlevel = lowlevel  # type: ignore[attr-defined]  # pyfuse3 reads trio through this shim
    return shim


def install() -> None:
    """Make pyfuse3's loop use :func:`trio_for_pyfuse3` (before ``pyfuse3.main``)."""
    pyfuse3.trio = trio_for_pyfuse3()  # type: ignore[attr-defined]  # pyfuse3's module global, replaced
