"""``-o nc_files`` on real mounts: the .nc files beside each dataset, read by programs that know
no Zarr, each value compared with zarr-python reading the store (netCDF-C's ``>S1`` chars, which
zarr-python 3 refuses: with the netCDF4 wheel reading the store). Every backend shows the files
and gives the netCDF4 wheel every value; the other readers, which read the same bytes, read
them from a directory mount."""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import os
import re
import shutil
import stat
import subprocess
import time
import zipfile
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from tests.conftest import CORPUS
from tests.helpers import DirectoryBackend, Mount, S3Backend, ZipBackend, counts, mounted
from tests.mount.test_reference_mount import RefsBackend
from tests.mount.test_view_sharding import write_sharded
from tests.nczarr.test_ncfile import make_cf, make_v3, make_xarray_v2

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")
numcodecs = pytest.importorskip("numcodecs")

#: dataset folder -> (its files, their formats)
FILES = {
    "cf.zarr": {"cf.zarr.nc": 5, "cf.zarr.g.nc": 1},
    "v3.zarr": {"v3.zarr.nc": 5},
    "x.zarr": {"x.zarr.nc": 1},
    "sharded.zarr": {"sharded.zarr.nc": 1},  # every sharding form (tests/mount/test_view_sharding.py)
}
HANDMADE = ["v2za.file", "v2lc_allzattrs.file", "v2uc.file", "zarr.file"]
#: netCDF-C's own test datasets (shared/corpus/netcdf-c): V2-LC by 4.9.2, V2-ZA with a group,
#: pure Zarr (u1, a null fill, blosc, quoted attributes, arrays without chunks)
NETCDF_C = ["ref_oldkeys.file.zip", "ref_oldformat.zip", "ref_byte.zarr.zip", "ref_byte_fill_value_null.zarr.zip",
            "ref_quotes_orig.zip", "HEAD-2ed1b285b/ref_power_901_constants_orig.zip"]
NETCDF_C_FILES = ["ref_oldkeys.file.nc", "ref_oldformat.nc", "ref_oldformat.g1.nc", "ref_byte.zarr.nc",
                  "ref_byte_fill_value_null.zarr.nc", "ref_quotes.nc", "ref_power_901_constants.nc"]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """The datasets, as files: the project's own and handmade ones from the shared corpus."""
    root = tmp_path_factory.mktemp("ncdata")
    make_cf(root / "cf.zarr")
    make_v3(root / "v3.zarr")
    make_xarray_v2(root / "x.zarr")
    write_sharded(root)
    copy_corpus(root, HANDMADE)
    return root


def backend_of(kind: str, local: Path, base: Path, request) -> tuple:
    """The datasets of ``local`` on a ``kind`` backend: (backend, the mount's extra arguments,
    its SOURCE or None)."""
    if kind == "reference":  # metadata inline, chunks as byte ranges of the local files
        refs = {}
        for key, data in tree(local).items():
            name = key.rpartition("/")[2]
            refs[key] = data.decode() if name.startswith(".") or name == "zarr.json" or not data \
                else [str(local / key), 0, len(data)]
        (base / "refs.json").write_text(json.dumps({"version": 1, "refs": refs}))
        return RefsBackend(base / "refs.json"), ["-o", f"allow_root={local}"], f"reference://{base / 'refs.json'}"
    if kind == "directory":
        backend = DirectoryBackend(base / "backing")
        backend.root.mkdir()
    elif kind == "zip":
        backend = ZipBackend(base / "backing.zip")
    else:
        server = request.getfixturevalue("s3_server")
        backend = S3Backend(server, server.shared_bucket, server.new_prefix())
    backend.put_many(tree(local))
    return backend, [], None


def copy_corpus(root: Path, handmade) -> None:
    """``handmade`` datasets of the shared corpus and netCDF-C's test datasets into ``root``."""
    for name in handmade:
        shutil.copytree(CORPUS / "handmade" / name, root / name)
    for name in NETCDF_C:
        with zipfile.ZipFile(CORPUS / "netcdf-c" / name) as z:
            z.extractall(root)
    (root / ".zgroup").unlink()  # a stray one at the top of ref_power_901_constants_orig.zip


