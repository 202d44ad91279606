"""mount(8) hygiene: a non-empty mount point, the mount table's SOURCE and ro, busy and lazy
unmounts, memory bounds larger than the machine."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.test_cli import dirs  # noqa: F401 - the fixture: src and mnt folders
from tests.helpers import NCZFS, DirectoryBackend, is_mounted, mounted, run_nczfs, unmount


def _mount_entry(mnt) -> list[str]:
    with open("/proc/self/mounts") as f:
        return next(line.split() for line in f if line.split()[1] == str(mnt))


@pytest.fixture
def src_a(dirs):
    """src (holding a file ``a``) and mnt."""
    (dirs[0] / "a").write_bytes(b"abc")
    return dirs


@pytest.mark.fuse
def test_a_non_empty_mount_point_is_refused_unless_nonempty(src_a, tmp_path):
    src, mnt = src_a
    (mnt / "hidden").write_text("x")
    res = run_nczfs("mount", str(src), str(mnt), "--log-file", str(tmp_path / "log"))
    assert res.returncode == 2 and not is_mounted(mnt)
    assert res.stderr.strip() == f"nczfs: {mnt}: not empty (the mount would hide what it holds); -o nonempty mounts over it"
    with mounted(DirectoryBackend(src), mnt, "-o", "nonempty") as m:
        assert sorted(os.listdir(m.path)) == ["a"]
    assert (mnt / "hidden").read_text() == "x"


@pytest.mark.fuse
def test_the_mount_table_shows_source_absolute_and_ro_for_read_only_backends(src_a, tmp_path):
    src, mnt = src_a
    res = subprocess.run([*NCZFS, "mount", "src", "mnt",
                          "--log-file", "log"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    try:
        fields = _mount_entry(mnt)
        assert fields[0] == str(src) and fields[2] == "fuse.nczfs" and "rw" in fields[3].split(",")
    finally:
        unmount(mnt)
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"version": 1, "refs": {".zgroup": '{"zarr_format": 2}'}}))
    res = subprocess.run([*NCZFS, "mount", "file://refs.json#mode=refs",
                          "mnt", "--log-file", "log2"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    try:
        fields = _mount_entry(mnt)
        assert fields[0].replace("\\043", "#") == f"file://{refs}#mode=refs"  # /proc/mounts escapes #
        assert "ro" in fields[3].split(","), fields  # a reference set is read-only
        assert run_nczfs("umount", str(mnt)).returncode == 0
    finally:
        unmount(mnt)


@pytest.mark.fuse
def test_a_busy_umount_names_the_processes_and_lazy_detaches(src_a, tmp_path):
    src, mnt = src_a
    with mounted(DirectoryBackend(src), mnt) as m:
        holder = subprocess.Popen(["sleep", "300"], cwd=m.path)
        try:
            f = open(m.path / "a", "rb")
            res = run_nczfs("umount", str(m.path))
            assert res.returncode == 1 and is_mounted(m.path)
            line = res.stderr.strip()
            assert line.startswith(f"nczfs: {m.path}: busy, in use by ") and f"{holder.pid} (sleep)" in line, line
            assert f"{os.getpid()} (" in line and f"nczfs umount --lazy {m.path}" in line
            pid = json.loads((m.path / ".nczfs").read_bytes())["pid"]
            res = run_nczfs("umount", "--lazy", str(m.path))
            assert res.returncode == 0 and not is_mounted(m.path), res.stderr
            assert f.read() == b"abc"  # what is open keeps working
            f.close()
        finally:
            holder.kill()
            holder.wait()
        for _ in range(200):
            if not os.path.exists(f"/proc/{pid}"):
                break
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{pid}"), "the daemon outlived its last user"


def test_memory_bounds_larger_than_the_machine_are_refused(src_a):
    src, mnt = src_a
    for args in (["--cache-size", "1T"], ["-o", "write_memory=1T"]):
        res = run_nczfs("mount", str(src), str(mnt), *args)
        assert res.returncode == 2 and "more than this machine's memory (" in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1
