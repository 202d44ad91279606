"""The views' fidelity matrix over netCDF-C's whole CDL corpus, and what transcoding costs.

    .venv/bin/python bench/bench_fidelity.py [--cdl DIR] [--views all|own] [--transcode-mib 256] [--runs 3]

Every CDL file (default ``../shared/corpus/netcdf-c-cdl``) is written by Debian netCDF-C 4.9.0,
the netCDF4 wheel (4.10.1) and xarray (Zarr v2, v3), with the Zarr features corpus (every codec,
sharding form and data type zarr-python writes); each dataset is read by Debian ``ncdump``, the
wheel and xarray without nczfs and through nczfs views on a directory mount and an S3 (SeaweedFS)
mount, and compared with the original (tests/fidelity/). Prints, per stored flavor and reader,
full/partial/fails without nczfs and through the reader's own view, the reads that come out worse
through the view, the failures, and (``--views all``) every view x reader. Then, unless
``--transcode-mib 0``: the wheel reading a float32 array of that size through ``netcdf-4.10``,
compressed with lz4 (which the wheel lacks: transcoded by the mount) and with zstd (which it has:
passed through), cold (remounted, page cache dropped), median of --runs, MB/s and the daemon's CPU.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from tests.fidelity.matrix import Matrix  # noqa: E402
from tests.fidelity.readers import OWN_VIEW, READERS  # noqa: E402
from tests.fidelity.run import EXCEPTIONS, own_views, read_direct, write_corpus  # noqa: E402
from tests.fidelity.writers import CDL_DIR  # noqa: E402
from tests.helpers import DirectoryBackend, S3Backend, mounted  # noqa: E402
from tests.s3server import SeaweedS3  # noqa: E402

VIEWS = ("as-stored", "netcdf-4.9", "netcdf-4.10", "xarray")


def commit() -> str:
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def fidelity(work: Path, cdl_dir: Path, all_views: bool) -> Matrix:
    t0 = time.monotonic()
    datasets = write_corpus(work, cdl_dir=cdl_dir)
    stores = work / "stores"
    print(f"== {sum(map(len, datasets.values()))} datasets written in {time.monotonic() - t0:.0f} s: "
          + ", ".join(f"{w} {len(v)}" for w, v in datasets.items()), flush=True)
    m = Matrix()
    read_direct(m, stores, datasets)
    views = VIEWS if all_views else None
    own_views(m, DirectoryBackend(stores), "dir", work, datasets, views)
    server = SeaweedS3(work / "seaweed")
    server.start()
    try:
        os.environ.update(server.write_aws_files(work / "aws"))
        s3 = S3Backend(server, server.new_bucket(), "stores")
        s3.put_many({str(p.relative_to(stores)): p.read_bytes() for p in stores.rglob("*") if p.is_file()})
        own_views(m, s3, "s3", work, datasets, views)
    finally:
        server.stop()
    print(f"== read in {time.monotonic() - t0:.0f} s", flush=True)
    return m


def report(m: Matrix) -> None:
    print(f"\n## Each reader through its own view ({datetime.date.today()}, commit {commit()}): "
          "full/partial/fails\n")
    print(m.table("dir"))
    same = all(m.cell(f"s3 {OWN_VIEW[r]}", w, r) == m.cell(f"dir {OWN_VIEW[r]}", w, r)
               for r in READERS for w in {w for _, w, _, _ in m.results})
    print(f"\nS3 mount: {'the same counts in every cell' if same else 'differs, see below'}")
    if not same:
        print(m.table("s3"))
    for backend in ("dir", "s3"):
        worse = m.worse_than_direct({r: f"{backend} {v}" for r, v in OWN_VIEW.items()})
        print(f"\n{backend}: {len(worse)} read(s) worse through the view than without nczfs")
        for w in worse:
            print("  -", w[:300])
        fails = [(w, n, r, res.get("err", "")) for (c, w, n, r), res in m.results.items()
                 if c == f"{backend} {OWN_VIEW[r]}" and res["status"] == "fails"]
        print(f"{backend}: {len(fails)} failed read(s) through the own view "
              f"({sum((n, r) in EXCEPTIONS for _, n, r, _ in fails)} of them the documented exceptions)")
        for w, n, r, err in fails:
            print(f"  - {w}/{n} {r}: {EXCEPTIONS.get((n, r), err)[:200]}")
    cols = [c for c in m.columns() if c.startswith("dir ")]
    if len(cols) > len(READERS):
        print("\n## Every view x reader (directory mount)\n")
        print("| stored | reader | no nczfs | " + " | ".join(c[4:] for c in cols) + " |")
        print("|---|---|---|" + "---|" * len(cols))
        for w in sorted({w for _, w, _, _ in m.results}):
            for r in READERS:
                cells = [m.cell(c, w, r) for c in ["direct", *cols]]
                print(f"| {w} | {r} | " + " | ".join(f"{c['full']}/{c['partial']}/{c['fails']}" for c in cells) + " |")
    zarr = collections.Counter((c, r, res["status"]) for (c, w, n, r), res in m.results.items()
                               if w == "zarr" and c == f"dir {OWN_VIEW[r]}")
    print("\n## Zarr features through each reader's own view (values as zarr-python reads them)\n")
    for r in READERS:
        print(f"- {r}: " + ", ".join(f"{s} {zarr[(f'dir {OWN_VIEW[r]}', r, s)]}" for s in ("full", "partial", "fails")))


def transcode_cost(work: Path, mib: int, runs: int) -> None:
    """The wheel reading one float32 array through netcdf-4.10: lz4 (transcoded) against zstd."""
    import netCDF4
    import numcodecs
    import numpy as np
    import zarr

    src = work / "tc"
    n = mib * 1024 * 1024 // 4
    data = (np.arange(n, dtype="<f4") % 1000) / 7
    for name, codec in (("lz4", numcodecs.LZ4()), ("zstd", numcodecs.Zstd(1))):
        g = zarr.open_group(str(src / f"{name}.zarr"), mode="w", zarr_format=2)
        a = g.create_array("v", shape=(n,), chunks=(2 * 1024 * 1024,), dtype="<f4", compressors=codec)
        a[:] = data
        a.attrs["_ARRAY_DIMENSIONS"] = ["n"]
    print(f"\n## Transcoding: the wheel reads {mib} MiB of float32 through netcdf-4.10, cold, median of {runs}\n")
    print("| stored codec | shown as | MB/s | daemon CPU s |")
    print("|---|---|---|---|")
    for name in ("lz4", "zstd"):
        times, cpus = [], []
        for _ in range(runs):
            with mounted(DirectoryBackend(src), work / "tcm", "--read-only", "--present", "netcdf-4.10") as m:
                drop_caches()
                pid = int(subprocess.run(["pgrep", "-f", f"nczfs.*mount.*{m.path}"], capture_output=True,
                                         text=True).stdout.split()[0])
                before = _cpu(pid)
                t = time.perf_counter()
                with netCDF4.Dataset(f"file://{m.path}/{name}.zarr#mode=nczarr,file") as nc:
                    got = nc["v"][:]
                times.append(time.perf_counter() - t)
                cpus.append(_cpu(pid) - before)
                assert got.shape == (n,)
        shown = "decoded (the wheel lacks lz4)" if name == "lz4" else "as stored (zstd)"
        print(f"| {name} | {shown} | {mib * 1.048576 / statistics.median(times):.0f} | {statistics.median(cpus):.2f} |")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    import warnings

    warnings.simplefilter("ignore")  # zarr-python's and xarray's about the data types the corpus writes on purpose
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cdl", type=Path, default=CDL_DIR, help="a folder of CDL files (default: netCDF-C's corpus)")
    p.add_argument("--views", choices=("own", "all"), default="all", help="each reader's own view, or every view")
    p.add_argument("--transcode-mib", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="nczfs-fidelity-") as tmp:
        m = fidelity(Path(tmp), args.cdl.resolve(), args.views == "all")
        report(m)
        if args.transcode_mib:
            transcode_cost(Path(tmp), args.transcode_mib, args.runs)


if __name__ == "__main__":
    main()
