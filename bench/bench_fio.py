"""fio jobs for bench_s3.py, modelled on mountpoint-s3's benchmark suite (its ``scripts/fio``:
``read/seq_read.fio``, ``read/seq_read_4t.fio``, ``read/rand_read.fio``,
``read_latency/ttfb.fio``, ``create/create_files_*.fio``, and the listing of
``fs_latency_bench.sh``), sized by amount instead of by time so that each path does the same
work and the times compare (the time of a job: fio's ``job_runtime`` of its slowest job, which
leaves out fio's start-up; the create's adds the wait until its files are listed):

- sequential read of one object of --fio-mib MiB, 256 KiB reads (``seq_read``);
- 4 readers in parallel, each its own object of a quarter of that (``seq_read_4t``);
- --fio-reads random reads of 4 KiB in the big object, one reader (``rand_read``, 4 KiB);
- time to first byte: 1 byte read from each of --fio-ttfb objects, one open at a time (``ttfb``);
- --fio-files files of 4 KiB created, one open at a time (``create_files``, with data), durable:
  listed by another client; then the same number of files of 4 KiB read (written beforehand);
- the listing of those files' folder: ``ls -f`` (names only, one readdir pass).

Debian's ``fio`` (``apt-get install fio``); every job ``ioengine=sync``, ``fallocate=none``,
reads ``--readonly``. Each workload says what its daemon CPU is counted per: GiB or requests.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any, Callable, NamedTuple

from bench.bench_peers import wait_listed

KiB, MiB = 1024, 1024 * 1024
ROOT = "fio"
READ = ["--ioengine=sync", "--readonly", "--invalidate=1"]


class FioCase(NamedTuple):
    name: str
    fn: Callable[[Any, str], float]
    writes: bool
    #: what the daemon's CPU is counted per: ("GiB", GiB moved) or ("10,000 requests", requests / 10,000)
    unit: tuple[str, float]


def run_fio(*args: str) -> dict[str, Any]:
    """Run fio; its JSON report."""
    out = subprocess.run(["fio", "--output-format=json", *args], check=True, capture_output=True).stdout
    return json.loads(out[out.index(b"{"):])


def fio(*args: str) -> float:
    """Run fio; the seconds its slowest job ran (fio's own start-up, ~0.6 s here, left out)."""
    return max(job["job_runtime"] for job in run_fio(*args)["jobs"]) / 1000


def put_data(p: Any, mib: int, files: int, ttfb: int) -> None:
    """The objects the read jobs read, written by an S3 client."""
    c = p.server.client()
    big = bytes(range(256)) * (mib * MiB // 256)
    c.put_object(Bucket=p.bucket, Key=f"{ROOT}/big.bin", Body=big)
    for i in range(4):
        c.put_object(Bucket=p.bucket, Key=f"{ROOT}/par/r{i}", Body=big[: mib * MiB // 4])
    for i in range(ttfb):
        c.put_object(Bucket=p.bucket, Key=f"{ROOT}/ttfb/f.{i}", Body=big[:256 * KiB])
    for i in range(files):
        c.put_object(Bucket=p.bucket, Key=f"{ROOT}/small/f.{i}", Body=big[: 4 * KiB])


def cases(mib: int, reads: int, ttfb: int, files: int) -> list[FioCase]:
    def seq(p: Any, label: str) -> float:
        return fio(*READ, "--name=seq", f"--filename={p.mnt[label] / ROOT / 'big.bin'}", "--rw=read", "--bs=256k")

    def par(p: Any, label: str) -> float:
        jobs = [a for i in range(4) for a in (f"--name=r{i}", f"--filename={p.mnt[label] / ROOT / 'par' / f'r{i}'}")]
        return fio(*READ, "--rw=read", "--bs=256k", *jobs)

    def rand(p: Any, label: str) -> float:
        return fio(*READ, "--name=rand", f"--filename={p.mnt[label] / ROOT / 'big.bin'}", "--rw=randread",
                         "--bs=4k", f"--io_size={reads * 4}k", "--randrepeat=1", "--norandommap")

    def first_byte(p: Any, label: str) -> float:
        return fio(*READ, "--name=ttfb", f"--directory={p.mnt[label] / ROOT / 'ttfb'}", "--filename_format=f.$filenum",
                         f"--nrfiles={ttfb}", "--filesize=1", "--rw=read", "--bs=1", "--openfiles=1")

    def create(p: Any, label: str) -> float:
        folder = f"{ROOT}/created-{label}-{time.monotonic_ns()}"
        (p.mnt[label] / folder).mkdir(parents=True)
        ran = fio("--ioengine=sync", "--fallocate=none", "--name=create", f"--directory={p.mnt[label] / folder}",
            "--filename_format=f.$filenum", f"--nrfiles={files}", "--filesize=4k", "--rw=write", "--bs=4k",
            "--openfiles=1", "--create_on_open=1")
        t = time.perf_counter()
        wait_listed(p.listing_client(), p.bucket, {f"{folder}/f.{i}": 4 * KiB for i in range(files)})
        return ran + time.perf_counter() - t

    def read_small(p: Any, label: str) -> float:
        return fio(*READ, "--name=small", f"--directory={p.mnt[label] / ROOT / 'small'}", "--filename_format=f.$filenum",
                         f"--nrfiles={files}", "--filesize=4k", "--rw=read", "--bs=4k", "--openfiles=1")

    def listing(p: Any, label: str) -> float:
        t = time.perf_counter()
        out = subprocess.run(["ls", "-f", str(p.mnt[label] / ROOT / "small")], check=True, capture_output=True).stdout
        assert out.count(b"\n") >= files
        return time.perf_counter() - t

    gib = mib / 1024
    return [
        FioCase(f"fio: sequential read of one {mib} MiB object", seq, False, ("GiB", gib)),
        FioCase(f"fio: 4 readers in parallel, {mib // 4} MiB each", par, False, ("GiB", gib)),
        FioCase(f"fio: {reads:,} random 4 KiB reads", rand, False, ("10,000 requests", reads / 1e4)),
        FioCase(f"fio: time to first byte of {ttfb} objects", first_byte, False, ("10,000 requests", ttfb / 1e4)),
        FioCase(f"fio: create {files:,} files of 4 KiB, durable", create, True, ("10,000 requests", files / 1e4)),
        FioCase(f"fio: read {files:,} files of 4 KiB", read_small, False, ("10,000 requests", files / 1e4)),
        FioCase(f"fio: ls -f of {files:,} files", listing, False, ("10,000 requests", files / 1e4)),
    ]


def check_fio() -> None:
    """fio must be installed: the workloads need it."""
    try:
        subprocess.run(["fio", "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit("bench_s3.py --fio needs fio: apt-get install fio") from exc


