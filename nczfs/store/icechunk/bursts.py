"""Small reads asked for together from trio, sent to the asyncio loop as one call.

The cache fetches the chunks of an array being walked in bursts (its sibling prefetches), and
readers ask for several chunks at once. Each read sent alone costs a hand-over to the loop's
thread, a Python future of Icechunk's and a wake-up of trio; a burst's reads (those asked for in
the same scheduling round of trio) go as one call instead, which reads them with one
``get_partial_values`` (:meth:`SnapshotTree._get_many`). Reads of objects larger than
:data:`BURST_BELOW` bytes, or of unknown size, go alone: their transfer dwarfs the hand-over,
and each reader gets its bytes as soon as they arrive. A read whose every reader was cancelled
is cancelled.
Measured in docs/PERFORMANCE.md, "Icechunk: reads sent in bursts".
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import trio

from nczfs.store.aiobridge import AsyncioBridge
from nczfs.store.values import ByteRange
from nczfs.toolbox import background
from nczfs.toolbox.errors import BackendError

#: reads of objects of at most this many bytes are sent in bursts
BURST_BELOW = 1024 * 1024

Ask = tuple[str, ByteRange | None]


class _Burst:
    """The reads of one burst, their outcomes once sent, and how many readers still wait."""

    def __init__(self) -> None:
        self.asks: list[Ask] = []
        self.outcomes: list[bytes | BaseException] | None = None
        self.done = trio.Event()
        self.scope = trio.CancelScope()
        self.waiting = 0

    def outcome(self, index: int) -> bytes:
        if self.outcomes is None:
            raise BackendError(f"{self.asks[index][0]!r}: the read was abandoned (the mount is stopping)")
        got = self.outcomes[index]
        if isinstance(got, BaseException):
            raise got
        return got


class ReadBursts:
    """``one(key, rng)`` for a read alone, ``many(asks)`` for a burst (its outcomes in order:
    bytes or the exception of each read), both coroutines run in ``bridge``'s loop."""

    def __init__(self, bridge: AsyncioBridge, one: Callable[[str, ByteRange | None], Awaitable[bytes]],
                 many: Callable[[list[Ask]], Awaitable[list[bytes | BaseException]]]):
        self.bridge, self.one, self.many = bridge, one, many
        self._open: _Burst | None = None
        #: bursts of more than one read sent, and the reads they held
        self.bursts = 0
        self.reads_in_bursts = 0

    async def get(self, key: str, rng: ByteRange | None, size: int | None) -> bytes:
        """``key``'s bytes ``rng``; ``size``: the object's, if known."""
        if size is None or size > BURST_BELOW:
            return await self.bridge.trio_run(self.one, key, rng)
        burst = self._open
        if burst is None:
            burst = self._open = _Burst()
            background.start_soon(self._send, burst, name="icechunk read burst")
        index = len(burst.asks)
        burst.asks.append((key, rng))
        burst.waiting += 1
        try:
            await burst.done.wait()
        except trio.Cancelled:
            burst.waiting -= 1
            if not burst.waiting:  # no reader left: not sent, or its call cancelled
                if self._open is burst:
                    self._open = None
                burst.scope.cancel()
            raise
        return burst.outcome(index)

    async def _send(self, burst: _Burst) -> None:
        try:
            with burst.scope:
                await trio.sleep(0)  # the other reads started in this round join the burst
                if self._open is burst:
                    self._open = None
                burst.outcomes = await self._outcomes(burst.asks)
        finally:
            if self._open is burst:  # cancelled while open (the mount is stopping)
                self._open = None
            burst.done.set()

    async def _outcomes(self, asks: list[Ask]) -> list[bytes | BaseException]:
        try:
            if len(asks) == 1:
                return [await self.bridge.trio_run(self.one, *asks[0])]
            self.bursts += 1
            self.reads_in_bursts += len(asks)
            return await self.bridge.trio_run(self.many, asks)
        except Exception as exc:  # noqa: BLE001 - each reader gets the read's own error
            return [exc] * len(asks)

    def counters(self) -> dict[str, int]:
        return {"icechunk.read-bursts": self.bursts, "icechunk.reads-in-bursts": self.reads_in_bursts}
