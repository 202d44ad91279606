"""The decoded judge (tests/decoded/judge.py) on netCDF-C's CDL corpus as xarray stores it:
the differences nczfs fixed through Debian ``ncdump`` 4.9.0 (``netcdf-4.9``), and those it counts
as documented (tests/decoded/documented.py) because the path's reader itself cannot hold what the
store holds. Each of the latter is shown on the reader alone, without nczfs, then judged through
the mount: the difference is there and is the documented one (docs/SEMANTICS.md, "Masks" and
"Views"; docs/FIDELITY.md has the counts of ``bench/bench_decoded.py``)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.decoded.judge import _names_as_utf8, compare, judge, undocumented
from tests.decoded.run import Site, directory_site, reader_worker  # noqa: F401 - the module's worker fixture

pytestmark = [pytest.mark.fuse, pytest.mark.filterwarnings("ignore")]

xr = pytest.importorskip("xarray")
netCDF4 = pytest.importorskip("netCDF4")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with directory_site(tmp_path_factory.mktemp("decoded-limits"), ("as-stored", "netcdf-4.9", "netcdf-4.10")) as site:
        yield site


def judged(site: Site, ds, path: str, **encoding) -> list[str]:
    """``ds`` written by xarray as Zarr v2 (with ``encoding``), its differences through ``path``."""
    name = site.put(lambda p: ds.to_zarr(p, mode="w", zarr_format=2, encoding=encoding))
    return judge(site.where(name), [path])[path]


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, **kw)


# --- fixed: what Debian ncdump 4.9.0 prints through netcdf-4.9 ---------------------------------

def test_an_empty_string_mask_reaches_ncdump_as_the_chars_fill(site):
    """``tst_charfill`` as xarray stores it (``|S32``, ``fill_value`` the base64 of ``\\0``):
    4.9.0 printed no ``_FillValue``, so the dump read back gave ``b''`` where xarray masks."""
    ds = xr.Dataset({"ident": ("x", np.array([b"ab", b"", b"cd"], dtype="S4"))})
    for fill in (b"", b"\0"):
        assert judged(site, ds, "netcdf-4.9/ncdump", ident={"_FillValue": fill}) == []
    text = xr.Dataset({"ident": ("x", np.array(["ab", "", "cd"], dtype="U4"))})  # tst_string_data's mask
    assert judged(site, text, "netcdf-4.9/ncdump", ident={"_FillValue": ""}) == []


def test_strings_shown_as_chars_carry_no_nczarr_attribute(site):
    """4.9.0 reads chars along ``<name>_strlen`` without ``_nczarr_maxstrlen``, which it printed
    as the variable's attribute (``tst_chararray``, ``tst_small``'s ``Times``)."""
    ds = xr.Dataset({"s": ("x", np.array(["ab", "é", "xyz"], dtype="U3")),
                     "b": ("x", np.array([b"a", b"bc", b"d"], dtype="S2"))})
    assert judged(site, ds, "netcdf-4.9/ncdump") == []


# --- documented: what the reader itself cannot hold --------------------------------------------

def test_xarray_masks_no_unicode_string_in_a_classic_file(site, tmp_path):
    """pydata/xarray#1647: xarray refuses to write a unicode string's ``_FillValue`` to a netCDF
    file, and reading UTF-8 chars (``_Encoding``) with a char ``_FillValue`` does not mask them.
    ``NAME.nc`` of ``tst_string_data`` as xarray stores it (``<U14``, mask ``""``) reads ``""``."""
    ds = xr.Dataset({"s": ("x", np.array(["ab", "", "cd"], dtype="U2"))})
    with pytest.raises(NotImplementedError, match="1647"):
        ds.to_netcdf(tmp_path / "x.nc", format="NETCDF3_CLASSIC", encoding={"s": {"_FillValue": ""}})
    with netCDF4.Dataset(tmp_path / "c.nc", "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("x", 3)
        nc.createDimension("n", 2)
        v = nc.createVariable("s", "S1", ("x", "n"), fill_value="\0")
        v._Encoding = "utf-8"
        v[:] = np.array([[b"a", b"b"], [b"", b""], [b"c", b"d"]])
    assert xr.open_dataset(tmp_path / "c.nc").load()["s"].values.tolist() == ["ab", "", "cd"]
    for path in ("nc/netcdf4", "nc/scipy"):
        got = judged(site, ds, path, s={"_FillValue": ""})
        assert got == ["/s: values at [1]: want ['ab',nan,'cd'] got ['ab','','cd'], the masked strings read as"
                       " their mask ''", "/s: _FillValue lost (np.str_(''))"], got
        assert undocumented(path, got) == []
    other = "/s: values at [1]: want ['ab',nan,'cd'] got ['ab','x','cd']"
    assert undocumented("nc/netcdf4", [other]) == [other]


def test_scipy_reads_utf8_names_as_latin_1(site, tmp_path):
    """netCDF-C writes a classic file's names in UTF-8; scipy decodes them as Latin-1
    (``tst_utf8``, ``tst_unicode``); the judge reads them back and compares the values."""
    with netCDF4.Dataset(tmp_path / "u.nc", "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("xā", 2)
        nc.createVariable("Καλημέρα", "f8", ("xā",))[:] = [1.0, 2.0]
        nc.setncattr("Gā", "v")
    back = xr.open_dataset(tmp_path / "u.nc", engine="scipy")
    assert "Καλημέρα" not in back.variables and "Καλημέρα".encode().decode("latin-1") in back.variables
    ds = xr.Dataset({"Καλημέρα": ("xā", np.array([1.0, 2.0]))}, attrs={"Gā": "v"})
    got = judged(site, ds, "nc/scipy")
    assert got == ["/: names: scipy decodes names as Latin-1 (3 read back as UTF-8)"], got
    assert undocumented("nc/scipy", got) == [] and undocumented("nc/netcdf4", got) == got
    want = {"/": ds.assign({"Καλημέρα": ("xā", np.array([1.0, 5.0]))})}
    diffs = compare(want, {"/": _names_as_utf8(back.load())})  # values compared under their own names
    assert [d for d in diffs if "names:" not in d] == ["/Καλημέρα: values at [1]: want [1.,5.] got [1.,2.]"], diffs


def test_ncdump_4_9_0_refuses_a_dimension_of_length_0(site, tmp_path):
    """netCDF-C 4.9.0 refuses an NCZarr dimension of size 0 (and its ncgen an unlimited one): the
    netcdf-4.9 view hides the arrays along one (``tst_perdimspecs``, ``tst_special_atts3``)."""
    store = tmp_path / "z0"
    (store / "t").mkdir(parents=True)
    (store / ".zgroup").write_text('{"zarr_format": 2, "_NCZARR_SUPERBLOCK": {"version": "2.0.0"}, "_NCZARR_GROUP":'
                                   ' {"dims": {"time": 0, "x": 2}, "vars": ["t"], "groups": []}}')
    (store / "t" / ".zarray").write_text(
        '{"zarr_format": 2, "shape": [0,2], "chunks": [1,2], "dtype": "<f8", "fill_value": "NaN", "order": "C",'
        ' "compressor": null, "filters": null, "_NCZARR_ARRAY": {"dimrefs": ["/time","/x"], "storage": "chunked"}}')
    for z in (store, store / "t"):
        (z / ".zattrs").write_text("{}")
    res = run("ncdump", f"file://{store}#mode=nczarr,file")
    assert res.returncode != 0 and "Invalid dimension size" in res.stderr
    ds = xr.Dataset({"tas": (("time", "lat"), np.zeros((0, 3), "f4")), "lat": ("lat", np.arange(3.0)),
                     "slp": (("time", "lon"), np.zeros((0, 2), "f4"))})
    got = judged(site, ds, "netcdf-4.9/ncdump")
    assert [d for d in sorted(got) if "length 0" in d] == ["/: sizes {'time': 0, 'lon': 2, 'lat': 3} -> {'lat': 3}: only the dimensions of length 0"
                           " (and those only arrays along one use) left out",
                           "/slp: missing (float32), along a dimension of length 0",
                           "/tas: missing (float32), along a dimension of length 0"], got
    assert undocumented("netcdf-4.9/ncdump", got) == []
    assert undocumented("netcdf-4.9/ncdump", ["/: sizes {'time': 0, 'lat': 3} -> {}"]) != []


def test_ncgen_4_9_0_crashes_on_ncdumps_print_of_chars_holding_a_newline(site, tmp_path):
    """Debian's ncdump prints a char array holding ``\\n`` broken after it, which its ncgen
    cannot read back (SIGSEGV), without nczfs (``tst_string_data`` through netcdf-4.9)."""
    (tmp_path / "nl.cdl").write_text('netcdf nl {\ndimensions:\n\tline = 2 ;\n\tlen = 16 ;\nvariables:\n'
                                     '\tchar s(line, len) ;\ndata:\n s = "first", "last \\n\\"string\\"" ;\n}\n')
    assert run("ncgen", "-4", "-o", str(tmp_path / "nl.nc"), str(tmp_path / "nl.cdl")).returncode == 0
    dump = run("ncdump", str(tmp_path / "nl.nc")).stdout
    (tmp_path / "again.cdl").write_text(dump)
    assert run("ncgen", "-4", "-o", str(tmp_path / "again.nc"), str(tmp_path / "again.cdl")).returncode < 0
    ds = xr.Dataset({"s": ("line", np.array(["first", 'last \n"string"'], dtype="U16"))})
    got = judged(site, ds, "netcdf-4.9/ncdump")
    assert got == ["open: RuntimeError: ncgen crashed (SIGSEGV) on ncdump's print of chars holding a newline"], got
    assert undocumented("netcdf-4.9/ncdump", got) == []


def test_ncgen_4_9_0_refuses_a_string_attribute_in_nczarr(site, tmp_path):
    """4.9.0's NCZarr has no string attributes: its ncgen refuses one; netcdf-4.9 shows a list of
    strings as JSON text (``attn`` of ``tst_fixedstring``)."""
    (tmp_path / "s.cdl").write_text('netcdf s {\ndimensions:\n\tx = 2 ;\nvariables:\n\tint v(x) ;\n'
                                    '\t\tstring :attn = "abcd", "efgh" ;\ndata:\n v = 1, 2 ;\n}\n')
    res = run("ncgen", "-4", "-o", f"file://{tmp_path / 's49'}#mode=nczarr,file", str(tmp_path / "s.cdl"))
    assert res.returncode != 0 and "NCZarr error" in res.stderr
    ds = xr.Dataset({"v": ("x", np.array([1, 2], "i4"))}, attrs={"attn": ["abcd", "efgh"]})
    got = judged(site, ds, "netcdf-4.9/ncdump")
    assert got == ["/: attr attn changed: ['abcd', 'efgh'] -> '[\"abcd\", \"efgh\"]'"], got
    assert undocumented("netcdf-4.9/ncdump", got) == []


def test_netcdf_c_stores_a_scalar_as_one_element_which_zarr_python_reads_so(site, tmp_path):
    """netCDF-C 4.10.1 (the wheel) writes its own scalar with shape ``[1]`` along ``_scalar_``
    (``_nczarr_array.scalar``) and reads no zero-rank array (the same variable with shape ``[]``
    is not found); zarr-python reads that scalar as one element. So through ``netcdf-4.10``, made
    for netCDF-C, a zero-rank Zarr array is one element along ``_scalar_`` to zarr-python: the
    NCZarr format's own scalar, documented (the wheel reads it as a scalar)."""
    import json
    import shutil

    with netCDF4.Dataset(f"file://{tmp_path}/w#mode=nczarr,file", "w") as nc:
        nc.createVariable("t", "f8", ())[...] = 3.5
    assert json.loads((tmp_path / "w/t/.zarray").read_text())["shape"] == [1]
    got = xr.open_zarr(tmp_path / "w", consolidated=False)["t"]
    assert got.dims == ("_scalar_",) and got.values.tolist() == [3.5]
    with netCDF4.Dataset(f"file://{tmp_path}/w#mode=nczarr,file") as nc:
        assert nc["t"].shape == () and float(nc["t"][...]) == 3.5
    shutil.copytree(tmp_path / "w", tmp_path / "z")
    for name, key, value in (("t/.zarray", "shape", []), ("t/.zarray", "chunks", []), ("t/.zattrs", "_ARRAY_DIMENSIONS", [])):
        meta = json.loads((tmp_path / "z" / name).read_text())
        (tmp_path / "z" / name).write_text(json.dumps({**meta, key: value}))
    assert xr.open_zarr(tmp_path / "z", consolidated=False)["t"].shape == ()
    with netCDF4.Dataset(f"file://{tmp_path}/z#mode=nczarr,file") as nc:
        assert "t" not in nc.variables
    ds = xr.Dataset({"t": ((), 3.5), "x": ("x", [1, 2])})
    name = site.put(lambda p: ds.to_zarr(p, mode="w", zarr_format=3))
    got = judge(site.where(name), ["netcdf-4.10/zarr", "netcdf-4.10/netcdf4"])
    assert undocumented("netcdf-4.10/netcdf4", got["netcdf-4.10/netcdf4"]) == []  # a NaN mask: documented
    assert sorted(got["netcdf-4.10/zarr"]) == ["/: sizes {'x': 2} -> {'_scalar_': 1, 'x': 2}",
                                               "/t: dims () -> ('_scalar_',)", "/t: values shape () -> (1,)"]
    assert undocumented("netcdf-4.10/zarr", got["netcdf-4.10/zarr"]) == []


