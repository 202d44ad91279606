"""Views recode the chunks their reader cannot take as stored, checked with the reader itself.

Debian's ncdump (netCDF-C 4.9.0) through ``netcdf-4.9``: it ignores codecs and byte order and
refuses chunks larger than their array and dimensions of length 0, and crashes on NCZarr scalars.
The netCDF4 wheel (4.10.1) through ``netcdf-4.10``: it has no plugin for some numcodecs codecs and
fails on NCZarr scalars with a blosc filter. Every netCDF-C ignores ``order: "F"``. xarray through
``xarray``: zarr-python 3 refuses the ``<U1``/``>S1`` char dtypes netCDF-C writes. Every value is
compared with what zarr-python reads from the store directly.
"""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from nczfs.nczarr.chunks import deflater
from tests.helpers import DirectoryBackend, mounted, run_nczfs

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
xr = pytest.importorskip("xarray")

DATA = np.arange(20, dtype="<f4").reshape(4, 5) * 1.5
#: name -> (compressor, filters) of a Zarr v2 array zarr-python writes
CODECS = {
    "raw": (None, None), "zlib": (numcodecs.Zlib(1), None), "zstd": (numcodecs.Zstd(1), None),
    "blosc": (numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE), None),
    "blosc_bitshuffle": (numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE), None),
    "gzip": (numcodecs.GZip(1), None), "lz4": (numcodecs.LZ4(), None), "bz2": (numcodecs.BZ2(1), None),
    "delta_zlib": (numcodecs.Zlib(1), [numcodecs.Delta("<f4")]),
    "scaled": (None, [numcodecs.FixedScaleOffset(0, 2, "<f4", astype="<i2")]),
}
#: codecs the netCDF4 wheel has no plugin for (measured: docs/SEMANTICS.md)
WHEEL_LACKS = {"gzip", "lz4", "delta_zlib", "scaled"}


def nc_url(path) -> str:
    return f"file://{path}#mode=nczarr,file"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("recode")
    g = zarr.open_group(str(root / "codecs.zarr"), mode="w", zarr_format=2)
    for name, (compressor, filters) in CODECS.items():
        a = g.create_array(name, shape=(4, 5), chunks=(2, 5), dtype="<f4", compressors=compressor, filters=filters,
                           fill_value=None)  # (zarr-python's 0 would be xarray's mask: masks.py)
        a[:] = DATA
        a.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    big = g.create_array("big", shape=(4, 5), chunks=(4, 5), dtype=">f8", compressors=None, fill_value=None)
    big[:] = DATA
    big.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    f = g.create_array("fortran", shape=(4, 5), chunks=(3, 4), dtype="<i4", order="F", compressors=numcodecs.Zlib(1),
                       fill_value=None)
    f[:] = DATA.astype("i4")
    f.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    with netCDF4.Dataset(nc_url(root / "unlim.file"), "w") as nc:  # the wheel's layout: chunks of 1024 along time
        nc.createDimension("time", None)
        nc.createDimension("empty", None)
        nc.createDimension("x", 3)
        nc.title = "unlimited"
        nc.createVariable("time", "f8", ("time",))[:] = [0.5, 1.5]
        nc.createVariable("t", "i4", ("time", "x"))[:] = [[1, 2, 3], [4, 5, 6]]
        nc.createVariable("nothing", "f4", ("empty",))
        nc.createVariable("s", "f8", ())[...] = 2.5
    sb = zarr.open_group(str(root / "scalarblosc.file"), mode="w", zarr_format=2)
    sb.create_array("s", shape=(), dtype="<f8", compressors=numcodecs.Blosc("lz4", 5, 1))[...] = 7.25
    chars = root / "chars.cdl"
    chars.write_text('netcdf chars {\ndimensions:\n\tn = 2 ;\n\tlen = 3 ;\nvariables:\n\tchar c(n, len) ;\n'
                     'data:\n c = "abc", "de" ;\n}\n')
    subprocess.run(["ncgen", "-4", "-o", nc_url(root / "chars.file"), str(chars)], check=True)  # Debian 4.9.0: <U1
    chars.unlink()
    return root


@pytest.fixture(scope="module")
def views(source, tmp_path_factory):
    mnt = tmp_path_factory.mktemp("recode-mnt")
    with (mounted(DirectoryBackend(source), mnt / "v49", "--read-only", "--present", "netcdf-4.9") as v49,
          mounted(DirectoryBackend(source), mnt / "v410", "--read-only", "--present", "netcdf-4.10") as v410,
          mounted(DirectoryBackend(source), mnt / "xa", "--read-only", "--present", "xarray") as xa):
        yield {"netcdf-4.9": v49, "netcdf-4.10": v410, "xarray": xa}


