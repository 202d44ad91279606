"""The .nc files of one dataset as of now (NcFilesStore): each file's layout, the versions of
the chunks it is read from, its version tag (a hash of the header and of every chunk's version)
and mtime (the newest of theirs)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from dataclasses import dataclass, field

import trio

from nczfs.toolbox.errors import KeyNotFound, NczfsError
from nczfs.nczarr.chunks.chunkfacts import ChunkFacts
from nczfs.nczarr.chunks.madechunks import MadeChunks
from nczfs.nczarr.metadata.model import Dataset
from nczfs.nczarr.metadata.read import read_dataset
from nczfs.nczarr.metadata.validate import is_metadata_key
from nczfs.nczarr.ncfile.classicfile import GroupFile, file_names, group_file, v3_encodings
from nczfs.nczarr.ncfile.nc4file import Nc4File, Options, nc4_file
from nczfs.nczarr.ncfile.nc4read import DecodedPieces
from nczfs.nczarr.ncfile.nc4shards import inner_chunks
from nczfs.store.base import Store
from nczfs.store.keys import join, parent_of
from nczfs.store.values import ObjectInfo
from nczfs.store.threads import run_blocking

log = logging.getLogger(__name__)


@dataclass
class NcVersion:
    """One version of one ``.nc`` file."""

    key: str
    #: a classic file (``.nc``) or the netCDF-4 file (``.nc4``)
    file: GroupFile | Nc4File
    #: store key -> what the listing said of every chunk (shard) of the file's arrays that exists
    chunks: dict[str, ObjectInfo]
    etag: str
    mtime_ns: int

    def info(self) -> ObjectInfo:
        return ObjectInfo(self.key, self.file.layout.size, self.mtime_ns, self.etag)


@dataclass
class Built:
    at: float
    #: file name -> its current version
    files: dict[str, NcVersion] = field(default_factory=dict)


class _Objects:
    """The reader's objects (:class:`nczfs.nczarr.metadata.read.Objects`), fetched from a worker thread
    through the trio thread; the infos of what it lists are kept."""

    def __init__(self, store: Store, root: str):
        self.store, self.root = store, root
        self.objects: dict[str, bytes] = {}
        self.infos: list[ObjectInfo] = []

    def _full(self, key: str) -> str:
        return join(self.root, key) if key else self.root

    def get(self, key: str) -> bytes | None:
        try:
            data = trio.from_thread.run(self.store.get, self._full(key))
        except KeyNotFound:
            return None
        self.objects[key] = data
        return data

    def children(self, prefix: str) -> list[str]:
        try:
            entries = trio.from_thread.run(self.store.list_dir, self._full(prefix))
        except KeyNotFound:
            return []
        self.infos.extend(e.info for e in entries if e.info is not None)
        return [e.name for e in entries]


async def build_files(inner: Store, root: str, name: str, logged: set[str],
                      facts: ChunkFacts | None = None, classic: bool = True,
                      netcdf4: bool = False, options: Options = Options(),
                      pieces: DecodedPieces | None = None) -> dict[str, NcVersion]:
    """The files of the dataset at ``root`` by file name, named after ``name``: its ``classic``
    files (``NAME.nc``, ``NAME.GROUP.nc``) and its ``netcdf4`` file (``NAME.nc4``); what was left
    out of them, and why there are none, logged once (``logged`` holds what was). ``facts`` scans
    the chunks of variable-length strings (their width; without it the classic files leave them
    out); ``options``: how the .nc4 file shows chunks whose codecs HDF5 lacks (``sized`` is
    ``pieces``' sizes), ``pieces`` makes (and keeps) those whose sizes are not yet known."""
    objects = _Objects(inner, root)
    try:
        ds = await run_blocking(read_dataset, objects)
    except KeyNotFound:
        return {}
    except NczfsError as exc:
        if root not in logged:
            logged.add(root)
            log.warning("%r: no .nc file: %s", root or "/", exc)
        return {}
    encodings = v3_encodings(ds, lambda k: objects.objects.get(k))
    listed: dict[str, ObjectInfo] = {}
    async with trio.open_nursery() as nursery:
        for array in _arrays(ds, root):
            nursery.start_soon(_list_chunks, inner, array, listed)
    meta_mtime = max((i.mtime_ns for i in objects.infos), default=0)
    folder = parent_of(root) if root else ""
    out: dict[str, NcVersion] = {}
    if classic:
        found = await facts.of(root, ds, times=False) if facts is not None else {}
        for fname, group in file_names(ds, name).items():
            f = group_file(ds, group, root, encodings, found)
            out[fname] = _version(join(folder, fname), f, listed, meta_mtime, logged)
    if netcdf4 and any(g.variables for g in ds.root.walk()):
        sizes = {k: i.size for k, i in listed.items()}
        problems: dict[str, str] = {}
        shards = await inner_chunks(inner, ds, root, encodings, problems)
        pieces = pieces or DecodedPieces(inner, MadeChunks(64 * 1024 * 1024))
        options = dataclasses.replace(options, sized=lambda src: pieces.known(src, listed.get(src.key)))
        f4 = await run_blocking(nc4_file, ds, root, encodings, sizes, shards, options)
        if f4.unsized:  # chunks deflated or of strings: their sizes known once made
            await pieces.make(f4.unsized, listed)
            f4 = await run_blocking(nc4_file, ds, root, encodings, sizes, shards, options)
            assert not f4.unsized, f4.unsized[:3]
        f4.left_out += [f"/{path}: its shards cannot be read: {why}" for path, why in problems.items()]
        out[f"{name}.nc4"] = _version4(join(folder, f"{name}.nc4"), f4, listed, meta_mtime, logged)
    return out


def _arrays(ds: Dataset, root: str) -> set[str]:
    """The key prefix of every array of the dataset."""
    return {"/".join(p for p in (root, g.path.strip("/"), v.name) if p) for g in ds.root.walk() for v in g.variables}


def _log_left_out(key: str, left_out: list[str], logged: set[str]) -> None:
    for why in left_out:
        if f"{key}: {why}" not in logged:
            logged.add(f"{key}: {why}")
            log.info("%s leaves out %s", key, why)


def _version4(key: str, f: Nc4File, listed: dict[str, ObjectInfo], meta_mtime: int, logged: set[str]) -> NcVersion:
    """The version of a netCDF-4 file: a hash of its metadata and of its chunks' versions."""
    _log_left_out(key, f.left_out, logged)
    chunks = {p.source.key: listed[p.source.key] for p in f.layout.pieces if p.source.fill is None}
    h = hashlib.sha1(f.layout.meta)
    for k in sorted(chunks):
        h.update(f"\0{k}\0{chunks[k].etag}".encode())
    mtime = max([meta_mtime, *(i.mtime_ns for i in chunks.values())])
    return NcVersion(key, f, chunks, h.hexdigest(), mtime or time.time_ns())


def _version(key: str, f: GroupFile, listed: dict[str, ObjectInfo], meta_mtime: int, logged: set[str]) -> NcVersion:
    _log_left_out(key, f.left_out, logged)
    prefixes = tuple(v.array + "/" for v in f.values)
    chunks = {k: i for k, i in listed.items() if k.startswith(prefixes) and not is_metadata_key(k)}
    h = hashlib.sha1(f.layout.header)
    for k in sorted(chunks):
        h.update(f"\0{k}\0{chunks[k].etag}".encode())
    mtime = max([meta_mtime, *(listed[k].mtime_ns for k in listed if k.startswith(prefixes))])
    return NcVersion(key, f, chunks, h.hexdigest(), mtime or time.time_ns())


async def _list_chunks(inner: Store, prefix: str, out: dict[str, ObjectInfo]) -> None:
    try:
        entries = await inner.list_dir(prefix)
    except KeyNotFound:
        return
    for e in entries:
        key = join(prefix, e.name)
        if e.is_dir:
            await _list_chunks(inner, key, out)
        elif e.info is not None:
            out[key] = e.info
        else:
            try:
                out[key] = await inner.stat(key)
            except KeyNotFound:
                pass
