"""Who may use a mount: only the mounting user by default; ``allow_other`` with permission checks.

A user made for the test with ``useradd`` (removed in teardown) reads through mounts that
root made. The mount point lies in a world-searchable directory so that only FUSE's own
checks decide.
"""

from __future__ import annotations

import os

import pytest

from tests.helpers import DirectoryBackend, as_user, mounted

pytestmark = pytest.mark.fuse


@pytest.mark.parametrize(
    "options, backing_mode, owned, readable",
    [
        ((), 0o644, False, False),  # FUSE refuses everyone but the mounting user
        (("-o", "allow_other"), 0o644, False, True),
        (("-o", "allow_other"), 0o600, False, False),  # default_permissions: mode 0600, owned by root
        (("-o", "allow_other"), 0o600, True, True),  # now owned by the user
    ],
)
def test_other_users_need_allow_other_and_file_permissions(other_user, public_dir, tmp_path, options, backing_mode,
                                                           owned, readable):
    """A local directory's files show their own modes and owners, which the kernel checks."""
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "a").write_bytes(b"dataset bytes")
    (src / "d" / "a").chmod(backing_mode)
    if owned:
        os.chown(src / "d" / "a", other_user.pw_uid, other_user.pw_gid)
    with mounted(DirectoryBackend(src), public_dir / "mnt", *options, log=tmp_path / "log") as m:
        assert (m.path / "d" / "a").read_bytes() == b"dataset bytes"  # root, the mounting user, always may
        res = as_user(other_user, "cat", str(m.path / "d" / "a"))
        if readable:
            assert res.returncode == 0 and res.stdout == "dataset bytes", res.stderr
        else:
            assert res.returncode != 0 and "Permission denied" in res.stderr, (res.returncode, res.stdout, res.stderr)


def test_allow_other_does_not_let_others_write_files_they_do_not_own(other_user, public_dir, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"root's")
    with mounted(DirectoryBackend(src), public_dir / "mnt", "-o", "allow_other", log=tmp_path / "log") as m:
        res = as_user(other_user, "sh", "-c", f"echo changed > '{m.path / 'a'}'")
        assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
        res = as_user(other_user, "touch", str(m.path / "new"))  # the root directory is 0755 root
        assert res.returncode != 0 and "Permission denied" in res.stderr, res.stderr
    assert (src / "a").read_bytes() == b"root's" and not (src / "new").exists()
    assert os.listdir(src) == ["a"]
