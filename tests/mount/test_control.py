"""The control file ``MOUNTPOINT/.nczfs`` (nczfs/fuse/control.py) and the control socket
(nczfs/daemon/controlsock.py): ``nczfs umount`` and ``nczfs stats`` read the pid and counters from the
control file, ``nczfs sync`` and ``nczfs umount`` ask the daemon to store over the socket.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from nczfs.fuse import control
from nczfs.fuse.control import NotAnNczfsMount, read_control
from tests.helpers import DirectoryBackend, delta, is_mounted, mounted, run_nczfs

pytestmark = pytest.mark.fuse


def err(fn, *args) -> int:
    with pytest.raises(OSError) as info:
        fn(*args)
    return info.value.errno


@pytest.fixture
def backing(tmp_path) -> DirectoryBackend:
    b = DirectoryBackend(tmp_path / "backing")
    b.put("a", b"a")
    b.put(control.NAME, b"an object of the reserved name")
    b.put(f"sub/{control.NAME}", b"below the root: an ordinary file")
    return b


def test_the_control_file_is_readable_and_hidden_from_listings(backing, tmp_path):
    with mounted(backing, tmp_path / "mnt") as m:
        path = m.path / control.NAME
        st, root = os.stat(path), os.stat(m.path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o444 and st.st_size == 0
        assert (st.st_ino, st.st_uid, st.st_gid) == (control.INO, root.st_uid, root.st_gid)
        data = read_control(str(m.path))
        assert bytes(m.path) in Path(f"/proc/{data['pid']}/cmdline").read_bytes().split(b"\0")  # the daemon
        assert all(isinstance(v, int) for v in data["counters"].values()) and "fuse.getxattr" in data["counters"]
        assert path.read_text().startswith('{"counters": {')  # size 0 does not cut the read
        # never listed, and shadows the store's object of that name; a deeper one is a plain file
        assert sorted(os.listdir(m.path)) == ["a", "sub"]
        found = subprocess.run(["find", str(m.path)], capture_output=True, text=True, check=True).stdout.split()
        assert sorted(found) == sorted(str(m.path / p) for p in ("", "a", "sub", f"sub/{control.NAME}"))
        subprocess.run(["cp", "-r", f"{m.path}/.", str(tmp_path / "copy")], check=True)
        assert sorted(os.listdir(tmp_path / "copy")) == ["a", "sub"]
        assert (tmp_path / "copy" / "sub" / control.NAME).read_bytes() == b"below the root: an ordinary file"
    assert backing.read(control.NAME) == b"an object of the reserved name"


def test_the_control_file_refuses_every_change(backing, tmp_path):
    """Contents (open for writing, truncate, chmod, utime): EACCES; the name (unlink, rename, link): EPERM."""
    with mounted(backing, tmp_path / "mnt") as m:
        path, a = m.path / control.NAME, m.path / "a"
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC, os.O_WRONLY | os.O_APPEND):
            assert err(os.open, path, flags) == errno.EACCES, flags
        assert err(os.truncate, path, 0) == errno.EACCES
        assert err(os.chmod, path, 0o644) == errno.EACCES
        assert err(os.utime, path, (0, 0)) == errno.EACCES
        assert err(os.unlink, path) == errno.EPERM
        assert err(os.rename, path, m.path / "b") == errno.EPERM
        assert err(os.rename, a, path) == errno.EPERM
        assert err(os.link, path, m.path / "b") == errno.EPERM
        assert err(os.mkdir, path) == errno.EEXIST
        assert err(os.open, path, os.O_CREAT | os.O_EXCL | os.O_WRONLY) == errno.EEXIST
        assert sorted(os.listdir(m.path)) == ["a", "sub"] and a.read_bytes() == b"a"
        assert read_control(str(m.path))["pid"] > 0
    assert backing.keys() == sorted(["a", control.NAME, f"sub/{control.NAME}"])
    assert backing.read(control.NAME) == b"an object of the reserved name"


def test_sync_works_after_a_setxattr_with_xattr_create_or_replace(backing, tmp_path):
    """pyfuse3 asks getxattr before a setxattr with XATTR_CREATE or XATTR_REPLACE and passes its
    answer on: the daemon answered ENOSYS, the kernel then turned setxattr off for the whole
    mount (fsstress does it), and `nczfs sync`, a setxattr, failed for the rest of its life. Now
    the daemon answers that getxattr ENODATA, and `nczfs sync` uses no xattr at all (its control
    socket). The kernel still answers programs' getxattr itself (EOPNOTSUPP): the mount turned it
    off once at start, so that ``ls -l`` costs no getxattr request (it asked two a file)."""
    for i in range(20):
        backing.put(f"d/f{i}", b"x")
    with mounted(backing, tmp_path / "mnt") as m:
        f = m.path / "a"
        assert read_control(str(m.path))["counters"]["fuse.getxattr"] == 1  # the mount's own, at start
        for i in range(20):
            assert err(os.getxattr, m.path / "d" / f"f{i}", "security.selinux") == errno.EOPNOTSUPP
        subprocess.run(["ls", "-lR", str(m.path)], capture_output=True, check=True)
        assert read_control(str(m.path))["counters"]["fuse.getxattr"] == 1
        assert err(os.setxattr, f, "user.a", b"1", os.XATTR_CREATE) == errno.ENOTSUP
        assert err(os.setxattr, f, "user.a", b"1", os.XATTR_REPLACE) == errno.ENODATA
        assert err(os.setxattr, f, "user.a", b"1") == errno.ENOTSUP  # still answered by the daemon
        assert read_control(str(m.path))["counters"]["fuse.getxattr"] == 3  # the two setxattr checks
        assert os.listxattr(f) == []
        with open(m.path / "pending", "wb") as fh:
            fh.write(b"stored by nczfs sync")
            fh.flush()  # to the daemon's buffer; the object is stored at close or sync
            assert not backing.exists("pending")
            res = run_nczfs("sync", str(m.path))
            assert res.returncode == 0, res.stderr
            assert backing.read("pending") == b"stored by nczfs sync"
        res = run_nczfs("stats", str(m.path))
        assert res.returncode == 0 and dict(ln.split() for ln in res.stdout.splitlines())["fuse.getxattr"] == "3"
    assert not is_mounted(m.path)


def _as_user_in_process(user, fn) -> tuple[int, str]:
    """Run ``fn()`` (its return value the exit code) in a child process of this one with
    ``user``'s uid and gid, and return that code and what it wrote to stderr. In this process,
    not a new one: the test's Python may not be readable by that user."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 99
        try:
            os.close(r)
            os.dup2(w, 2)
            sys.stderr = open(2, "w", closefd=False)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            code = fn()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), text


