"""The command line as a user meets it: exit codes, one-line errors, daemon life cycle."""

import os
import signal
import subprocess
import sys
import time

import pytest

from nczfs.fuse.control import read_control
from tests.helpers import NCZFS, DirectoryBackend, is_mounted, mounted, run_nczfs, unmount


def _one_line_error(res):
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nczfs: "), res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


@pytest.fixture
def dirs(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    return src, mnt


def test_missing_source_directory(dirs, tmp_path):
    _, mnt = dirs
    line = _one_line_error(run_nczfs("mount", str(tmp_path / "nope"), str(mnt)))
    assert "nope" in line and not is_mounted(mnt)


def test_unknown_mode_word(dirs):
    src, mnt = dirs
    line = _one_line_error(run_nczfs("mount", f"file://{src}#mode=nczarr,wat", str(mnt)))
    assert "wat" in line


@pytest.mark.parametrize(
    "source, reason",
    [
        ("https://127.0.0.1:99999/bkt/p", "Port out of range"),  # a traceback, exit 1
        ("https://127.0.0.1:port/bkt/p", "not a valid URL"),
        ("https://[::1/bkt/p", "not a valid URL"),
        ("s3://bkt/x#mode=zarr,zip", "mode zip contradicts the URL"),  # silently ignored
        ("s3://bkt/x#mode=nczarr,file", "mode file contradicts the URL"),
        ("https://127.0.0.1:9000/bkt/x#mode=zarr,zip", "mode zip does not fit a web server"),
        ("s3://bkt/x#mode=zarr,xarray,noxarray", "noxarray and xarray contradict each other"),
    ],
    ids=["port-out-of-range", "port-not-a-number", "bad-ipv6", "s3-zip", "s3-file", "https-zip", "xarray-noxarray"],
)
def test_a_bad_url_or_contradictory_mode_is_one_line_and_exit_2(dirs, source, reason):
    _, mnt = dirs
    line = _one_line_error(run_nczfs("mount", source, str(mnt)))
    assert reason in line and not is_mounted(mnt)


@pytest.mark.parametrize("source, shown, char", [("s3://bkt/p\n#mode=s3", r"'s3://bkt/p\n#mode=s3'", r"\n"),
                                                 ("s3://bkt/p\r", r"'s3://bkt/p\r'", r"\r"),
                                                 ("\x1b[31ms3://bkt/p", r"'\x1b[31ms3://bkt/p'", r"\x1b")],
                         ids=["newline", "carriage-return", "escape"])
def test_a_source_holding_a_control_character_is_one_line_and_exit_2(dirs, source, shown, char):
    """A newline pasted into SOURCE: refused before any daemon starts (it was 'warning: error
    s3://bkt/p' and 'the daemon exited before the mount was ready', exit 1)."""
    _, mnt = dirs
    line = _one_line_error(run_nczfs("mount", source, str(mnt), "--endpoint-url", "http://127.0.0.1:9"))
    assert line == f"nczfs: SOURCE {shown} holds a control character ({char}); give it without"
    assert not is_mounted(mnt)


def test_a_mountpoint_holding_a_control_character_is_one_line_and_exit_2(dirs):
    src, mnt = dirs
    line = _one_line_error(run_nczfs("mount", str(src), f"{mnt}\n"))
    assert line == f"nczfs: MOUNTPOINT '{mnt}\\n' holds a control character (\\n); give it without"


def test_missing_mountpoint(dirs, tmp_path):
    src, _ = dirs
    assert "missing" in _one_line_error(run_nczfs("mount", str(src), str(tmp_path / "missing")))


def test_mountpoint_is_a_file(dirs, tmp_path):
    src, _ = dirs
    f = tmp_path / "file"
    f.write_text("x")
    assert "not a directory" in _one_line_error(run_nczfs("mount", str(src), str(f)))


def test_unknown_mount_option(dirs):
    src, mnt = dirs
    assert "frobnicate" in _one_line_error(run_nczfs("mount", str(src), str(mnt), "-o", "ro,frobnicate=1"))


def test_mountpoint_inside_source(dirs):
    src, _ = dirs
    (src / "m").mkdir()
    line = _one_line_error(run_nczfs("mount", str(src), str(src / "m")))
    assert "must not lie inside the source directory" in line


def test_mountpoint_inside_source_through_a_symlink(dirs, tmp_path):
    """The mount point is checked where the kernel would mount: a symlink into the source is
    the source's inside too (the daemon would read its own mount)."""
    src, _ = dirs
    (src / "m").mkdir()
    (tmp_path / "link").symlink_to(src / "m")
    try:
        line = _one_line_error(run_nczfs("mount", str(src), str(tmp_path / "link")))
    finally:
        unmount(src / "m")  # mounted there before this was checked
    assert f"{src}/m: the mount point must not lie inside the source directory" in line


@pytest.mark.parametrize("through_a_symlink", [False, True])
def test_a_cache_dir_inside_the_mount_point_is_refused(dirs, tmp_path, through_a_symlink):
    src, mnt = dirs
    cache = mnt / "cache"
    if through_a_symlink:
        (tmp_path / "link").symlink_to(mnt)
        cache = tmp_path / "link" / "cache"
    try:
        line = _one_line_error(run_nczfs("mount", str(src), str(mnt), "--cache-dir", str(cache)))
    finally:
        unmount(mnt)
    assert f"--cache-dir {cache}: must not lie inside the mount point" in line
    assert not is_mounted(mnt) and not (mnt / "cache").exists()


def test_a_file_that_is_no_zip_archive_is_refused(dirs, tmp_path):
    _, mnt = dirs
    z = tmp_path / "x.zip"
    z.write_bytes(b"")
    line = _one_line_error(run_nczfs("mount", str(z), str(mnt)))
    assert "x.zip: not a readable zip archive" in line and not is_mounted(mnt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mnt", "src", "x.zip"]  # no staging left


def test_umount_of_something_not_mounted(dirs):
    _, mnt = dirs
    line = _one_line_error(run_nczfs("umount", str(mnt)))
    assert f"{mnt}: not an nczfs mount point" in line


@pytest.mark.fuse
def test_file_url_source_and_double_mount_refused(dirs):
    src, mnt = dirs
    (src / "x.file").mkdir()
    (src / "x.file" / ".zgroup").write_text('{"zarr_format": 2}')
    with mounted(DirectoryBackend(src), mnt, source=f"file://{src}#mode=nczarr,file"):
        assert (mnt / "x.file" / ".zgroup").read_text() == '{"zarr_format": 2}'
        assert "already" in _one_line_error(run_nczfs("mount", str(src), str(mnt)))
    assert not is_mounted(mnt)


@pytest.mark.fuse
def test_a_mount_point_named_through_a_symlink(dirs, tmp_path):
    """A mount point given as a symlink is mounted where it leads (as mount(8) does), and every
    command finds the mount through the symlink too: stats, sync, umount, a second mount."""
    src, mnt = dirs
    link = tmp_path / "link"
    link.symlink_to(mnt)
    res = run_nczfs("mount", str(src), str(link), "--log-file", str(tmp_path / "log"))
    assert res.returncode == 0, res.stderr
    try:
        assert is_mounted(mnt)
        fd = os.open(link / "f", os.O_WRONLY | os.O_CREAT)
        try:
            os.write(fd, b"through ")
            subprocess.run(["true"], check=True, pass_fds=(fd,))  # the child's close stores nothing
            assert not (src / "f").exists()
            os.write(fd, b"the link")
        finally:
            os.close(fd)
        assert (src / "f").read_bytes() == b"through the link"
        assert "already a FUSE mount point" in _one_line_error(run_nczfs("mount", str(src), str(link)))
        assert run_nczfs("sync", str(link)).returncode == 0
        assert "write.closes" in run_nczfs("stats", str(link)).stdout
        # what README says: fusermount3 itself does not unmount through the link
        plain = subprocess.run(["fusermount3", "-u", str(link)], capture_output=True, text=True, check=False)
        assert plain.returncode != 0 and is_mounted(mnt), plain.stderr
        res = run_nczfs("umount", str(link))
        assert res.returncode == 0, res.stderr
        assert not is_mounted(mnt)
    finally:
        unmount(mnt)


def _daemon_pid(mnt) -> int:
    return read_control(str(mnt))["pid"]


def _gone(pid) -> bool:
    """The process has exited (no /proc entry, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def _wait_gone(pid, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.fuse
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_flushes_open_file_and_unmounts(dirs, sig):
    src, mnt = dirs
    res = run_nczfs("mount", str(src), str(mnt))
    assert res.returncode == 0, res.stderr
    pid = _daemon_pid(mnt)
    fd = os.open(mnt / "pending.bin", os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, b"x" * 100_000)
        assert not (src / "pending.bin").exists()  # buffered until close/fsync
        os.kill(pid, sig)
        assert _wait_gone(pid), "daemon did not exit after the signal"
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    assert not is_mounted(mnt)
    assert (src / "pending.bin").read_bytes() == b"x" * 100_000


@pytest.mark.fuse
def test_foreground_mode_stays_attached(dirs, tmp_path):
    src, mnt = dirs
    proc = subprocess.Popen([*NCZFS, "mount", "-f", str(src), str(mnt)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not is_mounted(mnt) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert is_mounted(mnt)
        (mnt / "g").write_text("hi")
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        err = proc.stderr.read()
        assert "mounted" in err and "unmounted" in err  # logs go to stderr in the foreground
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    assert (src / "g").read_text() == "hi"


@pytest.mark.fuse
def test_stale_mount_detected_and_cleaned(dirs):
    src, mnt = dirs
    assert run_nczfs("mount", str(src), str(mnt)).returncode == 0
    pid = _daemon_pid(mnt)
    os.kill(pid, signal.SIGKILL)
    assert _wait_gone(pid)
    try:
        line = _one_line_error(run_nczfs("mount", str(src), str(mnt)))
        assert "nczfs umount" in line
        res = run_nczfs("sync", str(mnt))  # a dead daemon stores nothing: exit 1, pointing at umount
        assert res.returncode == 1 and res.stderr == (
            f"nczfs: {mnt}: stale mount (its daemon has died); see 'nczfs umount {mnt}'\n"), res.stderr
        res = run_nczfs("stats", str(mnt))
        assert res.returncode == 2 and "not an nczfs mount point (Transport endpoint is not connected)" in res.stderr
        res = run_nczfs("umount", str(mnt))
        assert res.returncode == 0, res.stderr
        assert not is_mounted(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


@pytest.mark.fuse
def test_version_and_start_are_logged(dirs, tmp_path):
    src, mnt = dirs
    log = tmp_path / "log"
    with mounted(DirectoryBackend(src), mnt, log=log):
        pass
    text = log.read_text()
    assert "nczfs 0.1.0: mounting" in text and str(mnt) in text


def test_python_dash_m_entry_point():
    res = subprocess.run([sys.executable, "-m", "nczfs", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("nczfs ")


@pytest.mark.fuse
@pytest.mark.parametrize("how", ["nczfs umount", "fusermount3 -u"])
def test_unmount_stores_written_data_and_stops_the_daemon(dirs, how):
    src, mnt = dirs
    assert run_nczfs("mount", str(src), str(mnt)).returncode == 0
    try:
        pid = _daemon_pid(mnt)
        (mnt / "f").write_bytes(b"data")
        if how == "nczfs umount":
            res = run_nczfs("umount", str(mnt))
            assert res.returncode == 0, res.stderr
            assert _gone(pid)  # at once: nczfs umount waits for the daemon
        else:
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
            assert _wait_gone(pid)
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    assert not is_mounted(mnt)
    assert (src / "f").read_bytes() == b"data"


@pytest.mark.fuse
@pytest.mark.parametrize("opts, kib", [((), 4096), (("-o", "read_ahead_kb=512"), 512)])
def test_mount_sets_kernel_readahead(dirs, opts, kib):
    src, mnt = dirs
    with mounted(DirectoryBackend(src), mnt, *opts):
        dev = os.stat(mnt).st_dev
        path = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
        with open(path) as f:
            assert int(f.read()) == kib
