"""bench/bench_s3.py's fio jobs (bench/bench_fio.py) on tiny sizes, on a local folder standing in
for a mount: each job's fio command line runs with Debian's fio and reads or writes what it says,
and the create job waits until its files are listed. The whole harness (S3 server, mounts,
rclone, s3fs-fuse) runs with ``bench/bench_s3.py --quick``; this checks its fio part cheaply."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import bench_fio

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (scripts/install.sh --test)")


class FolderS3:
    """The two calls of an S3 client the jobs make, on a local folder: put_object, and listing."""

    def __init__(self, root: Path):
        self.root = root

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> None:
        path = self.root / Key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(Body)

    def get_paginator(self, name: str):
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket: str, Prefix: str):
        found = [p for p in self.root.rglob("*") if p.is_file() and str(p.relative_to(self.root)).startswith(Prefix)]
        yield {"Contents": [{"Key": str(p.relative_to(self.root)), "Size": p.stat().st_size} for p in found]}


class Paths:
    def __init__(self, root: Path):
        self.mnt, self.bucket, self.s3 = {"local": root}, "b", FolderS3(root)
        self.server = self  # the jobs write their data with ``p.server.client()``

    def client(self) -> FolderS3:
        return self.s3

    def listing_client(self) -> FolderS3:
        return self.s3


def test_every_fio_job_moves_what_it_says_and_counts_its_cpu_per_gib_or_requests(tmp_path, monkeypatch):
    p = Paths(tmp_path)
    bench_fio.put_data(p, mib=4, files=20, ttfb=5)
    assert (tmp_path / "fio" / "big.bin").stat().st_size == 4 * 1024 * 1024
    moved: list[tuple[int, int]] = []
    real = bench_fio.run_fio

    def recording(*args: str) -> dict:
        report = real(*args)
        moved.append((sum(j["read"]["io_bytes"] for j in report["jobs"]), sum(j["write"]["io_bytes"] for j in report["jobs"])))
        return report

    monkeypatch.setattr(bench_fio, "run_fio", recording)
    cases = bench_fio.cases(mib=4, reads=50, ttfb=5, files=20)
    assert [c.unit[0] for c in cases] == ["GiB", "GiB"] + ["10,000 requests"] * 5
    for case in cases:
        assert 0 <= case.fn(p, "local") < 60, case.name
    kib = 1024
    # sequential 4 MiB; 4 readers of 1 MiB; 50 random 4 KiB reads; 1 byte of 5 objects; 20 files
    # of 4 KiB written, then read (the listing runs ls, not fio)
    assert moved == [(4096 * kib, 0), (4096 * kib, 0), (200 * kib, 0), (5, 0), (0, 80 * kib), (80 * kib, 0)]
    created = [d for d in (tmp_path / "fio").iterdir() if d.name.startswith("created-local-")]
    assert len(created) == 1 and sorted(f.stat().st_size for f in created[0].iterdir()) == [4096] * 20


def test_a_job_fio_refuses_fails_the_run(tmp_path):
    with pytest.raises(Exception):
        bench_fio.fio("--name=x", f"--filename={tmp_path / 'missing'}", "--rw=read", "--readonly")


def test_only_takes_numbers_and_ranges_and_refuses_the_rest_before_a_server_starts(capsys):
    """``--only 1,2,8-14`` as the README writes it; a bad list is a usage error (exit 2), parsed
    before the benchmark starts SeaweedFS, so nothing is left running."""
    from bench import bench_s3

    assert bench_s3.workload_numbers(bench_s3.parse_args(["--only", "1,2,8-10"]).only) == {1, 2, 8, 9, 10}
    assert bench_s3.workload_numbers("") == set()
    with pytest.raises(SystemExit) as stop:
        bench_s3.main(["--only", "8-x"])
    assert stop.value.code == 2
    assert "--only: '8-x': not a comma list" in capsys.readouterr().err
