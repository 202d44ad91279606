"""S3-only behaviour through a real mount on the test SeaweedFS server.

The generic real-mount suites (zarr, netCDF4, xarray, POSIX tools, semantics) already run
against S3 through the ``backend`` fixture; this module covers what only S3 has: request
counts, multipart uploads, mount-time failures, credentials, remote changes, errors.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import S3Backend, counts, delta, is_mounted, mounted, pages_in_memory, run_nczfs, unmount

pytestmark = pytest.mark.fuse


@pytest.fixture
def s3(s3_server) -> S3Backend:
    return S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("m"))


@pytest.fixture
def s3mount(s3, tmp_path):
    with mounted(s3, tmp_path / "mnt") as m:
        yield m
    text = m.log_text()
    assert "Traceback" not in text, text


# ---------------------------------------------------------------------- request counts


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_write_costs_one_put_per_object(s3mount, zarr_format):
    """zarr-python writes ``<key>.<uuid>.partial`` and renames it: one PUT per chunk, no COPY/DELETE."""
    import zarr

    before = counts(s3mount.path)
    z = zarr.open_array(str(s3mount.path / "a.zarr"), mode="w", shape=(40, 40), chunks=(10, 10),
                        dtype="f4", zarr_format=zarr_format, fill_value=0)
    z[:] = np.arange(1600, dtype="f4").reshape(40, 40)
    d = delta(before, counts(s3mount.path))
    keys = s3mount.backend.keys("a.zarr")
    assert len([k for k in keys if ".partial" not in k]) == len(keys)
    chunks = [k for k in keys if not k.rsplit("/", 1)[-1].startswith((".z", "zarr.json"))]
    assert len(chunks) == 16
    assert d.get("PutObject", 0) == len(keys), (d, keys)
    assert "CopyObject" not in d, d
    assert d.get("DeleteObject", 0) <= 1, d  # mode="w" clears the (empty) array directory once
    assert np.array_equal(zarr.open_array(str(s3mount.path / "a.zarr"), mode="r")[:], z[:])


def test_rsync_temp_files_cost_one_put(s3mount, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(os.urandom(1000 + i))
    before = counts(s3mount.path)
    subprocess.run(["rsync", "-a", f"{src}/", f"{s3mount.path}/dst/"], check=True)
    d = delta(before, counts(s3mount.path))
    assert d.get("PutObject", 0) == 5 and "CopyObject" not in d, d
    for i in range(5):
        assert s3mount.backend.read(f"dst/f{i}") == (src / f"f{i}").read_bytes()


def test_stats_command_prints_counters(s3mount):
    (s3mount.path / "x").write_bytes(b"1")
    res = run_nczfs("stats", str(s3mount.path))
    assert res.returncode == 0, res.stderr
    assert any(line.split()[0] == "PutObject" for line in res.stdout.splitlines()), res.stdout


def test_small_objects_a_walk_fetches_ahead_go_to_s3_in_one_call_per_burst(s3mount):
    """Reading a directory's small objects one after another (zarr's chunks) fetches the next
    ones ahead in bursts of 8, each burst handed to the store in one call (its GETs sent at once
    from the store's loop): one hand-over and one wake-up of trio per burst, not per GET. Every
    object is fetched once, with its own bytes."""
    for i in range(100):
        s3mount.backend.put(f"walk/{i}", bytes([i]) * 4096)
    os.listdir(s3mount.path / "walk")
    before = counts(s3mount.path)
    for i in range(100):
        assert (s3mount.path / "walk" / str(i)).read_bytes() == bytes([i]) * 4096
    d = delta(before, counts(s3mount.path))
    assert d["GetObject"] == 100, d
    assert d["reads-together"] >= 80 and d["read-calls-together"] <= d["reads-together"] // 4, d
    assert d["cache.fetch-bursts"] == d["read-calls-together"], d


# ---------------------------------------------------------------------- multipart


@pytest.mark.parametrize("where", ["memory", "temp file"])
def test_big_file_goes_up_in_multipart_parts(s3, tmp_path, where):
    """Above the threshold the file is sent as a multipart upload, part by part: from memory
    (a file keeps up to a quarter of the write memory there), or from its temp file (here,
    with 64 MiB of write memory, past 64 MiB)."""
    data = np.random.default_rng(7).integers(0, 255, 72 * 1024 * 1024 + 5, dtype=np.uint8).tobytes()
    args = ["-o", "write_memory=1G"] if where == "memory" else ["-o", "write_memory=64M"]
    with mounted(s3, tmp_path / "mnt", *args) as m:
        before = counts(m.path)
        with open(m.path / "big.bin", "wb") as f:
            for off in range(0, len(data), 1 << 20):
                f.write(data[off : off + (1 << 20)])
        d = delta(before, counts(m.path))
    assert "Traceback" not in m.log_text(), m.log_text()
    assert d.get("CreateMultipartUpload") == 1 and d.get("UploadPart", 0) >= 9 and d.get("CompleteMultipartUpload") == 1, d
    assert "PutObject" not in d
    assert d.get("write.spilled-files", 0) == (1 if where == "temp file" else 0), d
    assert d.get("write.early-uploads-completed") == 1, d  # sent while written (see below)
    assert s3.read("big.bin") == data
    client = s3.server.client()
    assert not client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads")


def test_a_big_file_is_sent_while_it_is_written_and_a_rewritten_part_again_at_close(s3, tmp_path):
    """Early upload: the complete parts of a file being written go while it is still open;
    the close sends the last part, and again the part a write changed after it was sent (a
    header rewritten at the end, as netCDF does), then completes."""
    data = bytearray(np.random.default_rng(8).integers(0, 255, 40 * 1024 * 1024 + 3, dtype=np.uint8).tobytes())
    with mounted(s3, tmp_path / "mnt") as m:
        before = counts(m.path)
        with open(m.path / "nc.bin", "wb") as f:
            for off in range(0, len(data), 1 << 20):
                f.write(data[off : off + (1 << 20)])
            f.flush()
            deadline = time.monotonic() + 60
            while delta(before, counts(m.path)).get("UploadPart", 0) < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            d = delta(before, counts(m.path))
            assert d.get("UploadPart") == 5 and "CompleteMultipartUpload" not in d, d  # 5 whole parts of 8 MiB
            assert not s3.keys("")  # nothing visible yet
            f.seek(10)
            f.write(b"HEADER")
            data[10:16] = b"HEADER"
        d = delta(before, counts(m.path))
    assert "Traceback" not in m.log_text(), m.log_text()
    assert d.get("UploadPart") == 7 and d.get("CompleteMultipartUpload") == 1 and "PutObject" not in d, d
    assert d.get("write.early-uploads-completed") == 1, d
    assert s3.read("nc.bin") == bytes(data)
    assert not _unfinished_uploads(s3)


def test_rsync_of_a_big_file_sends_it_while_written_under_its_final_name(s3, tmp_path):
    """rsync writes ``.NAME.XXXXXX`` and renames it: its parts go to the final name while it is
    written, its close sends the rest, the rename completes the upload (no copy, no PUT)."""
    src = tmp_path / "src"
    src.mkdir()
    data = np.random.default_rng(9).integers(0, 255, 40 * 1024 * 1024 + 3, dtype=np.uint8).tobytes()
    (src / "big.bin").write_bytes(data)
    with mounted(s3, tmp_path / "mnt") as m:
        before = counts(m.path)
        subprocess.run(["rsync", "-a", f"{src}/", f"{m.path}/dst/"], check=True)
        d = delta(before, counts(m.path))
    assert "Traceback" not in m.log_text(), m.log_text()
    assert d.get("CreateMultipartUpload") == 1 and d.get("UploadPart") == 6 and d.get("CompleteMultipartUpload") == 1, d
    assert "PutObject" not in d and "CopyObject" not in d, d
    assert d.get("write.early-uploads-completed") == 1, d
    assert s3.read("dst/big.bin") == data and s3.keys("dst") == ["dst/big.bin"]
    assert not _unfinished_uploads(s3)


def _unfinished_uploads(backend) -> list:
    client = backend.server.client()
    return client.list_multipart_uploads(Bucket=backend.bucket, Prefix=backend.prefix + "/").get("Uploads", [])


def test_zarr_chunks_from_a_megabyte_go_up_at_close_and_appear_at_rename(s3mount):
    """A closed ``.partial`` of 1 MiB or more is sent at close as the parts of a multipart upload
    of its final key (invisible), so the rename (one at a time per directory in the kernel)
    only completes it; smaller objects stay one PUT each."""
    import zarr

    data = np.random.default_rng(3).random(4 * 300_000, dtype="f4")  # four 1.2 MB chunks
    before = counts(s3mount.path)
    z = zarr.create_array(str(s3mount.path / "big.zarr"), shape=data.shape, chunks=(300_000,), dtype="f4",
                          compressors=None, zarr_format=2)
    z[:] = data
    d = delta(before, counts(s3mount.path))
    assert d.get("CreateMultipartUpload") == 4 and d.get("CompleteMultipartUpload") == 4, d
    assert d.get("PutObject") == 2 and "CopyObject" not in d, d  # .zarray and .zattrs
    assert sorted(s3mount.backend.keys("big.zarr")) == ["big.zarr/.zarray", "big.zarr/.zattrs", "big.zarr/0",
                                                         "big.zarr/1", "big.zarr/2", "big.zarr/3"]
    assert s3mount.backend.read("big.zarr/2") == data[600_000:900_000].tobytes()
    assert np.array_equal(zarr.open_array(str(s3mount.path / "big.zarr"), mode="r")[:], data)
    assert not _unfinished_uploads(s3mount.backend)


def test_a_staged_temp_file_unlinked_or_renamed_elsewhere_leaves_nothing_behind(s3mount):
    part = "x." + "0123456789abcdef" * 2 + ".partial"
    blob = os.urandom(2 * 1024 * 1024)
    (s3mount.path / part).write_bytes(blob)  # closed: staged under "x"
    os.unlink(s3mount.path / part)
    (s3mount.path / part).write_bytes(blob[::-1])
    os.rename(s3mount.path / part, s3mount.path / "y")  # not the name it was staged under
    rsync_tmp = s3mount.path / ".z.Ab12Cd"  # rsync's temp name for "z", renamed into place
    rsync_tmp.write_bytes(blob)
    os.rename(rsync_tmp, s3mount.path / "z")
    assert s3mount.backend.keys() == ["y", "z"]
    assert s3mount.backend.read("y") == blob[::-1] and s3mount.backend.read("z") == blob
    assert not _unfinished_uploads(s3mount.backend)


def test_a_staged_temp_file_never_renamed_is_aborted_at_unmount(s3, tmp_path):
    with mounted(s3, tmp_path / "mnt") as m:
        (m.path / ("w." + "ab" * 16 + ".partial")).write_bytes(os.urandom(1024 * 1024))
        assert _unfinished_uploads(s3)  # staged at close
    assert not _unfinished_uploads(s3)
    assert s3.keys() == ["w." + "ab" * 16 + ".partial"]  # stored under its own name at unmount, as before


def _kill_daemon(mnt: Path) -> None:
    import signal

    from nczfs.fuse.control import read_control

    pid = read_control(str(mnt))["pid"]
    os.kill(pid, signal.SIGKILL)
    while Path(f"/proc/{pid}").exists():
        time.sleep(0.01)


def _writing_big(path: Path, before: dict, mnt: Path):
    """A file open for writing whose first parts went up early: 40 MiB written, 5 parts sent."""
    f = open(path, "wb")
    for _ in range(40):
        f.write(os.urandom(1 << 20))
    f.flush()
    deadline = time.monotonic() + 60
    while delta(before, counts(mnt)).get("UploadPart", 0) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    return f


def test_uploads_a_killed_mount_left_open_are_aborted_by_the_next_mount_only(s3, tmp_path):
    """kill -9 while a big file was being sent left its multipart upload open for ever (4 of 5
    kills). The dead daemon's journal of open uploads (runstate.py) names it: `nczfs umount`
    says so, and the next mount of the prefix aborts it; an upload of a live mount is not touched
    by another mount of the same prefix."""
    with mounted(s3, tmp_path / "mnt") as m:
        f = _writing_big(m.path / "big", counts(m.path), m.path)
        _kill_daemon(m.path)
        try:
            f.close()
        except OSError:
            pass
        left = _unfinished_uploads(s3)
        assert [u["Key"] for u in left] == [f"{s3.prefix}/big"]
        res = run_nczfs("umount", str(m.path))
        assert res.returncode == 1 and "1 multipart upload(s) left open in" in res.stderr, res.stderr
        assert f"{s3.prefix}/big" in res.stderr and not is_mounted(m.path)
    assert _unfinished_uploads(s3) == left  # nothing else removes it
    with mounted(s3, tmp_path / "mnt2") as live:
        assert not _unfinished_uploads(s3)
        assert "aborted 1 multipart upload(s) that a killed mount of" in live.log_text()
        f = _writing_big(live.path / "big2", counts(live.path), live.path)
        with mounted(s3, tmp_path / "mnt3"):  # a second mount of the prefix: the live upload stays
            assert [u["Key"] for u in _unfinished_uploads(s3)] == [f"{s3.prefix}/big2"]
        f.close()
    assert not _unfinished_uploads(s3) and s3.keys() == ["big2"]


# ---------------------------------------------------------------------- mount-time failures


def _refused(tmp_path: Path, *args: str) -> str:
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    res = run_nczfs("mount", *args, str(mnt), timeout=90)
    assert res.returncode != 0
    assert not is_mounted(mnt)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_missing_bucket_refused(s3_server, tmp_path):
    msg = _refused(tmp_path, "s3://nczfs-no-such-bucket/x", "--endpoint-url", s3_server.endpoint)
    assert "nczfs-no-such-bucket" in msg and "does not exist" in msg


def test_wrong_credentials_refused(s3_server, s3, tmp_path):
    msg = _refused(tmp_path, s3.source, "--endpoint-url", s3_server.endpoint, "--profile", "wrong")
    assert "refused the credentials" in msg and "SignatureDoesNotMatch" in msg


def test_unsigned_requests_are_refused_by_a_server_that_wants_signatures(s3_server, s3, tmp_path):
    msg = _refused(tmp_path, s3.source, "-o", f"endpoint_url={s3_server.endpoint},no_sign_request")
    assert "AccessDenied" in msg


def test_unknown_profile_refused(s3_server, s3, tmp_path):
    msg = _refused(tmp_path, s3.source, "--endpoint-url", s3_server.endpoint, "--profile", "nobody")
    assert "nobody" in msg


def test_unreachable_endpoint_refused(s3, tmp_path):
    from tests.ports import free_ports

    port = free_ports(1)[0]
    msg = _refused(tmp_path, s3.source, "--endpoint-url", f"http://127.0.0.1:{port}")
    assert "cannot reach S3" in msg and str(port) in msg


def test_a_mount_whose_command_was_killed_before_ready_unmounts_without_a_traceback(s3_server, s3, tmp_path):
    """`nczfs mount` killed while the daemon waits on a frozen server (timeout(1), Ctrl-C): nobody
    was told the mount exists, so the daemon unmounts once ready, and logs why (it was a
    BrokenPipeError traceback and a mount left behind)."""
    import signal

    from tests.faultproxy import FaultProxy

    mnt, log = tmp_path / "mnt", tmp_path / "mount.log"
    mnt.mkdir()
    with FaultProxy(s3_server.s3_port) as proxy:
        proxy.freeze()
        cmd = subprocess.Popen([sys.executable, "-m", "nczfs", "mount", s3.source, str(mnt), "--log-file", str(log),
                                "--endpoint-url", proxy.endpoint], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while "mounting" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
                time.sleep(0.1)
            cmd.send_signal(signal.SIGKILL)
            cmd.wait(10)
        finally:
            proxy.thaw()
        deadline = time.monotonic() + 30
        while "nobody waits for it" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        mounted_still = is_mounted(mnt)
        if mounted_still:
            unmount(mnt)
    text = log.read_text()
    assert "the nczfs mount command waiting for this mount is gone" in text, text
    assert "nobody waits for it" in text, text
    assert "Traceback" not in text, text
    assert not mounted_still


# ---------------------------------------------------------------------- URL forms and credentials


def test_path_style_url_with_fragment_and_profile_key(s3_server, s3, tmp_path):
    """``http://host:port/bucket/prefix#mode=nczarr,s3&aws.profile=reader``: endpoint and profile from the URL."""
    s3.put("ds/.zgroup", b'{"zarr_format": 2}')
    url = f"{s3_server.endpoint}/{s3.bucket}/{s3.prefix}#mode=nczarr,s3&aws.profile=reader"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = run_nczfs("mount", url, str(mnt), "--log-file", str(tmp_path / "log"))
    assert res.returncode == 0, res.stderr
    try:
        assert (mnt / "ds" / ".zgroup").read_bytes() == b'{"zarr_format": 2}'
        with pytest.raises(PermissionError) as info:  # the reader identity may not write
            (mnt / "ds" / "new").write_bytes(b"x")
        assert info.value.errno == errno.EACCES
        assert not s3.exists("ds/new")
    finally:
        assert run_nczfs("umount", str(mnt)).returncode == 0


def test_aws_profile_environment_variable(s3_server, s3, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "wrong")
    msg = _refused(tmp_path, s3.source, "--endpoint-url", s3_server.endpoint)
    assert "SignatureDoesNotMatch" in msg
    monkeypatch.setenv("AWS_PROFILE", "reader")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)  # the endpoint from the environment too
    s3.put("r", b"readable")
    mnt = tmp_path / "mnt2"
    with mounted(s3, mnt, source=s3.source) as m:
        assert (m.path / "r").read_bytes() == b"readable"


