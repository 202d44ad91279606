"""Where the innermost chunks of a dataset's sharded Zarr v3 arrays lie, for its netCDF-4 file:
each shard's index read (pinned to the shard's version), so that the file's chunk index can name
each inner chunk's byte range of its shard and its size without reading a chunk."""

from __future__ import annotations

import math

from nczfs.toolbox.errors import NczfsError
from nczfs.nczarr.chunks.sharding import IndexCache, Located, ShardedArray
from nczfs.nczarr.chunks.v2form import V2Array, v3_chunk_prefix, v3_to_v2
from nczfs.nczarr.metadata.model import Dataset
from nczfs.store.base import Store


async def inner_chunks(store: Store, ds: Dataset, prefix: str, encodings: dict[str, str],
                       problems: dict[str, str] | None = None) -> dict[str, dict[str, Located]]:
    """Every innermost chunk the store holds of each sharded array of ``ds`` (stored under
    ``prefix``), by array path (``g/v``) and chunk name (``i.j``). An array whose shards cannot be
    read is missing; why, in ``problems`` (by path)."""
    out: dict[str, dict[str, Located]] = {}
    if ds.flavor != "zarr-v3":
        return out
    cache = IndexCache()
    for g in ds.root.walk():
        for var in g.variables:
            form = v3_to_v2(var)
            if not isinstance(form, V2Array) or form.sharding is None:
                continue
            path = "/".join(p for p in (g.path.strip("/"), var.name) if p)
            array = "/".join(p for p in (prefix, path) if p)
            grid = tuple(math.ceil(s / c) if c else 0 for s, c in zip(var.shape, form.chunks))
            cprefix = v3_chunk_prefix(var, encodings.get("/" + path, "default"))
            sharded = ShardedArray(array, cprefix, var.dimension_separator, form.sharding, grid)
            try:
                out[path] = await sharded.chunks(store, cache)
            except NczfsError as exc:
                if problems is not None:
                    problems[path] = str(exc)
    return out
