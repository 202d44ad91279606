"""PresentingStore: show every dataset of the store in one metadata flavor (``--present``).

A dataset is the topmost folder holding ``.zgroup``, ``zarr.json``, ``.nczarr`` or
``.zmetadata``. Its metadata objects are read into the model (:mod:`nczfs.nczarr.read`) and
written out in the view's flavor (:mod:`nczfs.nczarr.emit`); the stored metadata objects are
replaced by those, arrays the view's reader cannot handle are hidden (one log line each), and
chunk keys pass through untouched, except Zarr v3 chunks, shown without their ``c/`` (or
``c.``) prefix. A view is rebuilt when it is older than ``ttl`` seconds or after a write
through the mount; rebuilding an unchanged dataset gives the same bytes, so sizes are stable.

Writes: chunk writes pass through (v3 keys mapped back). Metadata writes pass through when the
dataset is stored in the view's own flavor (or is not a dataset yet). Otherwise they are
translated back: the dataset as the view shows it, with the written object, is written out in
the stored flavor (only the objects that change), provided reading that back gives the same
dataset; if not, the write is refused with EROFS, so a dataset never mixes two flavors.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, BinaryIO, Callable, TypeVar

import numpy as np

from nczfs.errors import InvalidArgument, KeyNotFound, NczfsError, NotSupported, ReadOnly, Stale
from nczfs.nczarr import jsontext
from nczfs.nczarr.emit import emit, signature
from nczfs.nczarr.v2form import v3_chunk_prefix, v3_to_v2
from nczfs.nczarr.viewshape import Layouts
from nczfs.nczarr.model import Dataset
from nczfs.nczarr.read import DictObjects, read_dataset
from nczfs.nczarr.roots import Roots
from nczfs.nczarr.sharding import IndexCache, Located, ShardedArray, Sharding
from nczfs.nczarr.transcode import Codecs, Recode
from nczfs.nczarr.validate import METADATA_NAMES, is_metadata_key, stale_tail_prefix
from nczfs.store.base import ByteRange, DirEntry, Meta, ObjectInfo, Store, join, parent_of
from nczfs.store.wrapper import WrapperStore
from nczfs.threads import run_blocking

log = logging.getLogger(__name__)
T = TypeVar("T")

#: the stored flavor each view writes; datasets stored so take metadata writes through the view
VIEW_FLAVOR = {"netcdf-4.10": "V2-ZA", "netcdf-4.9": "V2-UC", "netcdf-4.9.1": "V2-LC", "xarray": "zarr-v2"}
#: the view that writes each stored flavor (to translate metadata written through a view back)
STORED_AS = {"V2-ZA": "netcdf-4.10", "V2-UC": "netcdf-4.9", "V2-LC": "netcdf-4.9.1", "zarr-v2": "xarray"}
#: bytes of recoded chunks a view keeps by default (the mount gives it a quarter of --cache-size;
#: the stored chunks are cached below it, as on every mount)
RECODED_CACHE_BYTES = 64 * 1024 * 1024
#: the chunk "prefix" of a zero-rank Zarr v3 array: its one chunk is "c" (shown as "0")
ZERO_RANK = "<zero-rank>"
GROUP_META = (".zgroup", ".zattrs", ".zmetadata", ".nczarr", ".nczgroup", ".nczattr", ".nczattrs", "zarr.json")


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


@dataclass
class DatasetView:
    root: str
    flavor: str
    built: float
    #: full keys of the view's metadata objects -> bytes
    objects: dict[str, bytes] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    #: full array prefix -> where its chunks live below it in the store (Zarr v3: "c/" or "c.")
    v3: dict[str, str] = field(default_factory=dict)
    mtime_ns: int = 0
    #: no arrays, groups or attributes yet (a dataset being created): any flavor may be written
    empty: bool = False
    #: full array prefix -> how its chunks are shown when the view's reader cannot take them as stored
    recodes: dict[str, Recode] = field(default_factory=dict)
    #: full array prefix -> a sharded Zarr v3 array, shown by its innermost chunks
    sharded: dict[str, ShardedArray] = field(default_factory=dict)
    #: full array prefix -> (what precedes the stored chunk indices, their separator): strings shown
    #: as chars along one more axis of one chunk, chunk ``i.j.0`` being the stored ``i.j``
    char_axis: dict[str, tuple[str, str]] = field(default_factory=dict)

    def info(self, key: str) -> ObjectInfo:
        data = self.objects[key]
        return ObjectInfo(key, len(data), self.mtime_ns, hashlib.md5(data).hexdigest())

    def array_of(self, key: str) -> str | None:
        """The hidden, v3 or recoded array ``key`` lies in (or is), if any."""
        k = key
        while k:
            if k in self.hidden or k in self.v3 or k in self.recodes or k in self.sharded or k in self.char_axis:
                return k
            k = parent_of(k)
        return None

    def recode_of(self, key: str) -> Recode | None:
        """How the chunk ``key`` is shown, if its array's chunks are recoded."""
        array = self.array_of(key)
        if array is None or array == key or array not in self.recodes or is_metadata_key(key):
            return None
        return self.recodes[array]

    def to_store(self, key: str) -> str | None:
        """The store key behind view key ``key`` (None: not in the view, or synthesised)."""
        if key in self.objects:
            return None
        array = self.array_of(key)
        if array is not None:
            if key == array:
                return None if array in self.hidden else key
            if array in self.hidden or array in self.sharded:
                return None
            rest = key[len(array) + 1:]
            if is_metadata_key(rest):
                return None
            if array in self.char_axis:
                prefix, separator = self.char_axis[array]
                parts = rest.split(".")
                if len(parts) < 2 or parts[-1] != "0" or not all(p.isdigit() for p in parts):
                    return None
                if prefix == ZERO_RANK:
                    return f"{array}/c" if parts[:-1] == ["0"] else None
                return f"{array}/{prefix}{separator.join(parts[:-1])}"
            if array not in self.v3:
                return key
            if self.v3[array] == ZERO_RANK:  # a zero-rank v3 array's one chunk "c", shown as "0"
                return f"{array}/c" if rest == "0" else None
            return f"{array}/{self.v3[array]}{rest}"
        return None if is_metadata_key(key) else key


