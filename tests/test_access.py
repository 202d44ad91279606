"""Who may use a mount: only the mounting user by default; ``allow_other`` with permission checks.

A user made for the test with ``useradd`` (removed in teardown) reads through mounts that
root made. The mount point lies in a world-searchable directory so that only FUSE's own
checks decide.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.helpers import DirectoryBackend, mounted

pytestmark = pytest.mark.fuse


@pytest.fixture
def other_user():
    name = f"nczfs-t{uuid.uuid4().hex[:8]}"
    res = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def public_dir():
    d = Path(tempfile.mkdtemp(prefix="nczfs-access-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _as_user(user: pwd.struct_passwd, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *cmd],
        capture_output=True, text=True, timeout=60,
    )


@pytest.mark.parametrize(
    "options, readable",
    [
        ((), False),  # FUSE refuses everyone but the mounting user
        (("-o", "allow_other"), True),
        (("-o", "allow_other,umask=077"), False),  # default_permissions: mode 0600, owned by root
        (("-o", "allow_other,umask=077,uid={uid},gid={gid}"), True),  # now owned by the user
    ],
)
def test_other_users_need_allow_other_and_file_permissions(other_user, public_dir, tmp_path, options, readable):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "a").write_bytes(b"dataset bytes")
    opts = [o.format(uid=other_user.pw_uid, gid=other_user.pw_gid) for o in options]
    with mounted(DirectoryBackend(src), public_dir / "mnt", *opts, log=tmp_path / "log") as m:
        assert (m.path / "d" / "a").read_bytes() == b"dataset bytes"  # root, the mounting user, always may
        res = _as_user(other_user, "cat", str(m.path / "d" / "a"))
        if readable:
            assert res.returncode == 0 and res.stdout == "dataset bytes", res.stderr
        else:
            assert res.returncode != 0 and "Permission denied" in res.stderr, (res.returncode, res.stdout, res.stderr)


def test_allow_other_does_not_let_others_write_files_they_do_not_own(other_user, public_dir, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"root's")
    with mounted(DirectoryBackend(src), public_dir / "mnt", "-o", "allow_other", log=tmp_path / "log") as m:
        res = _as_user(other_user, "sh", "-c", f"echo changed > '{m.path / 'a'}'")
        assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
        res = _as_user(other_user, "touch", str(m.path / "new"))  # the root directory is 0755 root
        assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
    assert (src / "a").read_bytes() == b"root's" and not (src / "new").exists()
    assert os.listdir(src) == ["a"]