@contextlib.contextmanager
def mount_of(kind: str, local: Path, base: Path, request) -> Iterator[Mount]:
    """The datasets of ``local`` on a ``kind`` backend, mounted with --nc-files."""
    backend, extra, source = backend_of(kind, local, base, request)
    with mounted(backend, base / "mnt", "--nc-files", *extra, source=source) as m:
        yield m
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text


@pytest.fixture(scope="module", params=["directory", "zip", "s3", "reference"])
def mnt(request, local, tmp_path_factory):
    """A mount of each backend (the bytes of the files do not depend on it)."""
    with mount_of(request.param, local, tmp_path_factory.mktemp(f"ncmount-{request.param}"), request) as m:
        yield m


@pytest.fixture(scope="module")
def dmnt(request, local, tmp_path_factory):
    """A directory mount, for the readers that only read the files' bytes."""
    with mount_of("directory", local, tmp_path_factory.mktemp("ncmount-readers"), request) as m:
        yield m


def want_of(local: Path, dataset: str, group: str, var: str) -> np.ndarray:
    """What zarr-python reads (the wheel, from the store, where zarr-python refuses the dtype)."""
    try:
        zg = zarr.open_group(str(local / dataset), mode="r")
        return np.asarray((zg[group.strip("/")] if group != "/" else zg)[var][...])
    except ValueError:
        with netCDF4.Dataset(f"file://{local / dataset}#mode=nczarr,file") as nc:
            nc.set_auto_maskandscale(False)
            return np.asarray((nc[group] if group != "/" else nc)[var][...])


def as_text(a: np.ndarray) -> list[str]:
    """Fixed-width strings or char rows as Python strings."""
    if a.dtype.kind == "S" and a.dtype.itemsize == 1 and a.ndim > 1:
        a = a.view(f"S{a.shape[-1]}")[..., 0]
    return [s if isinstance(s, str) else s.decode() for s in np.atleast_1d(a).ravel()]


def same(got: np.ndarray, want: np.ndarray) -> bool:
    if want.dtype.kind in "SU":
        return as_text(np.asarray(got)) == as_text(want) if want.ndim else as_text(np.asarray(got)) == as_text(want)
    got = np.asarray(got).reshape(want.shape)
    return np.array_equal(got.astype(want.dtype), want, equal_nan=want.dtype.kind == "f")


def files(mnt) -> dict[str, tuple[str, str]]:
    """Every .nc file of the mount -> (dataset, group)."""
    out = {}
    for name in sorted(os.listdir(mnt.path)):
        if name.endswith(".nc"):
            stem = name[:-3]
            ds = next(d for d in sorted(os.listdir(mnt.path), key=len, reverse=True)
                      if (mnt.path / d).is_dir() and (stem == d or stem.startswith(d + ".")))
            out[name] = (ds, "/" + stem[len(ds) + 1:].replace(".", "/") if stem != ds else "/")
    return out


def test_each_dataset_shows_its_files_read_only_with_exact_sizes(mnt):
    names = sorted(n for n in os.listdir(mnt.path) if n.endswith(".nc"))
    expected = sorted([*(f for d in FILES.values() for f in d), *(f"{h}.nc" for h in HANDMADE), "v2za.file.g.nc",
                       "v2lc_allzattrs.file.g.nc", "v2uc.file.g.nc", "zarr.file.g.nc", *NETCDF_C_FILES])
    assert names == expected
    for name in names:
        st = os.stat(mnt.path / name)
        assert stat.S_IMODE(st.st_mode) == 0o444
        data = (mnt.path / name).read_bytes()
        assert len(data) == st.st_size and data[:3] == b"CDF"
    for dataset, fmts in FILES.items():
        for name, version in fmts.items():
            assert (mnt.path / name).read_bytes()[3] == version, name
    with pytest.raises(OSError) as e:
        (mnt.path / "x.zarr.nc").write_bytes(b"x")
    assert e.value.errno in (errno.EROFS, errno.EACCES)
    for call in (lambda: os.unlink(mnt.path / "x.zarr.nc"), lambda: os.rename(mnt.path / "x.zarr.nc", mnt.path / "y.nc")):
        with pytest.raises(OSError) as e:
            call()
        assert e.value.errno == errno.EROFS