def test_another_user_cannot_sync_through_an_allow_other_mount(other_user, public_dir, tmp_path):
    """With ``allow_other,umask=000`` every user may write the mount's root; asking the daemon to
    store (on zip: to commit) is still only for root and the user who mounted."""
    from nczfs import cli

    backing = DirectoryBackend(tmp_path / "backing")
    backing.put("a", b"a")
    with mounted(backing, public_dir / "mnt", "-o", "allow_other,umask=000", log=tmp_path / "log") as m:
        fd = os.open(m.path / "pending", os.O_CREAT | os.O_WRONLY)
        try:
            os.write(fd, b"root's pending write")
            code, stderr = _as_user_in_process(other_user, lambda: cli.main(["sync", str(m.path)]))
            assert code == 1 and "not allowed to control this mount" in stderr, (code, stderr)
            code, stderr = _as_user_in_process(other_user, lambda: cli.main(["umount", str(m.path)]))
            assert code == 1 and "not allowed to control this mount" in stderr, (code, stderr)
            assert is_mounted(m.path) and not backing.exists("pending")
            assert run_nczfs("sync", str(m.path)).returncode == 0  # root may
            assert backing.read("pending") == b"root's pending write"
        finally:
            os.close(fd)


def test_requests_are_counted_by_operation(backing, tmp_path):
    """``fuse.<operation>``: the requests that reached the daemon (``nczfs stats`` shows them)."""
    with mounted(backing, tmp_path / "mnt") as m:
        before = read_control(str(m.path))["counters"]
        for _ in range(5):
            assert (m.path / "a").read_bytes() == b"a"
        changed = delta(before, read_control(str(m.path))["counters"])
        # the kernel keeps the entry and the page, yet every open and close reaches the daemon;
        # one more of each: the control file read for the second reading (its snapshot counts its open)
        assert changed["fuse.open"] == 6 and changed["fuse.flush"] == 6
        assert changed["fuse.release"] >= 4  # sent after close, not waited for: one or two may be on the way
        assert changed.get("fuse.lookup", 0) <= 1  # the first read looks "a" up, the others find it
        res = run_nczfs("stats", str(m.path))
        assert res.returncode == 0 and int(dict(ln.split() for ln in res.stdout.splitlines())["fuse.open"]) >= 5


