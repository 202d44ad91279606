"""Consolidated metadata the mount maintains, with another writer updating it at the same time
(kernel-free: the memory store checks versions as S3 does; another writer's update is injected
between this mount's read of ``.zmetadata`` and its write)."""

from __future__ import annotations

from dataclasses import replace

import errno
import json
import logging

import pytest

from nczfs.cache import CachingStore
from nczfs.toolbox.errors import Stale
from nczfs.nczarr import consolidating
from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.store.memory.store import MemoryStore
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
        self.capabilities = replace(self.capabilities, checks_writes=checks)
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


class CutOnce(MemoryStore):
    """A memory store whose next read of ``ds/.zmetadata`` answers other bytes of its length
    that are not JSON (as a read that went wrong: another version's bytes cut at this one's size)."""

    def __init__(self):
        super().__init__("cut")
        self.cut = 0

    def get_version(self, key, rng, etag):
        data = super().get_version(key, rng, etag)
        if key == ZMETA and self.cut > 0:
            self.cut -= 1
            return b"[" + bytes(data[1:])  # as long as the version's size says, not JSON
        return data


async def test_a_copy_read_as_not_json_is_read_again_from_the_store_before_it_is_passed_over(caplog):
    """The cache kept a consolidated copy that is not JSON for the version the store holds: the
    store's own copy is read again, and the entry is added (it used to be passed over unsaid, and
    so was every later entry while the cache kept it). A copy the store itself holds as not JSON
    is passed over with a warning naming it."""
    below = CutOnce()
    s = _stack(below, cached=True)
    below.cut = 1
    await s.set("ds/a/.zarray", json.dumps(ZARRAY).encode())
    await s.set("ds/b/.zarray", json.dumps(ZARRAY).encode())
    assert below.cut == 0 and _entries(below) == {".zgroup", "a/.zarray", "b/.zarray"}
    below.set(ZMETA, b"{ not json")
    with caplog.at_level(logging.WARNING):
        await s.set("ds/c/.zarray", json.dumps(ZARRAY).encode())
    assert "'ds/.zmetadata': not JSON, so this mount's change of it was not made" in caplog.text
    assert below.get(ZMETA) == b"{ not json"


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


def _doc(entries: dict, v3: bool = False, **own) -> bytes:
    if v3:
        return json.dumps({"zarr_format": 3, "node_type": "group", **own,
                           "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": entries}}).encode()
    return json.dumps({"metadata": entries, "zarr_consolidated_format": 1}).encode()


@pytest.mark.parametrize("v3", [False, True], ids=["zmetadata", "zarr.json"])
def test_a_copy_both_changed_is_merged_with_this_mounts_entry_changes_on_the_others(v3):
    """``merge_consolidated`` (what a zip store is told to merge with when another program
    rewrote a copy the mount's change of was staged): the other's copy, with the entries this
    mount set, changed and removed since the base applied; the other's own changes kept."""
    key = "g/zarr.json" if v3 else "g/.zmetadata"
    base = _doc({"x": {"a": 1}, "gone": {"a": 2}, "kept": {"a": 3}}, v3)
    theirs = _doc({"x": {"a": 1}, "gone": {"a": 2}, "kept": {"a": 30}, "theirs": {"t": 1}}, v3)
    ours = _doc({"x": {"a": 10}, "kept": {"a": 3}, "ours": {"o": 1}}, v3)
    merged = json.loads(consolidating.merge_consolidated(key, theirs, ours, base))
    entries = merged["consolidated_metadata"]["metadata"] if v3 else merged["metadata"]
    assert entries == {"x": {"a": 10}, "kept": {"a": 30}, "theirs": {"t": 1}, "ours": {"o": 1}}
    # no copy to start from (both made it): every entry of the mount's is set on the other's
    none = json.loads(consolidating.merge_consolidated(key, theirs, ours, None))
    assert (none["consolidated_metadata"]["metadata"] if v3 else none["metadata"]) == {
        "x": {"a": 10}, "gone": {"a": 2}, "kept": {"a": 3}, "theirs": {"t": 1}, "ours": {"o": 1}}


def test_a_copy_is_not_merged_where_both_changed_the_groups_own_metadata_or_one_is_no_copy():
    """The group's own metadata (outside the entries) is the other's or the mount's, whichever
    changed it; both changed it, or one side is not a consolidated copy: None (kept beside)."""
    base = _doc({}, True, attributes={"t": 0})
    theirs, ours = _doc({"a": {}}, True, attributes={"t": 1}), _doc({"b": {}}, True, attributes={"t": 0})
    merged = json.loads(consolidating.merge_consolidated("zarr.json", theirs, ours, base))
    assert merged["attributes"] == {"t": 1} and sorted(merged["consolidated_metadata"]["metadata"]) == ["a", "b"]
    mine = json.loads(consolidating.merge_consolidated("zarr.json", base, _doc({"b": {}}, True, attributes={"t": 2}), base))
    assert mine["attributes"] == {"t": 2}
    assert consolidating.merge_consolidated("zarr.json", theirs, _doc({}, True, attributes={"t": 2}), base) is None
    assert consolidating.merge_consolidated(".zmetadata", b"not json", _doc({}), _doc({})) is None
    assert consolidating.merge_consolidated("zarr.json", b'{"zarr_format": 3, "node_type": "array"}', ours, base) is None
    assert consolidating.is_consolidated("a/zarr.json") and not consolidating.is_consolidated("a/.zarray")
