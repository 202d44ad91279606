"""The versions a view showed, kept after it is replaced (nczfs/nczarr/views/shownversions.py):
the last 64 views replaced, by writes through the mount or at their TTL (docs/SEMANTICS.md,
"Concurrent writers"), without a kernel."""

from __future__ import annotations

import hashlib
import json

import pytest
import trio

from nczfs.toolbox.errors import Conflict
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.nczarr.views.datasetview import DatasetView
from nczfs.nczarr.views.shownversions import SHOWN_BEFORE, Shown
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.values import ABSENT
from tests.store.test_nczarr_wrappers import ZARRAY, _dataset

TTL = 0.01


def _consolidated(below: MemoryStore) -> None:
    """Dataset ``ds`` with a ``.zmetadata`` lacking its array: the view shows it made from the
    arrays stored (so under another version than stored, changing with every array added)."""
    _dataset(below)
    below.set("ds/.zmetadata", json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                           "zarr_consolidated_format": 1}).encode())


def _add_array(below: MemoryStore, i: int) -> None:
    below.set(f"ds/a{i}/.zarray", json.dumps(ZARRAY).encode())


async def _shown(s: PresentingStore) -> tuple[bytes, str]:
    data = await s.get("ds/.zmetadata")
    return data, hashlib.md5(data).hexdigest()


async def _replaced_at_ttl(s: PresentingStore, below: MemoryStore, times: int, start: int = 0) -> None:
    """``times`` views replaced at their TTL, each showing ``.zmetadata`` otherwise (another
    writer's new array)."""
    for i in range(start, start + times):
        _add_array(below, i)
        await trio.sleep(2 * TTL)
        await s.view_for("ds/.zmetadata")


@pytest.mark.parametrize("replaced", [SHOWN_BEFORE, SHOWN_BEFORE + 1])
async def test_the_last_64_views_replaced_at_their_ttl_are_kept(replaced):
    """A rewrite naming the version a view showed, 64 views back, is stored (conditioned on the
    stored version that view was built from); 65 back, it is refused as from another writer."""
    below = MemoryStore()
    _consolidated(below)
    s = PresentingStore(ThreadedStore(below), "xarray", ttl=TTL)
    data, version = await _shown(s)
    await _replaced_at_ttl(s, below, replaced)
    assert len(s._shown) == min(replaced, SHOWN_BEFORE)
    if replaced <= SHOWN_BEFORE:
        await s.set("ds/.zmetadata", data + b" ", if_version=version)
        assert below.get("ds/.zmetadata") == data + b" "
    else:
        with pytest.raises(Conflict):
            await s.set("ds/.zmetadata", data + b" ", if_version=version)


async def test_views_replaced_by_writes_and_at_their_ttl_are_kept_in_one_place():
    """Drops by writes through the view and replacements at the TTL count together; a view
    rebuilt at its TTL showing what it showed is not kept (its replacement answers for it)."""
    below = MemoryStore()
    _consolidated(below)
    s = PresentingStore(ThreadedStore(below), "xarray", ttl=TTL)
    data, version = await _shown(s)
    for _ in range(3 * SHOWN_BEFORE):  # nothing changed: no view kept
        await trio.sleep(2 * TTL)
        await s.view_for("ds/.zmetadata")
    assert len(s._shown) == 0
    half = SHOWN_BEFORE // 2
    for i in range(half):  # dropped by writes through the view
        await s.view_for("ds/.zmetadata")
        await s.set(f"ds/w{i}/.zarray", json.dumps(ZARRAY).encode())
    await s.view_for("ds/.zmetadata")  # built again after the last write (nothing replaced)
    assert len(s._shown) == half
    await _replaced_at_ttl(s, below, SHOWN_BEFORE - half)
    await s.delete("ds/.zmetadata", if_version=version)  # the 64th view back showed it
    assert "ds/.zmetadata" not in below._objects


def test_a_replaced_view_answers_the_stored_version_as_the_view_did():
    versions = {"ds/.zgroup": "e1", "ds/.zattrs": ""}
    view = DatasetView("ds", "zarr", 0.0, versions=versions)
    shown = Shown({}, versions)
    for key, want in [("ds/.zgroup", "e1"), ("ds/.zattrs", None), ("ds/.zmetadata", ABSENT)]:
        assert view.stored_version(key) == want and shown.stored_version(key) == want


def test_the_last_64_views_replaced_are_kept_as_the_docs_say():
    assert SHOWN_BEFORE == 64  # docs/SEMANTICS.md, "Metadata a view writes back"