# --- a view serves its reader: chars and strings read by another netCDF-C ----------------------

_WHEEL_OPENS = "import sys, netCDF4; netCDF4.Dataset(sys.argv[1]).close(); print('opened')"


def _wheel_opens(url: str) -> bool:
    """Whether the netCDF4 wheel (netCDF-C 4.10.1) opens ``url``, in a process of its own (it
    may crash)."""
    import sys
    res = run(sys.executable, "-c", _WHEEL_OPENS, url)
    return res.returncode == 0 and "opened" in res.stdout


def _ncdump_opens(url: str) -> bool:
    """Whether Debian ``ncdump`` (netCDF-C 4.9.0) prints ``url`` whole."""
    res = run("ncdump", url)
    return res.returncode == 0


def _char_store(where, dtype: str, upper: bool) -> str:
    """A one-array NCZarr store holding chars of ``dtype`` as 4.9.0 writes them (``upper``:
    V2-UC keys, ``<U1``) or as 4.10.1 does (V2-ZA, ``>S1``), made by hand."""
    where.mkdir()
    (where / "c").mkdir()
    if upper:
        (where / ".zgroup").write_text('{"zarr_format": 2, "_NCZARR_SUPERBLOCK": {"version": "2.0.0"},'
                                       ' "_NCZARR_GROUP": {"dims": {"n": 2}, "vars": ["c"], "groups": []}}')
        (where / ".zattrs").write_text("{}")
        (where / "c" / ".zarray").write_text(
            '{"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "%s", "fill_value": null, "order": "C",'
            ' "compressor": null, "filters": null, "_NCZARR_ARRAY": {"dimrefs": ["/n"], "storage": "chunked"}}' % dtype)
        (where / "c" / ".zattrs").write_text('{"_ARRAY_DIMENSIONS": ["n"], "_NCZARR_ATTR": {"types": {}}}')
    else:
        (where / ".zgroup").write_text('{"zarr_format": 2}')
        (where / ".zattrs").write_text('{"_nczarr_superblock": {"version": "2.0.0"}, "_nczarr_group":'
                                       ' {"dimensions": {"n": 2}, "arrays": ["c"], "groups": []}}')
        (where / "c" / ".zarray").write_text(
            '{"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "%s", "fill_value": null, "order": "C",'
            ' "compressor": null, "filters": null}' % dtype)
        (where / "c" / ".zattrs").write_text('{"_ARRAY_DIMENSIONS": ["n"], "_nczarr_array":'
                                             ' {"dimension_references": ["/n"]}}')
    (where / "c" / "0").write_bytes(b"ab")
    return f"file://{where}#mode=nczarr,file"