def test_waits_for_the_next_request_are_counted(backing, tmp_path):
    """``fuse.next-request-waits`` (the daemon waited for the device through trio) and
    ``fuse.next-request-waiting`` (a request was queued already: no wait). The daemon is stopped
    (SIGSTOP) while 32 threads each open and read a file of their own: their requests queue in
    the kernel, and the daemon finds them waiting when it goes on (a machine's load cannot make
    the readers too slow to queue any, as when the test relied on them outrunning the daemon)."""
    import signal
    import threading
    import time

    names = [f"q{i}" for i in range(32)]
    backing.put_many({n: n.encode() for n in names})
    with mounted(backing, tmp_path / "mnt") as m:
        for n in names:
            os.stat(m.path / n)  # entries known: each thread's open is one request, none a lookup
        pid = read_control(str(m.path))["pid"]
        before = read_control(str(m.path))["counters"]
        got: dict[str, bytes] = {}
        threads = [threading.Thread(target=lambda n=n: got.__setitem__(n, (m.path / n).read_bytes())) for n in names]
        os.kill(pid, signal.SIGSTOP)
        try:
            for t in threads:
                t.start()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and sum(_waits_on_fuse(t) for t in threads) < len(threads):
                time.sleep(0.02)
        finally:
            os.kill(pid, signal.SIGCONT)
        for t in threads:
            t.join()
        assert got == {n: n.encode() for n in names}
        changed = delta(before, read_control(str(m.path))["counters"])
        assert changed["fuse.next-request-waits"] >= 1 and changed["fuse.next-request-waiting"] >= len(names) // 2, changed
        requests = sum(changed[f"fuse.{op}"] for op in ("open", "flush", "release"))
        assert changed["fuse.next-request-waits"] + changed["fuse.next-request-waiting"] >= requests, changed  # one each


def _waits_on_fuse(thread) -> bool:
    """Is ``thread`` blocked waiting for a FUSE daemon's answer?"""
    try:
        return Path(f"/proc/self/task/{thread.native_id}/wchan").read_text() == "request_wait_answer"
    except (OSError, TypeError):
        return False


def test_read_control_refuses_what_is_not_an_nczfs_mount(tmp_path):
    with pytest.raises(NotAnNczfsMount, match="not an nczfs mount point"):
        read_control(str(tmp_path))
    (tmp_path / control.NAME).write_text('{"pid": 1, "counters": {}}')  # not the daemon's file
    with pytest.raises(NotAnNczfsMount, match="not its control file"):
        read_control(str(tmp_path))
    res = run_nczfs("stats", str(tmp_path))
    assert res.returncode == 2 and "not an nczfs mount point" in res.stderr
