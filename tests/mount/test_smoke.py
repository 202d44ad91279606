import os

import pytest

pytestmark = pytest.mark.fuse


def test_write_read_through_mount_reaches_backend(mount):
    p = mount.path / "a" / "b.txt"
    os.makedirs(p.parent)
    p.write_bytes(b"hello")
    assert p.read_bytes() == b"hello"
    assert mount.backend.read("a/b.txt") == b"hello"
    assert sorted(os.listdir(mount.path)) == ["a"]