def test_no_char_dtype_is_read_by_both_netcdf_c_4_9_0_and_4_10_1(site, tmp_path):
    """Without nczfs: netCDF-C 4.9.0's only char is ``<U1``, which makes 4.10.1 refuse the whole
    dataset; 4.10.1's char ``>S1`` (and its strings' ``|S<n>``) make 4.9.0 fail on the whole
    dataset; zarr-python (and xarray over it) reads 4.9.0's ``<U1``, one byte stored, as 4 bytes a
    char and fails. So a dataset holding chars or strings opens through a view made for one of them
    and not in the other: through ``netcdf-4.9`` the wheel and xarray, through ``netcdf-4.10`` Debian
    ``ncdump`` fail on it, as on the stores each wrote (the cross-dialect cells of the fidelity matrix;
    before strings were shown, such datasets opened there without their strings)."""
    old = _char_store(tmp_path / "v2uc", "<U1", upper=True)
    new = _char_store(tmp_path / "v2za", ">S1", upper=False)
    strings = _char_store(tmp_path / "v2za-s", "|S2", upper=False)
    assert _ncdump_opens(old) and not _wheel_opens(old)
    with pytest.raises(ValueError, match="larger dtype"):  # zarr-python: 4 bytes a <U1, 1 stored
        xr.open_zarr(tmp_path / "v2uc", consolidated=False).load()
    assert _wheel_opens(new) and _wheel_opens(strings)
    assert not _ncdump_opens(new) and not _ncdump_opens(strings)
    ds = xr.Dataset({"s": ("x", np.array(["ab", "cde"], dtype=object)), "v": ("x", np.array([1, 2], "i4"))})
    name = site.put(lambda p: ds.to_zarr(p, mode="w", zarr_format=2))
    nine, ten = (f"file://{site.roots[v] / name}#mode=nczarr,file" for v in ("netcdf-4.9", "netcdf-4.10"))
    assert _ncdump_opens(nine) and _wheel_opens(ten)
    assert not _wheel_opens(nine) and not _ncdump_opens(ten)
    with pytest.raises(ValueError, match="larger dtype"):
        xr.open_zarr(site.roots["netcdf-4.9"] / name, consolidated=False).load()
