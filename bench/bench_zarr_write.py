"""The issue #33 workload, exactly: zarr-python writes then reads 128 MiB through nczfs and s3fs-fuse.

    .venv/bin/python bench/bench_zarr_write.py [--runs 5] [--zarr-format 3] [--https] [--busy 0]

``zarr.create_array(LocalStore(MOUNT/name), shape=(32 Mi,), chunks=(2 Mi,), dtype="f4",
compressors=None)`` then ``arr[:] = data``: 16 chunks of 8 MiB, durable in S3 when it returns
(both file systems upload at close); then, on a fresh mount with the page cache dropped, the
whole array read back (``arr[:]``, 128 MiB cold). One SeaweedFS on loopback (tests/s3server.py;
``--https``: its TLS port, a private CA's certificate), both paths in one run, interleaved
(nczfs, s3fs-fuse, nczfs, ...), one warm-up each. ``--busy N`` keeps N processes spinning on
the CPU throughout, as a machine shared with others is. Prints medians of wall time and of the
CPU seconds of the FUSE daemon and the S3 server, the ratio s3fs-fuse / nczfs (>1: nczfs is
faster) and the daemon's CPU per GiB written and read. Needs ``apt-get install s3fs`` and the
``bench`` extra. Not part of CI.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from bench.bench_s3 import Paths, cpu_seconds  # noqa: E402
from tests.s3server import SeaweedS3  # noqa: E402

MiB = 1024 * 1024
LABELS = ("nczfs", "s3fs-fuse")


def spin() -> None:
    while True:
        pass


class PutTimes:
    """Seconds zarr-python's LocalStore spends per object written: in all (``_put``: open the
    temp file, write, close, rename) and in the rename alone (``Path.replace``), summed over
    the objects of a write (they are written several at a time: sums exceed the wall time)."""

    def __init__(self) -> None:
        import pathlib

        import zarr.storage._local as local

        self.put = self.rename = 0.0
        self.renames: list[float] = []
        real_put, real_replace = local._put, pathlib.Path.replace

        def put(*args, **kwargs):
            t = time.perf_counter()
            try:
                return real_put(*args, **kwargs)
            finally:
                self.put += time.perf_counter() - t

        def replace(path, target):
            t = time.perf_counter()
            try:
                return real_replace(path, target)
            finally:
                self.renames.append(time.perf_counter() - t)

        local._put = put
        pathlib.Path.replace = replace

    def take(self) -> dict[str, float]:
        out = {"in-put": self.put, "in-rename": sum(self.renames),
               "rename-max": max(self.renames, default=0.0)}
        self.put, self.renames = 0.0, []
        return out


TIMES: PutTimes | None = None


def one_run(m: Paths, label: str, data: np.ndarray, zarr_format: int) -> dict[str, float]:
    name = f"w-{label}-{time.monotonic_ns()}.zarr"
    drop_caches()
    m.mount(label)
    pid = m.daemon_pid(label)
    server = m.server.proc.pid
    try:
        d0, s0, t0 = cpu_seconds(pid), cpu_seconds(server), time.perf_counter()
        arr = zarr.create_array(zarr.storage.LocalStore(m.mnt[label] / name), shape=data.shape, chunks=(2 * MiB,),
                                dtype="f4", compressors=None, zarr_format=zarr_format)
        TIMES.take()
        arr[:] = data
        out = {"write": time.perf_counter() - t0, "write-daemon": cpu_seconds(pid) - d0,
               "write-server": cpu_seconds(server) - s0, **TIMES.take()}
    finally:
        m.umount(label)
    drop_caches()
    m.mount(label)
    pid = m.daemon_pid(label)
    try:
        d0, s0, t0 = cpu_seconds(pid), cpu_seconds(server), time.perf_counter()
        got = zarr.open_array(zarr.storage.LocalStore(m.mnt[label] / name, read_only=True), mode="r")[:]
        out |= {"read": time.perf_counter() - t0, "read-daemon": cpu_seconds(pid) - d0,
                "read-server": cpu_seconds(server) - s0}
        assert np.array_equal(got, data)
    finally:
        m.umount(label)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--zarr-format", type=int, default=3, help="zarr-python's default is 3")
    ap.add_argument("--https", action="store_true")
    ap.add_argument("--busy", type=int, default=0, help="processes spinning on the CPU during the runs")
    args = ap.parse_args()
    global TIMES
    TIMES = PutTimes()
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-zw-"))
    server = SeaweedS3(work / "weed", tls=args.https)
    os.environ.update(server.write_aws_files(work / "aws"))
    server.start()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    results: dict[str, list[dict[str, float]]] = {label: [] for label in LABELS}
    try:
        m = Paths(server, server.new_bucket("zw"), work, [], https=args.https)
        data = np.random.default_rng(1).random(args.mib * MiB // 4, dtype="f4")
        for i in range(args.runs + 1):
            for label in LABELS:
                r = one_run(m, label, data, args.zarr_format)
                print(f"run {i} {label}: " + " ".join(f"{k} {v:.3f}" for k, v in r.items()), file=sys.stderr)
                if i:
                    results[label].append(r)
    finally:
        for p in spinners:
            p.terminate()
        for mnt in work.glob("mnt-*"):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
        server.stop()
        subprocess.run(["rm", "-rf", str(work)])

    med = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for label, rs in results.items()}
    gib = args.mib / 1024
    scheme = "https" if args.https else "http"
    print(f"\n| zarr v{args.zarr_format}, {args.mib} MiB in 8 MiB chunks, S3 over {scheme}, {args.busy} busy processes, "
          f"median of {args.runs} | nczfs | s3fs-fuse | s3fs-fuse/nczfs |")
    print("|---|---:|---:|---:|")
    for what in ("write", "read"):
        n, s = med["nczfs"], med["s3fs-fuse"]
        print(f"| {what} (cold), s | {n[what]:.3f} | {s[what]:.3f} | {s[what] / n[what]:.2f} |")
        print(f"| {what}: FUSE daemon CPU s | {n[what + '-daemon']:.2f} | {s[what + '-daemon']:.2f} | |")
        print(f"| {what}: S3 server CPU s | {n[what + '-server']:.2f} | {s[what + '-server']:.2f} | |")
        print(f"| {what}: daemon CPU s per GiB | {n[what + '-daemon'] / gib:.2f} | {s[what + '-daemon'] / gib:.2f} | |")
        if what == "write":
            for k, text in (("in-put", "zarr's puts, summed"), ("in-rename", "of which renames"),
                            ("rename-max", "slowest rename")):
                print(f"| write: {text}, s | {n[k]:.3f} | {s[k]:.3f} | |")
    print(f"\nload average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
