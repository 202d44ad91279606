"""Icechunk backend: the read workloads of bench_s3.py on an Icechunk repository on S3, next to the
same data as plain Zarr v3 in the same bucket, through nczfs and directly.

    .venv/bin/pip install -e ".[bench]"
    .venv/bin/python bench/bench_icechunk.py [--mib 256] [--small 4000] [--preads 1000] [--runs 3]
    .venv/bin/python bench/bench_icechunk.py --labels nczfs-icechunk,icechunk --base main   # before/after

Starts its own SeaweedFS on 127.0.0.1 (tests/s3server.py) and writes, with zarr-python, one big
array (8 MiB chunks, uncompressed) and one of many 4 KiB chunks twice: into an Icechunk repository
(one commit) and as plain Zarr v3 objects. Paths:

- ``nczfs-icechunk``: ``nczfs mount icechunk+s3://bucket/repo`` (read-only mount of main);
- ``nczfs-zarr``: ``nczfs mount s3://bucket`` over the plain copy (read-only);
- ``icechunk``: zarr-python over ``icechunk``'s own store, a fresh Repository each run (the direct
  path to the repository, nczfs's peer);
- ``zarr-s3``: zarr-python + fsspec ``s3fs`` over the plain copy (written only when this path or
  ``nczfs-zarr`` runs);
- ``nczfs-base`` (``--base REV``): the ``nczfs-icechunk`` mount running REV's code (a git worktree
  first on its daemon's PYTHONPATH), so that a change's before and after meet one server and load.

Each workload: one warm-up, then --runs cold runs (a fresh mount or client, page cache dropped),
the paths taking turns run by run;
the big read is also repeated warm in the same mount. Prints medians, the ratios
icechunk/nczfs-icechunk and nczfs-zarr/nczfs-icechunk (>1: the Icechunk mount is faster), and
the CPU seconds of the S3 server, the FUSE daemon and the reader.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_s3 import (  # noqa: E402
    CHUNK, MiB, Run, clean_up, count_listed, keep_medians, measure, pick_preads, print_walls, read_picks)
from tests.s3server import ADMIN, SeaweedS3  # noqa: E402

NCZFS = [sys.executable, "-m", "nczfs"]
LABELS = ("nczfs-icechunk", "nczfs-zarr", "icechunk", "zarr-s3")
#: the labels that read the plain Zarr copy
PLAIN = ("nczfs-zarr", "zarr-s3")


class Paths:
    def __init__(self, server: SeaweedS3, bucket: str, work: Path):
        self.server, self.bucket, self.work = server, bucket, work
        self.mnt = {"nczfs-icechunk": work / "mnt-icechunk", "nczfs-zarr": work / "mnt-zarr",
                    "nczfs-base": work / "mnt-base"}
        for m in self.mnt.values():
            m.mkdir()
        #: the code "nczfs-base" runs (``--base``)
        self.base: Path | None = None

    def source(self, label: str) -> str:
        return f"s3://{self.bucket}/plain" if label == "nczfs-zarr" else f"icechunk+s3://{self.bucket}/repo"

    def mount(self, label: str) -> None:
        env = dict(os.environ) | ({"PYTHONPATH": str(self.base)} if label == "nczfs-base" and self.base else {})
        # run in the tree whose code it is (python -m puts the working directory first on sys.path)
        subprocess.run([*NCZFS, "mount", self.source(label), str(self.mnt[label]), "--read-only",
                        "--endpoint-url", self.server.endpoint], check=True,
                       env=env, cwd=env.get("PYTHONPATH", "").split(os.pathsep)[0] or None)

    def umount(self, label: str) -> None:
        subprocess.run([*NCZFS, "umount", str(self.mnt[label])], check=True)

    def daemon_pid(self, label: str) -> int | None:
        if label not in self.mnt:
            return None
        from nczfs.fuse.control import read_control

        return read_control(str(self.mnt[label]))["pid"]

    def storage(self):
        import icechunk

        return icechunk.s3_storage(bucket=self.bucket, prefix="repo", endpoint_url=self.server.endpoint,
                                   allow_http=True, region="us-east-1", access_key_id=ADMIN[0],
                                   secret_access_key=ADMIN[1], force_path_style=True)

    def fs(self, asynchronous: bool = False):
        import s3fs

        return s3fs.S3FileSystem(key=ADMIN[0], secret=ADMIN[1], skip_instance_cache=True, asynchronous=asynchronous,
                                 client_kwargs={"endpoint_url": self.server.endpoint, "region_name": "us-east-1"})

    def array(self, label: str, name: str):
        if label in self.mnt:
            return zarr.open_array(zarr.storage.LocalStore(self.mnt[label] / name, read_only=True), mode="r")
        if label == "icechunk":
            import icechunk

            session = icechunk.Repository.open(self.storage()).readonly_session(branch="main")
            return zarr.open_array(session.store, path=name, mode="r")
        store = zarr.storage.FsspecStore(self.fs(asynchronous=True), path=f"{self.bucket}/plain/{name}", read_only=True)
        return zarr.open_array(store, mode="r")


def write_data(p: Paths, mib: int, small: int, plain: bool) -> None:
    import icechunk

    n = mib * MiB // 4
    repo = icechunk.Repository.create(p.storage())
    session = repo.writable_session("main")
    stores = [session.store]
    if plain:
        stores.append(zarr.storage.FsspecStore(p.fs(asynchronous=True), path=f"{p.bucket}/plain", read_only=False))
    for store in stores:
        big = zarr.create_array(store, name="big", shape=(n,), chunks=(CHUNK,), dtype="f4", compressors=None,
                                zarr_format=3)
        big[:] = np.arange(n, dtype="f4")
        s = zarr.create_array(store, name="small", shape=(small * 1024,), chunks=(1024,), dtype="f4",
                              compressors=None, zarr_format=3)
        s[:] = 1.0
    session.commit("bench data")


def read_big(p: Paths, label: str) -> float:
    t = time.perf_counter()
    assert float(p.array(label, "big")[:].sum(dtype="f8")) > 0
    return time.perf_counter() - t


def read_small(p: Paths, label: str) -> float:
    t = time.perf_counter()
    a = p.array(label, "small")
    assert float(a[:].sum()) == a.size
    return time.perf_counter() - t


def list_small(p: Paths, label: str) -> float:
    t = time.perf_counter()
    if label == "icechunk":
        import icechunk

        store = icechunk.Repository.open(p.storage()).readonly_session(branch="main").store

        async def count() -> int:
            return len([k async for k in store.list_prefix("small")])

        n = zarr.core.sync.sync(count())
    else:
        n = count_listed(p, label, "small" if label in p.mnt else "plain/small")
    assert n > 100
    return time.perf_counter() - t


def random_preads(p: Paths, label: str, count: int, mib: int) -> float:
    """``count`` reads of 4 KiB at random offsets of the big array's chunks, each its own open."""
    picks = pick_preads(count, mib)
    t = time.perf_counter()
    if label != "icechunk":
        read_picks(p, label, "big/c" if label in p.mnt else "plain/big/c", picks)
    else:
        import icechunk
        from zarr.abc.store import RangeByteRequest
        from zarr.core.buffer import default_buffer_prototype

        store = icechunk.Repository.open(p.storage()).readonly_session(branch="main").store

        async def reads() -> None:
            for c, off in picks:
                buf = await store.get(f"big/c/{c}", default_buffer_prototype(), RangeByteRequest(off, off + 4096))
                assert len(buf) == 4096

        zarr.core.sync.sync(reads())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--small", type=int, default=4000)
    ap.add_argument("--preads", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--labels", default=",".join(LABELS))
    ap.add_argument("--base", default="", help="a git revision: the nczfs-base path runs its code (added to --labels)")
    args = ap.parse_args()
    labels = args.labels.split(",") + (["nczfs-base"] if args.base and "nczfs-base" not in args.labels else [])
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-icechunk-"))
    server = SeaweedS3(work / "weed")
    os.environ.update(server.write_aws_files(work / "aws"))
    server.start()
    rows: dict[str, dict[str, Run]] = {}
    base: Path | None = None
    try:
        p = Paths(server, server.new_bucket("bench"), work)
        if args.base:
            from bench.bench_ab import checkout

            p.base = base = checkout(args.base, work / "base")
        print(f"load average {os.getloadavg()}", flush=True)
        write_data(p, args.mib, args.small, any(label in PLAIN for label in labels))
        cases = [
            (f"read {args.mib} MiB array (8 MiB chunks)", read_big, True),
            (f"read {args.small:,} chunks of 4 KiB", read_small, False),
            (f"list {args.small:,} chunks (mounts: ls -lR)", list_small, False),
            (f"{args.preads:,} random 4 KiB reads in the chunks", lambda p, l: random_preads(p, l, args.preads, args.mib), False),
        ]
        for name, fn, warm in cases:
            # the paths take turns run by run, so that a change of the host's load meets them all
            for label, (cold, hot) in measure(p, labels, fn, args.runs, warm).items():  # type: ignore[arg-type]
                keep_medians(rows, name, label, cold, hot if label in p.mnt else [])
        print(f"load average {os.getloadavg()}", flush=True)
    finally:
        clean_up(work, server, base)

    pairs = [(o, "nczfs-icechunk") for o in ("icechunk", "nczfs-zarr", "zarr-s3", "nczfs-base")
             if o in labels and "nczfs-icechunk" in labels]
    print_walls(rows, labels, pairs, args.runs)
    print(f"\n| CPU seconds (median of {args.runs}) | path | wall | S3 server | FUSE daemon | reader |")
    print("|---|---|---:|---:|---:|---:|")
    for name, r in rows.items():
        for label, run in r.items():
            print(f"| {name} | {label} | {run.wall:.3f} | {run.server:.2f} | {run.daemon:.2f} | {run.reader:.2f} |")


if __name__ == "__main__":
    main()
