"""The mask rule (nczfs/nczarr/metadata/masks.py) judged decoded on every path, where the earlier
judge could not look or saw a difference it had to explain:

* Zarr v3 fixed-width strings with a ``_FillValue`` (``tst_charfill``, ``tst_string_data`` as
  xarray stores them): xarray cannot read back the mask it wrote, so the judge reads those stores
  by zarr-python with xarray's CF decoding (tests/decoded/zarrread.py); through every path they
  decode as that read does (before: the views showed the base64 text as the mask, or no mask).
* A NaN mask or ``fill_value`` of a float array, scalar or not, float32 or float64, Zarr v2 or
  v3: one rule. The netCDF views leave a NaN mask out (NaN is missing to every reader by itself);
  a Zarr v3 ``fill_value`` of NaN without a mask stays the Zarr v2 ``fill_value`` (what a missing
  chunk holds to both readers), which zarr-python's xarray reads as its ``_FillValue``: Zarr v2
  has one ``fill_value`` for both, shown here on zarr-python alone. No decoded value changes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.decoded.documented import documented_as
from tests.decoded.judge import expected, judge, undocumented
from tests.decoded.run import Site, Tally, directory_site, run_examples
from tests.decoded.run import reader_worker  # noqa: F401 - the module's worker fixture
from tests.decoded.strategies import MASKED_STRINGS, cases
from tests.decoded.zarrread import UNDECODABLE, by_zarr_python

pytestmark = [pytest.mark.fuse, pytest.mark.filterwarnings("ignore")]

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")
pytest.importorskip("netCDF4")

VIEWS = ("xarray", "netcdf-4.10", "netcdf-4.9")
#: every path these views reach, each read by the reader it is made for (not zarr-python through
#: netcdf-4.10, where a string's fill_value is text, as netCDF-C takes it, not base64)
PATHS = ["as-stored/zarr", "xarray/zarr", "netcdf-4.10/netcdf4", "netcdf-4.9/ncdump", "nc/netcdf4", "nc/scipy",
         "open_view-xarray/zarr", "open_view-as-stored/zarr", "inspect/netcdf4"]
#: fixed-seed examples of v3/v2 fixed-width strings with a mask
EXAMPLES = 10


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with directory_site(tmp_path_factory.mktemp("decoded-masks"), ("as-stored", *VIEWS)) as site:
        yield site


def differences(site: Site, write, paths=PATHS) -> dict[str, list[str]]:
    """What is left, undocumented, per path of the dataset ``write(path)`` makes."""
    name = site.put(write)
    return {p: undocumented(p, d or []) for p, d in judge(site.where(name), paths).items()}


# --- Zarr v3 fixed-width string masks ----------------------------------------------------------

STRINGS = {  # tst_charfill, tst_string_data as xarray stores them (Zarr v3)
    "charfill": (np.array([b"ab", b"", b"xyz"], dtype="S32"), b"\0"),
    "string_data": (np.array(["first", "", "γάμμα"], dtype="U14"), ""),
    "text_mask": (np.array(["ab", "a", ""], dtype="U5"), "a"),
    "bytes_mask": (np.array([b"ab", b"a", b""], dtype="S3"), b"a"),
}


def _strings(key: str):
    values, fill = STRINGS[key]
    return xr.Dataset({"s": ("x", values)}), {"s": {"_FillValue": fill}}


@pytest.mark.parametrize("key", sorted(STRINGS))
def test_xarray_cannot_read_its_own_v3_string_mask_zarr_python_can(tmp_path, key):
    """The reader alone: why the judge reads these stores by zarr-python."""
    ds, enc = _strings(key)
    ds.to_zarr(tmp_path / "s.zarr", zarr_format=3, encoding=enc)
    with pytest.raises(ValueError, match=UNDECODABLE):
        xr.open_zarr(tmp_path / "s.zarr").load()
    got = expected(tmp_path / "s.zarr")["/"]["s"]
    assert got.encoding["_FillValue"] == enc["s"]["_FillValue"]
    want = [None if v == enc["s"]["_FillValue"] or (not v and enc["s"]["_FillValue"] in (b"\0", b"")) else v
            for v in STRINGS[key][0].tolist()]
    assert [None if isinstance(v, float) else v for v in got.values.tolist()] == want


#: the paths that hold strings as chars (classic NAME.nc, netcdf-4.9): a mask as the chars' _FillValue
CHAR_PATHS = ("nc/netcdf4", "nc/scipy", "netcdf-4.9/ncdump")


@pytest.mark.parametrize("key", sorted(STRINGS))
def test_a_v3_string_mask_decodes_the_same_on_every_path(site, key):
    """Before: the netCDF views and inspect showed ``tst_charfill``'s mask as its base64 text
    (``AA==``) and Debian ncdump read its chars as ``AAAA...``; ``tst_string_data``'s mask was lost
    on every view, its empty strings read as values; a non-empty text mask was lost too, and the
    paths holding strings as chars showed no non-empty mask (now their chars' one-char
    ``_FillValue``, as xarray writes bytes to a classic file; unicode strings: documented)."""
    ds, enc = _strings(key)
    left = differences(site, lambda p: ds.to_zarr(p, zarr_format=3, encoding=enc))
    assert left == {p: [] for p in PATHS}


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_one_char_bytes_mask_is_the_chars_fill_value(site, fmt):
    """Zarr v2 and v3 bytes masked by ``b"a"``: ``NAME.nc`` and ncdump through ``netcdf-4.9`` show
    ``_FillValue = "a"`` of the chars, and the reader masks the string ``"a"``, not ``"ab"`` nor
    ``""`` (before: no mask, ``"a"`` read as a value). A chunk never written (v2: the mask, v3:
    ``""``: v3 alone, see below) reads as zarr-python reads it."""
    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"a", b"", b"a"], dtype="S3"))})
    enc = {"s": {"_FillValue": b"a", "chunks": (1 if fmt == 3 else 2,)}}
    name = site.put(lambda p: ds.to_zarr(p, zarr_format=fmt, encoding=enc))
    got = judge(site.where(name), list(CHAR_PATHS))
    assert {p: undocumented(p, d) for p, d in got.items()} == {p: [] for p in CHAR_PATHS}
    where = site.where(name)
    nc = xr.open_dataset(where.nc_root / (name + ".nc"), engine="scipy")
    assert nc["s"].encoding["_FillValue"] == b"a" and nc["s"].values.tolist()[1] != b"a"


def test_a_v2_bytes_chunk_never_written_through_netcdf_4_9(site):
    """``b"a"`` alone in a chunk is the v2 ``fill_value``: zarr-python writes no such chunk and
    reads it as ``b"a"``, masked; netCDF-C 4.9.0 fills each char with the ``fill_value``'s ``a``
    (``"aaa"``), and a ``null`` one would read ``""``: the view makes that chunk (``a`` and NULs,
    nczfs/nczarr/views/fillchunks.py). Before: ``"aaa"``, a value."""
    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"a"], dtype="S3"))})
    enc = {"s": {"_FillValue": b"a", "chunks": (1,)}}
    name = site.put(lambda p: ds.to_zarr(p, zarr_format=2, encoding=enc))
    assert judge(site.where(name), ["netcdf-4.9/ncdump"]) == {"netcdf-4.9/ncdump": []}


#: a mask of bytes longer than one char, beyond a char variable's one-char _FillValue
LONG_MASK = "a mask of more than one char"


def test_xarray_cannot_write_a_longer_bytes_mask_to_a_classic_file(tmp_path):
    """The reader alone: the netCDF4 wheel keeps the first char of ``b"ab"`` (so xarray's file
    masks ``"a"``), scipy refuses it: a char's ``_FillValue`` is one char (netCDF-C)."""
    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"a", b""], dtype="S3"))})
    enc = {"s": {"_FillValue": b"ab"}}
    ds.to_netcdf(tmp_path / "w.nc", engine="netcdf4", format="NETCDF3_CLASSIC", encoding=enc)
    back = xr.open_dataset(tmp_path / "w.nc", engine="netcdf4").load()
    assert back["s"].encoding["_FillValue"] == b"a" and back["s"].values.tolist()[0] == b"ab"
    with pytest.raises(KeyError):
        ds.to_netcdf(tmp_path / "s.nc", engine="scipy", format="NETCDF3_CLASSIC", encoding=enc)


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_longer_bytes_mask_is_left_out_of_the_char_paths(site, fmt):
    """Bytes masked by ``b"ab"``: the char paths show no ``_FillValue`` (not its first char, which
    would mask ``"a"``), documented; the other paths mask ``"ab"``."""
    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"a", b""], dtype="S3"))})
    name = site.put(lambda p: ds.to_zarr(p, zarr_format=fmt, encoding={"s": {"_FillValue": b"ab"}}))
    got = judge(site.where(name), PATHS)
    assert {p: undocumented(p, d) for p, d in got.items()} == {p: [] for p in PATHS}
    for p in CHAR_PATHS:
        assert any(LONG_MASK in why for d in got[p] for why in documented_as(p, d)), (p, got[p])
    assert all(not any(LONG_MASK in why for d in got[p] for why in documented_as(p, d))
               for p in PATHS if p not in CHAR_PATHS)


