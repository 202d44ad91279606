"""Writes through a view (PresentingStore): chunk writes pass through (v3 keys mapped back);
metadata writes pass through where the dataset is stored in the view's own flavor, else are
translated back into the stored flavor or refused (EROFS), so a dataset never mixes two flavors."""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeGuard, TypeVar

from nczfs.toolbox.errors import Conflict, InvalidArgument, NotSupported, ReadOnly
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.read import DictObjects, read_dataset
from nczfs.nczarr.metadata.validate import is_metadata_key, stale_tail_prefix
from nczfs.nczarr.views.datasetview import DatasetView
from nczfs.nczarr.views.emit import emit, signature
from nczfs.nczarr.views.fillchunks import MADE_VERSION
from nczfs.nczarr.views.shownversions import NOT_SHOWN, ShownVersions
from nczfs.store.capabilities import check_content, checks_content
from nczfs.store.values import ABSENT, ByteRange, Meta, ObjectInfo
from nczfs.store import optional

if TYPE_CHECKING:
    from nczfs.store.base import Store

log = logging.getLogger(__name__)
T = TypeVar("T")

#: the stored flavor each view writes; datasets stored so take metadata writes through the view
VIEW_FLAVOR = {"netcdf-4.10": "V2-ZA", "netcdf-4.9": "V2-UC", "netcdf-4.9.1": "V2-LC", "xarray": "zarr-v2"}
#: the view that writes each stored flavor (to translate metadata written through a view back)
STORED_AS = {"V2-ZA": "netcdf-4.10", "V2-UC": "netcdf-4.9", "V2-LC": "netcdf-4.9.1", "zarr-v2": "xarray"}


