"""Zip backend: reading a stored-member archive through the mount vs ``zipfile``; commit cost vs ``cp``.

    .venv/bin/python bench/bench_zip.py [--read-mib 512] [--base-mib 1024] [--add-mib 100] [--runs 3]

1. read: an archive of --read-mib MiB in 8 MiB stored members (netCDF-C's layout), every member
   read in full through an nczfs mount (plain file reads) vs with ``zipfile`` directly.
2. commit: --add-mib MiB of new 8 MiB members written into a mount of a --base-mib MiB archive,
   then ``nczfs sync`` (new archive written, fsynced, renamed), timed from the sync call; vs
   ``cp`` of the archive plus ``sync`` of the copy (the floor for rewriting it).

Cold runs (page cache dropped before each, needs root), medians of --runs; files live in a
temporary directory under /tmp and are deleted at the end. Not run in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from bench_directory import drop_caches  # bench/ is on sys.path when run as a script

NCZFS = [sys.executable, "-m", "nczfs"]
MEMBER = 8 << 20


def make_archive(path: Path, mib: int) -> list[str]:
    names = []
    block = os.urandom(MEMBER)
    with zipfile.ZipFile(path, "w") as zf:  # stored, as netCDF-C writes
        zf.mkdir(path.name[:-4] + "/")
        for i in range(mib * (1 << 20) // MEMBER):
            name = f"{path.name[:-4]}/v/{i}"
            zf.writestr(name, block[i % 7:] + block[: i % 7])
            names.append(name)
    return names


def read_direct(path: Path, names: list[str]) -> float:
    t = time.perf_counter()
    with zipfile.ZipFile(path) as zf:
        total = sum(len(zf.read(n)) for n in names)
    assert total == len(names) * MEMBER
    return time.perf_counter() - t


def read_mount(mnt: Path, names: list[str]) -> float:
    t = time.perf_counter()
    total = 0
    for n in names:
        with open(mnt / n.split("/", 1)[1], "rb") as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
    assert total == len(names) * MEMBER
    return time.perf_counter() - t


def median(f, runs: int) -> float:
    f()  # warm-up
    return statistics.median(f() for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--read-mib", type=int, default=512)
    ap.add_argument("--base-mib", type=int, default=1024)
    ap.add_argument("--add-mib", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="bench_zip.") as tmp:
        tmp = Path(tmp)
        mnt = tmp / "mnt"
        mnt.mkdir()
        rows = []

        archive = tmp / "read.zip"
        names = make_archive(archive, args.read_mib)

        def direct() -> float:
            drop_caches()
            return read_direct(archive, names)

        def mounted() -> float:
            subprocess.run([*NCZFS, "mount", "--read-only", str(archive), str(mnt)], check=True)
            try:
                drop_caches()
                return read_mount(mnt, names)
            finally:
                subprocess.run([*NCZFS, "umount", str(mnt)], check=True)

        rows.append((f"read {args.read_mib} MiB stored zip (8 MiB members)", median(direct, args.runs), median(mounted, args.runs)))
        archive.unlink()

        base = tmp / "base.zip"
        make_archive(base, args.base_mib)
        work = tmp / "work.zip"
        new = os.urandom(MEMBER)

        def cp() -> float:
            drop_caches()
            t = time.perf_counter()
            subprocess.run(["cp", str(base), str(work)], check=True)
            subprocess.run(["sync", str(work)], check=True)
            dt = time.perf_counter() - t
            work.unlink()
            return dt

        def commit() -> float:
            subprocess.run(["cp", str(base), str(work)], check=True)
            subprocess.run([*NCZFS, "mount", str(work), str(mnt)], check=True)
            try:
                for i in range(args.add_mib * (1 << 20) // MEMBER):
                    (mnt / f"added/{i}").parent.mkdir(exist_ok=True)
                    (mnt / f"added/{i}").write_bytes(new)
                drop_caches()
                t = time.perf_counter()
                subprocess.run([*NCZFS, "sync", str(mnt)], check=True)
                dt = time.perf_counter() - t
            finally:
                subprocess.run([*NCZFS, "umount", str(mnt)], check=True)
            with zipfile.ZipFile(work) as zf:
                assert len(zf.namelist()) > args.base_mib // 8
            work.unlink()
            return dt

        rows.append((f"add {args.add_mib} MiB to a {args.base_mib} MiB zip: commit vs cp", median(cp, args.runs), median(commit, args.runs)))

    print(f"| workload (median of {args.runs} cold runs) | direct s | nczfs s | nczfs/direct |")
    print("|---|---:|---:|---:|")
    for name, d, n in rows:
        print(f"| {name} | {d:.3f} | {n:.3f} | {n / d:.2f} |")


if __name__ == "__main__":
    main()
