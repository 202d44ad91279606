"""The chunks a view makes where the store has none (:mod:`nczfs.nczarr.views.fillchunks`) as
PresentingStore lists, stats and reads them: each made once per array (the same bytes for every
missing chunk of it), kept with the mount's made chunks, shown with a version of its own."""

from __future__ import annotations

from nczfs.nczarr.chunks.madechunks import Stored
from nczfs.nczarr.views.datasetview import DatasetView
from nczfs.nczarr.views.fillchunks import FillChunks
from nczfs.nczarr.views.recodedchunks import RecodedChunks
from nczfs.store.keys import join
from nczfs.store.values import DirEntry, ObjectInfo


class FillReads:
    """PresentingStore's reads of made chunks: it gives ``_recoded_chunks``."""

    _recoded_chunks: RecodedChunks

    async def _made(self, made: FillChunks) -> bytes:
        """The chunk ``made`` makes: made once (in the decode pool), kept with the made chunks."""
        return await self._recoded_chunks.made.get(Stored("", made.version), made.token, _nothing,
                                                   lambda _: made.make(), book=False)

    async def _made_info(self, v: DatasetView, key: str, made: FillChunks) -> ObjectInfo:
        return ObjectInfo(key, len(await self._made(made)), v.mtime_ns, made.version)

    async def _made_entry(self, v: DatasetView, key: str) -> DirEntry | None:
        """The entry of view key ``key`` where the store has none: a chunk the view makes, or a
        folder of such chunks (nested names), or None."""
        name, array = key.rpartition("/")[2], v.array_of(key)
        made = v.fills.get(array) if array is not None and array != key else None
        if made is None or array is None:
            return None
        rel = key[len(array) + 1:]
        if made.is_folder(rel):
            return DirEntry(name, True, None)
        return DirEntry(name, False, await self._made_info(v, key, made)) if made.holds(rel) else None

    def _made_folder(self, v: DatasetView, prefix: str) -> bool:
        """Is ``prefix`` a folder of (nested) chunk names of an array whose missing chunks ``v`` makes?"""
        array = v.array_of(prefix)
        return array is not None and array != prefix and array in v.fills and v.fills[array].is_folder(prefix[len(array) + 1:])

    async def _with_made(self, v: DatasetView, prefix: str, out: dict[str, DirEntry]) -> None:
        """The chunks (and folders of them) the view makes in folder ``prefix``, added to ``out``."""
        array = v.array_of(prefix)
        made = v.fills.get(array) if array is not None else None
        if made is None or array is None:
            return
        for name, is_dir in made.names(prefix[len(array) + 1:] if prefix != array else ""):
            if name not in out:
                info = None if is_dir else await self._made_info(v, join(prefix, name), made)
                out[name] = DirEntry(name, is_dir, info)


async def _nothing() -> bytes:
    """What a made chunk is made of: no stored bytes."""
    return b""
