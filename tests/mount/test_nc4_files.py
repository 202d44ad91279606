"""``-o nc_files=netcdf4`` on real mounts: NAME.nc4 beside each dataset, byte for byte the file
made without a mount, read by the netCDF4 wheel, Debian's ncdump and h5dump, h5py and xarray
(netcdf4 and h5netcdf engines) as the store reads; chunks passed through are never decoded; the
file follows its dataset (new size and mtime, ESTALE for a descriptor of the old version)."""

from __future__ import annotations

import errno
import json
import os
import stat
import time
import subprocess
from pathlib import Path

import numcodecs
import numpy as np
import pytest

from tests.helpers import DirectoryBackend, counts, delta, mounted
from tests.mount.test_view_sharding import write_sharded
from tests.mount.test_nc_files import backend_of, tree
from tests.nczarr.hdf5util import h5dump
from tests.nczarr.nc4util import nc4_of, write_nc4
from tests.nczarr.test_nc4file import _same_as_store, _xarray_same, make_passthrough
from tests.nczarr.test_ncfile import make_cf, make_v3

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")

DATASETS = ["cf.zarr", "p2.zarr", "p3.zarr", "sharded.zarr", "v3.zarr"]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("nc4data")
    make_cf(root / "cf.zarr")
    make_v3(root / "v3.zarr")
    make_passthrough(root / "p2.zarr", 2)
    make_passthrough(root / "p3.zarr", 3)
    write_sharded(root)  # every sharding form (tests/mount/test_view_sharding.py)
    return root


@pytest.fixture(scope="module", params=["directory", "s3", "zip", "reference"])
def m4(request, local, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"nc4mount-{request.param}")
    backend, extra, source = backend_of(request.param, local, base, request)
    with mounted(backend, base / "mnt", "-o", "nc_files=netcdf4", *extra, source=source) as m:
        yield m
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text


