"""Shutdown paths under load: SIGTERM in the middle of a large write, and a second signal.

The daemon is started with ``nczfs mount`` (daemonised, as users and mount(8) start it);
the bytes are checked in the backing directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import trio

from nczfs.config.mountconfig import MountConfig
from nczfs.config.source import parse_source
from nczfs.daemon import mount as daemon_mount
from nczfs.fuse.control import read_control
from nczfs.store.directory.store import TMP_MARK
from tests.helpers import DirectoryBackend, is_mounted, mounted, run_nczfs

pytestmark = pytest.mark.fuse

MIB = 1 << 20
#: the writer is well past the 64 MiB spill threshold (pending data on disk) when the signal comes
SIGNAL_AFTER = 96 * MIB
#: a bound on the writer, should the daemon not stop
MAX_CHUNKS = 1024


def _chunk(i: int) -> bytes:
    return bytes([i % 251]) * MIB


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def _wait(cond, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _mount(src: Path, mnt: Path, log: Path) -> int:
    mnt.mkdir(exist_ok=True)
    res = run_nczfs("mount", str(src), str(mnt), "--log-file", str(log))
    assert res.returncode == 0, res.stderr
    return read_control(str(mnt))["pid"]


class Writer(threading.Thread):
    """Writes 1 MiB chunks to ``path`` until a write fails, is short, or ``stop`` is set."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path = path
        self.acked = 0
        self.error: OSError | None = None
        self.stop = threading.Event()
        self.far_enough = threading.Event()

    def run(self) -> None:
        fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
        try:
            for i in range(MAX_CHUNKS):
                if self.stop.is_set():
                    break
                n = os.write(fd, _chunk(i))
                self.acked += n
                if self.acked >= SIGNAL_AFTER:
                    self.far_enough.set()
                if n < MIB:
                    break
        except OSError as exc:
            self.error = exc
        finally:
            self.far_enough.set()
            try:
                os.close(fd)
            except OSError:
                pass


def test_sigterm_during_a_large_write_stores_every_acknowledged_byte(tmp_path):
    src, mnt, log = tmp_path / "src", tmp_path / "mnt", tmp_path / "daemon.log"
    src.mkdir()
    pid = _mount(src, mnt, log)
    writer = Writer(mnt / "big")
    try:
        writer.start()
        assert writer.far_enough.wait(120)
        acked_at_signal = writer.acked
        os.kill(pid, signal.SIGTERM)
        assert _wait(lambda: _gone(pid)), "the daemon did not exit after SIGTERM"
        writer.join(60)
        assert not writer.is_alive()
    finally:
        writer.stop.set()
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    assert not is_mounted(mnt)
    assert acked_at_signal >= SIGNAL_AFTER
    # every byte the writer was told was written is in the store, in one complete object
    size = os.path.getsize(src / "big")
    assert writer.acked <= size < writer.acked + MIB, (writer.acked, size, writer.error)
    with open(src / "big", "rb") as f:
        for i in range(size // MIB):
            assert f.read(MIB) == _chunk(i), f"chunk {i} of the stored object is wrong"
        assert f.read() == _chunk(size // MIB)[: size % MIB]
    assert sorted(os.listdir(src)) == ["big"]  # no temporary left behind
    text = log.read_text()
    assert "signal 15: flushing pending writes" in text and "Traceback" not in text


def test_second_signal_exits_at_once_while_the_first_flush_hangs(tmp_path):
    """The store is itself an nczfs mount whose daemon is stopped, so the first flush cannot end."""
    inner_src = tmp_path / "inner-src"
    inner_src.mkdir()
    with mounted(DirectoryBackend(inner_src), tmp_path / "inner") as inner:
        inner_pid = read_control(str(inner.path))["pid"]
        outer, log = tmp_path / "outer", tmp_path / "outer.log"
        outer_pid = _mount(inner.path, outer, log)
        fd = os.open(outer / "pending", os.O_CREAT | os.O_WRONLY)
        try:
            os.write(fd, b"cannot be stored: the store hangs")
            os.kill(inner_pid, signal.SIGSTOP)  # every request to the inner mount now waits
            try:
                os.kill(outer_pid, signal.SIGTERM)
                assert _wait(lambda: "signal 15: flushing pending writes" in log.read_text())
                assert not _gone(outer_pid)  # stuck in the flush, as intended
                os.kill(outer_pid, signal.SIGTERM)
                assert _wait(lambda: _gone(outer_pid)), "a second signal did not end the daemon"
                # what the daemon left is a stale mount that nczfs umount removes
                res = run_nczfs("umount", str(outer))
                assert res.returncode == 0 and "stale" in res.stderr, res.stderr
            finally:
                os.kill(inner_pid, signal.SIGCONT)
        finally:
            try:
                os.close(fd)
            except OSError:
                pass
            subprocess.run(["fusermount3", "-u", "-z", str(outer)], capture_output=True)
        assert not is_mounted(outer)
        assert "second signal 15: exiting without waiting for pending writes" in log.read_text()
        # the hung flush never reached the store: nothing half-written is left there
        assert not [n for n in os.listdir(inner_src) if n == "pending" or n.startswith(TMP_MARK)]


def test_a_mount_announced_after_its_loop_ended_does_not_wait_for_its_own_answers(tmp_path):
    """The daemon's first ``stat`` of its mountpoint, and its getxattr probe, go through the kernel
    to its own request loop. A signal that ended the loop before they were answered left the
    daemon waiting for them until someone unmounted it (a foreground mount signalled 56 ms after
    it showed, under load). The unanswered request is made here by a stopped daemon's mount:
    cancelled, the announcement ends at once; its stat ends (ENOTCONN or its answer) on its own."""
    inner_src = tmp_path / "inner-src"
    inner_src.mkdir()
    with mounted(DirectoryBackend(inner_src), tmp_path / "inner") as inner:
        inner_pid = read_control(str(inner.path))["pid"]
        # a name the kernel has not looked up: its stat is a request to the (stopped) daemon
        config = MountConfig(source=parse_source(str(inner_src)), mountpoint=str(inner.path / "never-looked-up"))

        async def announce_then_end() -> None:
            with trio.move_on_after(0.5):  # as the loop's end cancels the announcement
                await daemon_mount._announce_ready(config, lambda error: True)

        resume = threading.Timer(20, os.kill, (inner_pid, signal.SIGCONT))
        os.kill(inner_pid, signal.SIGSTOP)
        resume.start()
        try:
            started = time.monotonic()
            trio.run(announce_then_end)
            took = time.monotonic() - started
        finally:
            resume.cancel()
            os.kill(inner_pid, signal.SIGCONT)
    assert took < 10, f"the announcement waited {took:.1f} s for its own mount's answer"