def test_the_judge_reads_ncdumps_chars_as_printed_beside_a_fill_value(tmp_path):
    """ncgen pads a char variable's strings with its ``_FillValue`` (xarray's own classic file,
    printed by ncdump, comes back ``"aba", "aaa"``): the judge names the attribute aside while
    ncgen makes the file, so what it judges is what ncdump printed."""
    import subprocess

    from tests.decoded.judge import _cdl_file

    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"a", b""], dtype="S3"))})
    ds.to_netcdf(tmp_path / "w.nc", engine="scipy", encoding={"s": {"_FillValue": b"a"}})
    cdl = subprocess.run(["ncdump", str(tmp_path / "w.nc")], capture_output=True, text=True, check=True).stdout
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain/d.cdl").write_text(cdl)
    subprocess.run(["ncgen", "-4", "-o", tmp_path / "plain/d.nc", tmp_path / "plain/d.cdl"], check=True)
    assert xr.open_dataset(tmp_path / "plain/d.nc")["s"].values.tolist()[0] == b"aba"
    got = xr.open_dataset(_cdl_file(cdl, str(tmp_path), True)).load()
    assert got["s"].values.tolist()[::2] == [b"ab", b""] and got["s"].encoding["_FillValue"] == b"a"


@pytest.fixture(scope="module")
def masked_tally(site) -> Tally:
    tally = Tally()
    assert run_examples(site, tally, EXAMPLES, PATHS, cases(kinds=MASKED_STRINGS, groups=False)) >= EXAMPLES // 2
    assert not tally.unreadable, tally.unreadable
    return tally


