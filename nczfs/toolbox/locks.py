"""A trio lock that is taken at once when it is free.

``trio.Lock`` yields to the scheduler on every acquisition, also when the lock is free: a pass of
trio's run loop (an ``epoll_wait`` and a task switch). nczfs takes a lock on almost every FUSE
request (a file's lock at each close; pyfuse3's loop has its own, nczfs.fuse.trio_loop.ReadLock), so
that pass showed in the daemon's CPU per request (bench/bench_requests.py). :class:`Lock` yields
only when it has to wait, and otherwise behaves as trio's: waiters get it in the order they came,
handed over at release (no other task can take it in between), and a waiter that is cancelled
leaves the queue without it.
"""

from __future__ import annotations

import trio


class Lock:
    """For the tasks of one trio run, used as ``async with lock:``."""

    def __init__(self) -> None:
        self._held = False
        self._lot = trio.lowlevel.ParkingLot()

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        if not self._held:
            self._held = True
            return
        await self._lot.park()  # woken only by a release that hands the lock over, still held

    async def __aexit__(self, *exc: object) -> None:
        if self._lot:
            self._lot.unpark()  # to the waiter parked longest; the lock stays held, now by it
        else:
            self._held = False
