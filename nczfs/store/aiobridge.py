"""Coroutines of an asyncio library (Icechunk's store) run from trio and from worker threads.

One asyncio event loop runs in a daemon thread of its own and serves every request: a coroutine
is handed to it with ``asyncio.run_coroutine_threadsafe``. Trio waits for the answer without a
worker thread (the loop wakes the trio task through its token); a worker thread waits for it on
the future. Nothing here ever blocks the trio thread.

A call that blocks the thread it is made on until the library's runtime answers (Icechunk's
listings: ``block_on`` until the session's lock is granted) is no coroutine to run on that shared
loop: :func:`run_apart` runs it on a loop of its own in the calling (worker) thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, TypeVar

import trio

T = TypeVar("T")


async def _call(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    # the awaitable is made inside the loop: libraries built on pyo3-async-runtimes look up the
    # running loop when they are called, not when they are awaited
    try:
        return await fn(*args)
    except (Exception, asyncio.CancelledError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a Rust panic (pyo3's PanicException): an error, not an exit
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from exc


def run_apart(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await fn(*args)`` on a loop of its own in the calling (worker) thread, which waits for it:
    what it blocks is that thread, never a loop other coroutines need."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_call(fn, *args))
    finally:
        loop.close()


class AsyncioBridge:
    def __init__(self, name: str = "asyncio-bridge"):
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def _submit(self, fn: Callable[..., Awaitable[T]], *args: Any) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(_call(fn, *args), self.loop)

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)`` in the loop; blocks the calling (worker) thread until it is done."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("AsyncioBridge.run called from its own loop")
        return self._submit(fn, *args).result()

    async def trio_run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)`` in the loop, from trio, without a worker thread; a trio cancellation
        cancels the asyncio task."""
        future = self._submit(fn, *args)
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: object) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(wake)
        try:
            await done.wait()
        except trio.Cancelled:
            future.cancel()
            raise
        return future.result()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()
