"""Consolidated metadata the mount maintains, with another writer updating it at the same time
(kernel-free: the memory store checks versions as S3 does; another writer's update is injected
between this mount's read of ``.zmetadata`` and its write)."""

from __future__ import annotations

import errno
import json
import logging

import pytest

from nczfs.cache import CachingStore
from nczfs.toolbox.errors import Stale
from nczfs.nczarr import consolidating
from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.store.memory import MemoryStore
from nczfs.store.threads import ThreadedStore

ZARRAY = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f4", "compressor": None,
          "fill_value": 0.0, "order": "C", "filters": None}
ZMETA = "ds/.zmetadata"


class OtherWriter(MemoryStore):
    """A memory store where another writer adds an array's entry to ``ds/.zmetadata`` (read
    fresh, merged, stored: as another mount does) right before each of the next ``times`` writes
    of it by this mount, i.e. after this mount read it."""

    def __init__(self, times: int = 1, checks: bool = True):
        super().__init__("other")
        self.checks_writes = checks
        self.times = times
        self.added: list[str] = []

    def set(self, key, data, if_version=None):
        if key == ZMETA and self.times > 0 and key in self._objects:
            self.times -= 1
            meta = json.loads(self.get(ZMETA))
            name = f"other{len(self.added)}/.zarray"
            meta["metadata"][name] = ZARRAY
            super().set(ZMETA, json.dumps(meta).encode())
            self.added.append(name)
        return super().set(key, data, if_version)


def _stack(below: MemoryStore, cached: bool) -> ConsolidatingStore:
    """The layer over the store, as a mount stacks it (over its cache) or right over it."""
    below.set(".zgroup", b'{"zarr_format": 2}')  # not below ds: no copy above it
    below.set(ZMETA, json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                 "zarr_consolidated_format": 1}).encode())
    inner = ThreadedStore(below)
    return ConsolidatingStore(CachingStore(inner, ttl=60) if cached else inner)


def _entries(below: MemoryStore) -> set[str]:
    return set(json.loads(below.get(ZMETA))["metadata"])


@pytest.mark.parametrize("cached", [False, True], ids=["bare", "over-the-cache"])
async def test_an_update_refused_by_another_writers_is_read_and_merged_again(cached):
    below = OtherWriter(times=3)
    s = _stack(below, cached)
    await s.get(ZMETA)  # a mount that read it before: over the cache, its old version is cached
    await s.set("ds/a/.zarray", json.dumps(ZARRAY).encode())
    await s.set("ds/a/.zattrs", b'{"_ARRAY_DIMENSIONS": ["x"]}')
    assert below.added == ["other0/.zarray", "other1/.zarray", "other2/.zarray"]
    assert _entries(below) == {".zgroup", "a/.zarray", "a/.zattrs", *below.added}
    await s.delete("ds/a/.zattrs")  # a removal merged the same: only its own entry goes
    assert _entries(below) == {".zgroup", "a/.zarray", *below.added}
    assert s.counters()["consolidated.merged-again"] >= 3 and s.counters()["consolidated.lost"] == 0


async def test_an_update_refused_at_every_attempt_fails_the_write_with_estale(monkeypatch, caplog):
    monkeypatch.setattr(consolidating, "BACKOFF", 0)
    below = OtherWriter(times=0)
    s = _stack(below, cached=True)
    await s.set("ds/a/.zarray", json.dumps(ZARRAY).encode())
    below.times = 1000
    with caplog.at_level(logging.ERROR), pytest.raises(Stale) as failed:
        await s.set("ds/b/.zarray", json.dumps(ZARRAY).encode())
    assert failed.value.errno == errno.ESTALE
    assert "'ds/b/.zarray': stored, but its entry in the consolidated metadata is missing" in str(failed.value)
    assert "'ds/.zmetadata' was changed by another writer at each of 8 attempts" in caplog.text
    assert len(below.added) == consolidating.ATTEMPTS
    assert s.counters()["consolidated.lost"] == 1
    assert _entries(below) == {".zgroup", "a/.zarray", *below.added}  # every other writer's entry is there
    with pytest.raises(Stale, match="'ds/.zmetadata' was changed by another writer"):  # an unlink: the same
        await s.delete("ds/a/.zarray")
    assert "a/.zarray" in _entries(below) and "ds/a/.zarray" not in below.list_prefix("ds")


async def test_where_the_store_cannot_check_the_copy_is_read_from_the_store_right_before_the_write():
    """No condition: another writer's update between the read and the write is lost (the last
    writer wins), but one made before the read is kept even while the cache holds an older copy."""
    below = OtherWriter(times=0, checks=False)
    s = _stack(below, cached=True)
    await s.get(ZMETA)  # cached for 60 s
    below.set(ZMETA, json.dumps({"metadata": {"before/.zarray": ZARRAY}, "zarr_consolidated_format": 1}).encode())
    await s.set("ds/a/.zarray", json.dumps(ZARRAY).encode())
    assert _entries(below) == {"before/.zarray", "a/.zarray"}
    below.times = 1
    await s.set("ds/b/.zarray", json.dumps(ZARRAY).encode())
    assert _entries(below) == {"before/.zarray", "a/.zarray", "b/.zarray"}  # other0 lost: not checked


class OtherV3Writer(MemoryStore):
    """As OtherWriter, for the ``consolidated_metadata`` of the Zarr v3 group ``ds/zarr.json``."""

    def __init__(self):
        super().__init__("other-v3")
        self.times = 0

    def set(self, key, data, if_version=None):
        if key == "ds/zarr.json" and self.times > 0:
            self.times -= 1
            node = json.loads(self.get(key))
            node["consolidated_metadata"]["metadata"]["other"] = {"node_type": "group", "zarr_format": 3}
            super().set(key, json.dumps(node).encode())
        return super().set(key, data, if_version)


async def test_a_zarr_v3_groups_consolidated_metadata_is_merged_the_same():
    below = OtherV3Writer()
    below.set("ds/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group", "consolidated_metadata": {
        "kind": "inline", "must_understand": False, "metadata": {}}}).encode())
    s = ConsolidatingStore(CachingStore(ThreadedStore(below), ttl=60))
    await s.get("ds/zarr.json")
    below.times = 1
    await s.set("ds/a/zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}).encode())
    assert set(json.loads(below.get("ds/zarr.json"))["consolidated_metadata"]["metadata"]) == {"a", "other"}


@pytest.mark.parametrize("cached", [False, True], ids=["bare", "over-the-cache"])
async def test_a_write_conditioned_on_a_version_the_mounts_own_rewrite_replaced_is_the_mounts_own(cached):
    """zarr writes .zmetadata last (a temp file renamed over it), conditioned on the version the
    mount saw before its own consolidation rewrote it (xarray's to_zarr on S3 failed with ESTALE);
    another writer's version still refuses it."""
    from nczfs.toolbox.errors import Conflict

    below = OtherWriter(times=0)
    s = _stack(below, cached)
    seen = (await s.stat(ZMETA)).etag
    await s.set("ds/a/.zarray", json.dumps(ZARRAY).encode())  # the mount's own rewrite of ZMETA
    assert (await s.stat(ZMETA)).etag != seen
    await s.set("ds/.zmetadata.partial", below.get(ZMETA))
    await s.rename("ds/.zmetadata.partial", ZMETA, if_version=seen)  # stored: no conflict
    now = (await s.stat(ZMETA)).etag
    below.set(ZMETA, below.get(ZMETA) + b" ")  # another writer's version
    with pytest.raises(Conflict):
        await s.set(ZMETA, below.get(ZMETA), if_version=now)
