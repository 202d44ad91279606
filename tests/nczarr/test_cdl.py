"""``nczfs inspect``'s CDL is CDL: Debian's ncgen reads it back to the same header ncdump prints."""

from __future__ import annotations

import subprocess

import pytest

from nczfs.nczarr.metadata.cdl import cdl_name, quote, to_cdl
from nczfs.nczarr.metadata.read import StoreObjects, read_dataset
from nczfs.store.directory.store import DirectoryStore
from tests.nczarr.test_jsontext import CDL, debian_nczarr

netCDF4 = pytest.importorskip("netCDF4")


@pytest.mark.parametrize("name", ["ncdump_cdl_ref_tst_names", "ncdump_ref_nc_test_netcdf4", "ncdump_ref_tst_unicode"])
def test_inspect_header_is_read_back_by_ncgen_as_ncdump_prints_it(tmp_path, name):
    """Names starting with a digit or holding CDL's special characters, control characters and
    bytes that are not UTF-8 in attributes: before, ``\\1var`` was printed ``1var`` (ncgen: syntax
    error) and a byte that is not UTF-8 could not be printed at all."""
    target = tmp_path / "d.file"
    debian_nczarr(name, target)
    header = to_cdl(read_dataset(StoreObjects(DirectoryStore(str(target)))), "d")
    (tmp_path / "h.cdl").write_bytes(header.encode("utf-8", "surrogateescape"))
    res = subprocess.run(["ncgen", "-4", "-o", str(tmp_path / "h.nc"), str(tmp_path / "h.cdl")], capture_output=True)
    assert res.returncode == 0, res.stderr
    again = subprocess.run(["ncdump", "-h", str(tmp_path / "h.nc")], capture_output=True).stdout
    strip = lambda b: [ln.strip() for ln in b.splitlines()[1:] if ln.strip() and b"_NCProperties" not in ln]
    assert strip(again) == strip(header.encode("utf-8", "surrogateescape"))


def test_names_and_text_are_escaped_as_ncdump_does():
    assert cdl_name("1var") == "\\1var" and cdl_name("a b:c") == "a\\ b\\:c" and cdl_name("Καλημέρα") == "Καλημέρα"
    assert quote("x\x00y\x01\udc80é\n") == '"x\\000y\\001\udc80é\\n"'
