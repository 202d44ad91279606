"""Building the view of one dataset (PresentingStore's views): its metadata objects collected
without listing array folders, read into the model, written out in the view's flavor
(:mod:`nczfs.nczarr.views.emit`); arrays' chunks scanned where a netCDF view needs to know what they
hold (:mod:`nczfs.nczarr.chunks.chunkfacts`)."""

from __future__ import annotations

import json
import logging
import time

from nczfs.toolbox.errors import NczfsError, Stale
from nczfs.nczarr.chunks.chunkfacts import ChunkFacts
from nczfs.nczarr.chunks.sharding import ShardedArray
from nczfs.nczarr.chunks.v2form import v3_chunk_prefix
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.model import Dataset
from nczfs.nczarr.metadata.read import DictObjects, read_dataset
from nczfs.nczarr.views.datasetview import ZERO_RANK, DatasetView
from nczfs.nczarr.views.emit import emit
from nczfs.nczarr.views.fillchunks import fill_chunks
from nczfs.nczarr.views.viewshape import Layouts
from nczfs.store.base import Store
from nczfs.store.keys import join

log = logging.getLogger(__name__)

GROUP_META = (".zgroup", ".zattrs", ".zmetadata", ".nczarr", ".nczgroup", ".nczattr", ".nczattrs", "zarr.json")


class ViewBuilder:
    """Builds the view of one dataset of ``inner``: its metadata objects read into the model,
    written out in the ``view``'s flavor, with where each shown chunk lies in the store."""

    def __init__(self, inner: Store, view: str, transcode: str = "auto"):
        self.inner = inner
        self.view = view
        self.transcode = transcode
        self._logged: set[tuple[str, str]] = set()
        #: what some arrays' chunks hold (the longest string, whether times are whole microseconds)
        self._facts = ChunkFacts(inner)
        #: which arrays' missing chunks the view makes, by their metadata (fillchunks.fill_chunks)
        self._fills: dict = {}

    async def build(self, root: str) -> DatasetView | None:
        """The view of the dataset at ``root`` (None: it cannot be read, said in the log)."""
        objects: dict[str, bytes] = {}
        versions: dict[str, str] = {}
        await self._collect(root, "", objects, versions)
        try:
            ds = read_dataset(DictObjects(objects))
        except NczfsError as exc:
            log.warning("%r: not shown as %s: %s", root or "/", self.view, exc)
            return None
        v = DatasetView(root, ds.flavor, time.monotonic(), mtime_ns=time.time_ns(), versions=versions,
                        empty=not (ds.root.variables or ds.root.groups or ds.root.attributes or ds.root.dims))
        if ds.flavor == "zarr-v3":
            v.v3 = _v3_prefixes(root, ds, objects)
        layouts = Layouts()
        facts = {} if self.view == "xarray" else await self._facts.of(root, ds)
        synth, hidden = emit(ds, self.view, transcode=self.transcode, facts=facts, layouts=layouts)
        _place(v, root, layouts)
        v.fills, many = fill_chunks(root, ds, self.view, synth, objects, layouts, self._fills)
        for full, made in v.fills.items():
            self._log_once(full, f"makes the chunks of {full!r} the store lacks: they hold {made.value.item()!r} "
                                 f"in the store, its reader would fill them with {made.viewed!r}")
        for path, why in many:
            self._log_once(join(root, path), f"{join(root, path)!r}: its chunks never written read as the view's fill_value, not as "
                                             f"stored ({why}): not made")
        _keep_stored_attrs(synth, objects)
        v.objects = {join(root, k): self._as_stored(objects.get(k), b) for k, b in synth.items()}
        self._hide(v, root, hidden)
        return v

    def _hide(self, v: DatasetView, root: str, hidden: list[tuple[str, str]]) -> None:
        """Arrays (and attributes) the view leaves out, each logged once."""
        for path, reason in hidden:
            full = join(root, path)
            if ":" not in path:
                v.hidden.add(full)
                v.v3.pop(full, None)
            self._log_once(full, f"hides {full!r}: {reason}")

    def _log_once(self, full: str, what: str) -> None:
        if (full, what) not in self._logged:
            self._logged.add((full, what))
            log.info("view %s %s", self.view, what)

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

    async def _get(self, key: str, versions: dict[str, str]) -> bytes:
        """``key``'s bytes; where the store checks writes, the version read is noted in ``versions``
        (through the cache, a stat and a read of that version cost what a plain read does)."""
        if not self.inner.capabilities.checks_writes:
            return await self.inner.get(key)
        info = await self.inner.stat(key)
        try:
            data = await self.inner.get_version(key, None, info.etag or None)
            versions[key] = info.etag
        except Stale:  # changed since its stat: the current bytes, of a version not known
            data = await self.inner.get(key)
            versions[key] = ""
        return data

    async def _collect(self, root: str, rel: str, out: dict[str, bytes], versions: dict[str, str]) -> None:
        """Every metadata object of the dataset at ``root`` (keys relative to it), without
        listing array folders (they may hold many chunks); ``versions``: by full key, as read."""
        folder = join(root, rel) if rel else root
        names = {e.name: e.is_dir for e in await self.inner.list_dir(folder)}
        for name in GROUP_META:
            if names.get(name) is False:
                out[join(rel, name)] = await self._get(join(folder, name), versions)
        for child, is_dir in names.items():
            if not is_dir or child.startswith("."):
                continue
            crel = join(rel, child)
            for name in (".zarray", "zarr.json", ".nczvar", ".nczarray"):
                try:
                    out[join(crel, name)] = await self._get(join(folder, join(child, name)), versions)
                except NczfsError:
                    pass
            v3 = out.get(join(crel, "zarr.json"))
            if join(crel, ".zarray") in out or (v3 is not None and b'"array"' in v3):
                for name in (".zattrs", ".nczattr", ".nczattrs"):
                    try:
                        out[join(crel, name)] = await self._get(join(folder, join(child, name)), versions)
                    except NczfsError:
                        pass
            else:  # a group (or a plain folder that may hold groups)
                out.pop(join(crel, "zarr.json"), None)
                await self._collect(root, crel, out, versions)


