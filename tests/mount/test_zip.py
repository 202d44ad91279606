"""Zip archives through real mounts: netCDF-C's corpus, real clients writing and reading back,
when staged writes reach the archive, kill -9 during a commit, and hostile archives.

Every check of "what is in the archive" opens the archive with ``zipfile`` (never through nczfs).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
import warnings
import zipfile
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import zarr

from nczfs.fuse.control import read_control
from tests.conftest import CORPUS
from tests.helpers import NCZFS, ZipBackend, is_mounted, mounted, run_nczfs
from tests.mount.trees import DIR, snapshot
from tests.ziputil import zip_members

pytestmark = pytest.mark.fuse

CORPUS_ZIPS = sorted((CORPUS / "netcdf-c").rglob("*.zip"))


def archive_tree(path: Path) -> dict:
    """The dataset as a snapshot, read from the archive with zipfile (dir entries and implied dirs)."""
    from tests.ziputil import dataset_prefix

    start = dataset_prefix(path)
    out: dict = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if not info.filename.startswith(start) or info.filename == start:
                continue
            key = info.filename[len(start):].rstrip("/")
            out[key] = DIR if info.is_dir() else zf.read(info)
            parts = key.split("/")[:-1]
            out.update({"/".join(parts[: i + 1]): DIR for i in range(len(parts))})
    return out


def extract(path: Path, dest: Path) -> Path:
    """Unzip (the trusted corpus) and return the dataset directory."""
    from tests.ziputil import dataset_prefix

    with zipfile.ZipFile(path) as zf:
        zf.extractall(dest)
    return dest / dataset_prefix(path).rstrip("/") if dataset_prefix(path) else dest


def check_archive(path: Path) -> None:
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None


def nc_summary(url: str):
    """Everything netCDF4 shows of a dataset (dims, attrs, variables with data), or its error."""
    try:
        ds = netCDF4.Dataset(url)
    except OSError as exc:
        return ("error", str(exc).split(":")[0])
    try:
        def group(g):
            return {
                "dims": {n: len(d) for n, d in g.dimensions.items()},
                "attrs": {k: repr(g.getncattr(k)) for k in g.ncattrs()},
                "vars": {n: (v.dimensions, str(v.dtype), np.ma.getdata(v[...]).tobytes()) for n, v in g.variables.items()},
                "groups": {n: group(s) for n, s in g.groups.items()},
            }
        return group(ds)
    finally:
        ds.close()


def zarr_summary(root):
    """Arrays (with data) and attributes zarr-python finds, or its error type."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NCZarr V1 objects zarr does not know
            g = zarr.open_group(store=zarr.storage.LocalStore(root, read_only=True), mode="r", zarr_format=2)
            return {path: (dict(a.attrs), a[...].tobytes()) for path, a in g.arrays()} | {"/": dict(g.attrs)}
    except Exception as exc:  # the same failure either way is what is compared
        return ("error", type(exc).__name__)


# ----------------------------------------------------------------------------- netCDF-C corpus


@pytest.mark.parametrize("archive", CORPUS_ZIPS, ids=[str(p.relative_to(CORPUS / "netcdf-c")) for p in CORPUS_ZIPS])
def test_corpus_zip_mounts_and_reads_like_its_unzipped_tree(archive, tmp_path):
    tree = extract(archive, tmp_path / "unzipped")
    with mounted(ZipBackend(archive), tmp_path / "mnt", "--read-only") as m:
        assert snapshot(m.path) == archive_tree(archive)
        for mode in ("nczarr", "zarr"):
            got = nc_summary(f"file://{m.path}#mode={mode},file")
            assert got == nc_summary(f"file://{tree}#mode={mode},file")
        assert zarr_summary(m.path) == zarr_summary(tree)
    log = m.log_text()
    assert "Traceback" not in log and " ERROR " not in log


# ----------------------------------------------------------------------------- real clients


def _write_nc(url: str) -> None:
    ds = netCDF4.Dataset(url, "w")
    ds.createDimension("x", 4)
    ds.createDimension("t", None)
    ds.title = "through a zip mount"
    v = ds.createVariable("v", "i4", ("t", "x"), chunksizes=(2, 2))
    v[0:3, :] = np.arange(12, dtype="i4").reshape(3, 4)
    g = ds.createGroup("g")
    w = g.createVariable("w", "f8", ("x",))
    w[:] = [0.5, 1.5, 2.5, 3.5]
    ds.close()


