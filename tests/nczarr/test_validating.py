"""The codec list metadata checks need (numcodecs, slow to import) is never loaded on the trio thread."""

from __future__ import annotations

import json
import threading

from nczfs.nczarr.metadata import codecids
from nczfs.nczarr.validating import ValidatingStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore

ZARRAY = {
    "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<f4", "compressor": {"id": "zlib", "level": 1},
    "fill_value": 0.0, "order": "C", "filters": None,
}


async def test_the_first_check_imports_numcodecs_in_a_worker_thread(monkeypatch):
    threads = []
    real = codecids.entry_points

    def spy(**kw):
        threads.append(threading.current_thread())
        return real(**kw)

    monkeypatch.setattr(codecids, "entry_points", spy)
    codecids.numcodecs_ids.cache_clear()
    try:
        store = ValidatingStore(ThreadedStore(MemoryStore()))
        await store.set("a/.zarray", json.dumps(ZARRAY).encode())
        await store.set("b/.zarray", json.dumps(ZARRAY).encode())
    finally:
        codecids.numcodecs_ids.cache_clear()
    assert len(threads) == 1  # looked up once
    assert threads[0] is not threading.main_thread()  # not on the trio thread, which would stall every request


async def test_the_mount_loads_the_codec_list_at_start_and_survives_a_failure(monkeypatch, caplog):
    from nczfs.daemon import mount

    codecids.numcodecs_ids.cache_clear()
    try:
        await mount._import_codecs()
        assert codecids.codecs_known()
    finally:
        codecids.numcodecs_ids.cache_clear()

    def broken():
        raise RuntimeError("entry point exploded")

    monkeypatch.setattr(mount, "numcodecs_ids", broken)
    await mount._import_codecs()  # logged, not raised: a daemon must not die of it
    assert "entry point exploded" in caplog.text
