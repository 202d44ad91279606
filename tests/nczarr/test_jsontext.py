"""Metadata JSON as netCDF-C writes it: parsed leniently, written back byte for byte.

The objects come from the two netCDF-C builds the views serve, writing datasets of netCDF-C's
own test CDL (Debian ``ncgen`` 4.9.0) and ones the netCDF4 wheel (4.10.1) writes: raw control
characters, bytes that are not UTF-8 and raw non-ASCII UTF-8 in names and attributes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.read import StoreObjects, read_dataset
from nczfs.store.directory.store import DirectoryStore
from tests.conftest import CORPUS

netCDF4 = pytest.importorskip("netCDF4")

CDL = CORPUS / "netcdf-c-cdl"
#: written by Debian netCDF-C 4.9.0: raw UTF-8 names, raw bytes \200 and \300 that are not UTF-8
NCGEN_CDL = ["ncdump_ref_tst_unicode", "ncdump_ref_tst_utf8", "ncdump_cdl_ref_tst_nul3",
             "ncdump_cdl_ref_tst_chardata", "ncdump_ref_nc_test_netcdf4"]


def metadata_objects(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob(".z*") if p.is_file()}


def debian_nczarr(cdl_name: str, target) -> None:
    """The CDL as Debian netCDF-C 4.9.0 writes it to NCZarr: by ncgen, or (4.9.0's ncgen refuses
    unlimited dimensions there) through a netCDF-4 file and ``nccopy -u``, as the fidelity run does."""
    if shutil.which("ncgen") is None:
        pytest.fail("Debian's ncgen (netcdf-bin) is missing: scripts/install.sh --test installs it")
    url = f"file://{target}#mode=nczarr,file"
    cdl = str(CDL / f"{cdl_name}.cdl")
    if subprocess.run(["ncgen", "-4", "-o", url, cdl], capture_output=True).returncode == 0:
        return
    shutil.rmtree(target, ignore_errors=True)
    nc = f"{target}.nc"
    subprocess.run(["ncgen", "-4", "-o", nc, cdl], check=True, capture_output=True)
    subprocess.run(["nccopy", "-u", nc, url], check=True, capture_output=True)


def written_by_debian_ncgen(tmp_path) -> dict[str, bytes]:
    out = {}
    for name in NCGEN_CDL:
        target = tmp_path / f"{name}.file"
        debian_nczarr(name, target)
        out.update({f"{name}/{k}": v for k, v in metadata_objects(target).items()})
    return out


def written_by_the_wheel(tmp_path) -> dict[str, bytes]:
    target = tmp_path / "wheel.file"
    with netCDF4.Dataset(f"file://{target}#mode=nczarr,file", "w") as nc:
        nc.createDimension("Καλημέρα", 2)
        nc.createDimension("t", None)
        nc.setncattr("ctl", "tab\there\x01end")
        nc.setncattr("pi", np.float64(3.141592653589793))
        nc.setncattr_string("strs", ["a", "é"])
        v = nc.createVariable("ā", "f4", ("t", "Καλημέρα"))
        v.units = "°C"
        v[0, :] = [1.5, 2.5]
    return metadata_objects(target)


def test_netcdf_c_objects_round_trip_byte_for_byte(tmp_path):
    """What the netCDF-C views emit for content they read unchanged is what netCDF-C wrote
    (so netCDF-C's in-place rewrites keep their length), except 4.9.0's bare NaN tokens,
    written as the strings both releases read."""
    objects = {**written_by_debian_ncgen(tmp_path), **written_by_the_wheel(tmp_path)}
    assert len(objects) > 20
    for raw in (b"\x01", b"\xc3", b"\x80"):  # a control character, UTF-8, a byte that is not UTF-8
        assert any(raw in v for v in objects.values()), raw
    for key, data in objects.items():
        expected = re.sub(rb"(?<=[\[,: ])(-?Infinity|NaN)(?=[\],}])", rb'"\1"', data)  # 4.9.0's bare tokens
        assert jsontext.dumps_netcdf(jsontext.loads(data)) == expected, key


def test_bytes_netcdf_c_writes_are_read_not_dropped(tmp_path):
    """A raw \\001 and a byte that is not UTF-8 used to drop the whole ``.zattrs``."""
    target = tmp_path / "d.file"
    debian_nczarr("ncdump_ref_nc_test_netcdf4", target)
    ds = read_dataset(StoreObjects(DirectoryStore(str(target))))
    assert not ds.problems, ds.problems
    gc = next(a for a in ds.root.attributes if a.name == "Gc")
    assert jsontext.encode(gc.value) == b"\x80" and ds.root.dim("Dr") is not None
    for key, data in metadata_objects(target).items():
        value = jsontext.loads(data)
        assert json.loads(jsontext.dumps_zarr(value)) is not None, key  # standard JSON for zarr-python


def test_the_netcdf_dialect_escapes_only_what_netcdf_c_decodes():
    value = {"a": ["x", "y"], "s": "q\"b\\n\nt\tc\x01é\udc80", "f": [1.5, float("nan"), float("inf")], "n": None}
    out = jsontext.dumps_netcdf(value)
    assert out == (b'{"a": ["x","y"], "s": "q\\"b\\\\n\\nt\\tc\x01\xc3\xa9\x80", "f": [1.5,"NaN","Infinity"], '
                   b'"n": null}')
    assert jsontext.loads(out)["s"] == value["s"]
    assert b"\\u" not in out  # netCDF-C reads \uXXXX as the letters uXXXX
