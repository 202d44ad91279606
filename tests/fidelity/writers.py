"""The datasets the views' fidelity is measured on, written by the writers users have.

Two corpora. netCDF-C's own CDL files (``../shared/corpus/netcdf-c-cdl``), each written as a
netCDF-4 file (the original every read is compared with) and by four writers: Debian netCDF-C
4.9.0 (``ncgen``, or through ``nccopy -u`` where 4.9.0's ncgen refuses the NCZarr, V2-UC:
``w49``), the netCDF4 wheel (netCDF-C 4.10.1, V2-ZA: ``w410``) and xarray (Zarr v2 and v3:
``xz2``, ``xz3``). And the Zarr features zarr-python 3 and xarray write by default or on request
(``zarr``): every codec, every sharding form, every data type, and realistic datasets.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
CDL_DIR = CORPUS / "netcdf-c-cdl"
WRITERS = ("w49", "w410", "xz2", "xz3")


def nczarr_url(path: Path | str) -> str:
    return f"file://{path}#mode=nczarr,file"


def _run(cmd: list[str]) -> tuple[int, str]:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, (p.stdout + p.stderr).strip()[-300:]


@functools.cache
def _netcdf_lib():
    """The netCDF4 wheel's libnetcdf (netCDF-C 4.10.1), for what netCDF4-python does not offer."""
    import netCDF4

    lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(netCDF4.__file__), "..", "netcdf4.libs", "libnetcdf*"))[0])
    lib.nc_copy_att.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.nc_inq_atttype.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]
    return lib


def _copy_group(lib, src, dst) -> None:
    """Copy a netCDF group with the wheel: dimensions, variables (chunking, fill), attributes with
    their exact types (nc_copy_att), data."""
    for name, d in src.dimensions.items():
        dst.createDimension(name, None if d.isunlimited() else len(d))
    for name in src.ncattrs():
        lib.nc_copy_att(src._grpid, -1, name.encode(), dst._grpid, -1)
    for name, v in src.variables.items():
        kw = {"fill_value": v.getncattr("_FillValue")} if "_FillValue" in v.ncattrs() else {}
        if isinstance(v.chunking(), list):
            kw["chunksizes"] = v.chunking()
        w = dst.createVariable(name, v.datatype, v.dimensions, **kw)
        for a in v.ncattrs():
            if a != "_FillValue":
                lib.nc_copy_att(src._grpid, v._varid, a.encode(), dst._grpid, w._varid)
        for x in (v, w):
            x.set_auto_maskandscale(False)
            x.set_auto_chartostring(False)
        if all(s > 0 for s in v.shape):
            w[...] = v[...]
    for name, g in src.groups.items():
        _copy_group(lib, g, dst.createGroup(name))


def write_cdl(cdl: Path, out: Path, writers: tuple[str, ...] = WRITERS) -> dict[str, str]:
    """``out/orig/N.nc`` and ``out/<writer>/N.file`` for each writer; what each writer did."""
    import netCDF4
    import xarray as xr

    name = cdl.stem
    done: dict[str, str] = {}
    orig = out / "orig" / f"{name}.nc"
    orig.parent.mkdir(parents=True, exist_ok=True)
    rc, msg = _run(["ncgen", "-4", "-o", str(orig), str(cdl)])
    if rc:
        return {"orig": f"failed: {msg}"}
    for writer in writers:
        target = out / writer / f"{name}.file"
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if writer == "w49":
                rc, msg = _run(["ncgen", "-4", "-o", nczarr_url(target), str(cdl)])
                done[writer] = "ok"
                if rc:  # 4.9.0's ncgen refuses unlimited dimensions in NCZarr: as the fidelity run, via nccopy -u
                    shutil.rmtree(target, ignore_errors=True)
                    rc, msg = _run(["nccopy", "-u", str(orig), nczarr_url(target)])
                    done[writer] = "ok via nccopy -u"
                if rc:
                    raise RuntimeError(msg)
            elif writer == "w410":
                with netCDF4.Dataset(orig) as s, netCDF4.Dataset(nczarr_url(target), "w", format="NETCDF4") as d:
                    _copy_group(_netcdf_lib(), s, d)
                done[writer] = "ok"
            else:
                tree = xr.open_datatree(orig, engine="netcdf4", mask_and_scale=False, decode_times=False,
                                        decode_timedelta=False)
                tree.to_zarr(target, zarr_format=2 if writer == "xz2" else 3, mode="w")
                done[writer] = "ok"
        except Exception as exc:  # noqa: BLE001 - a writer that cannot write this CDL: recorded, skipped
            shutil.rmtree(target, ignore_errors=True)
            done[writer] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    return done


