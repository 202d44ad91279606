"""Reads that decode, with 1 decode thread against N (``-o decode_threads=``; issue 46).

    .venv/bin/python bench/bench_decode.py [--mib 256] [--runs 3] [--threads 1,2] [--only view|nc]

``view``: the netCDF4 wheel reads (timed by itself: its open and read, not its start-up) a float32 array of --mib MiB stored with lz4 (which the wheel
lacks: the mount decodes each chunk of 8 MiB) through ``--present netcdf-4.10`` of a read-only
directory mount (as bench/bench_fidelity.py's transcoding row). ``nc``: ``ncks -O -v temp``
extracts a zlib-compressed float32 variable of --mib MiB (chunks of 8 MiB) through the
``ds.zarr.nc`` of an S3 mount of a SeaweedFS started here (as bench/bench_ncfiles.py --zlib),
against the same ncks on a local classic copy. Each run is cold (page cache dropped, remounted);
for each thread count: the median wall time, MB/s, the median CPU seconds of the daemon and of
the reader, and the speed-up of N threads over 1. The load average is printed before and after:
on a shared machine the CPU seconds say more than the wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from bench.bench_ncfiles import NCZFS, make_data, timed, tool_cmd, upload  # noqa: E402

MiB = 1024 * 1024


def option(threads: int) -> list[str]:
    """The mount's -o for a decode pool of ``threads`` (0: none given, as a checkout without the option)."""
    return ["-o", f"decode_threads={threads}"] if threads else []


def lz4_store(work: Path, mib: int) -> Path:
    import numcodecs
    import numpy as np
    import zarr

    src = work / "tc"
    n = mib * MiB // 4
    g = zarr.open_group(str(src / "lz4.zarr"), mode="w", zarr_format=2)
    a = g.create_array("v", shape=(n,), chunks=(2 * MiB,), dtype="<f4", compressors=numcodecs.LZ4())
    a[:] = (np.arange(n, dtype="<f4") % 1000) / 7
    a.attrs["_ARRAY_DIMENSIONS"] = ["n"]
    return src


def view_runs(work: Path, mib: int, runs: int, threads: int) -> list[tuple[float, float, float, float]]:
    from nczfs.fuse.control import read_control

    src = lz4_store(work, mib) if not (work / "tc").exists() else work / "tc"
    mnt = work / "vm"
    mnt.mkdir(exist_ok=True)
    # the reader times its own open and read (its start-up, ~0.5 s of importing on a loaded
    # machine, is no part of the read), and prints it
    code = ("import time, netCDF4; t = time.perf_counter(); "
            f"nc = netCDF4.Dataset('file://{mnt}/lz4.zarr#mode=nczarr,file'); "
            f"assert nc['v'][:].shape == ({mib * MiB // 4},); print(time.perf_counter() - t)")
    out = []
    for _ in range(runs):
        subprocess.run([*NCZFS, "mount", str(src), str(mnt), "--read-only", "-o", "present=netcdf-4.10",
                        *option(threads)], check=True)
        try:
            drop_caches()
            pid = read_control(str(mnt))["pid"]
            said: list[float] = []
            run = timed(lambda: said.append(float(subprocess.run([sys.executable, "-c", code], check=True,
                                                                 capture_output=True, text=True).stdout)),
                        os.getpid(), pid)
            out.append((said[0], *run[1:]))
        finally:
            subprocess.run([*NCZFS, "umount", str(mnt)], check=True)
    return out


def nc_runs(work: Path, mib: int, runs: int, threads: list[int]) -> dict[str, list]:
    from nczfs.fuse.control import read_control
    from tests.s3server import SeaweedS3

    server = SeaweedS3(work / "weed")
    os.environ.update(server.write_aws_files(work / "aws"))
    server.start()
    mnt, out = work / "ncm", work / "out.nc"
    mnt.mkdir()
    results: dict[str, list] = {"local .nc": [], **{f"nczfs .nc threads={t}": [] for t in threads}}
    try:
        bucket = server.new_bucket()
        store, local = make_data(work, mib, True)
        upload(server, bucket, store)
        for _ in range(runs):
            for t in threads:
                drop_caches()
                subprocess.run([*NCZFS, "mount", f"s3://{bucket}", str(mnt), "--read-only", "--nc-files",
                                "--endpoint-url", server.endpoint, *option(t)], check=True)
                try:
                    pid = read_control(str(mnt))["pid"]
                    results[f"nczfs .nc threads={t}"].append(timed(
                        lambda: subprocess.run(tool_cmd("ncks", mnt / "ds.zarr.nc", out), check=True),
                        server.proc.pid, pid))
                finally:
                    subprocess.run([*NCZFS, "umount", str(mnt)], check=True)
            drop_caches()
            results["local .nc"].append(timed(lambda: subprocess.run(tool_cmd("ncks", local, out), check=True),
                                              server.proc.pid, None))
    finally:
        if os.path.ismount(mnt):
            subprocess.run([*NCZFS, "umount", str(mnt)])
        server.stop()
    return results


def report(title: str, mib: int, results: dict[str, list], base: str, cpu_labels: tuple[str, str, str]) -> None:
    print(f"\n{title}")
    medians = {}
    for label, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        medians[label] = wall
        cpu = [statistics.median(r[i] for r in runs) for i in (1, 2, 3)]
        cpus = "  ".join(f"{n} {c:.2f}" for n, c in zip(cpu_labels, cpu) if n)
        print(f"  {label:24s} {wall:7.2f} s  {mib * MiB / 1e6 / wall:7.1f} MB/s   CPU s: {cpus}"
              f"   (runs: {', '.join(f'{r[0]:.2f}' for r in runs)})")
    one = [k for k in medians if k.endswith("threads=1")]
    for label, wall in medians.items():
        if one and label.startswith(one[0][:-1]) and label != one[0]:
            print(f"  speed-up {label.rsplit(' ', 1)[1]} over threads=1: {medians[one[0]] / wall:.2f}x")
        if base in medians and label != base and "threads" in label:
            print(f"  throughput {label} / {base}: {medians[base] / wall:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="decode pool sizes to compare (-o decode_threads=; 0: no option, "
                    "for a checkout before it)")
    ap.add_argument("--only", choices=("view", "nc"))
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{os.cpu_count()} cores; load average before {os.getloadavg()}", flush=True)
    t0 = time.time()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR", "/var/tmp")) as tmp:
        work = Path(tmp)
        if args.only in (None, "view"):
            results = {f"lz4 view threads={t}": [] for t in threads}
            for _ in range(args.runs):  # thread counts interleaved, one cold run each per round
                for t in threads:
                    results[f"lz4 view threads={t}"] += view_runs(work, args.mib, 1, t)
            report(f"the wheel reading {args.mib} MiB of lz4 float32 through --present netcdf-4.10 (directory), "
                   f"median of {args.runs} cold runs:", args.mib, results, "", ("", "daemon", "reader"))
        if args.only in (None, "nc"):
            results = nc_runs(work, args.mib, args.runs, threads)
            report(f"ncks extracting {args.mib} MiB of zlib float32 through ds.zarr.nc (S3), median of "
                   f"{args.runs} cold runs:", args.mib, results, "local .nc", ("server", "daemon", "ncks"))
    print(f"load average after {os.getloadavg()} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
