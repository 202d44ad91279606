"""Directory backend: read/write a Zarr array through an nczfs mount vs the local directory directly.

    .venv/bin/python bench/bench_directory.py [--mib 256] [--runs 3] [--only read,small,walk,write]

Cold runs: unmount (nczfs) and drop the page cache (`echo 3 > /proc/sys/vm/drop_caches`,
needs root) before each measured read run; one warm-up run first; the direct path and the
mount alternate run by run; medians of --runs.
Prints a table of seconds, the ratio nczfs/direct of the times (lower is better) and its
inverse, the mount's throughput as a fraction of the direct path's (issue #6 asks >= 0.6x for the
big read).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import zarr

NCZFS = [sys.executable, "-m", "nczfs"]


def drop_caches() -> None:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        print("warning: cannot drop caches (not root?): runs are warm", file=sys.stderr)


def mount(src: Path, mnt: Path) -> None:
    subprocess.run([*NCZFS, "mount", str(src), str(mnt)], check=True)


def umount(mnt: Path) -> None:
    subprocess.run([*NCZFS, "umount", str(mnt)], check=True)


def read_array(root: Path) -> float:
    t = time.perf_counter()
    a = zarr.open_array(zarr.storage.LocalStore(root / "big.zarr"), mode="r")
    total = float(a[:].sum(dtype="f8"))
    assert total >= 0
    return time.perf_counter() - t


def read_small(root: Path) -> float:
    t = time.perf_counter()
    a = zarr.open_array(zarr.storage.LocalStore(root / "small.zarr"), mode="r")
    a[:]
    return time.perf_counter() - t


def walk(root: Path) -> float:
    t = time.perf_counter()
    n = sum(len(files) for _, _, files in os.walk(root / "small.zarr"))
    assert n > 0
    return time.perf_counter() - t


def write_array(root: Path, mib: int) -> float:
    target = root / "written.zarr"
    shutil.rmtree(target, ignore_errors=True)
    data = np.random.default_rng(1).random(mib * 1024 * 1024 // 4, dtype="f4")
    t = time.perf_counter()
    a = zarr.create_array(zarr.storage.LocalStore(target), shape=data.shape, chunks=(2 * 1024 * 1024,),
                          dtype="f4", compressors=None, zarr_format=2)
    a[:] = data
    os.sync()
    dt = time.perf_counter() - t
    shutil.rmtree(target)
    return dt


#: the words ``--only`` takes, in the order their cases run
CASES = ("read", "small", "walk", "write")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="", help="the cases to run, by a word of their names: read (the big array), "
                    "small (2,000 chunks of 4 KiB), walk, write; comma-separated (default: all)")
    args = ap.parse_args()
    only = {w for w in args.only.split(",") if w}
    if only - set(CASES):
        ap.error(f"--only: unknown cases {sorted(only - set(CASES))} (known: {', '.join(CASES)})")
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-"))
    src, mnt = work / "src", work / "mnt"
    src.mkdir()
    mnt.mkdir()
    n = args.mib * 1024 * 1024 // 4
    if not only or "read" in only:
        big = zarr.create_array(zarr.storage.LocalStore(src / "big.zarr"), shape=(n,), chunks=(2 * 1024 * 1024,),
                                dtype="f4", compressors=None, zarr_format=2)
        big[:] = np.arange(n, dtype="f4")
    small = zarr.create_array(zarr.storage.LocalStore(src / "small.zarr"), shape=(2000 * 1024,),
                              chunks=(1024,), dtype="f4", compressors=None, zarr_format=2)
    small[:] = 1.0

    write_name = f"write {args.mib // 2} MiB array (8 MiB chunks), durable"
    named: dict[str, tuple[str, Callable[[Path], float]]] = {  # by the word --only takes
        "read": (f"read {args.mib} MiB array (8 MiB chunks)", read_array),
        "small": ("read 2,000 chunks of 4 KiB", read_small),
        "walk": ("walk 2,000 chunk files (os.walk)", walk),
        "write": (write_name, lambda root: write_array(root, args.mib // 2)),
    }
    results: dict[str, dict[str, list[float]]] = {}

    def run(label: str, fn: Callable[[Path], float], cold: bool) -> float:
        if cold:
            drop_caches()
        if label == "nczfs":
            mount(src, mnt)
        try:
            return fn(mnt if label == "nczfs" else src)
        finally:
            if label == "nczfs":
                umount(mnt)

    cases = dict(named[word] for word in CASES if not only or word in only)
    try:
        for name, fn in cases.items():
            for i in range(args.runs + 1):  # the two paths alternate, so that a change in the host's load hits both
                for label in ("direct", "nczfs"):
                    dt = run(label, fn, cold=name != write_name)
                    if i:  # the first run of each is a warm-up
                        results.setdefault(name, {}).setdefault(label, []).append(dt)
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"\n| workload (directory backend, median of {args.runs} cold runs) | direct s | nczfs s | nczfs/direct time | throughput vs direct |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        d, z = statistics.median(r["direct"]), statistics.median(r["nczfs"])
        print(f"| {name} | {d:.3f} | {z:.3f} | {z / d:.2f} | {d / z:.2f}x |")


if __name__ == "__main__":
    main()
