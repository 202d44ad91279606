"""A/B of two commits on one S3 server: the same bench_s3 workload through an nczfs mount of each, in turn.

    .venv/bin/python bench/bench_ab.py OLD_REV [NEW_REV] [--workload ncdump|write|cp] [--rounds 5]

Tells whether a change of a benchmark's time comes from the code or from the host: each round
mounts the bucket with OLD_REV's code, runs the workload cold (page cache dropped), unmounts,
then the same with NEW_REV's (default: this checkout), so both meet the same server, data and
load. The code of a revision is a ``git worktree`` in a temp directory, put first on the daemon's
PYTHONPATH (the revision must run with this venv's packages). Workloads, as bench/bench_s3.py
runs them: ``ncdump`` (Debian ``ncdump -h`` of a 60-array dataset), ``write`` (zarr-python
writes a 128 MiB array of 8 MiB chunks, durable), ``cp`` (of a 128 MiB file, durable). Prints
each round and the medians. Not part of CI.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import bench_s3  # noqa: E402
from bench.bench_directory import drop_caches  # noqa: E402
from tests.s3server import SeaweedS3  # noqa: E402


def checkout(rev: str, where: Path) -> Path:
    """A worktree of ``rev`` (removed by :func:`drop_checkout`)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), rev], check=True)
    return where


def drop_checkout(where: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)


def run_once(p: bench_s3.Paths, workload: str, big: Path) -> float:
    if workload == "write":
        return bench_s3.write_array(p, "nczfs", 128)
    if workload == "cp":
        return bench_s3.copy_file(p, "nczfs", big)
    return bench_s3.header_of_many(p, "nczfs")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default="", help="a revision (default: this checkout as it is)")
    ap.add_argument("--workload", choices=("ncdump", "write", "cp"), default="ncdump")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-ab-"))
    trees = {args.old: checkout(args.old, work / "old")}
    trees[args.new or "checkout"] = checkout(args.new, work / "new") if args.new else ROOT
    server = SeaweedS3(work / "weed")
    os.environ.update(server.write_aws_files(work / "aws"))
    server.start()
    big = Path(f"/dev/shm/nczfs-bench-ab-{os.getpid()}.bin")
    times: dict[str, list[float]] = {label: [] for label in trees}
    try:
        p = bench_s3.Paths(server, server.new_bucket("ab"), work, [])
        if args.workload == "ncdump":
            bench_s3.write_many_arrays(p, 60)
        big.write_bytes(bench_s3.random_data(128).tobytes())
        for rnd in range(args.rounds):
            for label, tree in trees.items():
                p.env["PYTHONPATH"] = str(tree)
                p.mount("nczfs")
                try:
                    drop_caches()
                    times[label].append(run_once(p, args.workload, big))
                finally:
                    p.umount("nczfs")
                print(f"round {rnd + 1} {label}: {times[label][-1]:.3f} s", flush=True)
    finally:
        big.unlink(missing_ok=True)
        server.stop()
        for tree in trees.values():
            if tree != ROOT:
                drop_checkout(tree)
    for label, ts in times.items():
        print(f"{args.workload} {label}: median {statistics.median(ts):.3f} s of {len(ts)} "
              f"({' '.join(f'{t:.3f}' for t in ts)})")
    print(f"load average at the end {os.getloadavg()}, {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