def test_a_bytes_mask_beside_a_chunk_never_written_through_the_xarray_view(site):
    """The generated examples' shrunk failure: ``b""`` in a chunk of its own (all the v3
    ``fill_value``: zarr-python writes no such chunk), the mask ``b"a"``. No metadata can carry
    it: xarray's Zarr v2 reader takes a bytes array's mask from its ``fill_value`` alone (a
    ``_FillValue`` attribute, base64 or text, masks nothing), and a missing chunk reads as that
    ``fill_value``; the view makes the chunk (the v3 fill in the view's codecs, where the store
    has none), which reads ``b""``. Before: masked."""
    ds = xr.Dataset({"s": ("x", np.array([b"a", b""], dtype="S3"))})
    enc = {"s": {"_FillValue": b"a", "chunks": (1,)}}
    left = differences(site, lambda p: ds.to_zarr(p, zarr_format=3, encoding=enc), ["xarray/zarr"])
    assert left == {"xarray/zarr": []}


@pytest.mark.parametrize("path", PATHS)
def test_generated_fixed_width_string_masks_decode_equal(masked_tally, path):
    c = masked_tally.counts[path]
    assert masked_tally.failed(path) == 0, f"{path}: {c}\n{masked_tally.failures(path)}"


def test_the_zarr_python_read_decodes_as_xarray_wherever_xarray_reads(tmp_path):
    """The judge's fallback reader is xarray's decoding: on generated stores xarray reads itself
    (every kind, Zarr v2 and v3, groups), both give the same datasets."""
    from hypothesis import HealthCheck, Phase, assume, given, settings

    from tests.decoded.judge import compare

    n = iter(range(10**6))

    @settings(max_examples=25, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def agree(case):
        path = tmp_path / f"c{next(n)}.zarr"
        try:
            case.write(path)
            want = {g: ds.load() for g, ds in xr.open_groups(path, engine="zarr").items()}
        except Exception:  # noqa: BLE001 - xarray refuses to write or read it: no example
            assume(False)
        assert compare(want, by_zarr_python(path)) == [], case.describe()

    agree()


# --- NaN: one rule for scalars and arrays, float32 and float64, Zarr v2 and v3 -------------------

NAN_SHAPES = [((), np.float64), ((), np.float32), ((3,), np.float64), ((3,), np.float32)]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(("shape", "dtype"), NAN_SHAPES)
def test_xarrays_nan_mask_is_left_out_of_the_netcdf_views_alike(site, fmt, shape, dtype):
    """xarray's default mask of floats (v3: ``_FillValue: "AAAAAAAA+H8="``; v2: ``fill_value:
    NaN``): the wheel reads no ``_FillValue`` through netcdf-4.10 (documented: NaN is missing by
    itself), values equal; zarr-python through the xarray view reads the mask."""
    values = np.array(np.full(shape, 1.5), dtype=dtype)
    if shape:
        values[1] = np.nan
    ds = xr.Dataset({"s": (("x",)[:len(shape)], values)})
    name = site.put(lambda p: ds.to_zarr(p, zarr_format=fmt))
    got = judge(site.where(name), ["netcdf-4.10/netcdf4", "xarray/zarr", "nc/netcdf4"])
    assert [d.split(" (")[0] for d in got["netcdf-4.10/netcdf4"]] == ["/s: _FillValue lost"]
    assert undocumented("netcdf-4.10/netcdf4", got["netcdf-4.10/netcdf4"]) == []
    assert got["xarray/zarr"] == [] and got["nc/netcdf4"] == []


def _zarr_python_nan_fill(shape, dtype, fmt):
    def write(path):
        g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
        kw = {"dimension_names": ["x"][:len(shape)]} if fmt == 3 else {}
        a = g.create_array("s", shape=shape, dtype=dtype, fill_value=np.nan, **kw)
        if fmt == 2:
            a.attrs["_ARRAY_DIMENSIONS"] = ["x"][:len(shape)]
        a[...] = np.full(shape, 1.5, dtype=dtype)
    return write


def test_a_zarr_v2_fill_value_is_xarrays_mask_by_itself(tmp_path):
    """The reader alone: zarr-python writes a Zarr v2 float array with ``fill_value: NaN`` and no
    attribute; xarray decodes ``_FillValue = NaN``. A Zarr v2 view can keep a v3 NaN
    ``fill_value`` (what a missing chunk holds) only so."""
    _zarr_python_nan_fill((3,), "f8", 2)(tmp_path / "v2.zarr")
    assert np.isnan(xr.open_zarr(tmp_path / "v2.zarr")["s"].encoding["_FillValue"])
    _zarr_python_nan_fill((3,), "f8", 3)(tmp_path / "v3.zarr")
    assert "_FillValue" not in xr.open_zarr(tmp_path / "v3.zarr")["s"].encoding


@pytest.mark.parametrize(("shape", "dtype"), NAN_SHAPES)
def test_a_v3_nan_fill_value_without_a_mask_alike(site, shape, dtype):
    """zarr-python's v3 float array of ``fill_value: NaN``, no ``_FillValue``: the wheel through
    netcdf-4.10 reads it as the store (no ``_FillValue``); zarr-python through a Zarr v2 view reads
    the ``fill_value`` as ``_FillValue = NaN`` (documented; no value changes)."""
    name = site.put(_zarr_python_nan_fill(shape, dtype, 3))
    got = judge(site.where(name), ["netcdf-4.10/netcdf4", "xarray/zarr", "netcdf-4.10/zarr"])
    assert got["netcdf-4.10/netcdf4"] == []
    for path in ("xarray/zarr", "netcdf-4.10/zarr"):
        assert "/s: _FillValue added" in [d.split(" (")[0] for d in got[path]], path
        assert not any(d.startswith("/s: values at") for d in got[path]), path
        assert undocumented(path, got[path]) == [], path  # (a scalar: NCZarr's, along _scalar_, documented)
