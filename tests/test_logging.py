"""What the daemon logs, and where: start line, --debug requests, medium failures, syslog."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pyfuse3
import pytest

from nczfs.fs.filesystem import Filesystem
from nczfs.fs.inodes import ROOT_INO
from nczfs.fs.options import FsOptions
from nczfs.fuse.ops import Operations
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.threads import ThreadedStore
from nczfs.toolbox.errors import Stale
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
    assert "the store's default" not in log.read_text()  # the TTL given is the TTL used


@pytest.mark.fuse
def test_a_metadata_ttl_not_given_is_logged_once_the_store_decided_it(src, tmp_path):
    log = tmp_path / "log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt", log=log):
        pass
    assert "metadata_ttl=None" in log.read_text()  # the start line: not given
    assert "metadata_ttl=60: the store's default for a writable mount" in log.read_text()


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


async def _opened_d_a():
    """Operations over a store holding ``d/a`` (b"abc") whose faults a test injects; ``d``'s
    entry and ``d/a`` opened."""
    raw = MemoryStore("log-test")
    raw.set("d/a", b"abc")
    store = FaultyStore(ThreadedStore(raw))
    ops = Operations(Filesystem(store, FsOptions(uid=0, gid=0, metadata_ttl=0)), 0)
    d = await ops.lookup(ROOT_INO, b"d")
    a = await ops.lookup(d.st_ino, b"a")
    return store, ops, d, await ops.open(a.st_ino, os.O_RDONLY, None)


async def test_a_medium_failure_is_one_log_line_naming_the_key_and_the_cause(caplog):
    store, ops, d, fi = await _opened_d_a()
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
async def test_a_request_whose_parts_fail_alike_answers_their_errno_without_a_traceback(caplog):
    """A read of several chunks at once whose chunks fail (a group of the filesystem's errors)
    answers the first one's errno, logged as that error is; a group holding anything else is a
    bug: EIO, logged with its traceback."""
    store, ops, d, fi = await _opened_d_a()
    caplog.set_level(logging.INFO, logger="nczfs")
    store.fail("get", ExceptionGroup("chunks", [Stale("'d/a/0': 5 bytes where the file's version has 7"),
                                                ExceptionGroup("inner", [Stale("'d/a/1': gone")])]), key="d/a", times=1)
    with pytest.raises(pyfuse3.FUSEError) as err:
        await ops.read(fi.fh, 0, 3)
    assert err.value.errno == errno.ESTALE
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    store.fail("get", ExceptionGroup("chunks", [Stale("'d/a/0': gone"), ValueError("a bug")]), key="d/a", times=1)
    with pytest.raises(pyfuse3.FUSEError) as err:
        await ops.read(fi.fh, 0, 3)
    assert err.value.errno == errno.EIO
    bad = [r for r in caplog.records if "failed unexpectedly" in r.getMessage()]
    assert len(bad) == 1 and bad[0].exc_info is not None
    assert await ops.read(fi.fh, 0, 3) == b"abc"


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
        import nczfs.cli as cli, nczfs.toolbox.logs as logs
        logs.SYSLOG_ADDRESS = {str(sock_path)!r}
        sys.exit(cli.main(["mount", {str(src)!r}, {str(mnt)!r}]))
    """)
    try:
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and is_mounted(mnt), res.stderr
        messages = []
        while not any("mounted " in m for m in messages):
            messages.append(sock.recv(65536).decode())
        start = next(m for m in messages if "mounting" in m)
        assert "nczfs[" in start and "INFO nczfs.daemon.mount: nczfs 0.1.0: mounting" in start and str(src) in start
        assert start.startswith("<14>")  # facility user, priority info
    finally:
        if is_mounted(mnt):
            assert run_nczfs("umount", str(mnt)).returncode == 0
        sock.close()


def test_secret_looking_source_parameters_are_masked_in_logs():
    from nczfs.daemon.mount import loggable_source

    text = "s3://b/p#mode=nczarr,s3&aws_secret_access_key=XYZ&session_token=T0K&region=eu"
    assert loggable_source(text) == "s3://b/p#mode=nczarr,s3&aws_secret_access_key=***&session_token=***&region=eu"
    assert loggable_source("[password=hunter2]https://h/x") == "[password=***]https://h/x"
    assert loggable_source("/data/plain.file") == "/data/plain.file"


def test_an_answer_the_kernel_no_longer_awaits_is_logged_as_info_not_an_error(tmp_path):
    """pyfuse3 logs ERROR when a reply finds its request gone (a RELEASE racing the unmount);
    the daemon's log says INFO and why. pyfuse3's other reply failures stay errors."""
    from nczfs.toolbox import logs

    root, pyfuse3_log = logging.getLogger(), logging.getLogger("pyfuse3")
    saved = (root.handlers[:], root.level, pyfuse3_log.filters[:], pyfuse3_log.level)
    log = tmp_path / "log"
    try:
        logs.setup(logs.Destination("file", str(log)))
        logs.setup(logs.Destination("file", str(log)))  # one filter, however often it is set up
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