def _logs_refusals(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A write the view refuses is logged (WARNING) as well as answered with its errno."""
    @functools.wraps(method)
    async def logged(*args: Any) -> T:
        try:
            return await method(*args)
        except ReadOnly as exc:
            log.warning("refused: %s", exc)
            raise

    return logged


class ViewWrites:
    """PresentingStore's writes: it gives ``inner``, ``view``, ``view_for`` and ``_forget``."""

    inner: Store
    view: str
    _deleting: dict[str, str]
    _refused: dict[str, str]
    _shown: ShownVersions

    if TYPE_CHECKING:  # what PresentingStore (presenting.py) gives the part, for the type checker alone
        async def view_for(self, key: str, reading: bool = False) -> DatasetView | None: ...
        def _forget(self, key: str) -> None: ...
        async def get(self, key: str, rng: ByteRange | None = None) -> bytes: ...
        async def set(self, key: str, data: bytes | bytearray | memoryview,
                      if_version: str | None = None) -> ObjectInfo: ...

    def translate_back(self, v: DatasetView, key: str, data: bytes) -> dict[str, bytes]:
        """The stored objects to write so the store holds, in its own flavor, what the client wrote
        to view object ``key``; ReadOnly (EROFS) where that is impossible or would lose information."""
        def refuse(why: str) -> ReadOnly:
            return ReadOnly(f"{key!r}: the {self.view} view shows this {v.flavor} dataset translated, and the "
                            f"write cannot be translated back: {why} (mount with --present as-stored to change it)")

        if v.flavor not in STORED_AS:
            raise refuse(f"nczfs does not write the {v.flavor} flavor")
        if v.hidden:
            raise refuse("some of its arrays are hidden from this view")
        start = v.root + "/" if v.root else ""
        current = {k[len(start):]: b for k, b in v.objects.items()}
        written = dict(current)
        # netCDF-C rewrites without O_TRUNC: a shorter object keeps the old tail (validating.py)
        written[key[len(start):]] = stale_tail_prefix(data, v.objects.get(key)) or bytes(data)
        old, new = read_dataset(DictObjects(current)), read_dataset(DictObjects(written))
        if [p for p in new.problems if p not in old.problems]:
            raise refuse(next(p for p in new.problems if p not in old.problems))
        old_out, _ = emit(old, STORED_AS[v.flavor], reader=False)
        new_out, hidden = emit(read_dataset(DictObjects(written)), STORED_AS[v.flavor], reader=False)
        if hidden:
            raise refuse(f"{hidden[0][0]}: {hidden[0][1]}")
        if signature(read_dataset(DictObjects(new_out))) != signature(new):
            raise refuse(f"the {v.flavor} flavor cannot hold it as written (types, dimensions or attributes would change)")
        return {start + k: b for k, b in new_out.items() if old_out.get(k) != b}

    async def _write_back(self, v: DatasetView, key: str, data: bytes) -> ObjectInfo:
        """The stored objects ``translate_back`` gives, each only while it is still the version
        the view was built from (where the store checks writes): else Conflict (ESTALE), as a
        close over another writer's change; the view is built again for what follows."""
        changes = self.translate_back(v, key, data)
        try:
            for target, content in changes.items():
                condition = v.stored_version(target) if self.inner.capabilities.checks_writes else None
                await self.inner.set(target, content, if_version=condition)
        except Conflict:
            self._forget(key)
            raise
        log.info("%r written through the %s view: stored as %s in %s", key, self.view, v.flavor,
                 ", ".join(sorted(changes)) or "nothing (no change)")
        self._forget(key)
        now = await self.view_for(key)
        if now is not None and key in now.objects:
            return now.info(key)
        return ObjectInfo(key, len(data), time.time_ns(), "")

    async def _stored_condition(self, key: str, call: Callable[..., Awaitable[Any]], target: str,
                                deleting: bool = False) -> dict[str, Any]:
        """The ``if_version`` of a write, rename or delete of view object ``key`` (stored
        ``target``). A metadata object a view shows rewritten carries the view's version (its
        bytes' MD5), which the stored object never has, and a view's version of an object is made
        of the dataset's other objects too (a ``.zmetadata`` made from the arrays stored): the
        stored version the view that showed the version given was built from stands for it (the
        view now, else the last of those replaced: ``ShownVersions``). No view kept showed it:
        left as given (the store refuses it: ESTALE). A chunk the view made (fillchunks.py) stands
        for no stored chunk: written while the store still has none (deleted: nothing, unless one
        was written since)."""
        given = getattr(call, "given", {}).get("if_version")
        if not given or given == ABSENT:
            return {}
        checked = self.inner.capabilities.checks_deletes if deleting else self.inner.capabilities.checks_writes
        if given.startswith(MADE_VERSION):
            return {"if_version": (given if deleting else ABSENT) if checked else None}
        stored = self._shown.stored_version(key, target, given, [await self.view_for(key)])
        if stored is NOT_SHOWN or (deleting and stored == ABSENT):
            return {}
        return {"if_version": stored if checked else None}

    def _translated(self, v: DatasetView | None, key: str) -> TypeGuard[DatasetView]:
        """Is ``key`` metadata of a dataset (in view ``v``) shown translated from its stored flavor?"""
        return (v is not None and is_metadata_key(key)
                and v.flavor != VIEW_FLAVOR[self.view] and not v.empty)

    def _check_refused(self, v: DatasetView | None, key: str) -> None:
        if v is not None and v.root in self._refused:
            raise ReadOnly(f"{key!r}: {self._refused[v.root]}")

    def _metadata_written(self, key: str) -> None:
        """A metadata object was written: a delete sequence in its dataset is over."""
        for root in [r for r in self._deleting if r == "" or key.startswith(r + "/")]:
            del self._deleting[root]

    async def _writable_target(self, key: str, deleting: bool = False) -> str:
        """The store key a write (or delete) of view key ``key`` goes to, or a clear refusal."""
        v = await self.view_for(key)
        if v is None:
            return key
        self._check_refused(v, key)
        is_meta = is_metadata_key(key)
        if is_meta:
            flavor = self._deleting.setdefault(v.root, v.flavor) if deleting else v.flavor
            if flavor != VIEW_FLAVOR[self.view] and not v.empty:
                if deleting:
                    self._refused[v.root] = (
                        f"a delete in the dataset {v.root or '/'!r} was refused, so every write into it is "
                        f"refused until the mount restarts (a dataset created over it would mix with it)")
                    self._deleting.pop(v.root, None)
                raise ReadOnly(
                    f"{key!r}: the {self.view} view shows this {flavor} dataset translated; metadata "
                    f"written or deleted through it would mix two flavors (mount with --present as-stored to change it)")
            return key
        array = v.array_of(key)
        if array is not None and array in v.hidden:
            raise ReadOnly(f"{key!r}: the array is hidden from the {self.view} view")
        if array is not None and array in v.sharded:
            raise ReadOnly(f"{key!r}: the {self.view} view shows this sharded array by its inner chunks, and a "
                           f"chunk written through it is not stored back into its shard (mount with "
                           f"--present as-stored to change it)")
        if v.recode_of(key) is not None:
            raise ReadOnly(f"{key!r}: the {self.view} view shows this array's chunks recoded for its reader "
                           f"(decoded, reordered or cut to the array), and a chunk written through it is not "
                           f"stored back (mount with --present as-stored to change it)")
        target = v.to_store(key)
        if target is None:
            raise InvalidArgument(f"{key!r}: not a writable name in the {self.view} view")
        return target

    def checks_content(self, key: str) -> bool:
        return is_metadata_key(key) or checks_content(self.inner, key)

    @_logs_refusals
    async def check_content(self, key: str, data: bytes) -> None:
        """Refuse now a metadata write that ``set`` would refuse, once ``data`` is whole JSON."""
        if is_metadata_key(key):
            try:
                jsontext.loads(data)
            except ValueError:
                return
            v = await self.view_for(key)
            self._check_refused(v, key)
            if self._translated(v, key):
                self.translate_back(v, key, data)
                return
            await self._writable_target(key)
        await check_content(self.inner, key, data)

    async def _optional_set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        """``set_meta``, offered where the store below has it: an object's attributes are kept on
        its stored key; a folder's on its own name (not on the write hook: the hook is not told
        whether the key is a folder)."""
        return await optional.set_meta(self.inner, key if is_dir else await self._writable_target(key), changes, is_dir)

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[..., Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        """Every write through the view: each goes to the stored key its view key stands for
        (:meth:`_writable_target`, a v3 chunk without its prefix), or metadata of a dataset shown
        translated is translated back into the stored flavor (:meth:`translate_back`) or refused;
        a link is made as a copy and a truncated object rewritten whole (by the filesystem, on
        NotSupported); a folder moves where its dataset is shown as stored."""
        if op == "link":
            raise NotSupported(f"{keys[1]!r}: names in a view are linked as copies")
        if op == "truncate":
            raise NotSupported(f"{keys[0]!r}: rewritten whole through the view")
        handler = _THROUGH_THE_VIEW.get(op)
        if handler is None:  # mkdir, rmdir, forget_dir: folders are the store's own
            return await call()
        return await handler(self, keys, call, data)

    @_logs_refusals
    async def _set(self, keys: tuple[str, ...], call: Callable[..., Awaitable[Any]], data: Any) -> ObjectInfo:
        """Stored under its stored key, or translated back."""
        key = keys[0]
        v = await self.view_for(key)
        self._check_refused(v, key)
        if is_metadata_key(key):
            self._metadata_written(key)
        if self._translated(v, key):
            return await self._write_back(v, key, bytes(data))
        return await self._stored_as(key, call, await self._writable_target(key))

    @_logs_refusals
    async def _set_file(self, keys: tuple[str, ...], call: Callable[..., Awaitable[Any]], data: Any) -> ObjectInfo:
        """Stored under its stored key (a metadata object of a translated dataset is refused)."""
        return await self._stored_as(keys[0], call, await self._writable_target(keys[0]))

    async def _stored_as(self, key: str, call: Callable[..., Awaitable[Any]], target: str) -> ObjectInfo:
        info = await call(target, **await self._stored_condition(key, call, target))
        self._forget(key)
        return ObjectInfo(key, info.size, info.mtime_ns, info.etag)

    @_logs_refusals
    async def _delete(self, keys: tuple[str, ...], call: Callable[..., Awaitable[Any]], data: Any) -> None:
        """The stored key deleted (only while it is the version the view was built from, where the
        delete names the view's version); metadata of a dataset shown translated is refused."""
        target = await self._writable_target(keys[0], deleting=True)
        await call(target, **await self._stored_condition(keys[0], call, target, deleting=True))
        self._forget(keys[0])

    async def _copy(self, keys: tuple[str, ...], call: Callable[..., Awaitable[Any]], data: Any) -> ObjectInfo:
        """A copy is a set of the bytes the view shows (they may be translated or recoded)."""
        src, dst = keys
        return await self.set(dst, await self.get(src))

    async def _make_node(self, keys: tuple[str, ...], call: Callable[..., Awaitable[Any]], data: Any) -> ObjectInfo:
        """Made under its stored key."""
        return await call(await self._writable_target(keys[0]))

    @_logs_refusals
    async def _rename(self, keys: tuple[str, ...], call: Callable[..., Awaitable[Any]], data: Any) -> ObjectInfo:
        """Between stored keys; onto metadata of a translated dataset: translated back, then the
        source deleted."""
        src, dst = keys
        v = await self.view_for(dst)
        self._check_refused(v, dst)
        if is_metadata_key(dst):
            self._metadata_written(dst)
        if self._translated(v, dst):
            source = await self._writable_target(src)
            info = await self._write_back(v, dst, await self.inner.get(source))
            await self.inner.delete(source)
            self._forget(src)
            return info
        target = await self._writable_target(dst)
        info = await call(await self._writable_target(src), target, **await self._stored_condition(dst, call, target))
        self._forget(src)
        self._forget(dst)
        return ObjectInfo(dst, info.size, info.mtime_ns, info.etag)

    @_logs_refusals
    async def _move_folder(self, keys: tuple[str, ...], call: Callable[..., Awaitable[T]], data: Any = None) -> T:
        """A folder moves where its dataset is shown as stored; what the view built under either
        name is forgotten."""
        for key in keys:
            v = await self.view_for(key)
            if v is not None and v.flavor != VIEW_FLAVOR[self.view]:
                raise ReadOnly(f"{key!r}: folders of a dataset shown translated by the {self.view} view cannot move")
        out = await call()
        for key in keys:
            self._forget(key)
        return out


#: the writes a view sends to other keys or translates (:meth:`ViewWrites._write`), each
#: answering what its operation's own call does
_THROUGH_THE_VIEW: dict[str, Callable[..., Awaitable[Any]]] = {
    "set": ViewWrites._set, "set_file": ViewWrites._set_file, "delete": ViewWrites._delete,
    "copy": ViewWrites._copy, "make_node": ViewWrites._make_node, "rename": ViewWrites._rename,
    "rename_dir": ViewWrites._move_folder}