def test_each_dataset_shows_its_nc4_read_only_the_file_made_without_a_mount(m4, local, tmp_path):
    names = sorted(n for n in os.listdir(m4.path) if not (m4.path / n).is_dir())
    assert names == [f"{d}.nc4" for d in DATASETS]  # no classic file
    for d in DATASETS:
        path = m4.path / f"{d}.nc4"
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o444
        _, want = write_nc4(local, d, tmp_path / f"{d}.nc4")
        data = path.read_bytes()
        assert len(data) == st.st_size and data == want.read_bytes(), d
        with open(path, "rb") as f:  # any byte range: the whole file's slice
            f.seek(st.st_size // 3)
            assert f.read(4097) == data[st.st_size // 3:st.st_size // 3 + 4097]
    with pytest.raises(OSError) as e:
        (m4.path / "p2.zarr.nc4").write_bytes(b"x")
    assert e.value.errno in (errno.EROFS, errno.EACCES)
    with pytest.raises(OSError) as e:
        os.unlink(m4.path / "p2.zarr.nc4")
    assert e.value.errno == errno.EROFS


def test_readers_see_what_the_store_holds(m4, local):
    with netCDF4.Dataset(f"file://{local / 'cf.zarr'}#mode=nczarr,file") as store, \
            netCDF4.Dataset(m4.path / "cf.zarr.nc4") as nc:
        assert _same_as_store(store, nc) == 8
    _xarray_same(local, "p2.zarr", m4.path / "p2.zarr.nc4", [])
    _xarray_same(local, "p3.zarr", m4.path / "p3.zarr.nc4", [])
    _xarray_same(local, "v3.zarr", m4.path / "v3.zarr.nc4", ["cplx"])
    for d in DATASETS:
        res = subprocess.run(["ncdump", str(m4.path / f"{d}.nc4")], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and not res.stderr and "data:" in res.stdout, (d, res.stderr)
        h5dump(m4.path / f"{d}.nc4")


def test_chunks_passed_through_are_not_decoded(m4, local):
    """Reading every file (twice; this module's other tests read them too) decodes exactly the
    chunks whose codecs HDF5 does not read (v3's zstd, the zlib scalars, strings), each once."""
    for _ in range(2):
        for d in DATASETS:
            (m4.path / f"{d}.nc4").read_bytes()
    decoded = {d: sum(1 for p in nc4_of(local, d).layout.pieces if p.source.recode is not None) for d in DATASETS}
    # cf: its strings; sharded: its zstd and blosc inner chunks (not those of "start": bytes only)
    assert decoded == {"cf.zarr": 1, "p2.zarr": 1, "p3.zarr": 1, "sharded.zarr": 28, "v3.zarr": 10}
    assert counts(m4.path)["ncfiles.chunks-decoded"] == 41


def test_both_shows_the_classic_files_and_the_netcdf4_file(local, tmp_path):
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many({f"p2.zarr/{k}": v for k, v in tree(local / "p2.zarr").items()})
    with mounted(backend, tmp_path / "mnt", "--nc-files=both") as m:
        assert sorted(n for n in os.listdir(m.path) if "." in n and not (m.path / n).is_dir()) == \
            ["p2.zarr.nc", "p2.zarr.nc4"]
        with netCDF4.Dataset(m.path / "p2.zarr.nc") as a, netCDF4.Dataset(m.path / "p2.zarr.nc4") as b:
            assert a.data_model == "NETCDF3_64BIT_DATA" and b.data_model == "NETCDF4"  # int64 k: CDF-5
            assert np.array_equal(a["temp"][...].filled(np.nan), b["temp"][...].filled(np.nan), equal_nan=True)


def test_the_file_follows_its_dataset_and_an_old_descriptor_gets_estale(local, tmp_path):
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many({f"p2.zarr/{k}": v for k, v in tree(local / "p2.zarr").items()})
    with mounted(backend, tmp_path / "mnt", "-o", "nc_files=netcdf4", "-o", "metadata_ttl=1") as m:
        nc4 = m.path / "p2.zarr.nc4"
        before = os.stat(nc4)
        fd = os.open(nc4, os.O_RDONLY)
        try:
            old = os.pread(fd, before.st_size, 0)
            arr = zarr.open_array(str(m.path / "p2.zarr" / "temp"), mode="r+")
            arr[5:, 4] = 99.0  # the chunk never written: the file grows by it
            after = os.stat(nc4)
            assert after.st_size > before.st_size and after.st_mtime_ns >= before.st_mtime_ns
            with netCDF4.Dataset(nc4) as nc:
                assert nc["temp"][6, 4] == 99.0
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            with pytest.raises(OSError) as info:
                os.pread(fd, before.st_size, 0)
            assert info.value.errno == errno.ESTALE
        finally:
            os.close(fd)
        assert nc4.read_bytes() != old
    assert "Traceback" not in m.log_text()


def test_nco_cdo_gdal_and_h5ls_read_the_files(m4, local):
    """Debian's ncks (JSON, every value), cdo, GDAL's netCDF and HDF5 drivers and h5ls."""
    for d in DATASETS:
        path = str(m4.path / f"{d}.nc4")
        for cmd in (["h5ls", "-r", path], ["ncks", "--jsn", path]):
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert res.returncode == 0 and "error" not in res.stderr.lower(), (cmd, res.stderr)
    res = subprocess.run(["ncks", "--jsn", "-v", "temp", str(m4.path / "p3.zarr.nc4")], capture_output=True, text=True,
                         timeout=120)
    got = np.array(json.loads(res.stdout)["variables"]["temp"]["data"], dtype=float)
    want = zarr.open_array(str(local / "p3.zarr" / "temp"), mode="r")[...]
    assert np.array_equal(got, want, equal_nan=True)
    res = subprocess.run(["cdo", "-s", "outputf,%g", "-selname,temp", str(m4.path / "p2.zarr.nc4")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and "20" in res.stdout.split(), res.stderr
    res = subprocess.run(["gdalinfo", "-stats", f"NETCDF:{m4.path / 'p2.zarr.nc4'}:temp"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "Size is 5, 7" in res.stdout and "Maximum=32" in res.stdout, res.stdout + res.stderr
    res = subprocess.run(["gdalinfo", "-stats", f'HDF5:"{m4.path / "p2.zarr.nc4"}"://temp'], capture_output=True,
                         text=True, timeout=120)  # GDAL's HDF5 driver
    assert res.returncode == 0 and "Size is 5, 7" in res.stdout and "Maximum=32" in res.stdout, res.stdout + res.stderr


def test_nc4_plugins_passes_blosc_and_zstd_through(tmp_path):
    """``-o nc4_plugins``: zarr-python's blosc (v2) and zstd (v3) chunks reach the reader as they
    are stored, under HDF5's registered filters; the netCDF4 wheel (its plugins) reads every value
    and the daemon decodes nothing."""
    from tests.nczarr.test_nc4file import make_plugin_chunks

    made = tmp_path / "made"
    made.mkdir()
    make_plugin_chunks(made)
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many(tree(made))
    with mounted(backend, tmp_path / "mnt", "-o", "nc_files=netcdf4", "-o", "nc4_plugins") as m:
        for name, var in (("b2.zarr", "lz4"), ("b2.zarr", "zstd"), ("z3.zarr", "v")):
            with netCDF4.Dataset(m.path / f"{name}.nc4") as nc:
                assert np.array_equal(nc[var][...], zarr.open_array(str(made / name / var), mode="r")[...])
        assert counts(m.path).get("ncfiles.chunks-decoded", 0) == 0
    assert "Traceback" not in m.log_text()


def test_a_front_to_back_read_fetches_each_chunk_once(request, tmp_path):
    """S3: reading NAME.nc4 whole (the kernel asks for 128 KiB at a time) fetches each stored
    chunk's bytes once, and nothing else of the dataset's chunks."""
    made = tmp_path / "made"
    made.mkdir()
    a = np.random.default_rng(1).standard_normal((16, 256, 256)).astype("f4")
    xr = pytest.importorskip("xarray")
    numcodecs = pytest.importorskip("numcodecs")
    xr.Dataset({"t": (("k", "y", "x"), a)}).to_zarr(
        made / "d.zarr", zarr_format=2, consolidated=False,
        encoding={"t": {"compressors": [numcodecs.Zlib(level=1)], "chunks": (8, 256, 256)}})
    chunk_bytes = sum(p.stat().st_size for p in (made / "d.zarr" / "t").glob("*.0.0"))
    backend, _, _ = backend_of("s3", made, tmp_path, request)
    with mounted(backend, tmp_path / "mnt", "-o", "nc_files=netcdf4") as m:
        size = os.stat(m.path / "d.zarr.nc4").st_size
        before = counts(m.path)
        assert len((m.path / "d.zarr.nc4").read_bytes()) == size
        got = delta(before, counts(m.path))
        assert got["cache.bytes-fetched"] == chunk_bytes and got["cache.misses"] == 2, got


def test_strings_and_deflated_chunks_on_a_mount(request, tmp_path):
    """NC_STRING (v2 and v3, empty strings, a missing chunk) and chunks re-encoded as
    deflate: each file byte for byte the one made without a mount (any range: strings' heap
    addresses placed where the version puts them), read by the wheel and h5py as the store; each
    chunk made once for the size and kept for the reads; a chunk written gives a new size; a
    chunk that cannot be decoded leaves its variable out."""
    from tests.nczarr import test_nc4reencode, test_nc4strings

    made = tmp_path / "made"
    for fmt in (2, 3):
        (made / f"v{fmt}").mkdir(parents=True)
        test_nc4strings._make(made / f"v{fmt}", fmt)
        (made / f"v{fmt}" / "s.zarr").rename(made / f"s{fmt}.zarr")
    test_nc4reencode._make(made)
    names = ["r2.zarr", "r3.zarr", "s2.zarr", "s3.zarr"]
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many({f"{n}/{k}": v for n in names for k, v in tree(made / n).items()})
    with mounted(backend, tmp_path / "mnt", "-o", "nc_files=netcdf4", "-o", "metadata_ttl=1") as m:
        for n in names:
            _, want = write_nc4(made, n, tmp_path / f"{n}.nc4")
            assert os.stat(m.path / f"{n}.nc4").st_size == want.stat().st_size
            at = len(nc4_of(made, n).layout.meta) + 5  # a range starting inside a chunk
            with open(m.path / f"{n}.nc4", "rb") as f:
                f.seek(at)
                assert f.read(100_000) == want.read_bytes()[at:at + 100_000], n
            assert (m.path / f"{n}.nc4").read_bytes() == want.read_bytes(), n
        before = counts(m.path)["ncfiles.chunks-decoded"]
        for n in names:
            zg = zarr.open_group(str(made / n), mode="r")
            with netCDF4.Dataset(m.path / f"{n}.nc4") as nc, h5py.File(m.path / f"{n}.nc4", "r") as h5:
                for var in zg.array_keys():
                    want = zg[var][...]
                    if want.dtype.kind == "S":  # bytes: chars, as xarray reads them (tests/nczarr)
                        continue
                    if want.dtype.kind in "OUT":
                        got = [np.asarray(x, dtype=object).tolist() for x in (nc[var][...], h5[var].asstr()[...])]
                        assert got == [want.tolist()] * 2, (n, var)
                    else:
                        assert np.array_equal(nc[var][...], want) and np.array_equal(h5[var][...], want), (n, var)
        assert counts(m.path)["ncfiles.chunks-decoded"] == before  # made once, for the sizes
        old = os.stat(m.path / "r2.zarr.nc4").st_size
        arr = zarr.open_array(str(m.path / "r2.zarr" / "lz4"), mode="r+")
        arr[0:16, 0:16] = np.random.default_rng(0).integers(0, 1 << 30, (16, 16))
        time.sleep(1.1)
        assert os.stat(m.path / "r2.zarr.nc4").st_size > old
        with netCDF4.Dataset(m.path / "r2.zarr.nc4") as nc:
            assert np.array_equal(nc["lz4"][...], arr[...])
        (backend.root / "r2.zarr" / "gzip" / "0.0").write_bytes(b"no gzip")  # changed behind the mount
        time.sleep(1.1)
        with netCDF4.Dataset(m.path / "r2.zarr.nc4") as nc:  # left out, the rest read
            assert "gzip" not in nc.variables and np.array_equal(nc["lz4"][...], arr[...])
    assert "Traceback" not in m.log_text()
    assert "leaves out /gzip: chunk 'r2.zarr/gzip/0.0' cannot be made" in m.log_text()


def test_a_remount_with_the_cache_dir_makes_no_chunk_for_the_size(tmp_path):
    """The sizes of re-encoded chunks are kept in --cache-dir (a directory mount too): the
    remount's first stat of NAME.nc4 makes none, and the file reads the same."""
    from tests.nczarr import test_nc4reencode

    made = tmp_path / "made"
    made.mkdir()
    test_nc4reencode._make(made)
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many({f"r2.zarr/{k}": v for k, v in tree(made / "r2.zarr").items()})
    args = ("--read-only", "-o", "nc_files=netcdf4", "--cache-dir", str(tmp_path / "cache"))
    with mounted(backend, tmp_path / "mnt", *args) as m:
        size = os.stat(m.path / "r2.zarr.nc4").st_size
        assert counts(m.path)["ncfiles.chunks-decoded"] == 36  # six arrays of six chunks, each made for its size
        whole = (m.path / "r2.zarr.nc4").read_bytes()
    with mounted(backend, tmp_path / "mnt", *args) as m:
        assert os.stat(m.path / "r2.zarr.nc4").st_size == size
        assert counts(m.path)["ncfiles.chunks-decoded"] == 0
        assert (m.path / "r2.zarr.nc4").read_bytes() == whole
    assert (tmp_path / "cache" / "made-sizes.sqlite").exists()


@pytest.mark.parametrize("kind", ["directory", "s3"])
def test_large_and_many_attributes_through_a_mount(request, tmp_path, kind):
    """Attributes of 100 KiB and 1 MiB (text and numeric) and 2,000 attributes on a variable, a
    subgroup and the root group (dense attribute storage): the file byte for byte the one made
    without a mount, its exact size in ``stat``, any byte range its slice; h5py, xarray (netcdf4,
    h5netcdf) and ncdump read the store's values, h5dump and h5ls report no error."""
    from tests.nczarr.test_nc4attrs import check_large_attrs, make_large_attrs

    made = tmp_path / "made"
    make_large_attrs(made / "a.zarr")
    backend, extra, _ = backend_of(kind, made, tmp_path, request)
    _, want = write_nc4(made, "a.zarr", tmp_path / "a.nc4")
    with mounted(backend, tmp_path / "mnt", "-o", "nc_files=netcdf4", *extra) as m:
        path = m.path / "a.zarr.nc4"
        size, expect = os.stat(path).st_size, want.read_bytes()
        assert size == len(expect) > 3 << 20
        with open(path, "rb") as f:
            for start in (0, 4095, size // 3, size // 2 + 7, size - 1000):
                f.seek(start)
                assert f.read(200_000) == expect[start:start + 200_000], start
        assert path.read_bytes() == expect
        check_large_attrs(path, made / "a.zarr")
    text = m.log_text()
    assert "Traceback" not in text and "leaves out" not in text, text[-2000:]


@pytest.mark.skipif(not os.environ.get("NCZFS_BIG_TESTS"), reason="opt-in: NCZFS_BIG_TESTS=1 (writes 1 GiB, reads it 3 times)")
def test_a_1_gib_re_encoded_variable_reads_whole_through_the_nc4_file(tmp_path):
    """A 1 GiB float32 variable stored with lz4 (16 MiB chunks, re-encoded as deflate): NAME.nc4's
    stat gives the exact size of the file made without a mount, and h5py and ncks read every value
    through it equal to zarr-python's read, block of records by block of records."""
    local = tmp_path / "local"
    g = zarr.open_group(str(local / "big.zarr"), mode="w", zarr_format=2)
    a = g.create_array("big", shape=(1024, 512, 512), chunks=(16, 512, 512), dtype="<f4",
                       compressors=numcodecs.LZ4(), fill_value=np.nan)
    a.attrs["_ARRAY_DIMENSIONS"] = ["t", "y", "x"]
    block = (np.arange(64 * 512 * 512, dtype="f4") % 1000).reshape(64, 512, 512) / 8
    for i in range(0, 1024, 64):
        a[i:i + 64] = block + i
    a[1000:] = np.nan  # stored chunks of fill only
    want_size = nc4_of(local, "big.zarr").size
    with mounted(DirectoryBackend(local), tmp_path / "mnt", "--read-only", "-o", "nc_files=netcdf4") as m:
        path = m.path / "big.zarr.nc4"
        assert os.stat(path).st_size == want_size
        with h5py.File(path, "r") as f:
            for i in range(0, 1024, 64):
                assert np.array_equal(f["big"][i:i + 64], a[i:i + 64], equal_nan=True), i
        out = tmp_path / "ncks.nc"
        subprocess.run(["ncks", "-O", "-v", "big", str(path), str(out)], check=True, capture_output=True)
        header = subprocess.run(["ncdump", "-h", str(path)], check=True, capture_output=True, text=True).stdout
        assert "t = 1024 ;" in header and "float big(t, y, x) ;" in header
    with netCDF4.Dataset(out) as nc:
        nc.set_auto_maskandscale(False)
        for i in range(0, 1024, 64):
            assert np.array_equal(nc["big"][i:i + 64], a[i:i + 64], equal_nan=True), i
    assert "Traceback" not in m.log_text()
