"""ConsolidatingStore: keep consolidated metadata in step with the objects written through the mount.

When a ``.zgroup``, ``.zarray`` or ``.zattrs`` is stored, deleted or renamed, every ``.zmetadata``
in the folders above it gets that entry updated (or removed); for Zarr v3, the
``consolidated_metadata`` of every ``zarr.json`` group above a written ``zarr.json`` is updated the
same way. So a reader that trusts the consolidated copy (xarray's ``consolidated=True``) never
sees stale metadata. A ``.zmetadata`` written by the client itself is stored as written.

Other mounts and clients may update the same copy at the same time: each rewrite reads the copy
with its version, applies only this mount's change of one entry to it, and (where the store checks
writes) stores it only while it is still that version; refused, it reads and merges again, so no
writer's entry is lost. Where the store cannot check, the copy is read from the store (not a
cache) right before it is rewritten, and the last writer wins. A store that finds another program's
change of a copy only after the mount's own was staged (zip) merges the two with
:func:`merge_consolidated` (:mod:`nczfs.daemon.stack` tells it so).
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any, Awaitable, Callable, TypeVar

import trio

from nczfs.toolbox.errors import KeyNotFound, NczfsError, NotSupported, Stale
from nczfs.nczarr.metadata import jsontext
from nczfs.store.base import Store
from nczfs.store.keys import join, parent_of
from nczfs.store.wrapper import WrapperStore
from nczfs.store import optional

log = logging.getLogger(__name__)
T = TypeVar("T")

V2_ENTRIES = (".zgroup", ".zarray", ".zattrs")
#: rewrites of one consolidated copy tried (each after reading it again) before the write fails
ATTEMPTS = 8
#: the wait (seconds) after a refused rewrite, doubled after each, jittered by up to half
BACKOFF = 0.01


class ConsolidationLost(Stale):
    """Another writer changed a consolidated copy at each attempt to update it (ESTALE)."""


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


def _entries(doc: Any, v3: bool) -> dict | None:
    """The entries of a ``.zmetadata`` (``v3``: of a ``zarr.json``'s ``consolidated_metadata``)."""
    if v3:
        cm = doc.get("consolidated_metadata") if isinstance(doc, dict) else None
        doc = cm
    entries = doc.get("metadata") if isinstance(doc, dict) else None
    return entries if isinstance(entries, dict) else None


def _dump(doc: Any, v3: bool) -> bytes:
    return json.dumps(doc, indent=2).encode() if v3 else json.dumps(doc, indent=4, sort_keys=True).encode()


def _outside(doc: Any, v3: bool) -> Any:
    """``doc`` without its consolidated entries (the group's own metadata)."""
    if not isinstance(doc, dict):
        return doc
    if not v3:
        return {k: v for k, v in doc.items() if k != "metadata"}
    cm = doc.get("consolidated_metadata")
    if not isinstance(cm, dict):
        return doc
    return {**doc, "consolidated_metadata": {k: v for k, v in cm.items() if k != "metadata"}}


def is_consolidated(key: str) -> bool:
    """Can ``key`` hold consolidated metadata (:func:`merge_consolidated` answers for it)?"""
    return key.rpartition("/")[2] in (".zmetadata", "zarr.json")


def merge_consolidated(key: str, theirs: bytes, ours: bytes, base: bytes | None) -> bytes | None:
    """The consolidated copy ``key`` that another writer (``theirs``) and this mount (``ours``)
    both changed since ``base`` (None: there was none): theirs, with this mount's changes of
    entries (each set or removed since the base) applied to it, and the group's own metadata of
    whichever of the two changed it. None (no merge) where one is not a consolidated copy or both
    changed the group's own metadata."""
    v3 = key.rpartition("/")[2] == "zarr.json"
    try:
        t, o, b = (None if data is None else jsontext.loads(data) for data in (theirs, ours, base))
    except (ValueError, UnicodeDecodeError):
        return None
    te, oe, be = _entries(t, v3), _entries(o, v3), {} if b is None else _entries(b, v3)
    if te is None or oe is None or be is None:
        return None
    doc: Any
    if _outside(o, v3) in (_outside(b, v3), _outside(t, v3)):
        doc = t
    elif b is not None and _outside(t, v3) == _outside(b, v3):
        doc = o
    else:
        return None
    merged = {**te, **{rel: v for rel, v in oe.items() if rel not in be or be[rel] != v}}
    for rel in be.keys() - oe.keys():
        merged.pop(rel, None)
    if doc is t and merged == te:
        return theirs
    _set_entries(doc, merged, v3)
    return _dump(doc, v3)


def _set_entries(doc: dict, entries: dict, v3: bool) -> None:
    (doc["consolidated_metadata"] if v3 else doc)["metadata"] = entries


class ConsolidatingStore(WrapperStore):
    #: staging and uploads of objects other than the watched metadata (whose writes set follows)
    passes = ("stage", "open_upload")

    def __init__(self, inner: Store, on_change: Callable[[str], None] | None = None):
        super().__init__(inner)
        self._lock = trio.Lock()
        #: told of every key this wrapper rewrites on its own, so cached sizes can be dropped
        self.on_change = on_change
        #: rewrites refused because another writer's came between, and writes failed after ATTEMPTS
        self.stats = {"consolidated.merged-again": 0, "consolidated.lost": 0}
        #: key -> (versions this wrapper's own rewrites replaced, the last one it stored): a write
        #: above conditioned on a version the mount itself replaced means the mount's own newest
        self._own: dict[str, tuple[set[str], str]] = {}

    def counters(self) -> dict[str, int]:
        return {**optional.counters(self.inner), **self.stats}

    async def _store(self, key: str, data: bytes, if_version: str | None, replaced: str | None) -> None:
        info = await self.inner.set(key, data, if_version=if_version)
        if replaced and info.etag:
            seen = self._own.get(key, (set(), ""))[0]
            self._own[key] = ({*seen, replaced} - {info.etag}, info.etag)
        if self.on_change is not None:
            self.on_change(key)

    def _mounts_own(self, key: str, given: dict) -> dict:
        """The keywords of a write onto ``key`` conditioned on a version this wrapper's own
        rewrite replaced: conditioned on the version it stored instead (it is the mount's own)."""
        replaced, latest = self._own.get(key, (set(), ""))
        return {"if_version": latest} if given.get("if_version") in replaced else {}

    async def _read(self, key: str) -> tuple[Any, str | None]:
        """``key``'s JSON (None: no object, or not JSON) and the version it was read at (None:
        none there; "": the store tells none). Stale if it changed between the two."""
        try:
            info = await self.inner.stat(key)
            data = await self.inner.get_version(key, None, info.etag or None)
        except KeyNotFound:
            return None, None
        try:
            return jsontext.loads(data), info.etag
        except (ValueError, UnicodeDecodeError):
            return None, info.etag

    async def _rewrite(self, zkey: str, change: Callable[[Any], bool], dump: Callable[[Any], bytes]) -> None:
        """``change`` (True: it changed the content) applied to ``zkey``'s content as read now,
        stored only while ``zkey`` is still the version read (where the store checks writes);
        refused (another writer updated it meanwhile), read and applied again, a few times."""
        for attempt in range(ATTEMPTS):
            if not self.capabilities.checks_writes:  # nothing would refuse a stale copy: read the store's own
                await optional.refresh(self.inner, zkey)
            try:
                content, version = await self._read(zkey)
                if content is None and version is not None and self.capabilities.checks_writes:
                    await optional.refresh(self.inner, zkey)  # there, but not JSON as kept: the store's own copy
                    content, version = await self._read(zkey)
                if content is None and version is not None:
                    log.warning("%r: not JSON, so this mount's change of it was not made", zkey)
                if content is None or not change(content):
                    return
                await self._store(zkey, dump(content), (version or None) if self.capabilities.checks_writes else None, version)
                log.debug("%r: rewritten over version %r", zkey, version)
                return
            except Stale as exc:  # Conflict included: another writer's version came between
                self.stats["consolidated.merged-again"] += 1
                log.info("%r: changed by another writer (%s): read and merged again", zkey, exc)
                await trio.sleep(BACKOFF * 2**attempt * random.uniform(0.5, 1.5))
        self.stats["consolidated.lost"] += 1
        raise ConsolidationLost(f"{zkey!r} was changed by another writer at each of {ATTEMPTS} attempts to update it")

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
            rel = _rel(folder, key)

            def change(meta: Any, rel: str = rel) -> bool:
                entries = _entries(meta, v3=False)
                return entries is not None and _put(entries, rel, value, remove)

            await self._rewrite(join(folder, ".zmetadata"), change, lambda meta: _dump(meta, v3=False))

    async def _update_v3(self, key: str, value: Any, remove: bool) -> None:
        """The entry in the ``consolidated_metadata`` of each ``zarr.json`` above ``key``'s node."""
        for folder in _ancestors(key):
            rel = _rel(folder, parent_of(key))

            def change(node: Any, rel: str = rel) -> bool:
                entries = _entries(node, v3=True)
                return entries is not None and _put(entries, rel, value, remove)

            await self._rewrite(join(folder, "zarr.json"), change, lambda node: _dump(node, v3=True))

    async def _after_write(self, key: str, data: bytes) -> None:
        try:
            value = jsontext.loads(data)
        except (ValueError, UnicodeDecodeError):
            log.warning("%r: not JSON, so its consolidated metadata entry was left as it was", key)
            return
        try:
            await self._update(key, value)
        except ConsolidationLost as exc:  # its entry would be missing there for good: the write fails
            lost = ConsolidationLost(f"{key!r}: stored, but its entry in the consolidated metadata is missing: {exc}")
            log.error("%s", lost)
            raise lost from None
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
        out = await call(**self._mounts_own(keys[-1], getattr(call, "given", {})))
        await self._follow(op, keys, data)
        return out

    async def _follow(self, op: str, keys: tuple[str, ...], data: bytes | bytearray | memoryview | None) -> None:
        """A watched object was deleted or moved away (its entry goes), or stored (``data``) or
        made by a copy, rename or link (its entry is what was made, read back)."""
        if op in ("delete", "rename") and self._watched(keys[0]):
            await self._update(keys[0], None, remove=True)
        if op == "set" and self._watched(keys[0]):
            await self._after_write(keys[0], bytes(data))  # type: ignore[arg-type]  # a set always carries its data
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
