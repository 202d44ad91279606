"""Chunks never written, through a mount: where a view's reader would fill one otherwise than the
store holds it, the view shows it as a chunk it makes (nczfs/nczarr/views/fillchunks.py), listed
(``readdir``), sized (``stat``) and read alike; elsewhere a chunk never written stays missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.decoded.judge import judge, undocumented
from tests.decoded.run import directory_site
from tests.decoded.run import reader_worker  # noqa: F401 - the module's worker fixture
from tests.helpers import DirectoryBackend, mounted
from tests.nczarr.util import chunk_values

pytestmark = [pytest.mark.fuse, pytest.mark.filterwarnings("ignore")]

zarr = pytest.importorskip("zarr")
pytest.importorskip("xarray")
pytest.importorskip("netCDF4")

VIEWS = ("xarray", "netcdf-4.10", "netcdf-4.9")
PATHS = ["as-stored/zarr", "xarray/zarr", "netcdf-4.10/netcdf4", "netcdf-4.9/ncdump", "nc/netcdf4", "nc/scipy",
         "open_view-xarray/zarr", "open_view-as-stored/zarr", "inspect/netcdf4"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with directory_site(tmp_path_factory.mktemp("view-fills"), ("as-stored", *VIEWS)) as site:
        yield site


def write_fills(path: Path) -> None:
    """zarr-python's Zarr v3: ``v`` (int32, ``fill_value`` 5, masked by ``_FillValue`` -1, one
    chunk of six written), ``sh`` (the same, sharded: inner chunks and a shard never written),
    ``same`` (``fill_value`` 0, no mask: its chunks never written read alike through every view)."""
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    v = g.create_array("v", shape=(4, 6), chunks=(2, 2), dtype="<i4", fill_value=5, dimension_names=["y", "x"])
    v.attrs["_FillValue"] = -1
    v[0:2, 0:2] = [[1, -1], [2, 3]]
    sh = g.create_array("sh", shape=(12,), chunks=(2,), shards=(8,), dtype="<i4", fill_value=5, dimension_names=["k"])
    sh.attrs["_FillValue"] = -1
    sh[0:2] = [-1, 4]
    same = g.create_array("same", shape=(6,), chunks=(2,), dtype="<i2", fill_value=0, dimension_names=["x"])
    same[0:2] = [1, 2]


def test_a_v3_mask_beside_a_fill_value_not_zero_decodes_the_same_on_every_path(site):
    """Before, every view's ``fill_value`` was the mask (-1; ``missing_value`` cannot stand in:
    netCDF-C and zarr-python read a ``null`` fill as 0, not 5), so each chunk never written read
    as missing instead of 5."""
    name = site.put(write_fills)
    got = judge(site.where(name), PATHS)
    assert {p: undocumented(p, d or []) for p, d in got.items()} == {p: [] for p in PATHS}


def _chunks(folder: Path, sep: str) -> dict[str, Path]:
    """The chunk files below an array's folder by their chunk key (nested folders joined by ``/``)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            out[str(p.relative_to(folder)) if sep == "/" else p.name] = p
    return out


@pytest.mark.parametrize("view", VIEWS)
def test_readdir_stat_and_read_agree_on_the_chunks_a_view_makes(site, view):
    """``v``: every chunk of its grid is listed (nested folders where the view's separator is
    ``/``), each sized as the bytes a read gives, the unwritten ones the fill 5 in the view's
    codecs; ``sh``: its inner chunks, the same; ``same``: only the chunk written (one stored object)."""
    name = site.put(write_fills)
    root = site.roots[view] / name
    for array, written, grid in (("v", {("0", "0"): [1, -1, 2, 3]}, (2, 3)), ("sh", {("0",): [-1, 4]}, (6,))):
        zarray = json.loads((root / array / ".zarray").read_bytes())
        sep = zarray.get("dimension_separator", ".")
        found = _chunks(root / array, sep)
        want = [sep.join(map(str, i)) for i in np.ndindex(*grid)]
        assert sorted(found) == sorted(want), (array, sorted(found))
        for key, p in found.items():
            data = p.read_bytes()
            assert os.stat(p).st_size == len(data) and os.path.getsize(p) == len(data)
            fill = [5] * (len(chunk_values(data, zarray)))
            assert chunk_values(data, zarray) == written.get(tuple(key.split(sep)), fill), (array, key)
    assert list(_chunks(root / "same", ".")) == ["0"]
    assert not (root / "same" / "1").exists()


def test_a_chunk_written_through_the_view_over_a_made_one_is_stored(tmp_path):
    """Writing a chunk the view made (zarr-python through a writable ``xarray`` view) stores it
    as a write of a missing chunk does; the others stay made."""
    (tmp_path / "backing").mkdir()
    backend = DirectoryBackend(tmp_path / "backing")
    write_fills(tmp_path / "backing" / "w.zarr")
    with mounted(backend, tmp_path / "mnt", "--present", "xarray") as m:
        a = zarr.open_array(str(m.path / "w.zarr" / "v"), mode="r+", zarr_format=2)
        a[2:4, 0:2] = 7
        assert a[...].tolist()[2:] == [[7, 7, 5, 5, 5, 5]] * 2
    stored = zarr.open_array(str(tmp_path / "backing" / "w.zarr" / "v"), mode="r")
    assert stored[...].tolist() == [[1, -1, 5, 5, 5, 5], [2, 3, 5, 5, 5, 5], [7, 7, 5, 5, 5, 5], [7, 7, 5, 5, 5, 5]]
    assert sorted(p.name for p in (tmp_path / "backing" / "w.zarr" / "v" / "c").rglob("*") if p.is_file()) == ["0", "0"]