def _check_nc(url: str) -> None:
    ds = netCDF4.Dataset(url)
    try:
        assert ds.title == "through a zip mount"
        assert ds["v"][:].tolist() == np.arange(12).reshape(3, 4).tolist()
        assert ds["g"]["w"][:].tolist() == [0.5, 1.5, 2.5, 3.5]
    finally:
        ds.close()


def test_netcdf4_writes_a_new_zip_read_back_unzipped(tmp_path):
    """netCDF-C layout (the default for a new archive): unzip it and netCDF4 opens the tree."""
    archive = tmp_path / "new.zarr.zip"
    with mounted(ZipBackend(archive), tmp_path / "mnt") as m:
        _write_nc(f"file://{m.path}/ds.file#mode=nczarr,file")
        _check_nc(f"file://{m.path}/ds.file#mode=nczarr,file")
    check_archive(archive)
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
    assert infos[0].filename == "new.zarr/" and infos[0].is_dir()
    assert all(i.filename.startswith("new.zarr/") for i in infos)
    assert "new.zarr/ds.file/g/" in [i.filename for i in infos]  # netCDF-C's directory entries
    assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}  # stored, as netCDF-C writes
    subprocess.run(["unzip", "-q", str(archive), "-d", str(tmp_path / "out")], check=True)
    _check_nc(f"file://{tmp_path}/out/new.zarr/ds.file#mode=nczarr,file")
    assert not (tmp_path / ".new.zarr.zip.nczfs").exists()  # the staging area is gone


def test_netcdf4_writes_flat_zip_read_back_by_zarr_zipstore(tmp_path):
    archive = tmp_path / "flat.zip"
    with mounted(ZipBackend(archive, layout="flat"), tmp_path / "mnt", "-o", "zip_layout=flat") as m:
        _write_nc(f"file://{m.path}/ds.file#mode=nczarr,file")
    check_archive(archive)
    assert all(n.startswith("ds.file/") for n in zipfile.ZipFile(archive).namelist())
    store = zarr.storage.ZipStore(archive, mode="r")
    g = zarr.open_group(store=store, path="ds.file", mode="r", zarr_format=2)
    assert g["v"][...].tolist() == np.arange(12).reshape(3, 4).tolist()
    assert g["g/w"][...].tolist() == [0.5, 1.5, 2.5, 3.5]
    store.close()


def test_zarr_zipstore_archive_mounts_and_zarr_writes_back(tmp_path):
    """zarr-python's ZipStore layout (keys at the root) is detected and kept."""
    archive = tmp_path / "z.zip"
    store = zarr.storage.ZipStore(archive, mode="w")
    a = zarr.create_array(store, name="a", shape=(6,), chunks=(2,), dtype="i2", zarr_format=3)
    a[:] = np.arange(6, dtype="i2")
    store.close()
    with mounted(ZipBackend(archive, layout="flat"), tmp_path / "mnt") as m:
        g = zarr.open_group(store=zarr.storage.LocalStore(m.path), mode="r+", zarr_format=3)
        assert g["a"][...].tolist() == list(range(6))
        b = g.create_array("b", shape=(4,), chunks=(4,), dtype="f4")
        b[:] = [1, 2, 3, 4]
        g["a"][0] = 100
    check_archive(archive)
    assert "zarr.json" in zipfile.ZipFile(archive).namelist()  # still flat
    store = zarr.storage.ZipStore(archive, mode="r")
    g = zarr.open_group(store=store, mode="r", zarr_format=3)
    assert g["a"][...].tolist() == [100, 1, 2, 3, 4, 5] and g["b"][...].tolist() == [1, 2, 3, 4]
    store.close()


def test_a_zipped_directory_dataset_mounts_identical_and_copies_out_as_the_tree(tmp_path):
    """netCDF-C's promise: `zip -r` of a tree mounts with identical contents; cp -r gives the tree back."""
    src = CORPUS / "handmade"
    archive = tmp_path / "handmade.zip"
    subprocess.run(["zip", "-q", "-r", str(archive), "handmade"], cwd=src.parent, check=True)
    with mounted(ZipBackend(archive), tmp_path / "mnt", "--read-only") as m:
        assert snapshot(m.path) == snapshot(src)
        subprocess.run(["cp", "-r", str(m.path), str(tmp_path / "copy")], check=True)
    subprocess.run(["diff", "-r", str(src), str(tmp_path / "copy")], check=True)
    # and the other way: a tree copied into a new zip mount gives an archive that unzips to it
    archive2 = tmp_path / "again.zip"
    with mounted(ZipBackend(archive2), tmp_path / "mnt2") as m:
        subprocess.run(["cp", "-r", f"{src}/.", str(m.path)], check=True)
    check_archive(archive2)
    subprocess.run(["unzip", "-q", str(archive2), "-d", str(tmp_path / "unzipped")], check=True)
    subprocess.run(["diff", "-r", str(src), str(tmp_path / "unzipped" / "again")], check=True)