def _shard_of(v: DatasetView, key: str) -> tuple[ShardedArray, str] | None:
    """The sharded array whose view chunk ``key`` is, and the chunk's name (None if not one)."""
    array = parent_of(key)
    if array in v.sharded and not is_metadata_key(key):
        return v.sharded[array], key[len(array) + 1:]
    return None


class PresentingStore(WrapperStore):
    def __init__(self, inner: Store, view: str, ttl: float = 1.0, transcode: str = "auto",
                 recoded_cache_bytes: int = RECODED_CACHE_BYTES):
        super().__init__(inner)
        self.view = view
        self.ttl = ttl
        self.transcode = transcode
        self.recoded_cache_bytes = recoded_cache_bytes
        self._roots = Roots(inner, ttl)
        self._views: dict[str, DatasetView] = {}
        self._logged: set[tuple[str, str]] = set()
        #: recoded chunks by (stored key, stored version, recode), least recently used first
        self._recoded_cache: collections.OrderedDict[tuple, bytes] = collections.OrderedDict()
        self._recoded_bytes = 0
        self._indexes = IndexCache()
        #: array -> (its chunks' versions, what a scan of them found): see _facts
        self._scans: dict[str, tuple[tuple, dict]] = {}
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
        start = max((i for i in range(1, len(parts) + 1) if self.inner.hides("/".join(parts[:i]))), default=0)
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
        objects: dict[str, bytes] = {}
        await self._collect(root, "", objects)
        try:
            ds = read_dataset(DictObjects(objects))
        except NczfsError as exc:
            log.warning("%r: not shown as %s: %s", root or "/", self.view, exc)
            return None
        v = DatasetView(root, ds.flavor, time.monotonic(), mtime_ns=time.time_ns(),
                        empty=not (ds.root.variables or ds.root.groups or ds.root.attributes or ds.root.dims))
        for g in ds.root.walk():
            for var in g.variables:
                if ds.flavor == "zarr-v3":
                    node = jsontext.loads(objects[join(join(g.path.strip("/"), var.name), "zarr.json")])
                    name = (node.get("chunk_key_encoding") or {}).get("name", "default")
                    prefix = v3_chunk_prefix(var, name) if var.shape else ZERO_RANK
                    v.v3[join(root, join(g.path.strip("/"), var.name))] = prefix
        layouts = Layouts()
        facts = await self._facts(root, ds)
        synth, hidden = emit(ds, self.view, transcode=self.transcode, facts=facts, layouts=layouts)
        v.recodes = {join(root, path): plan for path, plan in layouts.recodes.items()}
        for path, separator in layouts.char_axis.items():
            full = join(root, path)
            v.char_axis[full] = (v.v3.pop(full, ""), separator)
        for path, (sh, shape, separator) in layouts.shardings.items():
            full = join(root, path)
            grid = tuple(-(-n // c) for n, c in zip(shape, sh.chunks))
            v.sharded[full] = ShardedArray(full, v.v3.pop(full), separator, sh, grid)
        v.objects = {join(root, k): self._as_stored(objects.get(k), b) for k, b in synth.items()}
        for path, reason in hidden:
            full = join(root, path)
            if ":" not in path:
                v.hidden.add(full)
                v.v3.pop(full, None)
            if (full, reason) not in self._logged:
                self._logged.add((full, reason))
                log.info("view %s hides %r: %s", self.view, full, reason)
        self._views[root] = v
        return v

    async def _facts(self, root: str, ds: Dataset) -> dict[str, dict]:
        """What a netCDF view needs from the chunks of some Zarr v3 arrays, by path: the longest
        variable-length string (its fixed width), whether nanosecond times are whole microseconds.
        Each array is scanned again only when one of its chunks changed."""
        out: dict[str, dict] = {}
        if self.view == "xarray" or ds.flavor != "zarr-v3":
            return out
        for g in ds.root.walk():
            for var in g.variables:
                ns = var.dtype == "numpy.datetime64" and var.dtype_config.get("unit") == "ns"
                v2 = v3_to_v2(var)
                if not (var.dtype == "string" or ns) or isinstance(v2, str) or v2.sharding is not None:
                    continue
                path = join(g.path.strip("/"), var.name)
                out[path] = await self._scan(join(root, path), Codecs(v2.compressor, tuple(v2.filters or ())), ns)
        return out

    async def _scan(self, array: str, codecs: Codecs, ns: bool) -> dict:
        chunks = [(k, await self.inner.stat(k)) for k in await self.inner.list_prefix(array)
                  if not is_metadata_key(k)]
        signature = tuple((k, i.etag, i.size) for k, i in chunks)
        cached = self._scans.get(array)
        if cached is not None and cached[0] == signature:
            return cached[1]
        fact: dict = {"us_exact": True} if ns else {"maxlen": 0}
        for key, info in chunks:
            decoded = await run_blocking(codecs.decode, await self.inner.get_version(key, None, info.etag or None))
            if ns:
                ints = np.frombuffer(decoded, "<i8")
                fact["us_exact"] &= bool(np.all((ints % 1000 == 0) | (ints == np.iinfo("i8").min)))
            else:
                fact["maxlen"] = max(fact["maxlen"], max((len(str(s).encode()) for s in decoded.ravel()), default=0))
        self._scans[array] = (signature, fact)
        return fact

    def _as_stored(self, stored: bytes | None, shown: bytes) -> bytes:
        """The stored bytes of an object where they mean what the view would show: an object a
        netCDF-C writer rewrites unchanged (in place, without O_TRUNC) keeps its length."""
        if stored is None or stored == shown:
            return shown
        try:
            if self.view == "xarray":
                json.loads(stored.decode("utf-8"))  # zarr-python reads standard JSON only
            same = jsontext.same(jsontext.loads(stored), jsontext.loads(shown))
        except ValueError:
            return shown
        return stored if same else shown

    async def _collect(self, root: str, rel: str, out: dict[str, bytes]) -> None:
        """Every metadata object of the dataset at ``root`` (keys relative to it), without
        listing array folders (they may hold many chunks)."""
        folder = join(root, rel) if rel else root
        names = {e.name: e.is_dir for e in await self.inner.list_dir(folder)}
        for name in GROUP_META:
            if names.get(name) is False:
                out[join(rel, name)] = await self.inner.get(join(folder, name))
        for child, is_dir in names.items():
            if not is_dir or child.startswith("."):
                continue
            crel = join(rel, child)
            for name in (".zarray", "zarr.json", ".nczvar", ".nczarray"):
                try:
                    out[join(crel, name)] = await self.inner.get(join(folder, join(child, name)))
                except NczfsError:
                    pass
            v3 = out.get(join(crel, "zarr.json"))
            if join(crel, ".zarray") in out or (v3 is not None and b'"array"' in v3):
                for name in (".zattrs", ".nczattr", ".nczattrs"):
                    try:
                        out[join(crel, name)] = await self.inner.get(join(folder, join(child, name)))
                    except NczfsError:
                        pass
            else:  # a group (or a plain folder that may hold groups)
                out.pop(join(crel, "zarr.json"), None)
                await self._collect(root, crel, out)

    def _forget(self, key: str) -> None:
        """A write changed the store under ``key``: rebuild what depends on it."""
        self._roots.forget(key)
        for root in list(self._views):
            if root == "" or key == root or key.startswith(root + "/"):
                self._views.pop(root, None)

    # -- reads ---------------------------------------------------------------------------------------

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        v = await self.view_for(key, reading=True)
        if v is None:
            return await self.inner.get(key, rng)
        if key in v.objects:
            data = v.objects[key]
            return rng.slice(data) if rng else data
        if _shard_of(v, key) is not None:
            return await self._shard_chunk(v, key, rng, None)
        target = v.to_store(key)
        if target is None:
            raise KeyNotFound(key)
        plan = v.recode_of(key)
        if plan is not None:
            data = await self._recoded(key, target, plan, None)
            return rng.slice(data) if rng else data
        return await self.inner.get(target, rng)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        v = await self.view_for(key, reading=True)
        if v is None or key in v.objects:
            return await self.get(key, rng) if v else await self.inner.get_version(key, rng, etag)  # type: ignore[attr-defined]
        if _shard_of(v, key) is not None:
            return await self._shard_chunk(v, key, rng, etag)
        target = v.to_store(key)
        if target is None:
            raise KeyNotFound(key)
        plan = v.recode_of(key)
        if plan is not None:
            data = await self._recoded(key, target, plan, etag)
            return rng.slice(data) if rng else data
        return await self.inner.get_version(target, rng, etag)  # type: ignore[attr-defined]

    async def stat(self, key: str) -> ObjectInfo:
        v = await self.view_for(key, reading=True)
        if v is None:
            return await self.inner.stat(key)
        if key in v.objects:
            return v.info(key)
        if _shard_of(v, key) is not None:
            info = await self._shard_info(v, key)
            if info is None:
                raise KeyNotFound(key)
            return info
        target = v.to_store(key)
        if target is None:
            raise KeyNotFound(key)
        info = await self.inner.stat(target)
        return await self._shown_info(v, key, info)

    async def entry(self, key: str) -> DirEntry | None:
        v = await self.view_for(key, reading=True)
        if v is None:
            return await self.inner.entry(key)
        name = key.rpartition("/")[2]
        if key in v.objects:
            return DirEntry(name, False, v.info(key))
        if _shard_of(v, key) is not None:
            info = await self._shard_info(v, key)
            return DirEntry(name, False, info) if info is not None else None
        target = v.to_store(key)
        if target is None:
            return None
        found = await self.inner.entry(target)
        if found is None:
            return None
        return await self._shown_entry(v, key, DirEntry(name, found.is_dir, found.info))

    async def _shown_info(self, v: DatasetView, key: str, info: ObjectInfo) -> ObjectInfo:
        """What stat shows of the stored object ``info`` under view key ``key`` (a recoded chunk:
        the size it is shown with, made to know it if it is shown compressed; the same version
        tag, as the shown bytes follow the stored)."""
        plan = v.recode_of(key)
        size = info.size
        if plan is not None:
            known = plan.shown_size()
            if known is None:
                known = len(await self._recoded(key, v.to_store(key) or key, plan, info.etag))
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
        return await self._recode(key, plan, (target, etag),
                                  lambda: self.inner.get_version(target, None, etag or None))  # type: ignore[attr-defined]

    async def _recode(self, key: str, plan: Recode, ident: tuple, fetch: Callable[[], Awaitable[bytes]]) -> bytes:
        """The shown chunk ``key``: ``plan`` applied to the stored chunk ``fetch`` gets (whose
        version ``ident`` names), kept in a cache of ``recoded_cache_bytes``."""
        ident = (*ident, plan.token)
        cached = self._recoded_cache.get(ident)
        if cached is not None:
            self._recoded_cache.move_to_end(ident)
            return cached
        data = await run_blocking(plan.apply, await fetch(), key)
        self._recoded_cache[ident] = data
        self._recoded_bytes += len(data)
        while self._recoded_bytes > self.recoded_cache_bytes and self._recoded_cache:
            _, old = self._recoded_cache.popitem(last=False)
            self._recoded_bytes -= len(old)
        return data

    async def _shard_chunk(self, v: DatasetView, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        """An innermost chunk of a sharded array: its byte range of its shard (recoded if need be)."""
        sa, name = _shard_of(v, key)  # type: ignore[misc]
        loc = await sa.locate(self.inner, self._indexes, name)
        if loc is None:
            raise KeyNotFound(key)
        if etag and etag != loc.tag:
            raise Stale(f"{key!r}: its shard was rewritten in the store")
        plan = v.recodes.get(sa.array)
        if plan is None:
            a = loc.start + (rng.start if rng else 0)
            b = loc.end if rng is None or rng.end is None else min(loc.end, loc.start + rng.end)
            return await self.inner.get_version(loc.key, ByteRange(a, max(a, b)), loc.etag or None)  # type: ignore[attr-defined]
        data = await self._recode(key, plan, (loc.key, loc.tag), lambda: self.inner.get_version(  # type: ignore[attr-defined]
            loc.key, ByteRange(loc.start, loc.end), loc.etag or None))
        return rng.slice(data) if rng else data

    async def _shard_info(self, v: DatasetView, key: str, loc: Located | None = None) -> ObjectInfo | None:
        sa, name = _shard_of(v, key)  # type: ignore[misc]
        loc = loc or await sa.locate(self.inner, self._indexes, name)
        if loc is None:
            return None
        plan = v.recodes.get(sa.array)
        size = loc.size if plan is None else plan.shown_size()
        if size is None:
            size = len(await self._shard_chunk(v, key, None, loc.tag))
        return ObjectInfo(key, size, loc.mtime_ns, loc.tag)

    async def dir_exists(self, prefix: str) -> bool:
        v = await self.view_for(prefix)
        if v is None:
            return await self.inner.dir_exists(prefix)
        target = v.to_store(prefix)
        return target is not None and await self.inner.dir_exists(target)

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        v = await self.view_for(prefix)
        if v is None:
            return await self.inner.list_dir(prefix)
        array = v.array_of(prefix)
        if array is not None and array in v.hidden:
            raise KeyNotFound(prefix)
        if array is None:
            out = {e.name: e for e in await self.inner.list_dir(prefix) if v.to_store(join(prefix, e.name)) is not None}
        elif array in v.sharded or array in v.char_axis:
            if prefix != array:
                raise KeyNotFound(prefix)
            out = await (self._shard_chunks(v, array) if array in v.sharded else self._char_axis_chunks(v, array))
        elif array not in v.v3:  # a v2 array whose chunks are recoded
            out = {e.name: await self._shown_entry(v, join(prefix, e.name), e)
                   for e in await self.inner.list_dir(prefix) if v.to_store(join(prefix, e.name)) is not None}
        else:
            out = await self._v3_chunks(v, prefix, array)
        start = prefix + "/" if prefix else ""
        for key in v.objects:
            if key.startswith(start) and "/" not in key[len(start):]:
                name = key[len(start):]
                out[name] = DirEntry(name, False, v.info(key))
        return [out[n] for n in sorted(out)]

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
        out = []
        for e in await self.list_dir(prefix):
            key = join(prefix, e.name)
            out.extend(await self.list_prefix(key) if e.is_dir else [key])
        return sorted(out)

    # -- writes --------------------------------------------------------------------------------------

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
        changes = self.translate_back(v, key, data)
        for target, content in changes.items():
            await self.inner.set(target, content)
        log.info("%r written through the %s view: stored as %s in %s", key, self.view, v.flavor,
                 ", ".join(sorted(changes)) or "nothing (no change)")
        self._forget(key)
        now = await self.view_for(key)
        if now is not None and key in now.objects:
            return now.info(key)
        return ObjectInfo(key, len(data), time.time_ns(), "")

    def _translated(self, v: DatasetView | None, key: str) -> bool:
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
        return is_metadata_key(key) or self.inner.checks_content(key)

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
                self.translate_back(v, key, data)  # type: ignore[arg-type]
                return
            await self._writable_target(key)
        await self.inner.check_content(key, data)

    @_logs_refusals
    async def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        v = await self.view_for(key)
        self._check_refused(v, key)
        if is_metadata_key(key):
            self._metadata_written(key)
        if self._translated(v, key):
            return await self._write_back(v, key, bytes(data))  # type: ignore[arg-type]
        target = await self._writable_target(key)
        info = await self.inner.set(target, data)
        self._forget(key)
        return ObjectInfo(key, info.size, info.mtime_ns, info.etag)

    @_logs_refusals
    async def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        target = await self._writable_target(key)
        info = await self.inner.set_file(target, f, size)  # type: ignore[attr-defined]
        self._forget(key)
        return ObjectInfo(key, info.size, info.mtime_ns, info.etag)

    @_logs_refusals
    async def delete(self, key: str) -> None:
        target = await self._writable_target(key, deleting=True)
        await self.inner.delete(target)
        self._forget(key)

    async def copy(self, src: str, dst: str) -> ObjectInfo:
        return await self.set(dst, await self.get(src))

    async def link(self, src: str, dst: str) -> ObjectInfo:
        raise NotSupported(f"{dst!r}: names in a view are linked as copies")  # the filesystem copies

    async def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        return await self.inner.set_meta(key if is_dir else await self._writable_target(key), changes, is_dir)

    async def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        return await self.inner.make_node(await self._writable_target(key), meta, target)

    async def truncate(self, key: str, size: int) -> ObjectInfo:
        raise NotSupported(f"{key!r}: rewritten whole through the view")  # the filesystem rewrites it

    @_logs_refusals
    async def rename(self, src: str, dst: str) -> None:
        v = await self.view_for(dst)
        self._check_refused(v, dst)
        if is_metadata_key(dst):
            self._metadata_written(dst)
        if self._translated(v, dst):
            source = await self._writable_target(src)
            await self._write_back(v, dst, await self.inner.get(source))  # type: ignore[arg-type]
            await self.inner.delete(source)
            self._forget(src)
            return
        target = await self._writable_target(dst)
        source = await self._writable_target(src)
        await self.inner.rename(source, target)
        self._forget(src)
        self._forget(dst)

    @_logs_refusals
    async def rename_dir(self, src: str, dst: str) -> None:
        for key in (src, dst):
            v = await self.view_for(key)
            if v is not None and v.flavor != VIEW_FLAVOR[self.view]:
                raise ReadOnly(f"{key!r}: folders of a dataset shown translated by the {self.view} view cannot move")
        await self.inner.rename_dir(src, dst)
        self._forget(src)
        self._forget(dst)