def test_read_only_key_gives_eacces_and_the_mount_keeps_working(s3_server, s3, tmp_path):
    s3.put("keep", b"old")
    with mounted(s3, tmp_path / "mnt", "-o", "profile=reader,region=us-east-1") as m:
        with pytest.raises(PermissionError):
            with open(m.path / "keep", "wb") as f:
                f.write(b"new")
        with pytest.raises(PermissionError):
            os.unlink(m.path / "keep")
        assert (m.path / "keep").read_bytes() == b"old"
    assert s3.read("keep") == b"old"


def test_bytes_whose_upload_was_refused_are_not_read_back(s3_server, s3, tmp_path):
    """A file rewritten in place with a key that may not write: close() fails with EACCES, and
    the mount then reads what S3 still holds, not the refused bytes the kernel had cached."""
    s3.put("kept", b"o" * 8192)
    with mounted(s3, tmp_path / "mnt", "-o", "profile=reader,region=us-east-1") as m:
        fd = os.open(m.path / "kept", os.O_RDWR)
        os.write(fd, b"X" * 8192)
        with pytest.raises(PermissionError):
            os.close(fd)
        assert (m.path / "kept").read_bytes() == b"o" * 8192
        time.sleep(1.5)
        assert (m.path / "kept").read_bytes() == b"o" * 8192
    assert s3.read("kept") == b"o" * 8192