def test_netcdf4_wheel_reads_every_value(mnt, local):
    checked = 0
    for name, (dataset, group) in files(mnt).items():
        with netCDF4.Dataset(mnt.path / name) as nc:
            nc.set_auto_maskandscale(False)
            for vname, var in nc.variables.items():
                assert same(var[...], want_of(local, dataset, group, vname)), (name, vname)
                checked += 1
    assert checked >= 20


def _ncdump_values(text: str) -> dict[str, list[str]]:
    data = text.split("\ndata:\n", 1)[1]
    out = {}
    for m in re.finditer(r"^ (\w+) =\s*(.*?) ;$", data, re.S | re.M):
        out[m.group(1)] = re.findall(r'"(?:[^"\\]|\\.)*"|[^,\s]+', m.group(2))
    return out


def test_debian_ncdump_dumps_every_value(dmnt, local):
    for name, (dataset, group) in files(dmnt).items():
        res = subprocess.run(["ncdump", str(dmnt.path / name)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        with netCDF4.Dataset(dmnt.path / name) as nc:
            fills = {v: nc[v].getncattr("_FillValue") if "_FillValue" in nc[v].ncattrs()
                     else netCDF4.default_fillvals.get(nc[v].dtype.str[1:]) for v in nc.variables}
        for vname, values in _ncdump_values(res.stdout).items():
            want = want_of(local, dataset, group, vname)
            if want.dtype.kind in "SU":
                # a char row per string; a 1-D char variable is one string
                # ncdump writes bytes past ASCII as octal escapes (UTF-8 here)
                text = b"".join(codecs.escape_decode(v.strip('"').encode())[0] for v in values).decode()
                assert text == "".join(as_text(want)), (name, vname)
                continue
            got = [fills[vname] if v == "_" else float(v.rstrip("fbsLUS").rstrip("UL") or "nan") for v in values]
            assert np.allclose(np.asarray(got, dtype="f8"), want.ravel().astype("f8"), rtol=1e-6, equal_nan=True), (name, vname)


@pytest.mark.parametrize("engine", ["scipy", "netcdf4"])
def test_xarray_reads_every_value(dmnt, local, engine):
    for name, (dataset, group) in files(dmnt).items():
        path = dmnt.path / name
        if engine == "scipy" and path.read_bytes()[3] == 5:
            continue  # scipy reads CDF-1 and CDF-2 only
        with xr.open_dataset(path, engine=engine, decode_cf=False, mask_and_scale=False) as xds:
            for vname in xds.variables:
                want = want_of(local, dataset, group, vname)
                assert same(xds[vname].values, want), (engine, name, vname)


def test_ncks_prints_every_value(dmnt, local):
    for name, (dataset, group) in files(dmnt).items():
        res = subprocess.run(["ncks", "--jsn", "-C", str(dmnt.path / name)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        for vname, v in json.loads(res.stdout)["variables"].items():
            want = want_of(local, dataset, group, vname)
            got = np.asarray(v["data"], dtype=object)
            if want.dtype.kind in "SU":
                assert "".join(str(s) for s in np.atleast_1d(got).ravel()) == "".join(as_text(want)), (name, vname)
            else:
                got = np.asarray([np.nan if x is None else x for x in got.ravel()], dtype="f8")
                assert np.allclose(got, want.ravel().astype("f8"), equal_nan=True), (name, vname)


def test_cdo_reads_every_field(dmnt, local):
    """``cdo info`` (per field: minimum, mean, maximum) and ``outputf`` (every value) of the
    variables CDO takes (it skips chars), unpacked and with missing values as CDO shows them."""
    for name in ("cf.zarr.nc", "x.zarr.nc", "v2za.file.nc"):
        dataset, group = files(dmnt)[name]
        path = str(dmnt.path / name)
        info = subprocess.run(["cdo", "-s", "info", path], capture_output=True, text=True, timeout=60)
        assert info.returncode == 0, info.stderr
        with netCDF4.Dataset(path) as nc:
            names = [v for v in nc.variables if nc[v].dtype != "S1" and nc[v].ndim >= 2]
            for vname in names:
                var = nc[vname]
                want = want_of(local, dataset, group, vname).astype("f8")
                fill = var.getncattr("_FillValue") if "_FillValue" in var.ncattrs() else None
                mask = want == fill if fill is not None else np.zeros(want.shape, bool)
                want = want * getattr(var, "scale_factor", 1.0) + getattr(var, "add_offset", 0.0)
                out = subprocess.run(["cdo", "-s", "outputf,%.12g,1", f"-selname,{vname}", path],
                                     capture_output=True, text=True, timeout=60)
                assert out.returncode == 0, out.stderr
                got = np.asarray([float(x) for x in out.stdout.split()])
                assert got.size == want.size, (name, vname)
                ok = np.isclose(got, want.ravel(), rtol=1e-9) | mask.ravel()
                assert ok.all(), (name, vname)
                field_min = float(want[~mask].min())
                assert f"{field_min:.4g}"[:3] in info.stdout or str(int(field_min)) in info.stdout, (name, vname)


def test_gdal_reads_every_raster(dmnt, local, tmp_path):
    """gdalinfo opens each file holding a raster (a variable of 2 dimensions or more);
    gdal_translate gives each raster's values, rows bottom-up (GDAL shows north up). Debian's
    GDAL does not open CDF-5 files."""
    for name, (dataset, group) in files(dmnt).items():
        path = str(dmnt.path / name)
        if (dmnt.path / name).read_bytes()[3] == 5:
            continue
        with netCDF4.Dataset(path) as nc:
            rasters = [v for v in nc.variables if nc[v].ndim >= 2 and nc[v].dtype != "S1"]
        if not rasters:
            continue  # GDAL opens no file without a raster
        info = subprocess.run(["gdalinfo", path], capture_output=True, text=True, timeout=60)
        assert info.returncode == 0 and "netCDF" in info.stdout, info.stderr
        for vname in rasters:
            out = tmp_path / f"{name}.{vname}.img"
            res = subprocess.run(["gdal_translate", "-q", "-of", "ENVI", f'NETCDF:"{path}":{vname}', str(out)],
                                 capture_output=True, text=True, timeout=60)
            assert res.returncode == 0, res.stderr
            want = want_of(local, dataset, group, vname)
            got = np.fromfile(out, dtype=want.dtype.newbyteorder("<")).reshape(want.shape)
            assert np.array_equal(got, want[..., ::-1, :], equal_nan=want.dtype.kind == "f"), (name, vname)


@pytest.fixture(params=["directory", "s3"])
def fresh(request, local, tmp_path):
    """A mount of its own (TTL 1 s), over a copy of x.zarr, for tests that change it."""
    if request.param == "directory":
        backend = DirectoryBackend(tmp_path / "backing")
        backend.root.mkdir()
    else:
        server = request.getfixturevalue("s3_server")
        backend = S3Backend(server, server.shared_bucket, server.new_prefix())
    backend.put_many({f"x.zarr/{k}": v for k, v in tree(local / "x.zarr").items()})
    with mounted(backend, tmp_path / "mnt", "--nc-files", "-o", "metadata_ttl=1") as m:
        yield m
    assert "Traceback" not in m.log_text()


def _values(path: Path, var: str) -> np.ndarray:
    with netCDF4.Dataset(path) as nc:
        nc.set_auto_maskandscale(False)
        return nc[var][...]


@pytest.mark.parametrize("fresh", ["directory"], indirect=True)
def test_the_file_follows_writes_through_the_mount_at_once(fresh):
    nc = fresh.path / "x.zarr.nc"
    before, old = os.stat(nc), nc.read_bytes()
    time.sleep(0.01)
    arr = zarr.open_array(str(fresh.path / "x.zarr" / "v"), mode="r+")
    arr[0, 0] = 99  # a chunk rewritten through the mount
    after = os.stat(nc)
    assert after.st_mtime_ns > before.st_mtime_ns
    assert _values(nc, "v")[0, 0] == 99 and nc.read_bytes() != old
    arr.attrs["comment"] = "a new attribute"  # metadata: the header grows
    assert os.stat(nc).st_size > after.st_size
    with netCDF4.Dataset(nc) as ds:
        assert ds["v"].comment == "a new attribute"


@pytest.mark.parametrize("fresh", ["directory"], indirect=True)
def test_a_descriptor_that_read_an_old_version_gets_estale_never_a_mix(fresh):
    """A chunk rewritten while a descriptor is open: once it has read, it gets ESTALE (the
    kernel's pages dropped so that the daemon answers), as for any object, never a mix of two
    versions; a new open reads the new version whole."""
    nc = fresh.path / "x.zarr.nc"
    fd = os.open(nc, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        old = os.pread(fd, size, 0)
        arr = zarr.open_array(str(fresh.path / "x.zarr" / "v"), mode="r+")
        arr[0, 0] = 99
        new = nc.read_bytes()
        assert new != old and len(new) == size
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        with pytest.raises(OSError) as info:
            os.pread(fd, size, 0)
        assert info.value.errno == errno.ESTALE
    finally:
        os.close(fd)
    assert _values(nc, "v")[0, 0] == 99


@pytest.mark.parametrize("fresh", ["directory"], indirect=True)
def test_a_file_is_not_linked_and_follows_links_made_in_its_dataset(fresh):
    """A link to a file made from a dataset fails with EROFS (there is no object to link, and
    no name of the file to give); a hard link that makes a chunk in the dataset changes the file."""
    nc = fresh.path / "x.zarr.nc"
    for call in (lambda: os.link(nc, fresh.path / "copy.nc"), lambda: os.chmod(nc, 0o600),
                 lambda: os.truncate(nc, 0)):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EROFS
    chunks = fresh.path / "x.zarr" / "v"
    before = _values(nc, "v").copy()
    os.unlink(chunks / "1.2")
    assert _values(nc, "v")[2, 9] == 7  # a missing chunk: the fill value
    os.link(chunks / "0.0", chunks / "1.2")  # chunk 0.0's values where 1.2's were
    assert _values(nc, "v")[2, 8:10].tolist() == before[0, 0:2].tolist()


@pytest.mark.parametrize("fresh", ["s3"], indirect=True)
def test_the_file_follows_changes_made_elsewhere_after_the_ttl(fresh, local):
    nc = fresh.path / "x.zarr.nc"
    assert _values(nc, "v")[2, 9] == 29
    chunk = local / "x.zarr" / "v" / "1.2"
    values = np.frombuffer(numcodecs.Blosc().decode(chunk.read_bytes()), "<i4").copy()
    values[1] = 1234  # chunk 1.2 holds rows 2-3, columns 8-11: (2, 9) is its element 1
    fresh.backend.put("x.zarr/v/1.2", numcodecs.Blosc("lz4", 5, 1).encode(values.tobytes()))
    deadline = time.monotonic() + 10
    while _values(nc, "v")[2, 9] != 1234 and time.monotonic() < deadline:
        time.sleep(0.3)
    got = _values(nc, "v")
    assert got[2, 9] == 1234 and got[2, 8] == 28


def test_reading_front_to_back_decodes_each_chunk_once(tmp_path):
    """Two record variables interleaved, 64 records of 256 KiB: a reader going through the file
    in the kernel's pieces gets each chunk decoded once."""
    local = tmp_path / "local"
    local.mkdir()
    with netCDF4.Dataset(f"file://{local / 'rec.zarr'}#mode=nczarr,file", "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", 256)
        nc.createDimension("x", 256)
        field = nc.createVariable("field", "f4", ("time", "y", "x"), chunksizes=(1, 256, 256), zlib=True)
        stamp = nc.createVariable("stamp", "i4", ("time",), chunksizes=(16,))
        for i in range(64):
            field[i] = np.full((256, 256), i, dtype="f4")
            stamp[i] = i
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many({f"rec.zarr/{k}": v for k, v in tree(local / "rec.zarr").items()})
    chunks = [k for k in tree(local / "rec.zarr") if not k.rpartition("/")[2].startswith(".")]
    with mounted(backend, tmp_path / "mnt", "--nc-files") as m:
        path = m.path / "rec.zarr.nc"
        with open(path, "rb", buffering=0) as f:
            while f.read(128 * 1024):
                pass
        decoded = counts(m.path)["ncfiles.chunks-decoded"]
        with netCDF4.Dataset(path) as nc:
            assert nc["field"][63, 255, 255] == 63 and list(nc["stamp"][:]) == list(range(64))
    assert decoded == len(chunks), (decoded, sorted(chunks))


@pytest.mark.skipif(not os.environ.get("NCZFS_BIG_TESTS"), reason="opt-in: NCZFS_BIG_TESTS=1 (writes and reads 2 GiB)")
def test_a_1_gib_variable_reads_whole_through_the_file(tmp_path):
    """A 1 GiB float32 variable (zlib, 16 MiB chunks) read whole by the netCDF4 wheel through the
    .nc file equals zarr-python's read, block of records by block of records."""
    local = tmp_path / "local"
    g = zarr.open_group(str(local / "big.zarr"), mode="w", zarr_format=2)
    a = g.create_array("big", shape=(1024, 512, 512), chunks=(16, 512, 512), dtype="<f4",
                       compressors=numcodecs.Zlib(1), fill_value=np.nan)
    a.attrs["_ARRAY_DIMENSIONS"] = ["t", "y", "x"]
    for i in range(0, 1024, 64):
        a[i:i + 64] = np.arange(i, i + 64, dtype="f4")[:, None, None] + np.zeros((1, 512, 512), "f4")
    a[1000:] = np.nan  # stored chunks of fill only
    backend = DirectoryBackend(local)
    with mounted(backend, tmp_path / "mnt", "--nc-files") as m:
        path = m.path / "big.zarr.nc"
        assert os.stat(path).st_size > 2**30
        with netCDF4.Dataset(path) as nc:
            nc.set_auto_maskandscale(False)
            assert nc.data_model == "NETCDF3_CLASSIC"
            for i in range(0, 1024, 64):
                assert np.array_equal(nc["big"][i:i + 64], a[i:i + 64], equal_nan=True), i


def test_a_dataset_at_the_root_shows_its_file_named_after_the_source_and_names_in_the_store_win(local, tmp_path):
    backend = DirectoryBackend(tmp_path / "x.zarr")
    shutil.copytree(local / "x.zarr", backend.root)
    shutil.copytree(local / "cf.zarr", tmp_path / "both" / "cf.zarr")
    (tmp_path / "both" / "cf.zarr.g.nc").write_bytes(b"mine")
    with mounted(backend, tmp_path / "mnt", "--nc-files") as m:
        assert sorted(n for n in os.listdir(m.path) if n.endswith(".nc")) == ["x.zarr.nc"]
        assert same(_values(m.path / "x.zarr.nc", "v"), want_of(local, "x.zarr", "/", "v"))
        assert np.array_equal(zarr.open_group(str(m.path), mode="r")["v"][...], want_of(local, "x.zarr", "/", "v"))
    with mounted(DirectoryBackend(tmp_path / "both"), tmp_path / "mnt2", "--nc-files") as m:
        assert (m.path / "cf.zarr.g.nc").read_bytes() == b"mine"
        assert stat.S_IMODE(os.stat(m.path / "cf.zarr.g.nc").st_mode) == 0o644
        assert (m.path / "cf.zarr.nc").read_bytes()[:3] == b"CDF"