def _keep_stored_attrs(synth: dict[str, bytes], stored: dict[str, bytes]) -> None:
    """A stored ``.zattrs`` of a group or array the view shows, where the view has none (no
    attribute it shows), is shown as ``{}``: hidden, it would stay behind when a program removes
    the folder's files it lists (``to_zarr(mode="w")``'s rmtree: ENOTEMPTY)."""
    for key in stored:
        folder, _, name = key.rpartition("/")
        prefix = folder + "/" if folder else ""
        if name == ".zattrs" and key not in synth and (prefix + ".zgroup" in synth or prefix + ".zarray" in synth):
            synth[key] = b"{}"


def _v3_prefixes(root: str, ds: Dataset, objects: dict[str, bytes]) -> dict[str, str]:
    """Where each Zarr v3 array's chunks lie below it (``c/``, ``c.``, nothing or ZERO_RANK)."""
    out = {}
    for g in ds.root.walk():
        for var in g.variables:
            node = jsontext.loads(objects[join(join(g.path.strip("/"), var.name), "zarr.json")])
            name = (node.get("chunk_key_encoding") or {}).get("name", "default")
            out[join(root, join(g.path.strip("/"), var.name))] = v3_chunk_prefix(var, name) if var.shape else ZERO_RANK
    return out


def _place(v: DatasetView, root: str, layouts: Layouts) -> None:
    """How the view shows chunks otherwise than stored: recoded, string arrays as chars, sharded
    arrays by their innermost chunks."""
    v.recodes = {join(root, path): plan for path, plan in layouts.recodes.items()}
    for path, separator in layouts.char_axis.items():
        full = join(root, path)
        v.char_axis[full] = (v.v3.pop(full, ""), separator)
    for path, (sh, shape, separator) in layouts.shardings.items():
        full = join(root, path)
        grid = tuple(-(-n // c) for n, c in zip(shape, sh.chunks))
        v.sharded[full] = ShardedArray(full, v.v3.pop(full), separator, sh, grid)
