"""systemd integration: the unit files, the readiness protocol, and the unit's own commands.

There is no systemd (PID 1) on the test machine, so the tests play its part: they own the
``NOTIFY_SOCKET`` (a datagram socket they read), run the ``ExecStartPre=``, ``ExecStart=``
and ``ExecStop=`` lines of ``systemd/nczfs@.service`` with the variables of an
``/etc/nczfs/NAME.conf``-style file expanded as systemd does, and stop the service the way
systemd does (ExecStop, then SIGTERM to a main process still running).
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from nczfs.fuse.control import read_control
from tests.helpers import NCZFS, DirectoryBackend, is_mounted, mounted, run_nczfs

UNITS = Path(__file__).resolve().parents[1] / "systemd"
SERVICE = UNITS / "nczfs@.service"
MOUNT_UNIT = UNITS / "mnt-ocean.mount"


def test_unit_files_pass_systemd_analyze_verify():
    res = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(SERVICE), str(MOUNT_UNIT)],
        capture_output=True, text=True, timeout=120,
    )
    # unknown keys are only warnings (exit 0): any output at all is a failure
    assert res.returncode == 0 and not res.stdout.strip() and not res.stderr.strip(), res.stdout + res.stderr


def test_service_unit_is_type_notify_and_restarts_on_failure():
    unit = _unit(SERVICE)
    assert unit["Service"]["Type"] == "notify"
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Service"]["EnvironmentFile"] == "/etc/nczfs/%i.conf"
    assert "--systemd" in unit["Service"]["ExecStart"].split()


def test_example_mount_unit_matches_its_mount_point():
    unit = _unit(MOUNT_UNIT)
    where = unit["Mount"]["Where"]
    assert unit["Mount"]["Type"] == "fuse.nczfs"
    escaped = subprocess.run(["systemd-escape", "-p", "--suffix=mount", where], capture_output=True, text=True)
    assert escaped.stdout.strip() == MOUNT_UNIT.name


def _unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.optionxform = str  # type: ignore[assignment]
    cp.read(path)
    return cp


# ------------------------------------------------------------------ the notify protocol


class NotifySocket:
    """A test-owned ``NOTIFY_SOCKET``: a bound AF_UNIX datagram socket (a path or ``@abstract``)."""

    def __init__(self, tmp_path: Path, abstract: bool):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"nczfs-test-{os.getpid()}-{id(self)}"
            self.sock.bind(b"\0" + name.encode())
            self.env = "@" + name
        else:
            path = tmp_path / "notify.sock"
            self.sock.bind(str(path))
            self.env = str(path)
        self.messages: list[str] = []

    def wait_for(self, start: str, timeout: float = 30.0) -> list[str]:
        """Read messages until one has a line beginning with ``start``; returns that message's lines."""
        self.sock.settimeout(timeout)
        while True:
            msg = self.sock.recv(65536).decode()
            self.messages.append(msg)
            lines = msg.split("\n")
            if any(line.startswith(start) for line in lines):
                return lines

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["path", "abstract"])
def notify_socket(request, tmp_path):
    ns = NotifySocket(tmp_path, abstract=request.param == "abstract")
    yield ns
    ns.close()


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    return src, mnt


def _stop(proc: subprocess.Popen, mnt: Path) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


