"""ConsolidatingStore: keep consolidated metadata in step with the objects written through the mount.

When a ``.zgroup``, ``.zarray`` or ``.zattrs`` is stored, deleted or renamed, every ``.zmetadata``
in the folders above it gets that entry updated (or removed); for Zarr v3, the
``consolidated_metadata`` of every ``zarr.json`` group above a written ``zarr.json`` is updated the
same way. So a reader that trusts the consolidated copy (xarray's ``consolidated=True``) never
sees stale metadata. A ``.zmetadata`` written by the client itself is stored as written.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable, TypeVar

import trio

from nczfs.errors import KeyNotFound, NczfsError, NotSupported
from nczfs.nczarr import jsontext
from nczfs.store.base import Store
from nczfs.store.keys import join, parent_of
from nczfs.store.wrapper import WrapperStore

log = logging.getLogger(__name__)
T = TypeVar("T")

V2_ENTRIES = (".zgroup", ".zarray", ".zattrs")


def _ancestors(key: str) -> list[str]:
    """Folders above ``key``'s own folder, nearest first, ending with the root ``""``."""
    out, folder = [], parent_of(parent_of(key)) if "/" in key else None
    while folder is not None:
        out.append(folder)
        folder = parent_of(folder) if folder else None
    return out


def _rel(folder: str, key: str) -> str:
    return key[len(folder) + 1:] if folder else key


def _put(entries: dict, rel: str, value: Any, remove: bool) -> bool:
    """``value`` (or nothing) as ``entries[rel]``; has that changed them?"""
    if remove:
        return entries.pop(rel, None) is not None
    if entries.get(rel) == value:
        return False
    entries[rel] = value
    return True


class ConsolidatingStore(WrapperStore):
    #: staging and uploads of objects other than the watched metadata (whose writes set follows)
    passes = ("stage", "open_upload")

    def __init__(self, inner: Store, on_change: Callable[[str], None] | None = None):
        super().__init__(inner)
        self._lock = trio.Lock()
        #: told of every key this wrapper rewrites on its own, so cached sizes can be dropped
        self.on_change = on_change

    async def _store(self, key: str, data: bytes) -> None:
        await self.inner.set(key, data)
        if self.on_change is not None:
            self.on_change(key)

    async def _json(self, key: str) -> Any:
        try:
            return jsontext.loads(await self.inner.get(key))
        except (KeyNotFound, ValueError, UnicodeDecodeError):
            return None

    async def _update(self, key: str, value: Any, remove: bool = False) -> None:
        """Put ``value`` (or nothing) as ``key``'s entry in each consolidated copy above it."""
        name = key.rpartition("/")[2]
        if name in V2_ENTRIES:
            async with self._lock:
                await self._update_v2(key, value, remove)
        elif name == "zarr.json":
            async with self._lock:
                await self._update_v3(key, value, remove)

    async def _update_v2(self, key: str, value: Any, remove: bool) -> None:
        """The entry in each ``.zmetadata`` at or above ``key``'s folder."""
        for folder in [parent_of(key), *_ancestors(key)]:
            zkey = join(folder, ".zmetadata")
            meta = await self._json(zkey)
            if not isinstance(meta, dict) or not isinstance(meta.get("metadata"), dict):
                continue
            rel = _rel(folder, key)
            if _put(meta["metadata"], rel, value, remove):
                await self._store(zkey, json.dumps(meta, indent=4, sort_keys=True).encode())
                log.debug("%s: entry %s updated", zkey, rel)

    async def _update_v3(self, key: str, value: Any, remove: bool) -> None:
        """The entry in the ``consolidated_metadata`` of each ``zarr.json`` above ``key``'s node."""
        for folder in _ancestors(key):
            zkey = join(folder, "zarr.json")
            node = await self._json(zkey)
            cm = node.get("consolidated_metadata") if isinstance(node, dict) else None
            if not isinstance(cm, dict) or not isinstance(cm.get("metadata"), dict):
                continue
            if _put(cm["metadata"], _rel(folder, parent_of(key)), value, remove):
                await self._store(zkey, json.dumps(node, indent=2).encode())

    async def _after_write(self, key: str, data: bytes) -> None:
        try:
            value = jsontext.loads(data)
        except (ValueError, UnicodeDecodeError):
            log.warning("%r: not JSON, so its consolidated metadata entry was left as it was", key)
            return
        try:
            await self._update(key, value)
        except NczfsError as exc:
            log.error("%r: stored, but its consolidated metadata could not be updated: %s", key, exc)

    def _watched(self, key: str) -> bool:
        return key.rpartition("/")[2] in (*V2_ENTRIES, "zarr.json")

    _whole = _watched  # a watched object is read back as JSON: written whole, through set

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[[], Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        """Make the change, then update the consolidated copies of the watched objects it touched."""
        if op == "truncate" and self._watched(keys[0]):  # rewritten through set, which updates them
            raise NotSupported(f"{keys[0]!r}: consolidated metadata follows whole writes")
        if op == "rename_dir":
            return await self._move_folder(keys[0], keys[1], call)
        out = await call()
        await self._follow(op, keys, data)
        return out

    async def _follow(self, op: str, keys: tuple[str, ...], data: bytes | bytearray | memoryview | None) -> None:
        """A watched object was deleted or moved away (its entry goes), or stored (``data``) or
        made by a copy, rename or link (its entry is what was made, read back)."""
        if op in ("delete", "rename") and self._watched(keys[0]):
            await self._update(keys[0], None, remove=True)
        if op == "set" and self._watched(keys[0]):
            await self._after_write(keys[0], bytes(data))  # type: ignore[arg-type]
        elif op in ("rename", "copy", "link") and self._watched(keys[1]):
            await self._after_write(keys[1], await self.inner.get(keys[1]))

    async def _move_folder(self, src: str, dst: str, call: Callable[[], Awaitable[T]]) -> T:
        """Each watched object below ``src`` moves: its entry goes, its new one is read back."""
        moved = [k for k in await self.inner.list_prefix(src) if self._watched(k)]
        out = await call()
        for key in moved:
            await self._update(key, None, remove=True)
            new = dst + key[len(src):]
            await self._after_write(new, await self.inner.get(new))
        return out
