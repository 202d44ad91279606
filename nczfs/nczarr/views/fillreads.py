"""The chunks a view makes where the store has none (:mod:`nczfs.nczarr.views.fillchunks`) as
PresentingStore lists, stats and reads them: each made once per array (the same bytes for every
missing chunk of it), kept with the mount's made chunks, shown with a version of its own."""

from __future__ import annotations

from nczfs.nczarr.chunks.madechunks import Stored
from nczfs.nczarr.views.datasetview import DatasetView, fills_at
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
        at = fills_at(v, key)
        if at is None or not at[1]:
            return None
        (made, rel), name = at, key.rpartition("/")[2]
        if made.is_folder(rel):
            return DirEntry(name, True, None)
        return DirEntry(name, False, await self._made_info(v, key, made)) if made.holds(rel) else None

    def _made_folder(self, v: DatasetView, prefix: str) -> bool:
        """Is ``prefix`` a folder of (nested) chunk names of an array whose missing chunks ``v`` makes?"""
        at = fills_at(v, prefix)
        return at is not None and bool(at[1]) and at[0].is_folder(at[1])

    async def _with_made(self, v: DatasetView, prefix: str, out: dict[str, DirEntry]) -> None:
        """The chunks (and folders of them) the view makes in folder ``prefix``, added to ``out``."""
        at = fills_at(v, prefix)
        if at is None:
            return
        made, rel = at
        for name, is_dir in made.names(rel):
            if name not in out:
                info = None if is_dir else await self._made_info(v, join(prefix, name), made)
                out[name] = DirEntry(name, is_dir, info)


async def _nothing() -> bytes:
    """What a made chunk is made of: no stored bytes."""
    return b""
