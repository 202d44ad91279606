"""Stores that wrap another store: the base that forwards everything, and failure injection.

A wrapper is itself an async :class:`~nczfs.store.base.Store`, so wrappers stack (cache over
NCZarr validation over a backend). :class:`WrapperStore` forwards every call unchanged;
subclasses override what they change. :class:`FaultyStore` makes chosen operations fail
(or slow down) on demand, for tests of what the filesystem does when the medium fails.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Awaitable, BinaryIO, Callable, TypeVar

import trio

from nczfs.errors import BackendError
from nczfs.store.base import ByteRange, DirEntry, FsStats, Meta, ObjectInfo, Store, Upload

T = TypeVar("T")


class WrapperStore(Store):
    """Forwards every call to ``inner``; capabilities are the inner store's. Except ``stage``
    and ``open_upload``: they bypass ``set``, so a wrapper offers them only by saying so itself;
    and ``list_tree``, which a wrapper that changes listings could not forward unchanged."""

    def __init__(self, inner: Store):
        self.inner = inner

    @property  # type: ignore[override]
    def supports_writes(self) -> bool:
        return self.inner.supports_writes

    @property  # type: ignore[override]
    def stores_directories(self) -> bool:
        return self.inner.stores_directories

    @property  # type: ignore[override]
    def read_only(self) -> bool:
        return self.inner.read_only

    @property  # type: ignore[override]
    def keys_form_a_tree(self) -> bool:
        return self.inner.keys_form_a_tree

    @property  # type: ignore[override]
    def checks_versions(self) -> bool:
        return self.inner.checks_versions

    @property  # type: ignore[override]
    def keeps_meta(self) -> bool:
        return self.inner.keeps_meta

    @property  # type: ignore[override]
    def live_meta(self) -> bool:
        return self.inner.live_meta

    @property  # type: ignore[override]
    def max_object_size(self) -> int | None:
        return self.inner.max_object_size

    def check_new_key(self, key: str) -> None:
        self.inner.check_new_key(key)

    async def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        return await self.inner.set_meta(key, changes, is_dir)

    async def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        return await self.inner.make_node(key, meta, target)

    async def readlink(self, key: str) -> str:
        return await self.inner.readlink(key)

    async def link(self, src: str, dst: str) -> ObjectInfo:
        return await self.inner.link(src, dst)

    async def truncate(self, key: str, size: int) -> ObjectInfo:
        return await self.inner.truncate(key, size)

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return await self.inner.get(key, rng)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self.inner.get_version(key, rng, etag)

    async def stat(self, key: str) -> ObjectInfo:
        return await self.inner.stat(key)

    async def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        return await self.inner.set_file(key, f, size)

    async def forget_dir(self, prefix: str) -> None:
        await self.inner.forget_dir(prefix)

    def checks_content(self, key: str) -> bool:
        return self.inner.checks_content(key)

    def read_only_key(self, key: str) -> bool:
        return self.inner.read_only_key(key)

    async def check_content(self, key: str, data: bytes) -> None:
        await self.inner.check_content(key, data)

    def counters(self) -> dict[str, int]:
        return self.inner.counters()

    def hides(self, key: str) -> bool:
        return self.inner.hides(key)

    async def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        return await self.inner.set(key, data)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        return await self.inner.list_dir(prefix)

    async def list_prefix(self, prefix: str) -> list[str]:
        return await self.inner.list_prefix(prefix)

    async def dir_exists(self, prefix: str) -> bool:
        return await self.inner.dir_exists(prefix)

    async def entry(self, key: str) -> DirEntry | None:
        return await self.inner.entry(key)

    async def copy(self, src: str, dst: str) -> ObjectInfo:
        return await self.inner.copy(src, dst)

    async def rename(self, src: str, dst: str) -> None:
        await self.inner.rename(src, dst)

    async def rename_dir(self, src: str, dst: str) -> None:
        await self.inner.rename_dir(src, dst)

    async def mkdir(self, prefix: str) -> None:
        await self.inner.mkdir(prefix)

    async def rmdir(self, prefix: str) -> None:
        await self.inner.rmdir(prefix)

    async def statfs(self) -> FsStats | None:
        return await self.inner.statfs()

    async def sync(self) -> None:
        await self.inner.sync()

    async def close(self) -> None:
        await self.inner.close()

    def describe(self) -> str:
        return self.inner.describe()


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


class FaultyStore(WrapperStore):
    """Fail or delay chosen operations on demand.

    ``fail("set", key="a/b", times=1)`` makes the next ``set`` of ``a/b`` raise an EIO
    :class:`~nczfs.errors.BackendError` without touching the medium (``after=True``: after
    the inner call succeeded). ``heal()`` disarms everything. ``calls`` counts every call by
    operation name, failed or not; ``latency`` seconds are slept before each call. The steps
    of an upload (:data:`UPLOAD_STEPS`) are operations too.
    """

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
        if not hasattr(Store, op) and op not in UPLOAD_STEPS:
            raise ValueError(f"{op!r} is not a store operation")
        if exc is None:
            make = _default_exc
        elif isinstance(exc, BaseException):
            make = lambda _key, exc=exc: exc  # noqa: E731
        else:
            make = exc
        if key is None:
            match: Callable[[str], bool] = lambda _k: True  # noqa: E731
        elif isinstance(key, str):
            match = lambda k, key=key: k == key  # noqa: E731
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

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return await self._call("get", key, self.inner.get, key, rng)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self._call("get", key, self.inner.get_version, key, rng, etag)

    async def stat(self, key: str) -> ObjectInfo:
        return await self._call("stat", key, self.inner.stat, key)

    async def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        return await self._call("set", key, self.inner.set_file, key, f, size)

    async def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        return await self._call("set", key, self.inner.set, key, data)

    async def delete(self, key: str) -> None:
        await self._call("delete", key, self.inner.delete, key)

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        return await self._call("list_dir", prefix, self.inner.list_dir, prefix)

    async def list_prefix(self, prefix: str) -> list[str]:
        return await self._call("list_prefix", prefix, self.inner.list_prefix, prefix)

    async def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        return await self._call("list_tree", prefix, self.inner.list_tree, prefix, limit)

    async def dir_exists(self, prefix: str) -> bool:
        return await self._call("dir_exists", prefix, self.inner.dir_exists, prefix)

    async def entry(self, key: str) -> DirEntry | None:
        return await self._call("entry", key, self.inner.entry, key)

    async def copy(self, src: str, dst: str) -> ObjectInfo:
        return await self._call("copy", src, self.inner.copy, src, dst)

    async def rename(self, src: str, dst: str) -> None:
        await self._call("rename", src, self.inner.rename, src, dst)

    async def rename_dir(self, src: str, dst: str) -> None:
        await self._call("rename_dir", src, self.inner.rename_dir, src, dst)

    async def mkdir(self, prefix: str) -> None:
        await self._call("mkdir", prefix, self.inner.mkdir, prefix)

    async def rmdir(self, prefix: str) -> None:
        await self._call("rmdir", prefix, self.inner.rmdir, prefix)

    async def open_upload(self, key: str) -> Upload | None:
        upload = await self._call("open_upload", key, self.inner.open_upload, key)
        if upload is None:
            return None

        async def send(number: int, data: bytes) -> None:
            await self._call("upload_part", key, upload.send, number, data)  # type: ignore[arg-type]

        async def complete(size: int) -> ObjectInfo:
            return await self._call("complete_upload", key, upload.complete, size)  # type: ignore[arg-type]

        async def abort() -> None:
            await self._call("abort_upload", key, upload.abort)  # type: ignore[arg-type]

        return Upload(key, upload.part_size, send, complete, abort)
