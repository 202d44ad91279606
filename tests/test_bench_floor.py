"""bench/bench_floor.py on tiny sizes, warm (no page cache dropped, the machine's benchmarks left
alone): every path mounts, is read by both readers and unmounts, and the minimal pyfuse3 daemon
(bench/floorfs.py) counts the requests a small file costs: 5 with FLUSH answered, 4 without;
the Icechunk paths each read the array's values right; the big part's paths each read its
8 MiB chunks right, the whole-object floors with one GET an object."""

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
        if cells[0] in ("reader", "path"):
            head = cells
        elif head[0] == "path":  # the big part's table: the zarr reader only
            rows[("zarr", cells[0])] = dict(zip(head, cells))
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


def test_the_big_parts_check_fails_when_a_chunk_is_read_at_the_wrong_place(tmp_path):
    import zarr

    big = bench_floor.Big(tmp_path, 2)
    big.write(zarr.storage.LocalStore(tmp_path))
    big.read(tmp_path, 2)  # the values as written
    folder = tmp_path / bench_floor.BIG
    first, second = (folder / "0").read_bytes(), (folder / "1").read_bytes()
    (folder / "0").write_bytes(second)
    (folder / "1").write_bytes(first)
    with pytest.raises(AssertionError, match="0: its values sum to"):
        big.read(tmp_path, 2)


def test_the_big_paths_each_read_the_array_and_the_whole_object_floors_get_each_object_once(capsys):
    bench_floor.main(["--only", "big", "--big-mib", "16", "--runs", "1", "--warm"])
    rows = table(capsys.readouterr().out)
    # each path's reader checked every chunk's sum (a chunk read wrong raises)
    labels = [label for label in bench_floor.DEFAULT_BIG.split(",") if label != "s3fs-fuse" or shutil.which("s3fs")]
    assert sorted(label for _, label in rows) == sorted(labels)
    cell = {label: rows[("zarr", label)] for label in labels}
    reads = {label: int(cell[label]["FUSE READs/GiB"]) for label in labels if label.startswith(("floor", "nczfs"))}
    gets = {label: int(cell[label]["GETs/GiB"]) for label in labels if label.startswith("floor")}
    # nczfs's readahead (4 MiB) on the floor too: READs of 1 MiB, 1,024 a GiB and the metadata's
    assert 1024 <= reads["floor-s3"] < 1300 and 1024 <= reads["nczfs"] < 1400, reads
    assert gets["floor-s3"] == reads["floor-s3"], cell
    # 2 chunks and the metadata: a GET each, whatever the READs
    for label in ("floor-s3-whole", "floor-s3-whole-loop", "floor-s3-open"):
        assert 128 <= gets[label] <= 320, (label, cell)
    assert reads["floor-s3-whole"] == reads["floor-s3-memory"] == reads["floor-s3"], reads
    assert reads["floor-s3-open"] == 0 and gets["floor-s3-memory"] == 0, (reads, gets)
    assert cell["obstore-get"]["daemon CPU s"] == "-"
    if "s3fs-fuse" in cell:
        assert cell["s3fs-fuse"]["daemon CPU / s3fs-fuse's"] in ("1.00", "-")