# ----------------------------------------------------------------------------- when writes reach the archive


def test_writes_reach_the_archive_at_fsync_nczfs_sync_and_unmount(tmp_path):
    archive = tmp_path / "s.zip"
    with mounted(ZipBackend(archive), tmp_path / "mnt") as m:
        (m.path / "a").write_bytes(b"closed")
        assert not archive.exists()  # closed, staged, not committed
        res = run_nczfs("sync", str(m.path))
        assert res.returncode == 0, res.stderr
        check_archive(archive)
        assert zip_members(archive) == {"a": b"closed"}
        with open(m.path / "b", "wb") as f:
            f.write(b"fsynced")
            f.flush()
            os.fsync(f.fileno())
            assert zip_members(archive) == {"a": b"closed", "b": b"fsynced"}
        os.unlink(m.path / "a")
        assert "a" in zip_members(archive)
    check_archive(archive)
    assert zip_members(archive) == {"b": b"fsynced"}
    assert run_nczfs("sync", str(tmp_path / "mnt")).returncode == 2  # not a mount any more


def test_kill_9_during_a_commit_leaves_a_whole_archive_and_the_next_mount_recovers(tmp_path):
    archive = tmp_path / "k.zip"
    old = {"base": os.urandom(1024) * 48 * 1024}  # 48 MiB: the commit takes a while
    with zipfile.ZipFile(archive, "w") as zf:
        zf.mkdir("k/")
        zf.writestr("k/base", old["base"])
    new_data = os.urandom(1024) * 32 * 1024
    mnt = tmp_path / "mnt"
    with mounted(ZipBackend(archive), mnt) as m:
        pid = read_control(str(m.path))["pid"]
        (m.path / "new").write_bytes(new_data)
        sync = subprocess.Popen([*NCZFS, "sync", str(m.path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        staging_new = tmp_path / ".k.zip.nczfs" / "new.zip"
        while not staging_new.exists() and sync.poll() is None:
            pass
        os.kill(pid, signal.SIGKILL)
        caught = staging_new.exists()
        sync.wait()
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.01)
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], check=True)
    assert caught, "the kill did not land during the commit"
    check_archive(archive)
    assert zip_members(archive) in (old, old | {"new": new_data})  # the old or the new archive, whole
    with mounted(ZipBackend(archive), tmp_path / "mnt2") as m:
        assert (m.path / "new").read_bytes() == new_data  # staged writes recovered
        assert (m.path / "base").read_bytes() == old["base"]
    check_archive(archive)
    assert zip_members(archive) == old | {"new": new_data}
    log = m.log_text()  # replayed (killed before the rename) or cleaned up (killed after it)
    assert "recovered 1 staged change(s)" in log or "an interrupted commit had finished" in log
    assert not (tmp_path / ".k.zip.nczfs").exists()


@pytest.mark.parametrize("swapped_out", ["the archive read", "another program's"])
def test_a_commit_killed_right_after_its_swap_is_finished_by_the_next_mount(tmp_path, monkeypatch, swapped_out):
    """A daemon killed right after its commit swapped the new archive into place (the archive
    swapped out still in the staging directory as ``new.zip``, unchecked; the journal and the
    marker not cleared): the next mount finds the commit finished and shows every staged change
    once (no member twice, none replayed again, none lost). The archive swapped out is removed
    if it is the one the changes were made on; one another program wrote between the commit's
    last check and the swap is kept aside (``.NAME.zip.nczfs-orphaned-TIME/``) and logged. The
    kill is made in process at that point (the store the daemon runs), not by timing."""
    from nczfs.store import fileversions
    from nczfs.store.zip.store import ZipStore
    from tests.store.test_zip import die, swap_then_die

    archive = tmp_path / "k.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.mkdir("k/")
        zf.writestr("k/base", b"base")
        zf.writestr("k/old", b"old")
        zf.writestr("k/gone", b"gone")
    s = ZipStore(str(archive))
    s.set("new/a", b"A")
    s.set("base", b"rewritten")
    s.delete("gone")
    s.rename("old", "moved")
    theirs = tmp_path / "theirs.zip"
    if swapped_out == "another program's":
        with zipfile.ZipFile(theirs, "w") as zf:
            zf.writestr("k/theirs", b"written between the check and the swap")
        s.staging.before_replace = lambda path: os.replace(theirs, path)
    monkeypatch.setattr(fileversions, "rename_exchange", swap_then_die)
    with pytest.raises(SystemExit):
        s.sync()
    die(s)
    monkeypatch.undo()
    assert {"committing", "journal", "new.zip"} <= set(os.listdir(tmp_path / ".k.zip.nczfs"))
    want = {"base": b"rewritten", "moved": b"old", "new/a": b"A"}
    with mounted(ZipBackend(archive), tmp_path / "mnt") as m:
        assert snapshot(m.path) == {**want, "new": DIR}
    check_archive(archive)
    names = zipfile.ZipFile(archive).namelist()
    assert len(names) == len(set(names)) and zip_members(archive) == want
    assert "an interrupted commit had finished" in m.log_text()
    assert not (tmp_path / ".k.zip.nczfs").exists()
    kept = [p for p in tmp_path.iterdir() if ".k.zip.nczfs-orphaned-" in p.name]
    if swapped_out == "the archive read":
        assert kept == []
    else:
        assert [sorted(os.listdir(p)) for p in kept] == [["k.zip"]]
        assert zip_members(kept[0] / "k.zip") == {"theirs": b"written between the check and the swap"}
        assert "replaced an archive another program had written meanwhile" in m.log_text()


