"""Stores that wrap another store: the base that forwards everything.

A wrapper is itself an async :class:`~nczfs.store.base.Store`, so wrappers stack (cache over
NCZarr validation over a backend). :class:`WrapperStore` forwards every call unchanged;
subclasses override what they change (writes: the one hook ``_write``). Failure injection over
the same base: :class:`nczfs.store.testing.FaultyStore`.
"""

from __future__ import annotations

from typing import Awaitable, BinaryIO, Callable, TypeVar

from nczfs.store.base import Store
from nczfs.store.capabilities import forwards_capabilities, offer_fast_paths
from nczfs.store.values import ByteRange, DirEntry, FsStats, Meta, ObjectInfo, Staged, Upload
from nczfs.store.threads import run_blocking

T = TypeVar("T")


def _below(method: Callable[..., Awaitable[T]], keys: tuple[str, ...], *rest: object,
           **given: object) -> Callable[..., Awaitable[T]]:
    """The change a write hook makes below: ``method(*keys, *rest, **given)``; called with other
    keys, the same change of those (a view's write goes to the stored key its view key stands
    for). ``given``: the keywords of the call (a write's ``if_version``), kept as ``.given``,
    ride along unless the hook passes others in their place."""
    def call(*other: str, **instead: object) -> Awaitable[T]:
        return method(*(other or keys), *rest, **{**given, **instead})

    call.given = given  # type: ignore[attr-defined]  # what the hook is told of the call's keywords
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
        return None if self._whole(key) else await self.inner.stage(key, data)  # type: ignore[attr-defined]  # fast path: offered only where the store below has it

    async def _open_upload(self, key: str) -> Upload | None:
        return None if self._whole(key) else await self.inner.open_upload(key)  # type: ignore[attr-defined]  # fast path: offered only where the store below has it

    async def _list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        return await self.inner.list_tree(prefix, limit)  # type: ignore[attr-defined]  # fast path: offered only where the store below has it

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

    async def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        return await self._write("rename", (src, dst), _below(self.inner.rename, (src, dst), if_version=if_version))

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