@pytest.mark.fuse
def test_readiness_status_and_stopping_over_notify_socket(notify_socket, tmp_path):
    src, mnt = _dirs(tmp_path)
    (src / "a").write_bytes(b"in the store")
    env = {**os.environ, "NOTIFY_SOCKET": notify_socket.env}
    proc = subprocess.Popen([*NCZFS, "mount", "--systemd", str(src), str(mnt)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        ready = notify_socket.wait_for("READY=1")
        # READY=1 only once the mount answers: it does, at once, without waiting
        assert is_mounted(mnt) and (mnt / "a").read_bytes() == b"in the store"
        assert f"STATUS=serving {src} on {mnt}" in ready
        assert proc.poll() is None  # --systemd stays in the foreground (it is the main process)
        fd = os.open(mnt / "pending", os.O_CREAT | os.O_WRONLY)
        os.write(fd, b"buffered until close")
        proc.send_signal(signal.SIGTERM)
        stopping = notify_socket.wait_for("STOPPING=1")
        assert any(line.startswith("STATUS=signal 15") for line in stopping)
        assert proc.wait(timeout=30) == 0
        try:
            os.close(fd)
        except OSError:
            pass
        err = proc.stderr.read()
    finally:
        _stop(proc, mnt)
    assert (src / "pending").read_bytes() == b"buffered until close"
    assert not any(m.startswith("READY=1") for m in notify_socket.messages[1:])  # READY once
    # stderr goes to the journal: every line has a <priority> prefix
    lines = err.strip().splitlines()
    assert lines and all(re.match(r"<[0-7]>", line) for line in lines), err
    assert any(line.startswith("<6>INFO nczfs.daemon.mount: nczfs ") and "mounting" in line for line in lines)


@pytest.mark.fuse
def test_failed_start_reports_status_and_no_readiness(tmp_path):
    ns = NotifySocket(tmp_path, abstract=False)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    bad_zip = tmp_path / "bad.zip"
    bad_zip.write_bytes(b"not a zip archive")
    env = {**os.environ, "NOTIFY_SOCKET": ns.env}
    try:
        # the store cannot be opened: STATUS= says why, an error line goes to the journal, exit 2
        res = subprocess.run([*NCZFS, "mount", "--systemd", str(bad_zip), str(mnt)],
                             env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2
        assert any(line.startswith("<3>") and str(bad_zip) in line for line in res.stderr.splitlines()), res.stderr
        status = ns.wait_for(f"STATUS=failed: {bad_zip}: ")
        assert "READY=1" not in status
        # a bad argument fails before anything is set up: nothing is sent at all
        res = subprocess.run([*NCZFS, "mount", "--systemd", str(tmp_path / "missing"), str(mnt)],
                             env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and "missing" in res.stderr
        ns.sock.setblocking(False)
        with pytest.raises(BlockingIOError):
            ns.sock.recv(65536)
        assert not any("READY=1" in m for m in ns.messages)
    finally:
        ns.close()
    assert not is_mounted(mnt)


# ------------------------------------------------------- the unit's commands, run as systemd would


def _expand(line: str, env: dict[str, str]) -> list[str]:
    """systemd's rules for one Exec line: ``${VAR}`` alone is one argument, ``$VAR`` splits."""
    words = []
    for word in shlex.split(line):
        if m := re.fullmatch(r"\$\{(\w+)\}", word):
            words.append(env.get(m.group(1), ""))
        elif m := re.fullmatch(r"\$(\w+)", word):
            words.extend(env.get(m.group(1), "").split())
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda mm: env.get(mm.group(1), ""), word))
    return words


def _conf(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            env[k] = v
    return env


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.fuse
def test_unit_start_and_stop_commands_store_pending_writes(tmp_path):
    """ExecStartPre, ExecStart (Type=notify) and ExecStop from the unit, with a NAME.conf."""
    unit = _unit(SERVICE)["Service"]
    src, mnt = _dirs(tmp_path)
    (src / "stored").write_bytes(b"s")
    conf = tmp_path / "test.conf"
    log = tmp_path / "daemon.log"
    conf.write_text(f"SOURCE={src}\nMOUNTPOINT={mnt}\nOPTIONS=metadata_ttl=0,umask=027,log_file={log}\n")
    env = {"OPTIONS": "", **_conf(conf)}
    ns = NotifySocket(tmp_path, abstract=True)
    proc = None
    try:
        assert _run(_expand(unit["ExecStartPre"], env)).returncode == 0  # nothing stale: does nothing
        proc = subprocess.Popen(_expand(unit["ExecStart"], env), env={**os.environ, "NOTIFY_SOCKET": ns.env},
                                stderr=subprocess.PIPE, text=True)
        ns.wait_for("READY=1")
        fd = os.open(mnt / "f", os.O_CREAT | os.O_WRONLY)
        os.write(fd, b"pending at stop")
        assert "umask=027" in log.read_text()  # OPTIONS reached the daemon
        # systemctl stop: ExecStop (the mount is busy: it stores, then cannot unmount), then SIGTERM
        stop = _run(_expand(unit["ExecStop"], env))
        assert (src / "f").read_bytes() == b"pending at stop"
        if proc.poll() is None:
            assert stop.returncode != 0 and "busy" in stop.stderr.lower()
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        try:
            os.close(fd)  # the mount is gone: ENOTCONN; its data was stored by ExecStop
        except OSError:
            pass
    finally:
        ns.close()
        if proc is not None:
            _stop(proc, mnt)
    assert not is_mounted(mnt)


@pytest.mark.fuse
def test_unit_stop_of_an_idle_mount_needs_no_signal(tmp_path):
    unit = _unit(SERVICE)["Service"]
    src, mnt = _dirs(tmp_path)
    env = {"SOURCE": str(src), "MOUNTPOINT": str(mnt), "OPTIONS": ""}
    ns = NotifySocket(tmp_path, abstract=False)
    proc = subprocess.Popen(_expand(unit["ExecStart"], env), env={**os.environ, "NOTIFY_SOCKET": ns.env},
                            stderr=subprocess.PIPE, text=True)
    try:
        ns.wait_for("READY=1")
        (mnt / "g").write_bytes(b"closed before stop")
        stop = _run(_expand(unit["ExecStop"], env))
        assert stop.returncode == 0, stop.stderr
        assert proc.poll() is not None  # nczfs umount returns after the daemon exited
        assert proc.returncode == 0
        ns.wait_for("STOPPING=1")
    finally:
        ns.close()
        _stop(proc, mnt)
    assert (src / "g").read_bytes() == b"closed before stop"


@pytest.mark.fuse
def test_umount_stale_only_removes_a_stale_mount_and_leaves_a_live_one(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    with mounted(DirectoryBackend(src), mnt):
        res = run_nczfs("umount", "--stale-only", str(mnt))
        assert res.returncode == 0 and is_mounted(mnt)  # a live mount is left alone
        (mnt / "x").write_bytes(b"x")
    assert run_nczfs("umount", "--stale-only", str(mnt)).returncode == 0  # not mounted: nothing to do
    assert run_nczfs("mount", str(src), str(mnt)).returncode == 0
    pid = read_control(str(mnt))["pid"]
    os.kill(pid, signal.SIGKILL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.statvfs(mnt)
            except OSError:
                break
            time.sleep(0.05)
        res = run_nczfs("umount", "--stale-only", str(mnt))
        assert res.returncode == 0 and "stale" in res.stderr
        assert not is_mounted(mnt)
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


def test_notify_without_socket_does_nothing(monkeypatch):
    from nczfs.daemon.notify import notify

    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
