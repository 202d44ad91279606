"""bench/bench_floor.py on tiny sizes, warm (no page cache dropped, the machine's benchmarks left
alone): every path mounts, is read by both readers and unmounts, and the minimal pyfuse3 daemon
(bench/floorfs.py) counts the requests a small file costs: 5 with FLUSH answered, 4 without;
the Icechunk paths each read the array's values right."""

from __future__ import annotations

import shutil

import pytest

from bench import bench_floor

pytestmark = pytest.mark.fuse


def table(out: str) -> dict[tuple[str, str], dict[str, str]]:
    """The printed tables' rows, by (reader, path): {column: cell}."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    head: list[str] = []
    for line in out.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "reader":
            head = cells
        else:
            rows[(cells[0], cells[1])] = dict(zip(head, cells))
    return rows


def test_the_directory_paths_each_read_every_file_and_the_floor_counts_its_requests(capsys):
    bench_floor.main(["--only", "dir", "--files", "40", "--runs", "1", "--warm",
                      "--labels", "direct,floor,floor-noflush,floor-plain,floor-disk,nczfs,nczfs-ro"])
    rows = table(capsys.readouterr().out)
    labels = ["direct", "floor", "floor-noflush", "floor-plain", "floor-disk", "nczfs", "nczfs-ro"]
    assert sorted(rows) == sorted((r, label) for r in ("files", "zarr") for label in labels)
    requests = {label: float(rows[("files", label)]["FUSE requests/file"]) for label in labels[1:]}
    # lookup, open, read, flush, release a file (and the folder's lookup, the control file's read)
    assert 5 <= requests["floor"] < 5.2
    # FLUSH answered ENOSYS once: the kernel sends no more
    for label in ("floor-noflush", "floor-plain", "floor-disk"):
        assert 4 <= requests[label] < 4.3, (label, requests)
    # nczfs: the same, but a walk's files read ahead go to the page cache at their open (no READ)
    assert 4 <= requests["nczfs"] < 5.3 and 3 <= requests["nczfs-ro"] < 4.3, requests
    assert rows[("files", "direct")]["FUSE requests/file"] == "-"
    assert rows[("zarr", "floor")]["direct/path (wall)"].endswith("x")


@pytest.mark.skipif(shutil.which("s3fs") is None, reason="s3fs-fuse not installed (scripts/install.sh --test)")
def test_the_s3_paths_each_read_every_object_and_are_compared_with_s3fs_fuse(capsys):
    bench_floor.main(["--only", "s3", "--small", "20", "--runs", "1", "--warm", "--readers", "files",
                      "--s3-labels", "floor-s3,floor-s3-thread,s3fs-fuse,nczfs-ro"])
    rows = table(capsys.readouterr().out)
    assert sorted(label for _, label in rows) == ["floor-s3", "floor-s3-thread", "nczfs-ro", "s3fs-fuse"]
    assert 4 <= float(rows[("files", "floor-s3")]["FUSE requests/file"]) < 4.3
    assert rows[("files", "s3fs-fuse")]["daemon CPU / s3fs-fuse's"] in ("1.00", "-")


def test_the_icechunk_paths_each_read_the_arrays_values_and_the_open_floor_sends_no_read(capsys):
    bench_floor.main(["--only", "icechunk", "--chunks", "12", "--runs", "1", "--warm"])
    rows = table(capsys.readouterr().out)
    labels = list(bench_floor.ICECHUNK_LABELS)
    # each path's reader checked every value (chunk i holds i * 1024 ...): a wrong one raises
    assert sorted(label for _, label in rows) == sorted(labels)
    by_op = {label: rows[("zarr", label)]["requests by op"] for label in labels[1:]}
    assert "read 1.0" in by_op["floor-icechunk"] and "read 1.0" in by_op["floor-icechunk-memory"], by_op
    # the chunks went into the page cache at their open: no READ (the zarr.json's open stores it too)
    for label in ("floor-icechunk-open", "floor-icechunk-burst", "floor-icechunk-burst64", "floor-icechunk-all",
                  "floor-icechunk-memory-open"):
        assert "read" not in by_op[label] and "open 1.0" in by_op[label], (label, by_op)
    assert rows[("zarr", "icechunk")]["icechunk/path (wall)"] == "1.00x"
