"""Reference backend: read a kerchunked netCDF-4 file through an nczfs mount vs the direct ways.

    .venv/bin/python bench/bench_reference.py [--mib 128] [--runs 3]

One netCDF-4 variable (float32, 1 MiB chunks, zlib level 1) is referenced by kerchunk; the
whole array is read with zarr-python (a) through the mount with local targets, (b) through a
mount whose targets are served by a local HTTP server (127.0.0.1, ranged GETs), (c) with
fsspec's ReferenceFileSystem in process (zarr over kerchunk's usual path), (d) with the
netCDF4 wheel from the .nc file itself. Cold runs: page cache dropped before each measured
run (needs root); one warm-up; medians of --runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import netCDF4
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import NCZFS, drop_caches  # noqa: E402
from tests.http_range_server import RangeServer  # noqa: E402


def make(d: Path, mib: int) -> tuple[Path, dict]:
    from kerchunk.hdf import SingleHdf5ToZarr

    nc = d / "big.nc"
    n = mib * 1024 * 1024 // 4 // (512 * 512)
    with netCDF4.Dataset(nc, "w") as ds:
        ds.createDimension("t", n)
        ds.createDimension("y", 512)
        ds.createDimension("x", 512)
        v = ds.createVariable("v", "f4", ("t", "y", "x"), chunksizes=(1, 512, 512), zlib=True, complevel=1)
        rng = np.random.default_rng(1)
        for i in range(n):
            v[i] = rng.normal(0, 1, (512, 512)).astype("f4").round(2)
    with open(nc, "rb") as f:
        refs = SingleHdf5ToZarr(f, "big.nc", inline_threshold=0).translate()
    return nc, refs


def timed(fn) -> float:
    t = time.perf_counter()
    total = fn()
    assert np.isfinite(total)
    return time.perf_counter() - t


def read_zarr(store) -> float:
    return float(zarr.open_group(store, mode="r", zarr_format=2)["v"][:].sum(dtype="f8"))


def mounted_read(json_path: Path, mnt: Path) -> float:
    subprocess.run([*NCZFS, "mount", str(json_path), str(mnt)], check=True)
    try:
        return timed(lambda: read_zarr(str(mnt)))
    finally:
        subprocess.run([*NCZFS, "umount", str(mnt)], check=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=128)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    warnings.filterwarnings("ignore", message=".*asynchronous=True.*")
    with tempfile.TemporaryDirectory(prefix="nczfs-bench-") as tmp:
        d = Path(tmp)
        nc, refs = make(d, args.mib)
        (d / "local.json").write_text(json.dumps(refs))
        server = RangeServer({"/big.nc": nc.read_bytes()})
        http = {"version": 1, "refs": {k: ([server.url + "/big.nc", *v[1:]] if isinstance(v, list) else v)
                                       for k, v in refs["refs"].items()}}
        (d / "http.json").write_text(json.dumps(http))
        mnt = d / "mnt"
        mnt.mkdir()

        def fsspec_read() -> float:
            import fsspec

            absolute = {k: ([str(nc), *v[1:]] if isinstance(v, list) else v) for k, v in refs["refs"].items()}
            fs = fsspec.filesystem("reference", fo={"version": 1, "refs": absolute}, remote_protocol="file")
            return timed(lambda: read_zarr(zarr.storage.FsspecStore(fs, read_only=True, path="")))

        def netcdf_read() -> float:
            return timed(lambda: float(netCDF4.Dataset(nc)["v"][:].sum(dtype="f8")))

        cases = {
            "nczfs mount, local targets": lambda: mounted_read(d / "local.json", mnt),
            "nczfs mount, http targets (127.0.0.1)": lambda: mounted_read(d / "http.json", mnt),
            "fsspec ReferenceFileSystem in process": fsspec_read,
            "netCDF4 wheel on the .nc file": netcdf_read,
        }
        print(f"| read a {args.mib} MiB float32 variable (1 MiB chunks, zlib 1), median of {args.runs} cold runs | s |")
        print("|---|---:|")
        try:
            for name, fn in cases.items():
                fn()  # warm-up
                times = []
                for _ in range(args.runs):
                    drop_caches()
                    times.append(fn())
                print(f"| {name} | {statistics.median(times):.3f} |")
        finally:
            server.close()


if __name__ == "__main__":
    main()
