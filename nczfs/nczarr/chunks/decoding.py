"""Chunk decoding (numcodecs, zlib, numpy: they release the GIL) in worker threads, at most as
many at once as the mount's decode pool holds (``-o decode_threads=``, default: the cores).

Recoded chunks of a view, the chunks behind a ``NAME.nc`` or ``NAME.nc4`` file: each decode is
one call of :func:`decode`, never on the trio thread. Readers ahead of a sequential reader start
as many decodes as the pool holds (:func:`ahead`), so one reader's chunks decode on every core;
the pool bounds the threads, the decoded caches above bound the memory.
"""

from __future__ import annotations

import contextvars
import os
from typing import Any, Callable, TypeVar

import trio

from nczfs.store.threads import run_blocking

T = TypeVar("T")

#: the pool's size in this process (0: the cores); set once by the mount
_threads = 0
#: set in a task decoding ahead of readers (:func:`early`)
_EARLY: contextvars.ContextVar[bool] = contextvars.ContextVar("nczfs_decode_early", default=False)
#: per trio run (a limiter belongs to the run it is used in): the limiters of decodes readers wait
#: for and of decodes ahead of readers, as many threads each
_LIMITER: trio.lowlevel.RunVar = trio.lowlevel.RunVar("nczfs_decode_limiter")


def set_threads(n: int) -> None:
    """Decode at most ``n`` chunks at once (0: as many as the cores)."""
    global _threads
    _threads = n


def threads() -> int:
    """How many chunks decode at once: ``-o decode_threads=``, else the cores this process may use."""
    if _threads > 0:
        return _threads
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def ahead() -> int:
    """How many chunks a sequential reader has decoded ahead of it: one per thread of the pool, at
    least two (one decoding while the reader takes the last)."""
    return max(2, threads())


def _limiter(early: bool) -> trio.CapacityLimiter:
    """The pool's limiter for decodes a reader waits for, or for those ahead of one (``early``)."""
    try:
        limiters = _LIMITER.get()
    except LookupError:
        limiters = None
    if limiters is None or limiters[0].total_tokens != threads():
        limiters = (trio.CapacityLimiter(threads()), trio.CapacityLimiter(threads()))
        _LIMITER.set(limiters)
    return limiters[early]


def early() -> None:
    """The calling task decodes ahead of readers (each decode it starts waits for a thread of its
    own: a reader's decode never queues behind those ahead of it)."""
    _EARLY.set(True)


async def decode(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` (a chunk's decoding) in a worker thread of the decode pool."""
    return await run_blocking(fn, *args, limiter=_limiter(_EARLY.get()))
