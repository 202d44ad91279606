"""The NCZarr layer tells the notifier it is given of every object it changes on its own
(kernel-free; on a mount the notifier drops the kernel's cached size, see fuse.notifier.KernelNotifier)."""

from __future__ import annotations

import json

from nczfs.config.mountconfig import MountConfig
from nczfs.nczarr.layer import nczarr_layer
from nczfs.config.source import Source
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore

ZARRAY = {
    "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<f4", "compressor": None,
    "fill_value": 0.0, "order": "C", "filters": None,
}


def _config(**kw) -> MountConfig:
    return MountConfig(Source("directory", "/nowhere", text="/nowhere"), "/nowhere", validate="off", **kw)


async def test_consolidated_metadata_rewritten_by_the_layer_is_notified():
    told: list[str] = []
    inner = ThreadedStore(MemoryStore())
    await inner.set("ds/.zgroup", b'{"zarr_format": 2}')
    await inner.set("ds/.zmetadata", json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                                  "zarr_consolidated_format": 1}).encode())
    store = nczarr_layer(inner, _config(), notify=told.append)
    await store.set("ds/v/.zarray", json.dumps(ZARRAY).encode())
    assert told == ["ds/.zmetadata"]
    assert "v/.zarray" in json.loads(await inner.get("ds/.zmetadata"))["metadata"]


async def test_without_a_notifier_the_layer_changes_the_same():
    inner = ThreadedStore(MemoryStore())
    await inner.set("ds/.zgroup", b'{"zarr_format": 2}')
    await inner.set("ds/.zmetadata", b'{"metadata": {}, "zarr_consolidated_format": 1}')
    store = nczarr_layer(inner, _config())
    await store.set("ds/v/.zarray", json.dumps(ZARRAY).encode())
    assert "v/.zarray" in json.loads(await inner.get("ds/.zmetadata"))["metadata"]


async def test_the_nc_files_of_a_dataset_written_to_are_notified():
    told: list[str] = []
    inner = ThreadedStore(MemoryStore())
    await inner.set("ds/.zgroup", b'{"zarr_format": 2}')
    await inner.set("ds/v/.zarray", json.dumps(ZARRAY).encode())
    await inner.set("ds/v/.zattrs", b'{"_ARRAY_DIMENSIONS": ["x"]}')
    store = nczarr_layer(inner, _config(nc_files=True, read_only=False), notify=told.append)
    assert "ds.nc" in [e.name for e in await store.list_dir("")]  # the dataset's file is built
    told.clear()
    await store.set("ds/.zattrs", b'{"title": "new"}')
    assert told == ["ds.nc"]
