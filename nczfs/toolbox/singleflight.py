"""One computation in flight per key: every caller that asks for the key while it runs waits
for it and gets its value or its error.

:meth:`SingleFlight.run` computes in the caller's task: a caller cancelled while computing
stops the computation, and the callers that were waiting for it are not cancelled: the first
of them computes again; with ``retry``, so do the waiters of a computation that failed (once).
:meth:`SingleFlight.start` computes in a background task (block fetches), so no cancelled reader
strands the others; a computation cancelled there (the mount ends) answers its waiters with
:class:`Abandoned`; :meth:`SingleFlight.start_group` computes several keys in one background
task (a burst of block fetches sent in one call). Neither keeps a value once the computation has
ended: the callers keep what they want to (their caches).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Generic, Hashable, TypeVar

import trio

from nczfs.toolbox import background
from nczfs.toolbox.errors import BackendError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Abandoned(BackendError):
    """The computation a caller waited for was cancelled before it ended."""


@dataclass(eq=False)
class Flight(Generic[V]):
    """One computation in flight; ``done`` is set when it has ended, however."""

    done: trio.Event = field(default_factory=trio.Event)
    value: V | None = None
    exc: BaseException | None = None
    #: its caller was cancelled before it ended (``exc`` is then :class:`Abandoned`)
    abandoned: bool = False

    async def wait(self) -> V:
        """Its value, or its error (:class:`Abandoned` if it was cancelled)."""
        await self.done.wait()
        if self.exc is not None:
            raise self.exc
        return self.value  # type: ignore[return-value]  # set before done, unless exc is


class SingleFlight(Generic[K, V]):
    """The computations in flight, by key; ``describe(key)`` names a key in an error."""

    def __init__(self, describe: Callable[[K], str] = repr):
        self._flying: dict[K, Flight[V]] = {}
        self._describe = describe

    def __contains__(self, key: K) -> bool:
        return key in self._flying

    def __len__(self) -> int:
        return len(self._flying)

    def get(self, key: K) -> Flight[V] | None:
        """The computation of ``key`` in flight, if there is one."""
        return self._flying.get(key)

    async def run(self, key: K, compute: Callable[[], Awaitable[V]], retry: bool = False) -> V:
        """``compute()``, unless a computation of ``key`` is in flight: then its value or error.
        With ``retry``, a caller whose wait ended in another caller's error tries once more (that
        computation may have been a read-ahead failing for its own reasons): it computes, or waits
        for the waiter that does (then it gets that one's error)."""
        retried = False
        while (flight := self._flying.get(key)) is not None:
            await flight.done.wait()
            if flight.abandoned:  # its caller was cancelled: compute again
                continue
            if flight.exc is not None and retry and not retried:
                retried = True
                continue
            return await flight.wait()
        flight = self._flying[key] = Flight()
        return await self._compute(key, flight, compute)

    def start(self, key: K, compute: Callable[[], Awaitable[V]], name: str | None = None) -> Flight[V]:
        """The computation of ``key`` in flight, started now in the background if there is none."""
        flight = self._flying.get(key)
        if flight is None:
            flight = self._flying[key] = Flight()
            background.start_soon(self._background, key, flight, compute, name=name)
        return flight

    def start_group(self, keys: list[K], compute: Callable[[list[K]], Awaitable[list[V | Exception]]],
                    name: str | None = None) -> None:
        """Compute those of ``keys`` not in flight in one background task: ``compute(those)``
        answers each one's value or error, in order; an error of the call itself is each one's,
        and a cancellation abandons them all, as :meth:`start` does one."""
        group = [k for k in dict.fromkeys(keys) if k not in self._flying]
        if group:
            flights: list[Flight[V]] = [Flight() for _ in group]
            self._flying.update(zip(group, flights))
            background.start_soon(self._background_group, group, flights, compute, name=name)

    async def _background_group(self, keys: list[K], flights: list[Flight[V]],
                                compute: Callable[[list[K]], Awaitable[list[V | Exception]]]) -> None:
        outcomes: list[V | Exception] | None = None
        try:
            outcomes = await compute(keys)
            if len(outcomes) != len(keys):
                raise BackendError(f"{len(outcomes)} answers to {len(keys)} computations of "
                                   f"{', '.join(map(self._describe, keys))}")
        except Exception as exc:  # noqa: BLE001 - its waiters get it
            outcomes = [exc] * len(keys)
        except BaseException:
            for key, flight in zip(keys, flights):
                flight.abandoned = True
                flight.exc = Abandoned(f"{self._describe(key)}: cancelled before it ended")
            raise
        finally:
            for n, (key, flight) in enumerate(zip(keys, flights)):
                outcome = None if outcomes is None else outcomes[n]  # None: abandoned
                if isinstance(outcome, Exception):
                    flight.exc = outcome
                elif not flight.abandoned:
                    flight.value = outcome
                if self._flying.get(key) is flight:
                    del self._flying[key]
                flight.done.set()

    async def _background(self, key: K, flight: Flight[V], compute: Callable[[], Awaitable[V]]) -> None:
        try:
            await self._compute(key, flight, compute)
        except Exception:  # noqa: BLE001 - its waiters get it; a cancellation goes on up
            pass

    async def _compute(self, key: K, flight: Flight[V], compute: Callable[[], Awaitable[V]]) -> V:
        try:
            flight.value = value = await compute()
            return value
        except Exception as exc:
            flight.exc = exc
            raise
        except BaseException:
            flight.abandoned = True
            flight.exc = Abandoned(f"{self._describe(key)}: cancelled before it ended")
            raise
        finally:
            if self._flying.get(key) is flight:
                del self._flying[key]
            flight.done.set()