def zarr_features(out: Path) -> dict[str, str]:
    """``out/zarr/<feature>.zarr``: one dataset per codec, sharding form, data type, and realistic
    ones; returns {feature: what it shows}. Each array is 1-D or 2-D along named dimensions."""
    import numcodecs
    import xarray as xr
    import zarr
    from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, ShardingCodec, ShardingCodecIndexLocation, ZstdCodec

    root = out / "zarr"
    root.mkdir(parents=True, exist_ok=True)
    grid = np.arange(48, dtype="<f4").reshape(6, 8) / 4
    made: dict[str, str] = {}

    def v2(name: str, what: str, **arrays):
        g = zarr.open_group(str(root / f"{name}.zarr"), mode="w", zarr_format=2)
        for aname, (compressor, filters) in arrays.items():
            a = g.create_array(aname, shape=grid.shape, chunks=(3, 4), dtype="<f4", compressors=compressor, filters=filters)
            a[:] = grid
            a.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
        made[name] = what

    b = numcodecs.Blosc
    v2("codec_zstd", "zstd", v=(numcodecs.Zstd(3), None))
    for shuffle, label in ((b.NOSHUFFLE, "noshuffle"), (b.SHUFFLE, "shuffle"), (b.BITSHUFFLE, "bitshuffle")):
        v2(f"codec_blosc_{label}", f"blosc lz4 {label}", v=(b("lz4", 5, shuffle), None))
    for cid, codec in (("gzip", numcodecs.GZip(5)), ("zlib", numcodecs.Zlib(5)), ("lz4", numcodecs.LZ4()),
                       ("bz2", numcodecs.BZ2(5))):
        v2(f"codec_{cid}", cid, v=(codec, None))
    v2("codec_crc32c", "crc32c filter", v=(None, [numcodecs.CRC32C()]))
    v2("codec_delta", "delta filter + zlib", v=(numcodecs.Zlib(1), [numcodecs.Delta("<f4")]))
    v2("codec_scaleoffset", "fixedscaleoffset filter", v=(None, [numcodecs.FixedScaleOffset(0, 4, "<f4", astype="<i2")]))

    def v3(name: str, what: str, **kw):
        g = zarr.open_group(str(root / f"{name}.zarr"), mode="w", zarr_format=3)
        a = g.create_array("v", shape=grid.shape, dtype="<f4", dimension_names=["y", "x"], **kw)
        a[:] = grid
        made[name] = what

    v3("v3_gzip_bigendian", "Zarr v3, gzip, big-endian", chunks=(3, 4), serializer=BytesCodec(endian="big"),
       compressors=GzipCodec(level=3))
    v3("shard_end", "shards of 2x2 chunks, index at the end", chunks=(3, 4), shards=(6, 8))
    v3("shard_start", "index at the start, blosc inside", chunks=(6, 8), compressors=None, serializer=ShardingCodec(
        chunk_shape=(3, 4), codecs=[BytesCodec(), BloscCodec(cname="zstd")], index_location=ShardingCodecIndexLocation.start))
    v3("shard_nested", "nested shards", chunks=(6, 8), compressors=None, serializer=ShardingCodec(
        chunk_shape=(6, 4), codecs=[ShardingCodec(chunk_shape=(3, 2), codecs=[BytesCodec(), ZstdCodec()])]))

    types = zarr.open_group(str(root / "dtypes.zarr"), mode="w", zarr_format=3)
    values = {
        "flag": np.array([True, False, True, True]),
        "time": np.array(["2020-01-01", "2020-01-02T06", "NaT", "2021-12-31T23:59:59"], dtype="datetime64[s]"),
        "time_ns": np.array(["2020-01-01T00:00:00.000001", "2020-01-02", "NaT", "2000-01-01"], dtype="datetime64[ns]"),
        "lag": np.array([1, 2, 3, 48], dtype="timedelta64[h]"),
        "name": np.array(["alpha", "b", "γάμμα", ""], dtype=object),
        "code": np.array([b"ab", b"c", b"xyz", b""], dtype="S3"),
        "i64": np.array([-(2**62), 0, 1, 2**62], dtype="<i8"),
        "u16": np.array([0, 1, 65535, 7], dtype="<u2"),
    }
    for vname, data in values.items():
        a = types.create_array(vname, shape=data.shape, chunks=(2,), dtype=str if data.dtype == object else data.dtype,
                               dimension_names=["n"])
        a[:] = data
    made["dtypes"] = "bool, datetime64, timedelta64, vlen strings, fixed bytes, int64, uint16"

    time = np.arange("2020-01-01", "2020-01-13", dtype="datetime64[D]").astype("datetime64[ns]")
    ds = xr.Dataset({"temp": (("time", "lat"), np.arange(48.0).reshape(12, 4) + 0.5, {"units": "K"})},
                    coords={"time": time, "lat": [10.0, 20.0, 30.0, 40.0]}, attrs={"title": "CF time series"})
    ds.to_zarr(root / "cf_v2.zarr", zarr_format=2, mode="w", encoding={"temp": {"chunks": (4, 2)}})
    ds.to_zarr(root / "cf_v3_sharded.zarr", zarr_format=3, mode="w",
               encoding={"temp": {"chunks": (2, 2), "shards": (4, 4)}})
    made["cf_v2"] = "xarray, CF time coordinate, chunked (Zarr v2)"
    made["cf_v3_sharded"] = "xarray, CF time coordinate, sharded (Zarr v3)"
    return made
