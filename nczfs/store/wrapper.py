"""Stores that wrap another store: the base that forwards everything, and failure injection.

A wrapper is itself an async :class:`~nczfs.store.base.Store`, so wrappers stack (cache over
NCZarr validation over a backend). :class:`WrapperStore` forwards every call unchanged;
subclasses override what they change (writes: the one hook ``_write``). :class:`FaultyStore`
makes chosen operations fail (or slow down) on demand, for tests of what the filesystem does
when the medium fails.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Awaitable, BinaryIO, Callable, TypeVar

import trio

from nczfs.errors import BackendError
from nczfs.store.base import Store
from nczfs.store.capabilities import FAST_PATHS, forwards_capabilities, offer_fast_paths
from nczfs.store.values import ByteRange, DirEntry, FsStats, Meta, ObjectInfo, Staged, Upload
from nczfs.threads import run_blocking

T = TypeVar("T")


def _below(method: Callable[..., Awaitable[T]], keys: tuple[str, ...], *rest: object,
           **given: object) -> Callable[..., Awaitable[T]]:
    """The change a write hook makes below: ``method(*keys, *rest, **given)``; called with other
    keys, the same change of those (a view's write goes to the stored key its view key stands
    for). ``given``: the keywords of the call (a write's ``if_version``), kept as ``.given``,
    ride along unless the hook passes others in their place."""
    def call(*other: str, **instead: object) -> Awaitable[T]:
        return method(*(other or keys), *rest, **{**given, **instead})

    call.given = given  # type: ignore[attr-defined]
    return call


@forwards_capabilities
class WrapperStore(Store):
    """Forwards every call to ``inner``; its capabilities are the inner store's.

    Every change of the store below passes through one hook, :meth:`_write`: a wrapper that
    watches or refuses changes overrides it instead of each writing method (one that changes
    the bytes or keys it sends below overrides just that method). The keys a wrapper must see
    whole (:meth:`_whole`) are stored through ``set``, never from a file, staged or uploaded.
    The fast paths (:class:`~nczfs.store.capabilities.Stages`, ``UploadsInParts``, ``ListsTrees``) bypass that hook
    (staging and uploads do not go through ``set``, a tree listing not through ``list_dir``), so
    a wrapper offers them only where it says so in :attr:`passes` (and the store below has them);
    ``_stage``, ``_open_upload`` and ``_list_tree`` answer them, forwarded unchanged unless the
    wrapper overrides them."""

    #: the fast paths this wrapper offers where the store below does: none unless it says so
    passes: tuple[str, ...] = ()

    def __init__(self, inner: Store):
        self.inner = inner
        offer_fast_paths(self, inner, self.passes)

    @property
    def below(self) -> Store:
        """The store whose capabilities this one has."""
        return self.inner

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[..., Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        """Make the change ``call()``: the Store method ``op`` of ``keys`` (the key it changes;
        a copy, rename or link: the source, then the destination); ``data``: what a ``set`` stores.
        ``call(*other_keys)`` makes the same change of other keys below."""
        return await call()

    def _whole(self, key: str) -> bool:
        """Must this wrapper see ``key``'s content whole? Then it is stored through :meth:`set`:
        ``set_file`` reads the file into memory, and staging and uploads are not offered for it."""
        return False

    # ------------------------------------------------------------------ the fast paths, where offered

    async def _stage(self, key: str, data: bytes) -> Staged | None:
        return None if self._whole(key) else await self.inner.stage(key, data)  # type: ignore[attr-defined]

    async def _open_upload(self, key: str) -> Upload | None:
        return None if self._whole(key) else await self.inner.open_upload(key)  # type: ignore[attr-defined]

    async def _list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        return await self.inner.list_tree(prefix, limit)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ reads

    def check_new_key(self, key: str) -> None:
        self.inner.check_new_key(key)

    async def readlink(self, key: str) -> str:
        return await self.inner.readlink(key)

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return await self.inner.get(key, rng)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self.inner.get_version(key, rng, etag)

    async def stat(self, key: str) -> ObjectInfo:
        return await self.inner.stat(key)

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

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        return await self.inner.list_dir(prefix)

    async def list_prefix(self, prefix: str) -> list[str]:
        return await self.inner.list_prefix(prefix)

    async def dir_exists(self, prefix: str) -> bool:
        return await self.inner.dir_exists(prefix)

    async def entry(self, key: str) -> DirEntry | None:
        return await self.inner.entry(key)

    async def statfs(self) -> FsStats | None:
        return await self.inner.statfs()

    async def refresh(self, key: str) -> None:
        await self.inner.refresh(key)

    def describe(self) -> str:
        return self.inner.describe()

    # ------------------------------------------------------------------ writes: through _write

    async def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        return await self._write("set", (key,), _below(self.inner.set, (key,), data, if_version=if_version), data)

    async def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        if self._whole(key):
            return await self.set(key, await run_blocking(f.read, size), if_version=if_version)
        return await self._write("set_file", (key,), _below(self.inner.set_file, (key,), f, size, if_version=if_version))

    async def delete(self, key: str, if_version: str | None = None) -> None:
        given = {"if_version": if_version} if if_version is not None else {}
        await self._write("delete", (key,), _below(self.inner.delete, (key,), **given))

    async def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        return await self._write("copy", (src, dst), _below(self.inner.copy, (src, dst), if_version=if_version))

    async def rename(self, src: str, dst: str, if_version: str | None = None) -> None:
        await self._write("rename", (src, dst), _below(self.inner.rename, (src, dst), if_version=if_version))

    async def rename_dir(self, src: str, dst: str) -> None:
        await self._write("rename_dir", (src, dst), _below(self.inner.rename_dir, (src, dst)))

    async def mkdir(self, prefix: str) -> None:
        await self._write("mkdir", (prefix,), _below(self.inner.mkdir, (prefix,)))

    async def rmdir(self, prefix: str) -> None:
        await self._write("rmdir", (prefix,), _below(self.inner.rmdir, (prefix,)))

    async def forget_dir(self, prefix: str) -> None:
        await self._write("forget_dir", (prefix,), _below(self.inner.forget_dir, (prefix,)))

    async def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        return await self._write("set_meta", (key,), _below(self.inner.set_meta, (key,), changes, is_dir))

    async def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        return await self._write("make_node", (key,), _below(self.inner.make_node, (key,), meta, target))

    async def link(self, src: str, dst: str) -> ObjectInfo:
        return await self._write("link", (src, dst), _below(self.inner.link, (src, dst)))

    async def truncate(self, key: str, size: int) -> ObjectInfo:
        return await self._write("truncate", (key,), _below(self.inner.truncate, (key,), size))

    async def sync(self) -> None:
        await self.inner.sync()

    async def close(self) -> None:
        await self.inner.close()


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
#: writes failed and counted as another operation (storing from a file is a ``set``)
WRITES_AS = {"set_file": "set"}


class FaultyStore(WrapperStore):
    """Fail or delay chosen operations on demand.

    ``fail("set", key="a/b", times=1)`` makes the next ``set`` of ``a/b`` raise an EIO
    :class:`~nczfs.errors.BackendError` without touching the medium (``after=True``: after
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
        if not hasattr(Store, op) and op not in FAST_PATHS and op not in UPLOAD_STEPS:
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
        return await self._call("list_tree", prefix, self.inner.list_tree, prefix, limit)  # type: ignore[attr-defined]

    async def dir_exists(self, prefix: str) -> bool:
        return await self._call("dir_exists", prefix, self.inner.dir_exists, prefix)

    async def entry(self, key: str) -> DirEntry | None:
        return await self._call("entry", key, self.inner.entry, key)

    async def _open_upload(self, key: str) -> Upload | None:
        upload = await self._call("open_upload", key, self.inner.open_upload, key)  # type: ignore[attr-defined]
        if upload is None:
            return None

        async def send(number: int, data: bytes) -> None:
            await self._call("upload_part", key, upload.send, number, data)  # type: ignore[arg-type]

        async def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            return await self._call("complete_upload", key, upload.complete, size, if_version)  # type: ignore[arg-type]

        async def abort() -> None:
            await self._call("abort_upload", key, upload.abort)  # type: ignore[arg-type]

        return Upload(key, upload.part_size, send, complete, abort)