def test_umount_after_a_killed_daemon_names_the_staged_writes_and_fails(tmp_path):
    """``nczfs umount`` of a mount whose daemon died used to exit 0 ("removed a stale mount")
    while writes were still only staged beside the archive: now it says how many and where,
    and exits 1 (``--stale-only``, run before mounting again, exits 0 with the same line)."""
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("s/base", b"base")
    mnt = tmp_path / "mnt"
    with mounted(ZipBackend(archive), mnt) as m:
        pid = read_control(str(m.path))["pid"]
        (m.path / "new").write_bytes(b"staged, not committed")  # closed: staged
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.01)
        res = run_nczfs("umount", "--stale-only", str(mnt))
        assert res.returncode == 0 and "1 change(s) staged in" in res.stderr, res.stderr
        res = run_nczfs("umount", str(mnt))  # already removed: nothing mounted there now
        assert res.returncode == 2 and not is_mounted(mnt), res.stderr
    with mounted(ZipBackend(archive), mnt) as m:  # again, killed with a staged write
        pid = read_control(str(m.path))["pid"]
        (m.path / "second").write_bytes(b"staged too")
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}").exists():
            time.sleep(0.01)
        res = run_nczfs("umount", str(mnt))
        assert res.returncode == 1 and not is_mounted(mnt), res.stderr
        staging = tmp_path / ".s.zip.nczfs"
        assert f"2 change(s) staged in {staging} are not yet in {archive}" in res.stderr, res.stderr
        assert "mount it read/write again to commit them" in res.stderr and len(res.stderr.splitlines()) == 1
    assert zip_members(archive) == {"base": b"base"}
    with mounted(ZipBackend(archive), mnt) as m:  # the next mount commits them
        assert (m.path / "new").read_bytes() == b"staged, not committed"
    assert zip_members(archive) == {"base": b"base", "new": b"staged, not committed", "second": b"staged too"}
    pid_files = [p for d in ("/run/nczfs",) if os.path.isdir(d) for p in os.listdir(d) if p == f"{pid}.json"]
    assert pid_files == []  # the dead daemon's state went with the recovery


# ----------------------------------------------------------------------------- hostile archives


def _patched(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 2  # local header and central directory
    return data.replace(old, new)


def _one_line_refusal(res) -> str:
    if res.returncode == 0:  # mounted after all: never leave it behind
        mnt = res.args[-1]
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        raise AssertionError(f"{mnt}: mounted, expected a refusal")
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nczfs: ") and "Traceback" not in res.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["../evil", "/abs/evil", "ds/..\\..\\evil", "ds/../../evil", "ds/x\x00/../evil"],
                         ids=["dotdot", "absolute", "backslash", "inner-dotdot", "nul"])
