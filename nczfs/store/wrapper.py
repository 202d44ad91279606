"""Stores that wrap another store: the base that forwards everything.

A wrapper is itself an async :class:`~nczfs.store.base.Store`, so wrappers stack (cache over
NCZarr validation over a backend). :class:`WrapperStore` forwards every call unchanged;
subclasses override what they change (writes: the one hook ``_write``). Failure injection over
the same base: :class:`nczfs.store.testing.FaultyStore`.
"""

from __future__ import annotations

from typing import Awaitable, BinaryIO, Callable, TypeVar

from nczfs.store.base import Store
from nczfs.store.capabilities import (Capabilities, WRAPPED, HoldsBytes, ListsTrees, Stages, UploadsInParts, offer,
                                     offer_fast_paths, offer_hooks)
from nczfs.store.forwarding import at_once, awaited, call_below, through_write
from nczfs.store.values import DirEntry, ObjectInfo, Staged, Upload
from nczfs.store.threads import run_blocking

T = TypeVar("T")


class WrapperStore(Store):
    """Forwards every call to ``inner``; its capabilities and optional operations are the inner
    store's (it has each Protocol of :data:`~nczfs.store.capabilities.WRAPPED` exactly where
    ``inner`` has it, or where its class answers it itself).

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
        offer(self, inner, WRAPPED)
        if self._reads_unchanged():
            offer(self, inner, {HoldsBytes: ("held_object", "object_arrives")})
        offer_hooks(self, inner)

    @classmethod
    def _reads_unchanged(cls) -> bool:
        """Do this wrapper's reads return what the store below returns (bytes held below may be
        handed out as its own: :class:`~nczfs.store.capabilities.HoldsBytes`)?"""
        return cls.get is WrapperStore.get and cls.get_version is WrapperStore.get_version

    @property
    def below(self) -> Store:
        """The store whose capabilities this one has."""
        return self.inner

    @property
    def capabilities(self) -> Capabilities:
        """The store below's."""
        return self.inner.capabilities

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
        assert isinstance(self.inner, Stages)  # offered only where it is
        return None if self._whole(key) else await self.inner.stage(key, data)

    async def _open_upload(self, key: str) -> Upload | None:
        assert isinstance(self.inner, UploadsInParts)  # offered only where it is
        return None if self._whole(key) else await self.inner.open_upload(key)

    async def _list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        assert isinstance(self.inner, ListsTrees)  # offered only where it is
        return await self.inner.list_tree(prefix, limit)

    # ------------------------------------------------------------------ forwarded: the one table

    get = awaited()
    get_version = awaited()
    stat = awaited()
    entry = awaited()
    list_dir = awaited()
    list_prefix = awaited()
    sync = awaited()
    close = awaited()
    # writes: through the hook :meth:`_write`, the keys it changes first
    set = through_write(keys=1)
    delete = through_write(keys=1)
    copy = through_write(keys=2)
    rename = through_write(keys=2)

    # ------------------------------------------------------------------ the optional operations, where offered

    _optional_check_new_key = at_once()
    _optional_counters = at_once()
    _optional_describe = at_once()
    _optional_write_meta = at_once()
    _optional_readlink = awaited()
    _optional_dir_exists = awaited()
    _optional_statfs = awaited()
    _optional_read_small = awaited()
    _optional_held_object = at_once()
    _optional_object_arrives = awaited()
    _optional_refresh = awaited()
    _optional_rename_dir = through_write(keys=2)
    _optional_mkdir = through_write(keys=1)
    _optional_rmdir = through_write(keys=1)
    _optional_forget_dir = through_write(keys=1)
    _optional_set_meta = through_write(keys=1)
    _optional_make_node = through_write(keys=1)
    _optional_link = through_write(keys=2)
    _optional_truncate = through_write(keys=1)

    async def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        if self._whole(key):
            return await self.set(key, await run_blocking(f.read, size), if_version=if_version)
        return await self._write("set_file", (key,), call_below(self.inner.set_file, (key,), f, size, if_version=if_version))