def _mount_script(src, mnt, *args: str, syslog: str = "/nonexistent/dev-log") -> str:
    """``nczfs mount`` as a daemon, with /dev/log taken to be ``syslog``."""
    return textwrap.dedent(f"""
        import sys
        import nczfs.cli as cli, nczfs.toolbox.logs as logs
        logs.SYSLOG_ADDRESS = {syslog!r}
        sys.exit(cli.main(["mount", {str(src)!r}, {str(mnt)!r}, *{list(args)!r}]))
    """)


@pytest.mark.fuse
def test_daemon_without_dev_log_logs_to_a_default_file_named_at_mount_and_in_stats(src, tmp_path):
    """No /dev/log and no --log-file: a file under /var/log/nczfs/ (root), never nowhere."""

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    expected = "/var/log/nczfs/" + str(mnt).strip("/").replace("/", "-") + ".log"
    env = {k: v for k, v in os.environ.items() if k != "NCZFS_LOG_DIR"}  # conftest's folder: not here
    try:
        res = subprocess.run([sys.executable, "-c", _mount_script(src, mnt)], capture_output=True, text=True, timeout=60,
                             env=env)
        assert res.returncode == 0 and is_mounted(mnt), res.stderr
        assert res.stderr.strip() == f"nczfs: logging to {expected}"
        (mnt / "d" / "a").read_bytes()
        stats = run_nczfs("stats", str(mnt))
        assert stats.returncode == 0 and any(line.split() == ["log", expected] for line in stats.stdout.splitlines()), stats.stdout
        assert any(line.split() == ["log_level", "info"] for line in stats.stdout.splitlines())
        assert f"mounting {src} on {mnt}" in open(expected).read()
    finally:
        if is_mounted(mnt):
            assert run_nczfs("umount", str(mnt)).returncode == 0
        with contextlib.suppress(FileNotFoundError):
            os.unlink(expected)


def test_default_log_file_of_other_users_is_under_xdg_state_home(monkeypatch, tmp_path):
    from nczfs.toolbox import logs

    monkeypatch.setenv("NCZFS_LOG_DIR", str(tmp_path / "logs"))
    assert logs.default_log_file("/mnt/x") == str(tmp_path / "logs" / "mnt-x.log")
    monkeypatch.delenv("NCZFS_LOG_DIR")

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert logs.default_log_file("/home/u/mnt/ocean") == str(tmp_path / "state" / "nczfs" / "home-u-mnt-ocean.log")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", "/home/u")
    assert logs.default_log_file("/data") == "/home/u/.local/state/nczfs/data.log"
    monkeypatch.setattr(logs, "SYSLOG_ADDRESS", str(tmp_path / "no-socket"))
    dest = logs.choose(None, "/mnt/x", daemon=True)
    assert dest.kind == "file" and dest.path == "/home/u/.local/state/nczfs/mnt-x.log" or os.geteuid() == 0
    # a socket file nobody listens on is not the journal either
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(dead))
    s.close()
    assert not logs.syslog_listening(str(dead))


def test_verbosity_flags_choose_the_log_level(tmp_path):
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser

    mnt, src = tmp_path / "mnt", tmp_path / "src"
    mnt.mkdir()
    src.mkdir()

    def level(*args: str) -> str:
        return build_config(build_parser().parse_args(["mount", str(src), str(mnt), *args])).log_level

    assert level() == "info"
    assert level("-q") == "warning"
    assert level("-v") == "debug"
    assert level("-vv") == "trace"
    assert level("--debug") == "trace"
    assert level("-o", "debug") == "trace"
    assert level("--log-level", "ERROR") == "error"
    assert level("-o", "log_level=debug") == "debug"
    assert level("-vv", "--log-level", "warning") == "warning"  # the explicit level wins
    bad = run_nczfs("mount", str(src), str(mnt), "-o", "log_level=loud")
    assert bad.returncode == 2 and "must be one of error, warning, info, debug, trace" in bad.stderr


@pytest.mark.fuse
def test_quiet_and_json_logs(src, tmp_path):
    log = tmp_path / "q.log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "-q", log=log) as m:
        (m.path / "d" / "a").read_bytes()
    assert "INFO" not in log.read_text()
    log = tmp_path / "j.log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt2", "--log-format", "json", "-vv", log=log) as m:
        (m.path / "d" / "a").read_bytes()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert {"time", "level", "logger", "pid", "message"} <= set(records[0])
    assert any(r["level"] == "INFO" and r["message"].startswith("nczfs 0.1.0: mounting") for r in records)
    assert any(r["level"] == "TRACE" and r["message"].startswith("request read(") for r in records)


