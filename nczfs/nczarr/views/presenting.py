"""PresentingStore: show every dataset of the store in one metadata flavor (``--present``).

A dataset is the topmost folder holding ``.zgroup``, ``zarr.json``, ``.nczarr`` or
``.zmetadata``. Its metadata objects are read into the model (:mod:`nczfs.nczarr.metadata.read`) and
written out in the view's flavor (:mod:`nczfs.nczarr.views.emit`); the stored metadata objects are
replaced by those, arrays the view's reader cannot handle are hidden (one log line each), and
chunk keys pass through untouched, except Zarr v3 chunks, shown without their ``c/`` (or
``c.``) prefix. A view is rebuilt when it is older than ``ttl`` seconds or after a write
through the mount; rebuilding an unchanged dataset gives the same bytes, so sizes are stable.

Writes: chunk writes pass through (v3 keys mapped back). Metadata writes pass through when the
dataset is stored in the view's own flavor (or is not a dataset yet). Otherwise they are
translated back: the dataset as the view shows it, with the written object, is written out in
the stored flavor (only the objects that change), provided reading that back gives the same
dataset; if not, the write is refused with EROFS, so a dataset never mixes two flavors.

Here: reads and listings. A dataset's view: datasetview.py; building it: viewbuild.py; writes:
viewwrites.py.
"""

from __future__ import annotations

import time

from nczfs.toolbox.errors import KeyNotFound, Stale
from nczfs.nczarr.chunks.madechunks import MadeChunks, Stored
from nczfs.nczarr.chunks.recode import Recode
from nczfs.nczarr.chunks.sharding import IndexCache, Located
from nczfs.nczarr.metadata.roots import Roots
from nczfs.nczarr.metadata.validate import METADATA_NAMES, is_metadata_key
from nczfs.nczarr.views.datasetview import ZERO_RANK, DatasetView, made_fill, shard_at, shard_of
from nczfs.nczarr.views.fillreads import FillReads
from nczfs.nczarr.views.recodedchunks import RecodedChunks
from nczfs.nczarr.views.shownversions import ShownVersions
from nczfs.nczarr.views.viewbuild import ViewBuilder
from nczfs.nczarr.views.viewwrites import ViewWrites
from nczfs.store.base import Store
from nczfs.store.capabilities import hides
from nczfs.store.keys import join
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.wrapper import WrapperStore
from nczfs.store import optional

#: bytes of recoded chunks a view keeps by default (the mount gives it a quarter of --cache-size;
#: the stored chunks are cached below it, as on every mount)
RECODED_CACHE_BYTES = 64 * 1024 * 1024