# ---------------------------------------------------------------------- other clients, errors


def test_remote_changes_seen_after_the_metadata_ttl(s3mount):
    s3mount.backend.put("r.txt", b"one")
    assert (s3mount.path / "r.txt").read_bytes() == b"one"
    s3mount.backend.put("r.txt", b"two, longer")
    s3mount.backend.put("new.txt", b"new")
    time.sleep(1.5)  # the default metadata TTL is 1 s
    assert (s3mount.path / "r.txt").read_bytes() == b"two, longer"
    assert "new.txt" in os.listdir(s3mount.path)
    s3mount.backend.delete("new.txt")
    time.sleep(1.5)
    assert not (s3mount.path / "new.txt").exists()


def test_open_file_reads_one_version_never_a_mix(s3mount):
    """A file rewritten in S3 while open: the open descriptor reads the old version to the end
    (from what the mount already holds) or gets ESTALE, never bytes of both versions."""
    size = 16 * 1024 * 1024
    s3mount.backend.put("v", b"A" * size)
    fd = os.open(s3mount.path / "v", os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no kernel readahead: each pread asks the mount
    got = b""
    try:
        got = os.pread(fd, 4096, 0)
        s3mount.backend.put("v", b"B" * size)
        try:
            while len(got) < size:
                chunk = os.pread(fd, 1 << 20, len(got))
                if not chunk:
                    break
                got += chunk
        except OSError as exc:
            assert exc.errno == errno.ESTALE
        else:
            assert len(got) == size
    finally:
        os.close(fd)
    assert set(got) == {ord("A")}  # one version only
    time.sleep(1.2)
    assert (s3mount.path / "v").read_bytes() == b"B" * size  # a new open reads the new version


def test_files_rewritten_elsewhere_after_their_directory_was_listed_open_read_and_change(s3mount):
    """The listing cached holds the old versions: reading, appending to and truncating the
    rewritten files work (on the old or the new version), instead of failing with ESTALE until
    the listing expires."""
    old, new = b"1" * 5000, b"2" * 5000
    for n in "fgh":
        s3mount.backend.put(f"d/{n}", old)
    d = s3mount.path / "d"
    assert sorted(os.listdir(d)) == ["f", "g", "h"]
    for n in "fgh":
        s3mount.backend.put(f"d/{n}", new)
    assert (d / "f").read_bytes() in (old, new)
    with open(d / "g", "ab") as f:
        f.write(b"x")
    assert s3mount.backend.read("d/g") in (old + b"x", new + b"x")
    os.truncate(d / "h", 10)
    assert s3mount.backend.read("d/h") in (old[:10], new[:10])


def _pattern(tag: bytes, size: int) -> bytes:
    """``size`` bytes in which every 4 KiB page says which version and page it is."""
    return b"".join((tag + b"%08d" % i).ljust(4096, b".") for i in range(size // 4096))


def _old_or_estale(read, old: bytes) -> None:
    """``read()`` gives the old version's bytes ``old`` or fails with ESTALE: never other bytes."""
    try:
        got = read()
    except OSError as exc:
        assert exc.errno == errno.ESTALE
    else:
        assert got == old


def test_a_descriptor_given_the_kernels_pages_is_pinned_to_their_version(s3, tmp_path):
    """A file opened again unchanged keeps the kernel's pages (keep_cache); rewritten in S3 while
    that descriptor is open, its reads of pages the kernel does not hold give ESTALE or old
    bytes, never the new version next to the kernel's old pages.

    The TTL is long: past it the kernel asks for the file's attributes again on a read, sees the
    new mtime and drops its pages (libfuse's auto_inval_data), so the read of page 0 would reach
    the mount and get ESTALE too. With the 1 s default, a 40 MiB PUT slower than that on a loaded
    machine did just that, and the test failed on what it assumed, not on what it checks."""
    size = 40 * 1024 * 1024
    old, new = _pattern(b"old", size), _pattern(b"new", size)
    s3.put("k", old)
    with mounted(s3, tmp_path / "mnt", "--metadata-ttl", "600") as m:
        with open(m.path / "k", "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            assert f.read(65536) == old[:65536]
        fd = os.open(m.path / "k", os.O_RDONLY)  # same version: the kernel keeps its pages
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            assert pages_in_memory(fd)[:16] == b"\x01" * 16
            s3.put("k", new)
            assert os.pread(fd, 4096, 0) == old[:4096]  # from the kernel's pages
            off = 36 * 1024 * 1024
            _old_or_estale(lambda: os.pread(fd, 4096, off), old[off:off + 4096])
        finally:
            os.close(fd)
    assert "Traceback" not in m.log_text()


def test_a_descriptor_of_an_old_version_puts_none_of_it_in_the_kernels_pages(s3mount):
    """A descriptor still on the old version of a rewritten object reads after a newer open has
    seen the new one: it gets ESTALE (or old bytes), and later opens read the new version whole,
    no old page left in the kernel's cache for them."""
    size = 20 * 1024 * 1024
    old, new = _pattern(b"old", size), _pattern(b"new", size)
    s3mount.backend.put("p", old)
    a = os.open(s3mount.path / "p", os.O_RDONLY)
    try:
        os.posix_fadvise(a, 0, 0, os.POSIX_FADV_RANDOM)
        assert os.pread(a, 4096, 0) == old[:4096]
        s3mount.backend.put("p", new)
        time.sleep(1.5)  # past the TTL: the next open sees the new version
        b = os.open(s3mount.path / "p", os.O_RDONLY)
        os.close(b)
        off = 6 * 1024 * 1024
        _old_or_estale(lambda: os.pread(a, 65536, off), old[off:off + 65536])
    finally:
        os.close(a)
    time.sleep(1.5)
    assert (s3mount.path / "p").read_bytes() == new


def test_a_descriptor_of_a_shrunk_object_gets_estale_not_the_old_bytes_cut_short(s3mount):
    """An object shrunk in S3 while a descriptor that read it whole is open: once the mount
    sees the new size, that descriptor's reads give ESTALE or all of the old bytes, not the old
    bytes cut at the new size."""
    size = 3 * 1024 * 1024
    old = _pattern(b"old", size)
    s3mount.backend.put("s", old)
    with open(s3mount.path / "s", "rb") as f:
        assert f.read() == old
        s3mount.backend.put("s", _pattern(b"new", 1024 * 1024))
        time.sleep(1.5)
        assert os.stat(s3mount.path / "s").st_size == 1024 * 1024
        f.seek(0)
        _old_or_estale(f.read, old)


def test_a_first_read_that_finds_a_new_version_reads_it_whole_not_cut_at_the_old_size(s3, tmp_path):
    """The kernel holds the size of the version it was told of (for the TTL, here long); a file
    rewritten in S3 since is opened and read: the mount reads the new version, and the kernel,
    told that its size changed, reads it to its end, not to the old size."""
    old, new = b"old", b"the new version, longer than the old one"
    s3.put("f", old)
    with mounted(s3, tmp_path / "m", "--metadata-ttl", "60") as m:
        assert os.stat(m.path / "f").st_size == len(old)
        s3.put("f", new)
        assert (m.path / "f").read_bytes() == new
        assert os.stat(m.path / "f").st_size == len(new)


def test_directory_markers_of_other_tools_are_directories(s3mount):
    s3mount.backend.put("made-by-console/", b"")
    s3mount.backend.put("made-by-console/inner/", b"")
    time.sleep(1.2)
    assert (s3mount.path / "made-by-console").is_dir()
    assert os.listdir(s3mount.path / "made-by-console") == ["inner"]
    os.rmdir(s3mount.path / "made-by-console" / "inner")
    os.rmdir(s3mount.path / "made-by-console")
    time.sleep(1.2)
    assert "made-by-console" not in os.listdir(s3mount.path)
    assert s3mount.backend.keys() == []


def test_no_directory_markers_are_created(s3mount):
    os.makedirs(s3mount.path / "g" / "h")
    (s3mount.path / "g" / "h" / "x").write_bytes(b"1")
    assert s3mount.backend.keys() == ["g/h/x"]


def test_key_longer_than_1024_bytes_is_enametoolong(s3mount):
    deep = s3mount.path
    for i in range(4):
        deep = deep / (chr(ord("a") + i) * 250)
    os.makedirs(deep)
    with pytest.raises(OSError) as info:
        (deep / ("z" * 40)).write_bytes(b"1")
    assert info.value.errno == errno.ENAMETOOLONG


def test_directory_rename_moves_every_key(s3mount):
    for i in range(30):
        p = s3mount.path / "src" / f"sub{i % 3}" / f"k{i}"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(str(i).encode())
    os.rename(s3mount.path / "src", s3mount.path / "dst")
    assert s3mount.backend.keys("src") == []
    assert len(s3mount.backend.keys("dst")) == 30
    assert s3mount.backend.read("dst/sub2/k29") == b"29"
    assert sorted(os.listdir(s3mount.path)) == ["dst"]


def test_listing_follows_pagination(s3mount):
    """More keys than one ListObjectsV2 page (1,000) in one directory: readdir and ls see all of them."""
    client = s3mount.backend.server.client()
    names = [f"c{i:05d}" for i in range(2500)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: client.put_object(Bucket=s3mount.backend.bucket, Key=f"{s3mount.backend.prefix}/big/{n}", Body=b"x"), names))
    before = counts(s3mount.path)
    assert sorted(os.listdir(s3mount.path / "big")) == names
    assert delta(before, counts(s3mount.path)).get("ListObjectsV2", 0) >= 3


def test_vanished_bucket_gives_eio_and_the_daemon_survives(s3_server, tmp_path):
    s3 = S3Backend(s3_server, s3_server.new_bucket("gone"))
    s3.put("x", b"1")
    with mounted(s3, tmp_path / "mnt", "-o", "metadata_ttl=0") as m:
        assert (m.path / "x").read_bytes() == b"1"
        client = s3_server.client()
        client.delete_object(Bucket=s3.bucket, Key="data/x")
        client.delete_bucket(Bucket=s3.bucket)
        with pytest.raises(OSError) as info:
            (m.path / "y").write_bytes(b"2")
        assert info.value.errno in (errno.EIO, errno.ENOENT)
        with pytest.raises(OSError):
            os.listdir(m.path)
        client.create_bucket(Bucket=s3.bucket)  # the daemon is still there and serves again
        (m.path / "z").write_bytes(b"3")
        assert s3.read("z") == b"3"
    assert "NoSuchBucket" in m.log_text()


def test_server_down_while_writing_fails_close_with_eio_and_recovers(s3_server, tmp_path):
    """The server stops while a file is open for writing: close() fails with EIO, the old object
    stays intact, and once the server is back the same mount works again."""
    s3 = S3Backend(s3_server, s3_server.new_bucket("outage"))
    s3.put("keep", b"old contents")
    with mounted(s3, tmp_path / "mnt", "-o", "metadata_ttl=0") as m:
        f = open(m.path / "keep", "r+b")
        f.write(b"NEW")
        s3_server.stop()
        try:
            with pytest.raises(OSError) as info:
                f.close()
            assert info.value.errno == errno.EIO
        finally:
            s3_server.start()  # same ports, same data directory
        assert s3.read("keep") == b"old contents"
        assert (m.path / "keep").read_bytes() == b"old contents"
        (m.path / "after").write_bytes(b"works again")
        assert s3.read("after") == b"works again"
    log = m.log_text()
    assert "keep" in log and "Traceback" not in log


def test_a_read_that_fails_costs_one_round_of_attempts(s3_server, tmp_path):
    """The server stops under an open file: its read fails with EIO after the store's attempts,
    and the read the kernel sends again at once for what its read-ahead could not get is answered
    by that failure, not by another round; once the server is back the file reads."""
    s3 = S3Backend(s3_server, s3_server.new_bucket("readfail"))
    s3.put("f", b"x" * 100_000)
    with mounted(s3, tmp_path / "mnt", "-o", "metadata_ttl=60") as m:  # the read goes straight to a GET
        fd = os.open(m.path / "f", os.O_RDONLY)
        try:
            before = counts(m.path)
            s3_server.stop()
            try:
                with pytest.raises(OSError) as info:
                    os.pread(fd, 100_000, 0)
                assert info.value.errno == errno.EIO
                got = delta(before, counts(m.path))
            finally:
                s3_server.start()
            assert got["GetObject"] == 3 and got["cache.failures-repeated"] >= 1, got
            time.sleep(1.1)  # past the failure's second
            assert os.pread(fd, 100_000, 0) == b"x" * 100_000
        finally:
            os.close(fd)


# ---------------------------------------------------------------------- https, a private CA


def test_https_with_a_private_ca_named_by_aws_ca_bundle(s3, tmp_path, monkeypatch):
    """S3 over https with a certificate of a private CA, trusted as the AWS CLI trusts it
    (``AWS_CA_BUNDLE``): listings, reads and writes work (listings used to fail with EIO: the
    hand-written client ignored the bundle); without the bundle the mount is refused at once."""
    server = s3.server
    monkeypatch.setenv("AWS_CA_BUNDLE", str(server.ca_file))
    s3.put("d/x", b"hello")
    with mounted(s3, tmp_path / "mnt2", "--endpoint-url", server.https_endpoint) as m:
        assert os.listdir(m.path) == ["d"] and os.listdir(m.path / "d") == ["x"]
        assert (m.path / "d" / "x").read_bytes() == b"hello"
        (m.path / "d" / "y").write_bytes(b"world")
        assert counts(m.path).get("ListObjectsV2", 0) >= 1
    assert "Traceback" not in m.log_text() and " ERROR " not in m.log_text(), m.log_text()
    assert s3.read("d/y") == b"world"
    monkeypatch.delenv("AWS_CA_BUNDLE")
    (tmp_path / "mnt3").mkdir()
    res = run_nczfs("mount", s3.source, str(tmp_path / "mnt3"), "--endpoint-url", server.https_endpoint)
    assert res.returncode != 0 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not is_mounted(tmp_path / "mnt3")


def test_storage_class_requester_pays_and_bounds_from_mount_options(s3, tmp_path):
    """-o storage_class=, requester_pays, retries=, connect_timeout=, read_timeout= reach the S3
    requests: what the mount writes (one PUT, a multipart upload, a rename's copy) has the
    storage class asked for."""
    big = os.urandom(40 * 1024 * 1024)
    with mounted(s3, tmp_path / "mnt", "-o", "storage_class=standard_ia,requester_pays,retries=1,"
                 "connect_timeout=3,read_timeout=20") as m:
        (m.path / "small").write_bytes(b"x" * 100)
        (m.path / "big").write_bytes(big)
        os.rename(m.path / "small", m.path / "moved")
    assert "Traceback" not in m.log_text() and " ERROR " not in m.log_text(), m.log_text()
    client = s3.server.client()
    for key in ("moved", "big"):
        assert client.head_object(Bucket=s3.bucket, Key=f"{s3.prefix}/{key}").get("StorageClass") == "STANDARD_IA", key
    assert s3.read("big") == big


# ---------------------------------------------------------------------- POSIX attributes in object metadata


def _s3fs_mount(s3: S3Backend, mnt: Path, passwd: Path):
    """s3fs-fuse on the same prefix (Debian's s3fs, scripts/install.sh --test)."""
    import shutil

    from tests.s3server import ADMIN

    assert shutil.which("s3fs"), "s3fs-fuse is not installed (scripts/install.sh --test installs it)"
    passwd.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
    passwd.chmod(0o600)
    mnt.mkdir()
    subprocess.run(["s3fs", f"{s3.bucket}:/{s3.prefix}", str(mnt), "-o", f"passwd_file={passwd}",
                    "-o", f"url={s3.server.endpoint},use_path_request_style"], check=True, timeout=60)
    deadline = time.monotonic() + 30
    while not is_mounted(mnt):
        assert time.monotonic() < deadline, "s3fs-fuse did not mount"
        time.sleep(0.05)


def test_a_bucket_reads_the_same_through_s3fs_fuse_and_nczfs(s3, tmp_path):
    """Modes, owners, mtimes, symlinks and fifos are kept in x-amz-meta-mode/-uid/-gid/-mtime (a
    symlink's target as its bytes), as s3fs-fuse keeps them: each reads what the other wrote
    (nczfs with -o posix_meta: a HEAD per object it looks up)."""
    s3.server.client().put_object(Bucket=s3.bucket, Key=f"{s3.prefix}/", Body=b"")  # s3fs wants its prefix
    s3fs_mnt = tmp_path / "s3fs"
    _s3fs_mount(s3, s3fs_mnt, tmp_path / "passwd")
    try:
        (s3fs_mnt / "by-s3fs").write_bytes(b"written by s3fs")
        os.chmod(s3fs_mnt / "by-s3fs", 0o640)
        os.chown(s3fs_mnt / "by-s3fs", 1234, 5678)
        os.utime(s3fs_mnt / "by-s3fs", ns=(1_000_000_000, 2_500_000_000))
        os.symlink("by-s3fs", s3fs_mnt / "link-by-s3fs")
        os.mkfifo(s3fs_mnt / "fifo-by-s3fs", 0o600)
        with mounted(s3, tmp_path / "nczfs", "-o", "posix_meta") as m:
            st = os.lstat(m.path / "by-s3fs")
            assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns) == (0o640, 1234, 5678, 2_500_000_000)
            assert os.readlink(m.path / "link-by-s3fs") == "by-s3fs"
            assert (m.path / "link-by-s3fs").read_bytes() == b"written by s3fs"
            assert stat.S_ISFIFO(os.lstat(m.path / "fifo-by-s3fs").st_mode)
            write = m.path / "by-nczfs"
            write.write_bytes(b"written by nczfs")
            os.chmod(write, 0o604)
            os.chown(write, 4321, 8765)
            os.utime(write, ns=(1_000_000_000, 3_250_000_000))
            os.symlink("by-nczfs", m.path / "link-by-nczfs")
            os.mkfifo(m.path / "fifo-by-nczfs", 0o640)
        time.sleep(1.5)  # s3fs-fuse's stat cache
        st = os.lstat(s3fs_mnt / "by-nczfs")
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns) == (0o604, 4321, 8765, 3_250_000_000)
        assert os.readlink(s3fs_mnt / "link-by-nczfs") == "by-nczfs"
        assert (s3fs_mnt / "link-by-nczfs").read_bytes() == b"written by nczfs"
        st = os.lstat(s3fs_mnt / "fifo-by-nczfs")
        assert stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640
    finally:
        subprocess.run(["fusermount3", "-u", str(s3fs_mnt)], capture_output=True)


def test_symlink_without_posix_meta_is_refused_with_eperm_and_a_log_line(s3, tmp_path):
    """Without -o posix_meta a lookup reads no object's metadata, the only place a symlink's
    type is kept, so after a remount it was a regular file holding its target, silently. It is
    refused (EPERM, as symlink(2) where a file system has no symlinks); with -o posix_meta it is
    made and stays a symlink across remounts."""
    with mounted(s3, tmp_path / "m1") as m:
        (m.path / "f").write_bytes(b"target bytes")
        with pytest.raises(OSError) as err:
            os.symlink("f", m.path / "link")
        assert err.value.errno == errno.EPERM
        with pytest.raises(OSError):
            os.symlink("f", m.path / "link2")
        assert not os.path.lexists(m.path / "link")
        os.mkfifo(m.path / "p")  # a fifo is still made (an empty object of that type)
        assert sorted(os.listdir(m.path)) == ["f", "p"]
    assert s3.keys() == ["f", "p"]
    refusals = [line for line in m.log_text().splitlines() if "refused" in line]
    assert len(refusals) == 1 and "symlink 'link' refused: symlinks on S3 need -o posix_meta" in refusals[0]
    with mounted(s3, tmp_path / "m2", "-o", "posix_meta") as m:
        os.symlink("f", m.path / "link")
    with mounted(s3, tmp_path / "m3", "-o", "posix_meta") as m:
        assert stat.S_ISLNK(os.lstat(m.path / "link").st_mode) and os.readlink(m.path / "link") == "f"
        assert (m.path / "link").read_bytes() == b"target bytes"
    with mounted(s3, tmp_path / "m4") as m:  # without it no lookup reads a type
        assert stat.S_ISREG(os.lstat(m.path / "link").st_mode) and (m.path / "link").read_bytes() == b"f"
        assert stat.S_ISREG(os.lstat(m.path / "p").st_mode) and os.lstat(m.path / "p").st_size == 0


def test_objects_of_one_prefix_keep_one_put_each_at_the_mounts_defaults(s3mount):
    """Attributes reach the metadata only where they differ from the mount's defaults (a file
    made by another user, a chmod, a utime): a file written plainly costs one PUT, no COPY."""
    before = counts(s3mount.path)
    (s3mount.path / "plain").write_bytes(b"x")
    d = delta(before, counts(s3mount.path))
    assert d.get("PutObject") == 1 and "CopyObject" not in d, d
    assert s3mount.backend.metadata("plain") == {}
    os.chmod(s3mount.path / "plain", 0o600)
    assert int(s3mount.backend.metadata("plain")["mode"]) == stat.S_IFREG | 0o600
    with open(s3mount.path / "plain", "ab") as f:  # a PUT drops metadata: the mount writes it again
        f.write(b"y")
    assert int(s3mount.backend.metadata("plain")["mode"]) == stat.S_IFREG | 0o600


def test_files_created_with_their_own_mode_cost_one_put_each_and_keep_it(s3, tmp_path):
    """A file created with a mode other than the mount's default (fio's 0600), or rewritten, sends
    its mode, owner and mtime in its PutObject's metadata: no CopyObject after it, and no listing
    dropped by one; a remount that reads metadata (-o posix_meta) shows the mode."""
    with mounted(s3, tmp_path / "m1") as m:
        (m.path / "d").mkdir()
        before = counts(m.path)
        for i in range(20):
            fd = os.open(m.path / "d" / f"f{i}", os.O_RDWR | os.O_CREAT, 0o600)
            os.write(fd, b"x" * 4096)
            os.close(fd)
        d = delta(before, counts(m.path))
        assert d.get("PutObject") == 20 and "CopyObject" not in d, d
        assert d.get("ListObjectsV2", 0) < 15, d  # each COPY dropped the listing: a LIST per file
        with open(m.path / "d" / "f3", "ab") as f:  # rewritten: one PUT, the mode with it
            f.write(b"y")
        assert "CopyObject" not in delta(before, counts(m.path))
        mtime = os.stat(m.path / "d" / "f3").st_mtime_ns
    assert all(int(s3.metadata(f"d/f{i}")["mode"]) == stat.S_IFREG | 0o600 for i in range(20))
    with mounted(s3, tmp_path / "m2", "-o", "posix_meta") as m:
        st = os.stat(m.path / "d" / "f3")
        assert (stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns) == (0o600, 4097, mtime)
        assert stat.S_IMODE(os.stat(m.path / "d" / "f0").st_mode) == 0o600