def debian_read(path, tmp_path) -> "netCDF4.Dataset":
    """What Debian's ncdump prints of the dataset at ``path``, read back (ncgen) as a netCDF-4 file."""
    res = subprocess.run(["ncdump", nc_url(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    (tmp_path / "dump.cdl").write_text(res.stdout)
    subprocess.run(["ncgen", "-4", "-o", str(tmp_path / "dump.nc"), str(tmp_path / "dump.cdl")], check=True)
    return netCDF4.Dataset(tmp_path / "dump.nc")


def test_debian_ncdump_reads_every_codec_byte_order_and_layout_through_netcdf_4_9(views, tmp_path):
    """Before: compressed, big-endian and F-order arrays were hidden (or read as garbage)."""
    with debian_read(views["netcdf-4.9"].path / "codecs.zarr", tmp_path) as nc:
        for name in CODECS:
            assert nc[name][:].tolist() == DATA.tolist(), name
        assert nc["big"][:].tolist() == DATA.tolist()
        assert nc["fortran"][:].tolist() == DATA.astype("i4").tolist()


def test_debian_ncdump_reads_the_wheels_unlimited_and_scalar_variables_through_netcdf_4_9(views, tmp_path):
    """Before: chunks of 1024 along a time of 2 (the wheel's layout) made 4.9.0 refuse the whole
    dataset (NCZarr error), a dimension of length 0 too, and scalars crashed it."""
    with debian_read(views["netcdf-4.9"].path / "unlim.file", tmp_path) as nc:
        assert nc["time"][:].tolist() == [0.5, 1.5] and nc["t"][:].tolist() == [[1, 2, 3], [4, 5, 6]]
        assert nc["s"].dimensions == ("_scalar_",) and nc["s"][:].tolist() == [2.5]
        assert "nothing" not in nc.variables and "empty" not in nc.dimensions and nc.title == "unlimited"
    log = views["netcdf-4.9"].log_text()
    assert "hides 'unlim.file/nothing': a dimension of length 0" in log


def test_the_wheel_reads_codecs_it_has_no_plugin_for_through_netcdf_4_10(views, source):
    m = views["netcdf-4.10"]
    with netCDF4.Dataset(nc_url(m.path / "codecs.zarr")) as nc:
        for name in CODECS:
            assert nc[name][:].tolist() == DATA.tolist(), name
            assert (nc[name].filters() or {}).get("zlib", False) is False or name not in WHEEL_LACKS
        assert nc["fortran"][:].tolist() == DATA.astype("i4").tolist()  # 4.10.1 itself reads it transposed
        assert nc["big"][:].tolist() == DATA.tolist()
    with netCDF4.Dataset(nc_url(m.path / "scalarblosc.file")) as nc:  # 4.10.1: "Filter error" as stored
        assert float(nc["s"][...]) == 7.25
    stored = sorted(os.listdir(source / "codecs.zarr" / "lz4"))
    shown = sorted(os.listdir(m.path / "codecs.zarr" / "lz4"))
    assert shown == stored  # the same chunk names; sizes as shown
    for name in ("0.0", "1.0"):
        assert (m.path / "codecs.zarr" / "lz4" / name).stat().st_size == 2 * 5 * 4
        assert len((m.path / "codecs.zarr" / "lz4" / name).read_bytes()) == 40
    assert (m.path / "codecs.zarr" / "zstd" / "0.0").read_bytes() == (source / "codecs.zarr" / "zstd" / "0.0").read_bytes()


def test_xarray_reads_netcdf_c_char_arrays_through_the_xarray_view(views, source):
    """Before: Debian's ``<U1`` chars passed through as ``|U1``, which zarr-python 3 refuses."""
    ds = xr.open_zarr(views["xarray"].path / "chars.file", consolidated=False)  # chars joined by xarray
    assert [v.decode() if isinstance(v, bytes) else v for v in ds["c"].values.tolist()] == ["abc", "de"]
    raw = xr.open_zarr(views["xarray"].path / "chars.file", consolidated=False, decode_cf=False)
    assert raw["c"].dtype == np.dtype("S1") and raw["c"].shape == (2, 3)


@pytest.mark.parametrize("mode", ["off", "none", "zlib"])
def test_the_transcode_option(source, tmp_path, mode):
    """``off``: arrays whose codecs the reader lacks are hidden; ``none``: every compressed chunk is
    shown decoded; ``zlib``: those the reader lacks are re-encoded with zlib, sizes as shown."""
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "netcdf-4.10",
                 "-o", f"transcode={mode}") as m:
        with netCDF4.Dataset(nc_url(m.path / "codecs.zarr")) as nc:
            shown = set(nc.variables)
            for name in shown & set(CODECS):
                assert nc[name][:].tolist() == DATA.tolist(), name
        zstd = (m.path / "codecs.zarr" / "zstd" / "0.0").stat().st_size
        lz4 = m.path / "codecs.zarr" / "lz4" / "0.0"
        if mode == "off":
            assert WHEEL_LACKS.isdisjoint(shown) and not lz4.exists()
        elif mode == "none":
            assert zstd == 40 and lz4.stat().st_size == 40
        else:
            shown = lz4.read_bytes()  # deflated by ISA-L: a zlib stream numcodecs reads
            assert lz4.stat().st_size == len(shown) and shown == deflater.compress(DATA[:2].tobytes(), 1)
            assert numcodecs.Zlib(1).decode(shown) == DATA[:2].tobytes()
    res = run_nczfs("mount", str(source), str(tmp_path / "m"), "-o", "transcode=gzip")
    assert res.returncode == 2 and "transcode=gzip: must be one of" in res.stderr


def test_chunks_of_a_recoded_array_are_refused_for_writing(source, tmp_path):
    import errno
    import shutil

    src = tmp_path / "src"
    shutil.copytree(source / "codecs.zarr", src / "codecs.zarr")
    before = (src / "codecs.zarr" / "lz4" / "0.0").read_bytes()
    with mounted(DirectoryBackend(src), tmp_path / "m", "--present", "netcdf-4.10") as m:
        with pytest.raises(OSError) as exc:
            (m.path / "codecs.zarr" / "lz4" / "0.0").write_bytes(bytes(40))
        assert exc.value.errno == errno.EROFS
        (m.path / "codecs.zarr" / "zstd" / "0.0").write_bytes((src / "codecs.zarr" / "zstd" / "1.0").read_bytes())
    assert (src / "codecs.zarr" / "lz4" / "0.0").read_bytes() == before


def test_the_codecs_each_reader_decodes_are_as_measured(source, tmp_path):
    """What nczfs assumes of each reader (recoding.READER_CODECS), measured on the stored arrays with
    no nczfs: the wheel decodes exactly those codecs (the others fail or read wrong), Debian's
    4.9.0 none (it reads compressed bytes as data: wrong numbers, exit 0)."""
    from nczfs.nczarr.views.viewarrays import READER_CODECS

    store = source / "codecs.zarr"
    for name, (compressor, filters) in CODECS.items():
        ids = {c.codec_id for c in [compressor, *(filters or [])] if c is not None}
        try:
            with netCDF4.Dataset(f"file://{store}#mode=zarr,file") as nc:
                right = nc[name][:].tolist() == DATA.tolist()
        except (RuntimeError, OSError):
            right = False
        assert right == ids.issubset(READER_CODECS["netcdf-4.10"]), (name, ids)
        res = subprocess.run(["ncdump", "-v", name, f"file://{store}#mode=zarr,file"], capture_output=True, text=True)
        printed = res.stdout.partition("data:")[2].partition("=")[2].partition(";")[0]
        try:
            values = [float(x) for x in printed.replace("\n", " ").split(",")]
        except ValueError:
            values = []
        assert (values == DATA.ravel().tolist()) == (not ids), (name, printed[:200])


def test_a_chunk_that_cannot_be_decoded_fails_its_read_with_eio_and_the_log_names_it(source, tmp_path):
    """Chunks decode in worker threads, the next ones ahead of a reader: a damaged one fails its
    own read (EIO, the log naming its key), at once each time; the others read."""
    import errno
    import shutil

    src = tmp_path / "src"
    shutil.copytree(source / "codecs.zarr", src / "codecs.zarr")
    (src / "codecs.zarr" / "lz4" / "1.0").write_bytes(b"not lz4")
    with mounted(DirectoryBackend(src), tmp_path / "m", "--read-only", "--present", "netcdf-4.10") as m:
        lz4 = m.path / "codecs.zarr" / "lz4"
        assert np.frombuffer((lz4 / "0.0").read_bytes(), "<f4").tolist() == DATA[:2].ravel().tolist()
        for _ in range(2):
            with pytest.raises(OSError) as exc:
                (lz4 / "1.0").read_bytes()
            assert exc.value.errno == errno.EIO
    assert "codecs.zarr/lz4/1.0" in m.log.read_text() and "cannot be decoded" in m.log.read_text()
