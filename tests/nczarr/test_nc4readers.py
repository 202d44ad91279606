"""Every reader of issue 45 (h5py, xarray's two engines, the netCDF4 wheel, ncdump, ncks, cdo,
GDAL's netCDF and HDF5 drivers, h5dump, h5ls) on NAME.nc4 of a few datasets of both corpora,
made without a mount: each equal to the store or a documented difference
(tests/nczarr/nc4readers.py DOCUMENTED). The whole corpora: bench/bench_nc4readers.py."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tests.nczarr.nc4readers as readers_mod
from tests.nczarr.nc4readers import READERS, documented

pytestmark = pytest.mark.filterwarnings("ignore")

pytest.importorskip("h5netcdf")
pytest.importorskip("hypothesis")
pytest.importorskip("netCDF4")
from bench import bench_nc4readers as bench  # noqa: E402

#: the small subset: generated examples (fixed seed) and shared datasets (sorted, the first)
EXAMPLES, SHARED = 4, 3


@pytest.mark.skipif(not all(shutil.which(t) for t in ("h5dump", "h5ls", "ncdump", "ncgen", "ncks", "cdo", "gdalinfo")),
                    reason="the command-line readers are not installed")
def test_every_reader_reads_both_corpora_as_the_store(tmp_path):
    corpora = {"generated": (tmp_path / "gen", bench.generated(tmp_path / "gen", EXAMPLES)),
               "shared": (tmp_path / "shared", bench.shared(tmp_path / "shared", SHARED))}
    assert len(corpora["generated"][1]) >= EXAMPLES // 2 and len(corpora["shared"][1]) == SHARED
    table = bench.run(corpora)
    bad = {(r, c, k): v for (r, c), kinds in table.items() for k, v in kinds.items() if k in ("differs", "fails")}
    assert bad == {}
    equal = sum(len(kinds.get("equal", [])) for kinds in table.values())
    assert equal >= len(READERS) * (EXAMPLES // 2 + SHARED) // 2  # most equal, not all documented away


def test_a_difference_is_documented_only_for_its_reader():
    line = "/v: attr flag_values extra"
    assert documented("xarray-netcdf4", line) and documented("h5py", line) is None
    assert documented("ncks", "/v: values differ: want [1.79769313e+308] got [inf]")
    assert documented("ncks", "/v: values differ: want [2.] got [3.]") is None


def test_attributes_compare_by_value():
    assert not readers_mod.attr_differs("K", b"K") and readers_mod.attr_differs("K", "m")
    assert not readers_mod.attr_differs([1, 2], np.array([1, 2], "i2")) and readers_mod.attr_differs([1, 2], [1, 3])
    assert not readers_mod.attr_differs(1.5, np.float32(1.5)) and readers_mod.attr_differs([1.0], [1.0, 2.0])


@pytest.mark.parametrize("wrong", ["values", "attributes"])
def test_a_reader_that_reads_other_values_or_attributes_differs(tmp_path, monkeypatch, wrong):
    corpora = {"generated": (tmp_path / "gen", bench.generated(tmp_path / "gen", 4))}
    import tests.nczarr.nc4readers as readers

    real = readers.read_h5py

    def off_by_one(path):
        values, attrs = real(path)
        if wrong == "attributes":
            return values, {k: {a: (v + 1 if isinstance(v, (int, float)) else f"{v}!") for a, v in at.items()}
                            for k, at in attrs.items()}
        return {k: (v + 1 if v.dtype.kind in "iuf" else v) for k, v in values.items()}, attrs
    monkeypatch.setattr(readers, "read_h5py", off_by_one)
    table = bench.run(corpora, readers=("h5py",))
    assert table["h5py", "generated"]["differs"]
    differs = table["h5py", "generated"]["differs"]
    assert all(wrong != "attributes" or " attr " in " ".join(lines) for _, lines in differs)
