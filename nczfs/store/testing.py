"""Failure injection for tests: :class:`FaultyStore` makes chosen operations of the store below
fail (or slow down) on demand, for tests of what the filesystem does when the medium fails.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar, cast

import trio

from nczfs.toolbox.errors import BackendError
from nczfs.store.base import Store
from nczfs.store.capabilities import FAST_PATHS
from nczfs.store.optional import OPTIONAL, TellsDirectories
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo, Upload
from nczfs.store.wrapper import WrapperStore

T = TypeVar("T")


@dataclass
class Fault:
    """One armed failure: operation name, which keys, what to raise, how often."""

    op: str
    exc: Callable[[str], BaseException]
    keys: Callable[[str], bool]
    #: failures left; None = until healed
    times: int | None
    #: run the inner call first, then fail (the medium changed but the caller sees an error)
    after: bool


def _default_exc(key: str) -> BaseException:
    return BackendError(f"{key!r}: injected failure")  # errno EIO


#: the steps of an upload opened by ``open_upload``, failed like store operations
UPLOAD_STEPS = ("upload_part", "complete_upload", "abort_upload")
#: the operations a store may have: the ABC's and the optional ones
OPERATIONS = frozenset({n for n in vars(Store) if not n.startswith("_")} | {m for _, ms in OPTIONAL.values() for m in ms})
#: writes failed and counted as another operation (storing from a file is a ``set``)
WRITES_AS = {"set_file": "set"}


class FaultyStore(WrapperStore):
    """Fail or delay chosen operations on demand.

    ``fail("set", key="a/b", times=1)`` makes the next ``set`` of ``a/b`` raise an EIO
    :class:`~nczfs.toolbox.errors.BackendError` without touching the medium (``after=True``: after
    the inner call succeeded). ``heal()`` disarms everything. ``calls`` counts every call by
    operation name, failed or not; ``latency`` seconds are slept before each call. The steps
    of an upload (:data:`UPLOAD_STEPS`) are operations too.
    """

    #: not staging: data staged would bypass the faults armed for ``set``
    passes = ("open_upload", "list_tree")

    def __init__(self, inner: Store, latency: float = 0.0):
        super().__init__(inner)
        self.latency = latency
        self.faults: list[Fault] = []
        self.calls: collections.Counter[str] = collections.Counter()

    def fail(
        self,
        op: str,
        exc: BaseException | Callable[[str], BaseException] | None = None,
        *,
        key: str | Callable[[str], bool] | None = None,
        times: int | None = None,
        after: bool = False,
    ) -> None:
        if op not in OPERATIONS and op not in FAST_PATHS and op not in UPLOAD_STEPS:
            raise ValueError(f"{op!r} is not a store operation")
        make: Callable[[str], BaseException]
        if exc is None:
            make = _default_exc
        elif isinstance(exc, BaseException):
            make = lambda _key: exc  # noqa: E731
        else:
            make = exc
        match: Callable[[str], bool]
        if key is None:
            match = lambda _k: True  # noqa: E731
        elif isinstance(key, str):
            match = lambda k: k == key  # noqa: E731
        else:
            match = key
        self.faults.append(Fault(op, make, match, times, after))

    def heal(self, op: str | None = None) -> None:
        self.faults = [f for f in self.faults if op is not None and f.op != op]

    def _take(self, op: str, key: str, after: bool) -> BaseException | None:
        for f in self.faults:
            if f.op == op and f.after == after and f.keys(key):
                if f.times is not None:
                    f.times -= 1
                    if f.times <= 0:
                        self.faults.remove(f)
                return f.exc(key)
        return None

    async def _before(self, op: str, key: str) -> None:
        self.calls[op] += 1
        if self.latency:
            await trio.sleep(self.latency)
        exc = self._take(op, key, after=False)
        if exc is not None:
            raise exc

    def _after(self, op: str, key: str) -> None:
        exc = self._take(op, key, after=True)
        if exc is not None:
            raise exc

    async def _call(self, op: str, key: str, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        await self._before(op, key)
        out = await fn(*args)
        self._after(op, key)
        return out

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[[], Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        return await self._call(WRITES_AS.get(op, op), keys[0], call)

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return await self._call("get", key, self.inner.get, key, rng)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self._call("get", key, self.inner.get_version, key, rng, etag)

    async def stat(self, key: str) -> ObjectInfo:
        return await self._call("stat", key, self.inner.stat, key)

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        return await self._call("list_dir", prefix, self.inner.list_dir, prefix)

    async def list_prefix(self, prefix: str) -> list[str]:
        return await self._call("list_prefix", prefix, self.inner.list_prefix, prefix)

    async def _list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        return await self._call("list_tree", prefix, self.inner.list_tree, prefix, limit)  # type: ignore[attr-defined]  # fast path: offered only where the store below has it

    async def _optional_dir_exists(self, prefix: str) -> bool:  # offered where the store below has it
        return await self._call("dir_exists", prefix, cast(TellsDirectories, self.inner).dir_exists, prefix)

    async def entry(self, key: str) -> DirEntry | None:
        return await self._call("entry", key, self.inner.entry, key)

    async def _open_upload(self, key: str) -> Upload | None:
        upload = await self._call("open_upload", key, self.inner.open_upload, key)  # type: ignore[attr-defined]  # fast path: offered only where the store below has it
        if upload is None:
            return None

        async def send(number: int, data: bytes) -> None:
            await self._call("upload_part", key, upload.send, number, data)

        async def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            return await self._call("complete_upload", key, upload.complete, size, if_version)

        async def abort() -> None:
            await self._call("abort_upload", key, upload.abort)

        return Upload(key, upload.part_size, send, complete, abort)