def test_zip_slip_member_names_are_refused(name, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    archive = work / "h.zip"
    placeholder = name.replace("\x00", "_")
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ds/ok", b"fine")
        zf.writestr(placeholder, b"escape!")
    if "\x00" in name:
        archive.write_bytes(_patched(archive.read_bytes(), placeholder.encode(), name.encode()))
    before = set(tmp_path.rglob("*"))
    (tmp_path / "mnt").mkdir()
    line = _one_line_refusal(run_nczfs("mount", str(archive), str(tmp_path / "mnt")))
    assert "refused" in line and repr(name)[1:-1].split("\\x00")[0] in line
    assert not is_mounted(tmp_path / "mnt")
    assert set(tmp_path.rglob("*")) == before | {tmp_path / "mnt"}  # nothing written anywhere


@pytest.mark.parametrize("damage", ["empty", "garbage", "cut-tail", "cut-middle"])
def test_truncated_or_corrupt_archives_are_refused_with_one_line(damage, tmp_path):
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("c/a", os.urandom(4000))
        zf.writestr("c/b", os.urandom(4000))
    data = archive.read_bytes()
    archive.write_bytes({"empty": b"", "garbage": os.urandom(3000), "cut-tail": data[:-30],
                         "cut-middle": data[:2000] + data[6000:]}[damage])
    (tmp_path / "mnt").mkdir()
    line = _one_line_refusal(run_nczfs("mount", str(archive), str(tmp_path / "mnt")))
    assert "c.zip" in line and ("corrupt" in line or "not a readable zip archive" in line)
    assert not is_mounted(tmp_path / "mnt") and sorted(p.name for p in tmp_path.iterdir()) == ["c.zip", "mnt"]


def _vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _set_central_size(data: bytes, name: bytes, size: int) -> bytes:
    """Rewrite the uncompressed size the central directory gives for member ``name``."""
    i = data.rindex(b"PK\x01\x02", 0, data.rindex(name))
    return data[: i + 24] + size.to_bytes(4, "little") + data[i + 28:]


def test_zip_bombs_and_lying_headers_fail_with_eio_without_exhausting_memory(tmp_path, caplog):
    archive = tmp_path / "b.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("b/ratio", bytes(4 << 20))  # ~4 KiB compressed
        zf.writestr("b/big", bytes(4 << 20))
        zf.writestr("b/short", os.urandom(1 << 20))
        zf.writestr("b/dup", b"first")
        zf.writestr("b/fine", b"fine")
    with pytest.warns(UserWarning):  # zipfile warns about the duplicate name it is told to write
        with zipfile.ZipFile(archive, "a") as zf:
            zf.writestr("b/dup", b"second")
    data = archive.read_bytes()
    data = _set_central_size(data, b"b/ratio", 200 << 20)  # claims 200 MiB from ~4 KiB: beyond deflate
    data = _set_central_size(data, b"b/big", 0xFFFFFFF0)  # claims ~4 GiB: more than may be inflated
    data = _set_central_size(data, b"b/short", 1000)  # inflates to more than the header says
    archive.write_bytes(data)
    with mounted(ZipBackend(archive), tmp_path / "mnt", "--read-only") as m:
        pid = read_control(str(m.path))["pid"]
        before = _vm_hwm_kib(pid)
        for name in ("ratio", "big", "short"):
            with pytest.raises(OSError) as info:
                (m.path / name).read_bytes()
            assert info.value.errno == errno.EIO, name
        assert (m.path / "dup").read_bytes() == b"second"  # duplicates: the last entry wins
        assert (m.path / "fine").read_bytes() == b"fine"  # and the mount keeps working
        assert _vm_hwm_kib(pid) - before < 64 * 1024  # nothing was inflated to its claimed size
    log = m.log_text()
    assert "'b/dup' appears more than once" in log


# ----------------------------------------------------------------------------- SOURCE forms, one writer


def test_zip_source_forms_and_one_read_write_mount_per_archive(tmp_path):
    archive = tmp_path / "ds.zarr.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.mkdir("ds.zarr/")
        zf.writestr("ds.zarr/.zgroup", b'{"zarr_format": 2}')
    b = ZipBackend(archive)
    for i, source in enumerate([f"file://{archive}#mode=nczarr,zip", f"file://{archive}#mode=zarr,zip"]):
        with mounted(b, tmp_path / f"ro{i}", "--read-only", source=source) as m:
            assert os.listdir(m.path) == [".zgroup"]
    with mounted(b, tmp_path / "rw") as m:
        (tmp_path / "second").mkdir()
        line = _one_line_refusal(run_nczfs("mount", str(archive), str(tmp_path / "second")))
        assert "already mounted read/write" in line
        with mounted(b, tmp_path / "reader", "--read-only") as r:  # readers are welcome
            assert os.listdir(r.path) == [".zgroup"]
        (m.path / "x").write_bytes(b"x")
    assert zip_members(archive) == {".zgroup": b'{"zarr_format": 2}', "x": b"x"}
