"""Background work of a mount, in one nursery the mount owns.

Block fetches, sibling and metadata prefetch, disk-cache writes, early upload parts and the
kernel notifications of the NCZarr layer run beside the request that started them. They all
start here, with :func:`start_soon`: inside :func:`owned` (the mount serves within it, until
its last pending write is stored) in the nursery it opens, which is cancelled when the mount
ends, and otherwise (a store driven by tests or by ``nczfs.open_view``, without a mount) as a
trio system task, which lives until its trio run ends. Either way a task that raises ends the
run it belongs to, as a request that raised would: the tasks catch what they expect.

The nursery is found through a context variable: every task the mount's task starts (pyfuse3's
request handlers, and so the stores they call) sees the nursery of the mount it serves.
"""

from __future__ import annotations

import contextvars
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import trio

_NURSERY: contextvars.ContextVar[trio.Nursery | None] = contextvars.ContextVar("nczfs_background", default=None)


def start_soon(fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> None:
    """Run ``fn(*args)`` in the background of the mount being served (see the module's text)."""
    nursery = _NURSERY.get()
    if nursery is None:
        trio.lowlevel.spawn_system_task(fn, *args, name=name)
    else:
        nursery.start_soon(fn, *args, name=name)


@asynccontextmanager
async def owned() -> AsyncIterator[trio.Nursery]:
    """The nursery of a mount's background work, for as long as the block runs; what is still
    running when it ends is cancelled."""
    async with trio.open_nursery() as nursery:
        token = _NURSERY.set(nursery)
        try:
            yield nursery
        finally:
            _NURSERY.reset(token)
            nursery.cancel_scope.cancel()
