"""nczfs as a mount(8) helper: ``mount -t fuse.nczfs``, an fstab line, and the -o option keys.

mount(8) runs ``mount.fuse3 SOURCE MOUNTPOINT -t fuse.nczfs -o OPTS``, which runs
``/bin/sh -c "nczfs SOURCE MOUNTPOINT -o OPTS"`` with mount's PATH. These tests give mount
the PATH systemd gives mount units, so ``nczfs`` is found only as installed by
scripts/install.sh (/usr/local/bin/nczfs).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
import zipfile

import pytest

from nczfs.cli.dispatch import _helper_form
from nczfs.config.mountconfig import MountConfig, parse_options
from nczfs.fuse.control import read_control
from nczfs.toolbox.errors import SourceError
from tests.helpers import is_mounted

#: the PATH systemd gives services and mount units
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: MountConfig fields that are not mount options
NOT_OPTIONS = {"source", "mountpoint", "foreground", "spill_threshold", "backend_options"}
#: fields set by another key's -o item
SET_BY = {"nc4_files": "nc_files=netcdf4"}


def _mount_cmd(*args: str, cwd=None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", **(env or {})}
    return subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=60, cwd=cwd)


def _mount_line(mnt) -> list[str]:
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[1] == str(mnt):
                return fields
    raise AssertionError(f"{mnt} is not mounted")


def _wait_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def dirs(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    (src / "d").mkdir()
    (src / "d" / "a").write_bytes(b"stored before the mount")
    yield src, mnt
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


def _use_mount(src, mnt) -> None:
    """Read and write through the mount; the backend holds the written bytes after close."""
    assert (mnt / "d" / "a").read_bytes() == b"stored before the mount"
    (mnt / "d" / "b").write_bytes(b"written through mount(8)")
    assert (src / "d" / "b").read_bytes() == b"written through mount(8)"


def _umount_and_wait(mnt) -> None:
    pid = read_control(str(mnt))["pid"]
    res = _mount_cmd("umount", str(mnt))
    assert res.returncode == 0, res.stderr
    assert not is_mounted(mnt)
    assert _wait_gone(pid), "the daemon did not exit after umount(8)"


@pytest.mark.fuse
def test_nczfs_is_on_the_system_path_for_mount_helpers():
    res = _mount_cmd("sh", "-c", "command -v nczfs && nczfs --version")
    assert res.returncode == 0, "nczfs is not on the system PATH (scripts/install.sh links /usr/local/bin/nczfs)"
    assert res.stdout.splitlines()[1].startswith("nczfs ")


@pytest.mark.fuse
def test_mount_t_fuse_nczfs_with_options_then_umount(dirs, tmp_path):
    src, mnt = dirs
    log = tmp_path / "daemon.log"
    # generic mount(8)/fstab options mixed with nczfs ones; mount.fuse3 adds dev,suid
    opts = f"rw,allow_other,_netdev,nofail,noatime,x-systemd.automount,metadata_ttl=0,umask=027,log_file={log}"
    res = _mount_cmd("mount", "-t", "fuse.nczfs", str(src), str(mnt), "-o", opts, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    fields = _mount_line(mnt)
    assert fields[0] == str(src) and fields[2] == "fuse.nczfs"
    assert "allow_other" in fields[3].split(",")
    _use_mount(src, mnt)
    # the options reached the daemon (a local directory shows its files' own modes: umask=027
    # is not seen in them, only in the daemon's configuration)
    assert "metadata_ttl=0.0" in log.read_text() and "umask=027" in log.read_text()
    # the daemon keeps no directory busy: mount ran in the test's directory, the daemon is in /
    assert os.readlink(f"/proc/{read_control(str(mnt))['pid']}/cwd") == "/"
    _umount_and_wait(mnt)


@pytest.mark.fuse
def test_fstab_line_mounted_with_mount_T(dirs, tmp_path):
    src, mnt = dirs
    fstab = tmp_path / "fstab"
    fstab.write_text(
        "# a test fstab\n"
        f"{src}  {mnt}  fuse.nczfs  defaults,_netdev,nofail,noauto,x-systemd.requires=network-online.target,"
        f"metadata_ttl=2,log_file={tmp_path / 'daemon.log'}  0  0\n"
    )
    res = _mount_cmd("mount", "-T", str(fstab), str(mnt))
    assert res.returncode == 0, res.stderr
    assert _mount_line(mnt)[2] == "fuse.nczfs"
    _use_mount(src, mnt)
    _umount_and_wait(mnt)


@pytest.mark.fuse
def test_fstab_line_for_a_zip_file(tmp_path):
    """The README's zip line (``nofail,ro,allow_other``) with this test's paths."""
    archive, mnt = tmp_path / "ocean.zarr.zip", tmp_path / "mnt"
    mnt.mkdir()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("d/a", b"in the zip")
    before = archive.read_bytes()
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{archive}  {mnt}  fuse.nczfs  nofail,ro,allow_other  0  0\n")
    res = _mount_cmd("mount", "-T", str(fstab), str(mnt))
    try:
        assert res.returncode == 0, res.stderr
        assert _mount_line(mnt)[2] == "fuse.nczfs"
        assert (mnt / "d" / "a").read_bytes() == b"in the zip"
        _umount_and_wait(mnt)
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
    assert archive.read_bytes() == before


@pytest.mark.fuse
def test_fstab_line_for_an_s3_prefix(s3_server, tmp_path):
    """The README's S3 line: endpoint_url=, region=, profile= (read-only keys), ro, allow_other."""
    bucket, mnt = s3_server.new_bucket(), tmp_path / "mnt"
    mnt.mkdir()
    s3_server.client().put_object(Bucket=bucket, Key="runs/ocean.zarr/d/a", Body=b"in the bucket")
    fstab = tmp_path / "fstab"
    fstab.write_text(f"s3://{bucket}/runs/ocean.zarr  {mnt}  fuse.nczfs  _netdev,nofail,ro,allow_other,"
                     f"endpoint_url={s3_server.endpoint},region=us-east-1,profile=reader,metadata_ttl=60  0  0\n")
    # root's AWS files, as an administrator's /root/.aws would hold them
    aws = {k: os.environ[k] for k in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_EC2_METADATA_DISABLED")}
    res = _mount_cmd("mount", "-T", str(fstab), str(mnt), env=aws)
    try:
        assert res.returncode == 0, res.stderr
        assert (mnt / "d" / "a").read_bytes() == b"in the bucket"
        _umount_and_wait(mnt)
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


@pytest.mark.fuse
def test_read_only_fstab_line(dirs, tmp_path):
    src, mnt = dirs
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{src} {mnt} fuse.nczfs ro,_netdev 0 0\n")
    res = _mount_cmd("mount", "-T", str(fstab), str(mnt))
    assert res.returncode == 0, res.stderr
    assert "ro" in _mount_line(mnt)[3].split(",")
    with pytest.raises(OSError) as err:
        (mnt / "d" / "new").write_bytes(b"x")
    assert err.value.errno == 30  # EROFS
    _umount_and_wait(mnt)


@pytest.mark.fuse
def test_mount_helper_refuses_an_unknown_option_with_a_clear_message(dirs):
    src, mnt = dirs
    res = _mount_cmd("mount", "-t", "fuse.nczfs", str(src), str(mnt), "-o", "ro,frobnicate=1")
    assert res.returncode != 0
    assert "nczfs: -o frobnicate=1: unknown mount option" in res.stderr
    assert "Traceback" not in res.stderr
    assert not is_mounted(mnt)


def test_helper_form_is_the_mount_command():
    assert _helper_form(["/src", "/mnt", "-o", "ro,dev,suid"]) == ["mount", "/src", "/mnt", "-o", "ro,dev,suid"]
    assert _helper_form(["mount", "/src", "/mnt"]) == ["mount", "/src", "/mnt"]
    assert _helper_form(["umount", "/mnt"]) == ["umount", "/mnt"]
    assert _helper_form(["--version"]) == ["--version"]


def _sample_value(f: dataclasses.Field) -> str:
    """An -o spelling for a field's type (a refused *value* is fine; an unknown *key* is not)."""
    t = str(f.type)
    if t == "bool":
        return ""
    if t.startswith("int"):
        return "=7"
    if t.startswith("float"):
        return "=1.5"
    return "=/x"


def test_every_mount_option_has_an_o_key():
    """Every MountConfig field (other than SOURCE, MOUNTPOINT and internals) is reachable with -o."""
    missing = []
    for f in dataclasses.fields(MountConfig):
        if f.name in NOT_OPTIONS:
            continue
        # a tuple field takes repeated singular keys
        items = {f.name + _sample_value(f), f.name.removesuffix("s") + _sample_value(f), SET_BY.get(f.name, "")} - {""}
        found = False
        for item in items:
            try:
                found = f.name in parse_options([item])
            except SourceError as exc:
                found = "unknown mount option" not in str(exc)
            if found:
                break
        if not found:
            missing.append(f.name)
    assert not missing, f"MountConfig fields with no -o key: {missing}"


@pytest.mark.parametrize(
    "generic",
    ["rw", "dev", "suid", "nodev", "nosuid", "noexec", "_netdev", "nofail", "noauto", "auto", "user",
     "users", "defaults", "noatime", "relatime", "x-systemd.automount", "x-systemd.mount-timeout=30",
     "x-systemd.requires=network-online.target", "x-gvfs-show", "comment=systemd.automount"],
)
def test_generic_mount8_options_are_ignored(generic):
    assert parse_options([generic]) == {}


@pytest.mark.parametrize("item, message", [("metadata_ttl", "-o metadata_ttl: needs a value"),
                                           ("read_ahead_kb=", "not a number"),
                                           ("frobnicate", "-o frobnicate: unknown mount option")])
def test_a_known_key_with_a_bad_value_is_not_called_unknown(item, message):
    with pytest.raises(SourceError) as err:
        parse_options([item])
    assert message in str(err.value)
