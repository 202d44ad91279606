"""The parts of one request run at once (the chunks a read of a file spans): in a nursery, a
part's failure cancelling the others; a failure of the filesystem's own (:class:`NczfsError`)
raised as itself, the first of them, not in a group, so a caller or the FUSE edge answers its
errno. A single part runs in the calling task."""

from __future__ import annotations

from typing import Awaitable, Callable, Iterable, TypeVar

import trio

from nczfs.toolbox.errors import NczfsError, first_of

T = TypeVar("T")


async def each(fn: Callable[[T], Awaitable[object]], items: Iterable[T]) -> None:
    """``fn(item)`` for every item, at once."""
    items = list(items)
    if len(items) <= 1:
        for item in items:
            await fn(item)
        return
    try:
        async with trio.open_nursery() as nursery:
            for item in items:
                nursery.start_soon(fn, item)
    except ExceptionGroup as group:
        own = first_of(group, (NczfsError,))
        if own is None:
            raise
        raise own from None