class PresentingStore(FillReads, ViewWrites, WrapperStore):
    """The view (``--present``) of every dataset of ``inner``: reads here, writes in ViewWrites."""

    #: no fast paths: a view's keys, writes and listings are translated (staging off)
    passes = ()

    def __init__(self, inner: Store, view: str, ttl: float = 1.0, transcode: str = "auto",
                 recoded_cache_bytes: int = RECODED_CACHE_BYTES, made: MadeChunks | None = None):
        super().__init__(inner)
        self.view = view
        self.ttl = ttl
        self.transcode = transcode
        self._roots = Roots(inner, ttl)
        self._views: dict[str, DatasetView] = {}
        #: every view replaced (by a write, or at its TTL): the versions it showed, for a write,
        #: rename or delete that names one (ViewWrites._stored_condition)
        self._shown = ShownVersions()
        #: recoded chunks: kept in ``made`` (the mount's one cache of made chunks), else a cache
        #: of ``recoded_cache_bytes`` of this view's own
        self._recoded_chunks = RecodedChunks(made or MadeChunks(recoded_cache_bytes))
        self._indexes = IndexCache()
        self._builder = ViewBuilder(inner, view, transcode)
        #: dataset root -> its flavor when the deletes of its metadata began (a create-with-clobber
        #: empties it object by object: its flavor must not change under the deletes)
        self._deleting: dict[str, str] = {}
        #: dataset root -> why every write into it is refused (a delete of it was refused: the writes
        #: that follow would mix a new dataset into the old one)
        self._refused: dict[str, str] = {}

    # -- finding and building views --------------------------------------------------------------

    async def _is_root(self, folder: str) -> bool:
        return await self._roots.is_root(folder)

    async def view_for(self, key: str, reading: bool = False) -> DatasetView | None:
        """The view of the dataset ``key`` lies in (None: in no dataset).

        Reads of chunks (``reading``, not a metadata name) use the last view even when it is older
        than the TTL: readers read metadata before chunks, and that rebuilds it, so a large read
        does not rebuild views. Listings and metadata always get a view at most TTL old.
        """
        stale_ok = reading and not is_metadata_key(key)
        parts = key.split("/") if key else []
        # a folder the store hides (Icechunk's history) is no part of the dataset around it
        start = max((i for i in range(1, len(parts) + 1) if hides(self.inner, "/".join(parts[:i]))), default=0)
        for i in range(start, len(parts) + 1):
            folder = "/".join(parts[:i])
            if stale_ok and folder in self._views:
                return self._views[folder]
            if await self._is_root(folder):
                return await self._view(folder)
        return None

    async def _view(self, root: str) -> DatasetView | None:
        v = self._views.get(root)
        if v is not None and time.monotonic() - v.built < self.ttl:
            return v
        old, v = v, await self._builder.build(root)
        if v is not None:
            self._views[root] = v
            if old is not None:
                self._shown.replaced(old, v)
        return v

    def _forget(self, key: str) -> None:
        """A write changed the store under ``key``: rebuild what depends on it."""
        self._roots.forget(key)
        for root in list(self._views):
            if root == "" or key == root or key.startswith(root + "/"):
                self._shown.replaced(self._views.pop(root))

    # -- reads ---------------------------------------------------------------------------------------

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return await self._get(key, rng, None, versioned=False)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self._get(key, rng, etag, versioned=True)

    async def _get(self, key: str, rng: ByteRange | None, etag: str | None, versioned: bool) -> bytes:
        """View key ``key``: an object of the view, the stored chunk it stands for (at version
        ``etag``, where ``versioned``), cut from its shard or recoded where the view says so, or
        the chunk the view makes where the store has none (fillchunks.py)."""
        v = await self.view_for(key, reading=True)
        made = made_fill(v, key) if v is not None else None
        try:
            if made is not None and etag == made.version:  # that one, while the store still has none
                await self._shown_get(v, key, None, None, False)
                raise Stale(f"{key!r}: written in the store since it was read as a chunk never written")
            return await self._shown_get(v, key, rng, etag, versioned)
        except KeyNotFound:
            if made is None or (versioned and etag and etag != made.version):  # a stored version, gone: as before
                raise
        data = await self._made(made)
        return rng.slice(data) if rng else data

    async def _shown_get(self, v: DatasetView | None, key: str, rng: ByteRange | None, etag: str | None,
                         versioned: bool) -> bytes:
        target = key
        if v is not None:
            if key in v.objects:
                data = v.objects[key]
                return rng.view(data) if rng else data  # type: ignore[return-value]  # bytes-like: a view of the object, not a copy
            if shard_of(v, key) is not None:
                return await self._shard_chunk(v, key, rng, etag)
            stored = v.to_store(key)
            if stored is None:
                raise KeyNotFound(key)
            target = stored
            plan = v.recode_of(key)
            if plan is not None:
                data = await self._recoded(key, target, plan, etag)
                if rng is None or rng.start == 0:  # read from its start: the next chunks decode ahead
                    self._recoded_chunks.ahead(v, key, len(data), self._recode_ahead)
                return rng.view(data) if rng else data  # type: ignore[return-value]  # bytes-like: a view of the object, not a copy
        if versioned:
            return await self.inner.get_version(target, rng, etag)
        return await self.inner.get(target, rng)

    async def stat(self, key: str) -> ObjectInfo:
        v = await self.view_for(key, reading=True)
        if v is None:
            return await self.inner.stat(key)
        if key in v.objects:
            return v.info(key)
        if shard_of(v, key) is not None:
            info = await self._shard_info(v, key)
            if info is None:
                if (made := made_fill(v, key)) is None:
                    raise KeyNotFound(key)
                return await self._made_info(v, key, made)
            return info
        target = v.to_store(key)
        if target is None:
            raise KeyNotFound(key)
        try:
            info = await self.inner.stat(target)
        except KeyNotFound:
            if (made := made_fill(v, key)) is None:
                raise
            return await self._made_info(v, key, made)
        return await self._shown_info(v, key, info)

    async def entry(self, key: str) -> DirEntry | None:
        v = await self.view_for(key, reading=True)
        if v is None:
            return await self.inner.entry(key)
        name = key.rpartition("/")[2]
        if key in v.objects:
            return DirEntry(name, False, v.info(key))
        if shard_of(v, key) is not None:
            info = await self._shard_info(v, key)
            return DirEntry(name, False, info) if info is not None else await self._made_entry(v, key)
        target = v.to_store(key)
        found = await self.inner.entry(target) if target is not None else None
        if found is None:
            return await self._made_entry(v, key)
        return await self._shown_entry(v, key, DirEntry(name, found.is_dir, found.info))

    async def _shown_info(self, v: DatasetView, key: str, info: ObjectInfo) -> ObjectInfo:
        """What stat shows of the stored object ``info`` under view key ``key`` (a recoded chunk:
        the size it is shown with, made to know it if it is shown compressed; the same version
        tag, as the shown bytes follow the stored)."""
        plan = v.recode_of(key)
        size = info.size
        if plan is not None:
            target = v.to_store(key) or key
            known = plan.shown_size()
            if known is None:
                known = await self._recoded_chunks.size(plan, Stored(target, info.etag))
            if known is None:
                known = len(await self._recoded(key, target, plan, info.etag))
            size = known
        return ObjectInfo(key, size, info.mtime_ns, info.etag)

    async def _shown_entry(self, v: DatasetView, key: str, e: DirEntry) -> DirEntry:
        if e.info is None or e.is_dir:
            return e
        return DirEntry(e.name, e.is_dir, await self._shown_info(v, key, e.info))

    async def _recoded(self, key: str, target: str, plan: Recode, etag: str | None) -> bytes:
        """The shown chunk ``key`` made from the stored ``target``."""
        if etag is None:
            etag = (await self.inner.stat(target)).etag
        return await self._recoded_chunks.get(key, plan, Stored(target, etag or ""),
                                              lambda: self.inner.get_version(target, None, etag or None))

    async def _recode_ahead(self, key: str) -> None:
        """Recoded chunk ``key`` made ahead of a reader (unless held or being made)."""
        v = await self.view_for(key, reading=True)
        target, plan = (v.to_store(key), v.recode_of(key)) if v is not None else (None, None)
        if v is None or target is None or plan is None:
            return
        etag = (await self.inner.stat(target)).etag
        if self._recoded_chunks.wanted(plan, Stored(target, etag)):
            await self._recoded(key, target, plan, etag)

    async def _shard_chunk(self, v: DatasetView, key: str, rng: ByteRange | None, etag: str | None,
                           reader: bool = True) -> bytes:
        """An innermost chunk of a sharded array: its byte range of its shard (recoded if need be;
        a ``reader``'s read from its start: the next chunks decoded ahead)."""
        sa, name = shard_at(v, key)
        loc = await sa.locate(self.inner, self._indexes, name)
        if loc is None:
            raise KeyNotFound(key)
        if etag and etag != loc.tag:
            raise Stale(f"{key!r}: its shard was rewritten in the store")
        plan = v.recodes.get(sa.array)
        if plan is None:
            a = loc.start + (rng.start if rng else 0)
            b = loc.end if rng is None or rng.end is None else min(loc.end, loc.start + rng.end)
            return await self.inner.get_version(loc.key, ByteRange(a, max(a, b)), loc.etag or None)
        data = await self._recoded_chunks.get(key, plan, Stored(loc.key, loc.etag, loc.start, loc.size),
                                              lambda: self.inner.get_version(loc.key, ByteRange(loc.start, loc.end),
                                                                             loc.etag or None))
        if reader and (rng is None or rng.start == 0):
            self._recoded_chunks.ahead(v, key, len(data), self._shard_ahead)
        return rng.view(data) if rng else data  # type: ignore[return-value]  # bytes-like: a view of the object, not a copy

    async def _shard_ahead(self, key: str) -> None:
        v = await self.view_for(key, reading=True)
        if v is not None and shard_of(v, key) is not None:
            await self._shard_chunk(v, key, None, None, reader=False)

    async def _shard_info(self, v: DatasetView, key: str, loc: Located | None = None) -> ObjectInfo | None:
        sa, name = shard_at(v, key)
        loc = loc or await sa.locate(self.inner, self._indexes, name)
        if loc is None:
            return None
        plan = v.recodes.get(sa.array)
        size = loc.size if plan is None else plan.shown_size()
        if size is None and plan is not None:
            size = await self._recoded_chunks.size(plan, Stored(loc.key, loc.etag, loc.start, loc.size))
        if size is None:
            size = len(await self._shard_chunk(v, key, None, loc.tag, reader=False))
        return ObjectInfo(key, size, loc.mtime_ns, loc.tag)

    async def _optional_dir_exists(self, prefix: str) -> bool:  # offered where the store below has it
        v = await self.view_for(prefix)
        if v is None:
            return await optional.dir_exists(self.inner, prefix)
        target = v.to_store(prefix)
        return (target is not None and await optional.dir_exists(self.inner, target)) or self._made_folder(v, prefix)

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        v = await self.view_for(prefix)
        if v is None:
            return await self.inner.list_dir(prefix)
        try:
            out = await self._stored_entries(v, prefix)
        except KeyNotFound:
            if not self._made_folder(v, prefix):
                raise
            out = {}
        await self._with_made(v, prefix, out)
        start = prefix + "/" if prefix else ""
        for key in v.objects:
            if key.startswith(start) and "/" not in key[len(start):]:
                name = key[len(start):]
                out[name] = DirEntry(name, False, v.info(key))
        return [out[n] for n in sorted(out)]

    async def _stored_entries(self, v: DatasetView, prefix: str) -> dict[str, DirEntry]:
        """What the view shows of the stored entries of folder ``prefix``, by name."""
        array = v.array_of(prefix)
        if array is not None and array in v.hidden:
            raise KeyNotFound(prefix)
        if array is None:
            return {e.name: e for e in await self.inner.list_dir(prefix) if v.to_store(join(prefix, e.name)) is not None}
        if array in v.sharded or array in v.char_axis:
            if prefix != array:
                raise KeyNotFound(prefix)
            return await (self._shard_chunks(v, array) if array in v.sharded else self._char_axis_chunks(v, array))
        if array not in v.v3:  # a v2 array whose chunks are recoded
            return {e.name: await self._shown_entry(v, join(prefix, e.name), e)
                    for e in await self.inner.list_dir(prefix) if v.to_store(join(prefix, e.name)) is not None}
        return await self._v3_chunks(v, prefix, array)

    async def _shard_chunks(self, v: DatasetView, array: str) -> dict[str, DirEntry]:
        """A sharded array's inner chunks that exist, as files of the view."""
        found = await v.sharded[array].chunks(self.inner, self._indexes)
        return {name: DirEntry(name, False, await self._shard_info(v, join(array, name), loc)) for name, loc in found.items()}

    async def _char_axis_chunks(self, v: DatasetView, array: str) -> dict[str, DirEntry]:
        """A string array shown as chars: stored chunk ``i.j`` is chunk ``i.j.0`` of the view."""
        out: dict[str, DirEntry] = {}
        lead, separator = v.char_axis[array]
        start = f"{array}/{'c' if lead == ZERO_RANK else lead}"
        for key in await self.inner.list_prefix(array):
            rest = key[len(start):] if key.startswith(start) else ""
            if lead == ZERO_RANK:
                rest = "0" if key == start else ""
            parts = rest.split(separator) if rest else []
            if parts and all(p.isdigit() for p in parts):
                name = ".".join([*parts, "0"])
                e = await self.inner.entry(key)
                if e is not None:
                    out[name] = await self._shown_entry(v, join(array, name), DirEntry(name, False, e.info))
        return out

    async def _v3_chunks(self, v: DatasetView, prefix: str, array: str) -> dict[str, DirEntry]:
        """A Zarr v3 array (or a folder of its chunks) as v2 names: without the chunk key prefix
        (``c/`` or ``c.``); a zero-rank array's one chunk ``c`` as ``0``."""
        cp = v.v3[array]
        out: dict[str, DirEntry] = {}
        if cp == ZERO_RANK:
            for e in await self.inner.list_dir(prefix):
                if e.name == "c" and not e.is_dir:
                    out["0"] = await self._shown_entry(v, join(prefix, "0"), DirEntry("0", False, e.info))
        elif cp.endswith("/") or prefix != array:
            below = f"{array}/{cp}{prefix[len(array) + 1:]}".rstrip("/") if prefix != array else f"{array}/{cp.rstrip('/')}"
            try:
                entries = await self.inner.list_dir(below)
            except KeyNotFound:
                entries = []
            for e in entries:
                out[e.name] = await self._shown_entry(v, join(prefix, e.name), e)
        else:
            for e in await self.inner.list_dir(prefix):
                if e.name.startswith(cp) and e.name not in METADATA_NAMES:
                    name = e.name[len(cp):]
                    out[name] = await self._shown_entry(v, join(prefix, name), DirEntry(name, e.is_dir, e.info))
        return out

    async def list_prefix(self, prefix: str) -> list[str]:
        """The objects below ``prefix`` as shown; a medium's own symlinks and fifos (``live_meta``:
        a directory's) are listed by ``list_dir`` but are no objects."""
        out = []
        for e in await self.list_dir(prefix):
            key = join(prefix, e.name)
            if e.is_dir:
                out.extend(await self.list_prefix(key))
            elif e.is_object(self.capabilities.live_meta):
                out.append(key)
        return sorted(out)
