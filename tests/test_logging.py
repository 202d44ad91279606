"""What the daemon logs, and where: start line, --debug requests, medium failures, syslog."""

from __future__ import annotations

import errno
import logging
import os
import socket
import subprocess
import sys
import textwrap

import pyfuse3
import pytest

from nczfs.filesystem import ROOT_INO, Filesystem, FsOptions
from nczfs.fuse_ops import Operations
from nczfs.store.memory import MemoryStore
from nczfs.store.wrapper import FaultyStore
from nczfs.threads import ThreadedStore
from tests.helpers import DirectoryBackend, is_mounted, mounted, run_nczfs


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "src"
    (d / "d").mkdir(parents=True)
    (d / "d" / "a").write_bytes(b"abc")
    return d


@pytest.mark.fuse
def test_start_line_names_version_source_mountpoint_and_effective_options(src, tmp_path):
    log = tmp_path / "log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--read-only", "-o", "umask=027,metadata_ttl=2.5",
                 log=log) as m:
        pass
    start = [line for line in log.read_text().splitlines() if "mounting" in line]
    assert len(start) == 1, log.read_text()
    line = start[0]
    assert f"nczfs 0.1.0: mounting {src} on {m.path} (" in line
    for option in ("read_only=True", "umask=027", "metadata_ttl=2.5", "allow_other=False", "read_ahead_kb=4096"):
        assert option in line, line


@pytest.mark.fuse
def test_debug_logs_every_request(src, tmp_path):
    log = tmp_path / "log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--debug", log=log) as m:
        assert (m.path / "d" / "a").read_bytes() == b"abc"
        (m.path / "d" / "b").write_bytes(b"x" * 100_000)
    text = log.read_text()
    for request in ("request lookup(1, b'd'", "request open(", "request read(", "request create(",
                    "request write(", "<", "bytes>)", "request flush(", "request release("):
        assert request in text, request
    quiet = tmp_path / "quiet.log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt2", log=quiet) as m:
        (m.path / "d" / "a").read_bytes()
    assert "request " not in quiet.read_text()  # without --debug: none of that


async def test_a_medium_failure_is_one_log_line_naming_the_key_and_the_cause(caplog):
    raw = MemoryStore("log-test")
    raw.set("d/a", b"abc")
    store = FaultyStore(ThreadedStore(raw))
    ops = Operations(Filesystem(store, FsOptions(uid=0, gid=0, metadata_ttl=0)), 0)
    d = await ops.lookup(ROOT_INO, b"d")
    a = await ops.lookup(d.st_ino, b"a")
    fi = await ops.open(a.st_ino, os.O_RDONLY, None)
    store.fail("get", key="d/a")
    caplog.set_level(logging.INFO, logger="nczfs")
    with pytest.raises(pyfuse3.FUSEError) as err:
        await ops.read(fi.fh, 0, 3)
    assert err.value.errno == errno.EIO
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "'d/a'" in lines[0].getMessage() and "injected failure" in lines[0].getMessage()
    caplog.clear()
    with pytest.raises(pyfuse3.FUSEError):
        await ops.unlink(d.st_ino, b"missing", None)  # an ordinary ENOENT is no news
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.fuse
def test_daemon_without_log_file_logs_to_syslog(src, tmp_path):
    """Daemonised with no --log-file, lines go to the syslog socket (journald's /dev/log)."""
    sock_path = tmp_path / "syslog.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(30)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = textwrap.dedent(f"""
        import sys
        import nczfs.cli as cli
        cli.SYSLOG_ADDRESS = {str(sock_path)!r}
        sys.exit(cli.main(["mount", {str(src)!r}, {str(mnt)!r}]))
    """)
    try:
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and is_mounted(mnt), res.stderr
        messages = []
        while not any("mounted " in m for m in messages):
            messages.append(sock.recv(65536).decode())
        start = next(m for m in messages if "mounting" in m)
        assert "nczfs[" in start and "INFO nczfs.mount: nczfs 0.1.0: mounting" in start and str(src) in start
        assert start.startswith("<14>")  # facility user, priority info
    finally:
        if is_mounted(mnt):
            assert run_nczfs("umount", str(mnt)).returncode == 0
        sock.close()


def test_secret_looking_source_parameters_are_masked_in_logs():
    from nczfs.mount import loggable_source

    text = "s3://b/p#mode=nczarr,s3&aws_secret_access_key=XYZ&session_token=T0K&region=eu"
    assert loggable_source(text) == "s3://b/p#mode=nczarr,s3&aws_secret_access_key=***&session_token=***&region=eu"
    assert loggable_source("[password=hunter2]https://h/x") == "[password=***]https://h/x"
    assert loggable_source("/data/plain.file") == "/data/plain.file"


def test_an_answer_the_kernel_no_longer_awaits_is_logged_as_info_not_an_error(tmp_path):
    """pyfuse3 logs ERROR when a reply finds its request gone (a RELEASE racing the unmount);
    the daemon's log says INFO and why. pyfuse3's other reply failures stay errors."""
    from nczfs.cli import setup_logging
    from nczfs.config import MountConfig
    from nczfs.source import Source

    root, pyfuse3_log = logging.getLogger(), logging.getLogger("pyfuse3")
    saved = (root.handlers[:], root.level, pyfuse3_log.filters[:], pyfuse3_log.level)
    log = tmp_path / "log"
    try:
        config = MountConfig(Source("directory", str(tmp_path), text=str(tmp_path)), str(tmp_path), log_file=str(log))
        setup_logging(config, daemon=True)
        setup_logging(config, daemon=True)  # one filter, however often it is set up
        pyfuse3_log.error("fuse_release(): fuse_reply_* failed with %s", os.strerror(errno.ENOENT))
        pyfuse3_log.error("fuse_read(): fuse_reply_* failed with %s", os.strerror(errno.EINVAL))
        for h in root.handlers:
            h.flush()
    finally:
        for h in root.handlers:
            h.close()
        root.handlers[:], root.level, pyfuse3_log.filters[:] = saved[0], saved[1], saved[2]
        pyfuse3_log.setLevel(saved[3])
    lines = log.read_text().splitlines()
    assert len(lines) == 2, lines
    assert " INFO pyfuse3: fuse_release(): fuse_reply_* failed with No such file or directory (the kernel no longer" in lines[0]
    assert " ERROR pyfuse3: fuse_read(): fuse_reply_* failed with Invalid argument" in lines[1]
