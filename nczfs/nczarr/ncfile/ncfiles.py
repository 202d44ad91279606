"""NcFilesStore: every dataset also shows as read-only netCDF classic files (``-o nc_files``).

A dataset is the topmost folder holding ``.zgroup``, ``zarr.json``, ``.nczarr`` or
``.zmetadata`` (as for views). Beside a dataset folder ``NAME`` its parent lists ``NAME.nc``
and ``NAME.GROUP.nc`` (:func:`nczfs.nczarr.ncfile.classicfile.file_names`); a dataset at the mount's root
shows them in the root, named after the source. A file is made of the dataset's metadata
(read with :func:`nczfs.nczarr.metadata.read.read_dataset`) and the listing of its arrays' chunks: its
size and header are known without reading a chunk; its version tag is a hash of the header and
of every chunk's version, its mtime the newest of theirs, so that a change of any chunk or
metadata object gives a new version (rebuilt after ``ttl`` seconds, or at once after a write
through the mount). A read is answered from the chunks it covers (:mod:`nczfs.nczarr.ncfile.classicread`),
decoded in worker threads and kept, decoded, in a cache of ``decoded_bytes``; a read through a
descriptor stays on the version it opened (the chunk versions listed then), as long as that
version is remembered. A sharded Zarr v3 array's chunks are read as byte ranges of its shards,
found through the shards' indexes (kept, per shard version). Names that exist in the store are
never shadowed.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Awaitable, Callable, TypeVar

import trio

from nczfs.toolbox import atonce
from nczfs.toolbox.errors import KeyNotFound, NczfsError, ReadOnly, Stale
from nczfs.nczarr.chunks.chunkfacts import ChunkFacts
from nczfs.nczarr.chunks.madechunks import MadeChunks
from nczfs.nczarr.metadata.roots import Roots
from nczfs.nczarr.ncfile import classicread, nc4read
from nczfs.nczarr.ncfile.classicfile import Values
from nczfs.nczarr.ncfile.nc4file import Nc4File, Options
from nczfs.nczarr.ncfile.nc4read import DecodedPieces
from nczfs.nczarr.ncfile.ncdecoded import DecodedChunks
from nczfs.nczarr.ncfile.ncversions import Built, NcVersion, build_files
from nczfs.config.source import Source
from nczfs.store.base import Store
from nczfs.store.capabilities import read_only_key
from nczfs.store.keys import join, parent_of
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.wrapper import WrapperStore
from nczfs.store import optional

log = logging.getLogger(__name__)

#: file versions remembered for descriptors still reading them
MAX_VERSIONS = 256
#: writes of folders: no file made here is refused by them
FOLDER_WRITES = ("rename_dir", "mkdir", "rmdir", "forget_dir")

T = TypeVar("T")


class NcFilesStore(WrapperStore):
    #: no fast paths: every write drops the .nc files built from it (staging off)
    passes = ()

    def __init__(self, inner: Store, ttl: float = 1.0, root_name: str = "dataset",
                 decoded_bytes: int = 256 * 1024 * 1024, on_change: Callable[[str], None] | None = None,
                 classic: bool = True, netcdf4: bool = False, plugins: bool = False, transcode: str = "auto",
                 made: MadeChunks | None = None):
        super().__init__(inner)
        #: which files to show: the classic ones (NAME.nc ...), the netCDF-4 one (NAME.nc4)
        self.classic, self.netcdf4 = classic, netcdf4
        #: NAME.nc4 passes blosc and zstd chunks through as HDF5's registered filters; deflates
        #: other chunks whose codecs HDF5 lacks, or not (``-o transcode=``)
        self.nc4_options = Options(plugins, transcode)
        #: NAME.nc4's decoded chunks: kept in ``made`` (the mount's one cache of made chunks),
        #: else in a cache of their own
        self._pieces = DecodedPieces(inner, made or MadeChunks(made_bytes(decoded_bytes, classic)))
        self.ttl = ttl
        self.root_name = root_name
        self._roots = Roots(inner, ttl)
        self._built: dict[str, Built] = {}
        self._building: dict[str, trio.Event] = {}
        self._versions: collections.OrderedDict[tuple[str, str], NcVersion] = collections.OrderedDict()
        self._decoded = DecodedChunks(inner, decoded_bytes)
        #: the widths of variable-length strings, from scans of their chunks
        self._facts = ChunkFacts(inner)
        #: keys of the files shown (read-only)
        self._shown: set[str] = set()
        self._logged: set[str] = set()
        self.stats = {"ncfiles.builds": 0}
        #: called with the key of a file whose dataset changed through the mount (layer.Notify)
        self.on_change = on_change

    def counters(self) -> dict[str, int]:
        return {**optional.counters(self.inner), "ncfiles.chunks-decoded": self._decoded.count + self._pieces.made.count,
                **self.stats, "ncfiles.decoded-bytes-held": self._decoded.bytes_held + self._pieces.made.bytes_held}

    # -- datasets and their files -----------------------------------------------------------------

    async def _is_root(self, folder: str) -> bool:
        return await self._roots.is_root(folder)

    async def _in_dataset(self, folder: str) -> bool:
        """Is ``folder`` a dataset or inside one?"""
        parts = folder.split("/") if folder else []
        for i in range(len(parts) + 1):
            if await self._is_root("/".join(parts[:i])):
                return True
        return False

    def _name_of(self, root: str) -> str:
        return root.rpartition("/")[2] if root else self.root_name

    async def _files(self, root: str) -> dict[str, NcVersion]:
        """The current files of the dataset at ``root`` (rebuilt when older than the TTL)."""
        while True:
            b = self._built.get(root)
            if b is not None and time.monotonic() - b.at < self.ttl:
                return b.files
            waiting = self._building.get(root)
            if waiting is None:
                break
            await waiting.wait()
        done = self._building[root] = trio.Event()
        try:
            built = await self._build(root)
        finally:
            del self._building[root]
            done.set()
        self._built[root] = built
        return built.files

    async def _build(self, root: str) -> Built:
        at = time.monotonic()
        self.stats["ncfiles.builds"] += 1
        files = await build_files(self.inner, root, self._name_of(root), self._logged, self._facts,
                                  self.classic, self.netcdf4, self.nc4_options, self._pieces)
        for v in files.values():
            self._versions[(v.key, v.etag)] = v
            self._versions.move_to_end((v.key, v.etag))
        while len(self._versions) > MAX_VERSIONS:
            self._versions.popitem(last=False)
        return Built(at, files)

    async def _listed_files(self, folder: str) -> dict[str, NcVersion]:
        """The files shown in ``folder``, by name."""
        if folder == "" and await self._is_root(""):
            return dict(await self._files(""))
        if await self._in_dataset(folder):
            return {}
        out: dict[str, NcVersion] = {}
        dirs = [e.name for e in await self.inner.list_dir(folder) if e.is_dir]
        roots: dict[str, bool] = {}

        async def check(name: str) -> None:
            roots[name] = await self._is_root(join(folder, name))

        async with trio.open_nursery() as nursery:
            for name in dirs:
                nursery.start_soon(check, name)
        for name in dirs:
            if roots[name]:
                try:
                    out.update(await self._files(join(folder, name)))
                except NczfsError as exc:
                    log.warning("%r: no .nc files listed: %s", join(folder, name), exc)
        return out

    async def _file(self, key: str) -> NcVersion | None:
        """The current version of the file ``key`` shows, if it is one."""
        folder, _, name = key.rpartition("/")
        if not is_file_name(name):
            return None
        if folder == "" and await self._is_root(""):
            return (await self._files("")).get(name)
        if await self._in_dataset(folder):
            return None
        stem = name.rpartition(".")[0]
        candidates = [stem[:i] for i, c in enumerate(stem) if c == "." and name.endswith(".nc")] + [stem]
        for cand in candidates:
            if cand and await self._is_root(join(folder, cand)):
                found = (await self._files(join(folder, cand))).get(name)
                if found is not None:
                    return found
        return None

    async def _shown_file(self, key: str) -> NcVersion | None:
        """``_file``, unless the store has an object or folder of that name."""
        v = await self._file(key)
        if v is None or await self.inner.entry(key) is not None:
            return None
        return v

    def read_only_key(self, key: str) -> bool:
        return key in self._shown or read_only_key(self.inner, key)

    # -- reads --------------------------------------------------------------------------------

    def _showing(self, key: str, shown: bool) -> None:
        """Whether ``key`` now names a file made here (read-only) or a name the store holds."""
        if shown:
            self._shown.add(key)
        else:
            self._shown.discard(key)

    async def entry(self, key: str) -> DirEntry | None:
        found = await self.inner.entry(key)
        if found is None and is_file_name(key):
            v = await self._file(key)
            if v is not None:
                self._showing(key, True)
                return DirEntry(key.rpartition("/")[2], False, v.info())
        self._showing(key, False)
        return found

    async def stat(self, key: str) -> ObjectInfo:
        try:
            info = await self.inner.stat(key)
        except KeyNotFound:
            v = await self._file(key) if is_file_name(key) else None
            if v is None:
                raise
            self._showing(key, True)
            return v.info()
        self._showing(key, False)
        return info

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        entries = await self.inner.list_dir(prefix)
        names = {e.name for e in entries}
        shown = await self._listed_files(prefix)
        extra = [DirEntry(n, False, v.info()) for n, v in shown.items() if n not in names]
        for e in extra:
            self._showing(join(prefix, e.name), True)
        for n in names & set(shown):
            self._showing(join(prefix, n), False)
        return sorted([*entries, *extra], key=lambda e: e.name)

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return await self.get_version(key, rng, None)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        v = self._versions.get((key, etag)) if etag else None
        if v is None and is_file_name(key):
            v = await self._shown_file(key)
            if v is not None and etag and v.etag != etag:
                raise Stale(f"{key!r}: the dataset changed since this version was read")
        if v is None:
            return await self.inner.get_version(key, rng, etag)
        self._versions.move_to_end((key, v.etag))
        start = rng.start if rng else 0
        end = rng.end if rng and rng.end is not None else v.file.layout.size
        return await self._read(v, start, min(end, v.file.layout.size))

    async def _read(self, v: NcVersion, start: int, end: int) -> bytes:
        if start >= end:
            return b""
        if isinstance(v.file, Nc4File):
            return await nc4read.read(v.file, v.chunks, self.inner, self._pieces, start, end)
        runs = classicread.runs(v.file, start, end)
        got: list[dict] = [{} for _ in runs]
        wanted: list[tuple[int, Values, tuple[int, ...]]] = []
        for i, run in enumerate(runs):
            val = v.file.values[run.var]
            e0, e1 = run.elements(val.itemsize)
            wanted.extend((i, val, idx) for idx in classicread.chunks_needed(val, e0, e1))

        async def one(w: tuple[int, Values, tuple[int, ...]]) -> None:
            i, val, idx = w
            got[i][idx] = await self._decoded.chunk(v, val, idx)

        await atonce.each(one, wanted)
        last: dict[int, tuple[Values, tuple[int, ...]]] = {}
        for i, val, idx in wanted:
            last[id(val)] = (val, idx)
        for val, idx in last.values():
            self._decoded.ahead(v, val, idx)
        return classicread.assemble(v.file, start, end, runs, got)

    # -- writes: the files are read-only; a write into a dataset makes its files new ----------------

    async def _refuse(self, key: str) -> None:
        if is_file_name(key) and await self._shown_file(key) is not None:
            raise ReadOnly(f"{key!r}: a netCDF file made from a dataset (-o nc_files): read-only")

    def _forget(self, key: str) -> None:
        self._roots.forget(key)
        for root in list(self._built):
            if root == "" or key == root or key.startswith(root + "/") or root.startswith(key + "/"):
                built = self._built.pop(root)
                folder = parent_of(root) if root else ""
                for name in built.files:
                    if self.on_change is not None:
                        self.on_change(join(folder, name))

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[[], Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        """Refuse a change of a file made here (a folder is never one: a name the store holds is
        not shown as a file; a copy of one is made by :meth:`copy`); then forget the files of every
        dataset the change is in (the source of a copy or link and attributes change no dataset's
        content)."""
        changed = keys[1:] if op in ("copy", "link") else () if op in ("set_meta", "forget_dir") else keys
        for key in () if op in FOLDER_WRITES else keys:
            await self._refuse(key)
        try:
            return await call()
        finally:
            for key in changed:
                self._forget(key)

    async def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """A copy of a file made here is a new object of its bytes (the store has no source to copy)."""
        if is_file_name(src) and await self._shown_file(src) is not None:
            await self._refuse(dst)
            return await self.inner.set(dst, await self.get(src), if_version=if_version)
        return await super().copy(src, dst, if_version=if_version)


def is_file_name(key: str) -> bool:
    """Could ``key`` name a file made here (``.nc``, ``.nc4``)?"""
    return key.endswith((".nc", ".nc4"))


def root_name(source: Source) -> str:
    """What the files of a dataset at the mount's root are named after: the source's last path
    component (an archive or reference set without its extension), else ``dataset``."""
    from nczfs.store.registry import BACKENDS

    base = source.location.rstrip("/").rpartition("/")[2]
    backend = BACKENDS.get(source.backend)
    if backend is not None and backend.one_file:
        base = base.rpartition(".")[0] or base
    return base or "dataset"


def decoded_cache_bytes(cache_size: int | None) -> int:
    """Decoded chunks kept: a quarter of the mount's cache size, at least 64 MiB."""
    from nczfs.toolbox.budgets import default_cache_size

    return max(64 * 1024 * 1024, (cache_size if cache_size is not None else default_cache_size()) // 4)


def made_bytes(decoded_bytes: int, classic: bool) -> int:
    """NAME.nc4's made chunks kept, of ``decoded_bytes``: half, beside the classic files'
    decoded chunks (``classic``), else all."""
    return decoded_bytes // 2 if classic else decoded_bytes
