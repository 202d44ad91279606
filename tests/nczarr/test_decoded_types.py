"""Strings and bool as xarray writes them at its defaults, without a mount (issue 43): the
classic file's bytes read back by xarray as it reads the store; what the netCDF views show."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import trio

from nczfs.nczarr.chunks.chunkfacts import ChunkFacts
from nczfs.nczarr.metadata.read import DictObjects, read_dataset
from nczfs.nczarr.ncfile.classicfile import group_file, v3_encodings
from nczfs.nczarr.views.emit import emit
from nczfs.nczarr.views.viewshape import Layouts
from nczfs.store.threads import ThreadedStore
from tests.nczarr.test_ncfile import files_of, render

xr = pytest.importorskip("xarray")
pytest.importorskip("netCDF4")

DATA = {
    "names": np.array(["a", "bcd", "é", ""], dtype=object),
    "fixed": np.array(["ab", "c", "xyz", "é"]),
    "flags": np.array([True, False, True, False]),
}


@pytest.fixture(scope="module", params=[2, 3])
def written(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"v{request.param}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xr.Dataset({n: (("n",), d) for n, d in DATA.items()}).to_zarr(
            root / "x.zarr", zarr_format=request.param, consolidated=False)
    return root


def test_the_classic_file_decodes_as_xarray_reads_the_store(written, tmp_path):
    """Before: variable-length strings (v2 and v3), v3's fixed strings and v2's bool were left out."""
    store, ds, _ = files_of(written, "x.zarr")
    facts = trio.run(ChunkFacts(ThreadedStore(store)).of, "x.zarr", ds, False)
    assert facts == {"names": {"maxlen": 3}}  # "é" is 2 bytes of UTF-8, "bcd" 3
    gf = group_file(ds, "/", "x.zarr", v3_encodings(ds, lambda k: store.get(f"x.zarr/{k}")), facts)
    assert gf.left_out == []
    (tmp_path / "x.nc").write_bytes(render(gf, store))
    want = xr.open_zarr(written / "x.zarr", consolidated=False)
    with xr.open_dataset(tmp_path / "x.nc", engine="netcdf4") as got:
        for name, data in DATA.items():
            assert got[name].values.tolist() == want[name].values.tolist() == data.tolist(), name
        assert got["flags"].dtype == bool


def test_without_a_scan_variable_length_strings_are_left_out_with_the_reason(written):
    _, ds, files = files_of(written, "x.zarr")
    dtype = next(v.dtype for v in ds.root.variables if v.name == "names")
    assert files["x.zarr.nc"].left_out == [f"/names: variable-length strings ({dtype}) whose longest value is not "
                                           "known (their chunks not scanned: sharded)"]


def test_inspect_scans_the_strings_as_the_mount_does(written):
    """``nczfs inspect`` names the file the mount shows, of the same size, leaving nothing out."""
    from tests.helpers import run_nczfs

    res = run_nczfs("inspect", str(written / "x.zarr"))
    assert res.returncode == 0, res.stderr
    store, ds, _ = files_of(written, "x.zarr")
    facts = trio.run(ChunkFacts(ThreadedStore(store)).of, "x.zarr", ds, False)
    gf = group_file(ds, "/", "x.zarr", v3_encodings(ds, lambda k: store.get(f"x.zarr/{k}")), facts)
    lines = [line for line in res.stdout.splitlines() if line.startswith("// nc file")]
    assert lines == [f"// nc file: x.zarr.nc (CDF-1, {gf.layout.size} bytes)"], res.stdout


@pytest.mark.parametrize("view", ["netcdf-4.10", "netcdf-4.9.1", "netcdf-4.9"])
def test_netcdf_views_show_every_string_and_bool_with_its_dtype(written, view):
    """Before: v2's strings (|O, <U3) and bool were hidden from every netCDF view, v3's fixed strings too."""
    root = written / "x.zarr"
    objects = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
               if p.is_file() and (p.name.startswith(".") or p.name == "zarr.json")}
    layouts = Layouts()
    out, hidden = emit(read_dataset(DictObjects(objects)), view, facts={"names": {"maxlen": 3}}, layouts=layouts)
    assert hidden == []
    assert {k: p.shown_dtype for k, p in layouts.recodes.items() if k != "flags"} == {
        "names": "|S3", "fixed": "|S12"}  # 4 bytes a character: UTF-8's longest
    chunk = (root / "fixed" / ("c/0" if (root / "zarr.json").exists() else "0")).read_bytes()
    shown = np.frombuffer(layouts.recodes["fixed"].apply(chunk), "|S12")
    assert [s.decode("utf-8") for s in shown] == DATA["fixed"].tolist()
    attrs = json.loads(out["flags/.zattrs"])
    assert attrs["dtype"] == "bool" and attrs["flag_meanings"] == "false true"
