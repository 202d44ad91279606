"""holders.py: which process still holds a file open, read from the real /proc of this process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from nczfs.fs.holders import (
    checker,
    descriptors_on,
    process_of,
    someone_elses_close,
)


def _mnt_and_ino(fd: int) -> tuple[int, int]:
    with open(f"/proc/self/fdinfo/{fd}") as f:
        info = dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)
    return int(info["mnt_id"]), os.fstat(fd).st_ino


def test_descriptors_are_counted_by_mount_and_inode(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x")
    a = os.open(p, os.O_RDONLY)
    try:
        mnt, ino = _mnt_and_ino(a)
        assert descriptors_on(os.getpid(), mnt, ino) == 1
        b = os.dup(a)
        assert descriptors_on(os.getpid(), mnt, ino) == 2
        os.close(b)
        assert descriptors_on(os.getpid(), mnt, ino + 1) == 0
        assert descriptors_on(os.getpid(), mnt + 100000, ino) == 0
        # only descriptors whose path is below the mount's are looked at
        assert descriptors_on(os.getpid(), mnt, ino, under=str(tmp_path)) == 1
        assert descriptors_on(os.getpid(), mnt, ino, under=str(tmp_path / "elsewhere")) == 0
    finally:
        os.close(a)
    assert descriptors_on(os.getpid(), mnt, ino) == 0
    assert descriptors_on(2**22 + 12345, mnt, ino) is None  # no such process


def test_process_of_a_thread_is_its_thread_group():
    tids: list[int] = []
    t = threading.Thread(target=lambda: tids.append(threading.get_native_id()))
    t.start()
    t.join()
    assert process_of(os.getpid()) == os.getpid()
    assert process_of(threading.get_native_id()) == os.getpid()
    assert process_of(2**22 + 12345) is None


def test_a_close_is_someone_elses_while_the_opener_holds_a_descriptor_per_description(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x")
    me = threading.get_native_id()
    a = os.open(p, os.O_RDONLY)
    mnt, ino = _mnt_and_ino(a)
    try:
        # one description, still held: a child's copy (or a duplicate) was closed
        assert someone_elses_close(me, mnt, ino, [me])
        b = os.open(p, os.O_RDONLY)
        # two descriptions, one descriptor left: the opener closed one of its own
        os.close(b)
        assert not someone_elses_close(me, mnt, ino, [me, me])
    finally:
        os.close(a)
    assert not someone_elses_close(me, mnt, ino, [me])  # the opener's own close
    assert not someone_elses_close(0, mnt, ino, [0])  # unknown opener
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True)
    gone = int(child.stdout)
    assert not someone_elses_close(gone, mnt, ino, [gone])  # the opener is gone


def test_the_checker_finds_a_mount_reached_through_a_symlinked_parent(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    info = tmp_path / "mountinfo"
    info.write_text(f"22 1 0:21 / / rw - ext4 /dev/root rw\n52 22 0:45 / {tmp_path}/real/mnt rw - fuse.nczfs nczfs rw\n")
    assert checker(str(tmp_path / "link" / "mnt"), str(info)) is not None
    assert checker(str(tmp_path / "real" / "mnt"), str(info)) is not None
    assert checker(str(tmp_path / "real" / "other"), str(info)) is None
