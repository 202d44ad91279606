"""Chunks a view makes where the store has none (nczfs/nczarr/views/fillchunks.py, fillreads.py),
without a kernel: which arrays get them, what they hold, and that a view lists, stats and reads
them alike; a write through the view over one goes to the store as a write of a missing chunk."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest

from nczfs.nczarr.views.fillchunks import NETCDF, ZARR, FillChunks, masked, missing_value
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.nczarr.chunks.recode import Codecs
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore
from nczfs.toolbox.errors import Conflict, KeyNotFound, Stale
from tests.nczarr.util import chunk_values

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.mark.parametrize(("dtype", "fill", "reader", "want"), [
    ("|S3", "YQ==", ZARR, b"a"),  # zarr-python: a |S fill_value is base64
    ("|S3", "a", NETCDF, b"a"),  # netCDF-C: the text
    ("<U1", "a", NETCDF, b"a"),  # a char (netcdf-4.9's strings as chars): one byte
    ("|S3", None, ZARR, b""),
    ("<U5", None, ZARR, ""),
    ("|O", None, ZARR, ""),
    ("<i4", None, NETCDF, 0),
    ("<f4", "NaN", ZARR, "nan"),
    ("<f4", "0x7fc00000", ZARR, "nan"),  # Zarr v3's hex of the bytes
    ("<i2", 5, ZARR, 5),
    ("|b1", False, ZARR, False),
])
def test_what_a_reader_reads_for_a_missing_chunk(dtype, fill, reader, want):
    got = missing_value(dtype, fill, reader)
    assert (str(got.item()) if want == "nan" else got.item()) == want


def test_a_missing_time_of_a_null_fill_is_nat_to_zarr_python_zero_to_netcdf_c():
    assert np.isnat(missing_value("<M8[ns]", None, ZARR)) and missing_value("<i8", None, NETCDF).item() == 0
    assert missing_value("<M8[s]", "NaT", ZARR).dtype == np.dtype("<M8[s]")


def test_what_is_surely_missing():
    assert masked(np.array(np.nan, "f4"), []) and masked(np.array(-1, "i4"), [-1, 7])
    assert masked(np.array(0.5, "f8"), ["NaN", 0.5]) and not masked(np.array(5, "i4"), [-1])
    assert not masked(np.array(b"a", "S3"), ["a"])  # strings: never said (made where raw differs)


def test_the_names_of_a_grid_nested_flat_and_of_rank_zero():
    nested = FillChunks((2, 3), "/", "<i4", (2, 2), Codecs(), np.array(5, "<i4"))
    assert list(nested.names("")) == [("0", True), ("1", True)]
    assert list(nested.names("1")) == [("0", False), ("1", False), ("2", False)]
    assert nested.holds("1/2") and not nested.holds("1/3") and not nested.holds("1") and not nested.holds("01/2")
    assert nested.is_folder("1") and not nested.is_folder("2") and list(nested.names("2")) == []
    flat = FillChunks((2, 2), ".", "<i4", (2, 2), Codecs(), np.array(5, "<i4"))
    assert [n for n, _ in flat.names("")] == ["0.0", "0.1", "1.0", "1.1"] and not flat.is_folder("0")
    scalar = FillChunks((), ".", "<i4", (), Codecs(), np.array(5, "<i4"))
    assert list(scalar.names("")) == [("0", False)] and scalar.holds("0") and not scalar.holds("1")
    assert np.frombuffer(scalar.make(), "<i4").tolist() == [5]


def _store(tmp_path) -> MemoryStore:
    """zarr-python's Zarr v3: ``v`` (int32, fill_value 5, masked by -1: one chunk of six written),
    ``same`` (fill_value 0, no mask: a missing chunk reads 0 through every view), and ``s``
    (bytes masked by b"a" beside an empty fill)."""
    g = zarr.open_group(str(tmp_path / "ds"), mode="w", zarr_format=3)
    v = g.create_array("v", shape=(4, 6), chunks=(2, 2), dtype="<i4", fill_value=5, dimension_names=["y", "x"])
    v.attrs["_FillValue"] = -1
    v[0:2, 0:2] = [[1, -1], [2, 3]]
    same = g.create_array("same", shape=(6,), chunks=(2,), dtype="<i2", fill_value=0, dimension_names=["x"])
    same[0:2] = [1, 2]
    s = g.create_array("s", shape=(2,), chunks=(1,), dtype="S3", fill_value=b"", dimension_names=["k"])
    s.attrs["_FillValue"] = "YQ=="
    s[0:1] = [b"ab"]
    below = MemoryStore()
    for p in (tmp_path / "ds").rglob("*"):
        if p.is_file():
            below.set(str(p.relative_to(tmp_path)), p.read_bytes())
    return below


@pytest.mark.parametrize("view", ["xarray", "netcdf-4.10", "netcdf-4.9"])
async def test_a_view_lists_stats_and_reads_the_chunks_it_makes_alike(tmp_path, view):
    """Every chunk of ``v``'s grid is listed (nested, as the view names them), its size the bytes
    a read gives, those bytes the store's fill in the view's codecs; ``same``'s missing chunks stay
    missing (they read alike without); a made chunk has a version of its own."""
    s = PresentingStore(ThreadedStore(_store(tmp_path)), view, ttl=60)
    zarray = json.loads(await s.get("ds/v/.zarray"))
    keys = [k for k in await s.list_prefix("ds/v") if not k.rpartition("/")[2].startswith(".")]
    sep = zarray.get("dimension_separator", ".")
    assert keys == [f"ds/v/{i}{sep}{j}" for i in range(2) for j in range(3)]
    for key in keys:
        info, data = await s.stat(key), await s.get(key)
        assert info.size == len(data) and (await s.entry(key)).info.size == len(data)
        written = key.endswith(f"0{sep}0")
        assert chunk_values(data, zarray) == ([1, -1, 2, 3] if written else [5] * 4), key
        assert info.etag.startswith("nczfs-fill-") != written
    assert [k.rpartition("/")[2] for k in await s.list_prefix("ds/same")][-1:] == ["0"]
    with pytest.raises(KeyNotFound):
        await s.stat("ds/same/1")
    with pytest.raises(KeyNotFound):  # beyond the grid
        await s.stat(f"ds/v/2{sep}0")
    await s.close()


async def test_only_the_xarray_view_makes_a_bytes_chunk_xarray_would_mask(tmp_path):
    """``s``'s missing chunk holds b"": the xarray view's fill_value is the mask b"a" (xarray's
    Zarr v2 reader masks bytes by it alone), so that view makes it; netCDF-C's views show the mask
    as an attribute beside a fill that reads b"" already."""
    below = _store(tmp_path)
    xa = PresentingStore(ThreadedStore(below), "xarray", ttl=60)
    assert await xa.get("ds/s/1") == numcodecs.Zstd(level=0).encode(bytes(3))
    for view in ("netcdf-4.10", "netcdf-4.9"):
        s = PresentingStore(ThreadedStore(below), view, ttl=60)
        assert not [k for k in await s.list_prefix("ds/s") if k.endswith("1") or k.endswith("1.0")], view
        await s.close()
    await xa.close()


async def test_a_write_over_a_made_chunk_is_a_write_of_a_missing_chunk(tmp_path):
    """A write naming a made chunk's version is stored only while the store has none (as a write
    creating it would be); a read of that version once the store has one: Stale (ESTALE)."""
    below = _store(tmp_path)
    s = PresentingStore(ThreadedStore(below), "xarray", ttl=60)
    made = await s.stat("ds/v/1/0")
    chunk = numcodecs.Zstd(level=0).encode(np.full((2, 2), 7, "<i4").tobytes())
    await s.set("ds/v/1/0", chunk, if_version=made.etag)
    assert below.get("ds/v/c/1/0") == chunk and await s.get("ds/v/1/0") == chunk
    with pytest.raises(Stale):
        await s.get_version("ds/v/1/0", None, made.etag)
    seen = (await s.stat("ds/v/1/1")).etag
    below.set("ds/v/c/1/1", chunk)  # another writer stores it after this one saw it made
    with pytest.raises(Conflict):
        await s.set("ds/v/1/1", chunk, if_version=seen)
    other = (await s.stat("ds/v/0/2")).etag
    await s.delete("ds/v/0/2", if_version=other)  # none stored: nothing to delete, still made
    assert (await s.stat("ds/v/0/2")).etag == other
    await s.close()


async def test_an_array_of_too_many_chunks_gets_none_and_the_log_says_so(tmp_path, monkeypatch, caplog):
    from nczfs.nczarr.views import fillchunks

    monkeypatch.setattr(fillchunks, "MAX_MADE", 5)  # v has 6 chunks
    s = PresentingStore(ThreadedStore(_store(tmp_path)), "netcdf-4.10", ttl=60)
    with caplog.at_level("INFO"):
        with pytest.raises(KeyNotFound):
            await s.stat("ds/v/1/0")
    assert "'ds/v': its chunks never written read as the view's fill_value" in caplog.text
    await s.close()


async def test_a_rebuilt_view_follows_the_stored_fill(tmp_path):
    """Views are rebuilt at every TTL (the answer per array kept by its metadata's bytes): once the
    store's fill is the mask, a chunk never written reads alike and is no longer made."""
    below = _store(tmp_path)
    s = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=0)
    assert (await s.stat("ds/v/1/0")).etag.startswith("nczfs-fill-")
    meta = json.loads(below.get("ds/v/zarr.json"))
    below.set("ds/v/zarr.json", json.dumps({**meta, "fill_value": -1}).encode())
    assert json.loads(await s.get("ds/v/.zarray"))["fill_value"] == -1  # a reader reads metadata first
    with pytest.raises(KeyNotFound):
        await s.stat("ds/v/1/0")
    await s.close()