@pytest.mark.fuse
def test_a_running_daemon_changes_level_on_sigusr2_and_log_level(src, tmp_path):
    log = tmp_path / "log"
    with mounted(DirectoryBackend(src), tmp_path / "mnt", log=log) as m:
        pid = json.loads((m.path / ".nczfs").read_bytes())["pid"]

        def level() -> str:  # what nczfs log-level MNT prints, read without starting a process
            return json.loads((m.path / ".nczfs").read_bytes())["log_level"]

        shown = run_nczfs("log-level", str(m.path))
        assert shown.returncode == 0 and shown.stdout == "info\n", shown.stderr
        assert level() == "info"
        (m.path / "d" / "a").read_bytes()
        assert "request " not in log.read_text()
        def toggled_to(name: str) -> str:
            os.kill(pid, signal.SIGUSR2)
            for _ in range(200):
                if level() == name:
                    break
                time.sleep(0.05)
            return level()

        assert toggled_to("trace") == "trace"
        os.stat(m.path / "d" / "a")
        assert "request " in log.read_text()
        assert toggled_to("info") == "info"  # and back
        res = run_nczfs("log-level", str(m.path), "warning")
        assert res.returncode == 0, res.stderr
        assert level() == "warning"
        assert "log level now warning" in log.read_text()
        bad = run_nczfs("log-level", str(m.path), "loud")
        assert bad.returncode == 2 and "invalid choice" in bad.stderr


def _debug_lines_of_work(backend, mnt, log, *args: str, switch_to: str | None = None) -> list[str]:
    """The debug lines (without time and pid) a write, a copy and a rename log on a mount."""
    with mounted(backend, mnt, *args, log=log) as m:
        if switch_to:
            res = run_nczfs("log-level", str(m.path), switch_to)
            assert res.returncode == 0, res.stderr
        start = len(log.read_text().splitlines())
        (m.path / "d" / "w").write_bytes(b"x" * 5000)
        subprocess.run(["cp", str(m.path / "d" / "w"), str(m.path / "d" / "c")], check=True)
        os.rename(m.path / "d" / "c", m.path / "d" / "r")
        assert run_nczfs("sync", str(m.path)).returncode == 0
        lines = log.read_text().splitlines()[start:]
    return [line.split(" ", 4)[4] for line in lines if line.split(" ")[3:4] == ["DEBUG"]]


@pytest.mark.fuse
def test_log_level_debug_on_a_running_mount_logs_what_a_mount_started_at_debug_logs(tmp_path):
    """A write, a copy (cp) and a rename log the same debug lines after ``nczfs log-level MNT
    debug`` as on a mount started at debug; the library lines a one-off import writes (numcodecs'
    codec registrations, in the background after the mount is ready) are trace's, not debug's."""
    runs = {}
    for how, args, switch in (("started", ("--log-level", "debug"), None), ("switched", (), "debug")):
        src = tmp_path / f"src-{how}"
        (src / "d").mkdir(parents=True)
        runs[how] = _debug_lines_of_work(DirectoryBackend(src), tmp_path / f"mnt-{how}", tmp_path / f"{how}.log",
                                         *args, switch_to=switch)
    assert runs["switched"] == runs["started"]
    assert "nczfs.fs.writeback: stored 'd/w': 5000 bytes" in runs["switched"]
    assert "nczfs.fs.writeback: stored 'd/c': 5000 bytes" in runs["switched"]
    assert "nczfs.fs.namespace: renamed 'd/c' to 'd/r'" in runs["switched"]
    started = (tmp_path / "started.log").read_text()
    assert "Registering codec" not in started  # numcodecs' import: not a line of debug


def test_the_azure_sdks_request_and_answer_lines_show_only_at_trace():
    """azure-storage-blob (GCS and Azure conditional deletes and large writes) logs every
    request's and answer's headers at info (18 lines a DELETE): at info and debug they are not
    logged, at trace they are."""
    from nczfs.toolbox import logs

    http = logging.getLogger("azure.core.pipeline.policies.http_logging_policy")
    saved = {name: logging.getLogger(name).level for name in ("", *logs.QUIET_BELOW)}
    state = dict(logs.STATE)
    try:
        for level in ("info", "debug"):
            logs.set_level(level)
            assert not http.isEnabledFor(logging.INFO), level
        logs.set_level("trace")
        assert http.isEnabledFor(logging.INFO)
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        logs.STATE.clear()
        logs.STATE.update(state)
