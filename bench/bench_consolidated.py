"""A single writer's cost of keeping consolidated metadata: zarr-python writes many small arrays
into one consolidated Zarr v2 group through an S3 mount, with two revisions' code in turn.

    .venv/bin/python bench/bench_consolidated.py OLD_REV [--arrays 100] [--rounds 3]

Each round mounts a fresh prefix of one SeaweedFS bucket (tests/s3server.py) with OLD_REV's code,
then with this checkout's (each a daemon with that tree first on its PYTHONPATH, as
bench/bench_ab.py does), makes the group (``.zgroup`` and an empty ``.zmetadata``, by boto3), and
times ``create_array`` of ``--arrays`` arrays of 16 bytes, each written (``arr[:] = ...``), with
``use_consolidated=False`` (the mount keeps ``.zmetadata`` current). Prints, per revision, the
median wall time and the S3 requests the daemon sent (``nczfs stats``), and checks the stored
``.zmetadata`` lists every array. Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_ab import checkout, drop_checkout  # noqa: E402
from tests.helpers import S3Backend, counts, delta, mounted  # noqa: E402
from tests.s3server import SeaweedS3  # noqa: E402


def one_round(backend: S3Backend, mnt: Path, arrays: int) -> tuple[float, dict[str, int]]:
    backend.put("g.zarr/.zgroup", b'{"zarr_format": 2}')
    backend.put("g.zarr/.zmetadata", b'{"metadata": {".zgroup": {"zarr_format": 2}}, "zarr_consolidated_format": 1}')
    with mounted(backend, mnt) as m:
        before = counts(m.path)
        t = time.perf_counter()
        g = zarr.open_group(str(m.path / "g.zarr"), mode="r+", zarr_format=2, use_consolidated=False)
        for i in range(arrays):
            a = g.create_array(f"a{i:03d}", shape=(8,), chunks=(8,), dtype="i2", attributes={"_ARRAY_DIMENSIONS": ["x"]})
            a[:] = np.arange(8, dtype="i2")
        took = time.perf_counter() - t
        after = counts(m.path)
        spent = {k: v for k, v in delta(before, after).items() if k[0].isupper() and v}
        spent["merged-again"] = after.get("consolidated.merged-again", -1)  # -1: code without it
    listed = {k.partition("/")[0] for k in json.loads(backend.read("g.zarr/.zmetadata"))["metadata"] if "/" in k}
    assert len(listed) == arrays, f"{arrays - len(listed)} arrays missing from .zmetadata"
    return took, spent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("--arrays", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-zmeta-"))
    trees = {args.old: checkout(args.old, work / "old"), "checkout": ROOT}
    server = SeaweedS3(work / "weed")
    os.environ.update(server.write_aws_files(work / "aws"))
    server.start()
    times: dict[str, list[float]] = {label: [] for label in trees}
    requests: dict[str, list[dict[str, int]]] = {label: [] for label in trees}
    try:
        bucket = server.new_bucket("zm")
        for rnd in range(args.rounds):
            for label, tree in trees.items():
                os.environ["PYTHONPATH"] = str(tree)
                os.chdir(tree)  # python -m nczfs puts its working directory first on sys.path
                backend = S3Backend(server, bucket, server.new_prefix(f"r{rnd}"))
                took, spent = one_round(backend, work / f"mnt-{label}-{rnd}", args.arrays)
                times[label].append(took)
                requests[label].append(spent)
                print(f"round {rnd + 1} {label}: {took:.3f} s {spent}", flush=True)
    finally:
        server.stop()
        drop_checkout(trees[args.old])
    for label, ts in times.items():
        medians = {k: statistics.median(r.get(k, 0) for r in requests[label]) for k in sorted({k for r in requests[label] for k in r})}
        print(f"{label}: {args.arrays} arrays, median {statistics.median(ts):.3f} s "
              f"({' '.join(f'{t:.3f}' for t in ts)}), requests (medians) {medians}")
    print(f"load average at the end {os.getloadavg()}, {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
