"""Another program changing the backing files of a local mount while the mount writes them: a
directory's files, a zip archive. A close over a version the writer did not start from fails
with ESTALE and its data is kept (docs/SEMANTICS.md, "Concurrent writers"). The other program
is a plain Python process, never the mount."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DirectoryBackend, ZipBackend, counts, mounted, run_nczfs
from tests.ziputil import zip_members

pytestmark = pytest.mark.fuse


def other_process(code: str, *args: str) -> None:
    """Run ``code`` in a Python process of its own (``sys.argv[1:]``: ``args``)."""
    subprocess.run([sys.executable, "-c", code, *args], check=True, timeout=60)


def rewrite(path: Path, data: bytes) -> None:
    """Another process writes ``path`` in place (``open(..., "wb")``: truncated and written)."""
    other_process("import sys; open(sys.argv[1], 'wb').write(sys.argv[2].encode())", str(path), data.decode())


def rewrite_member(archive: Path, key: str, data: bytes) -> None:
    """Another process replaces the zip archive with one whose member ``key`` holds ``data``."""
    other_process("import sys; from pathlib import Path; from tests.ziputil import rewrite_zip; "
                  "rewrite_zip(Path(sys.argv[1]), {sys.argv[2]: sys.argv[3].encode()})", str(archive), key, data.decode())


def conflicts(root: Path, name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in root.iterdir() if p.name.startswith(f"{name}.nczfs-conflict-")}


def close_fails_estale(f) -> None:
    with pytest.raises(OSError) as err:
        f.close()
    assert err.value.errno == errno.ESTALE, err.value


@pytest.fixture
def local(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    backend = DirectoryBackend(root)
    with mounted(backend, tmp_path / "mnt") as m:
        yield m, root
    assert "Traceback" not in m.log_text(), m.log_text()


def test_a_directory_file_rewritten_by_another_process_refuses_the_stale_close(local):
    """The mount opens ``f`` for writing, another process rewrites the backing file, the close
    fails with ESTALE: the other process's bytes stay, the writer's are in ``f.nczfs-conflict-*``."""
    m, root = local
    (root / "f").write_bytes(b"v0")
    fa = open(m.path / "f", "r+b")
    fa.seek(0, os.SEEK_END)
    fa.write(b" + the mount's")
    fa.flush()  # the write reaches the mount (it loads v0 under it), the close comes later
    rewrite(root / "f", b"the other process's")
    close_fails_estale(fa)
    assert (root / "f").read_bytes() == b"the other process's"
    assert list(conflicts(root, "f").values()) == [b"v0 + the mount's"]
    assert counts(m.path)["write.conflicts"] == 1 and counts(m.path)["write.overwrite-checked"] == 1
    line = next(line for line in m.log_text().splitlines() if "another process changed" in line
                or "another client changed" in line)
    assert "'f'" in line and "f.nczfs-conflict-" in line, line


def test_a_directory_file_made_by_another_process_meanwhile_is_not_replaced(local):
    """A file created through the mount where none was is stored only while there is still none."""
    m, root = local
    fa = open(m.path / "new", "xb")
    fa.write(b"the mount's")
    fa.flush()
    rewrite(root / "new", b"made meanwhile")
    close_fails_estale(fa)
    assert (root / "new").read_bytes() == b"made meanwhile"
    assert list(conflicts(root, "new").values()) == [b"the mount's"]


def test_a_rename_over_a_directory_file_another_process_changed_is_refused(local):
    """zarr-python's write (a temp file renamed over the target) replaces only the version this
    mount read there; the temp file stays where it was."""
    m, root = local
    (root / "t").write_bytes(b"v0")
    assert (m.path / "t").read_bytes() == b"v0"
    (m.path / "tmp").write_bytes(b"the mount's")
    rewrite(root / "t", b"changed")
    with pytest.raises(OSError) as err:
        os.rename(m.path / "tmp", m.path / "t")
    assert err.value.errno == errno.ESTALE
    assert (root / "t").read_bytes() == b"changed" and (root / "tmp").read_bytes() == b"the mount's"
    assert counts(m.path)["write.conflicts"] == 1
    (root / "u").write_bytes(b"v0")
    assert (m.path / "u").read_bytes() == b"v0"
    os.rename(m.path / "tmp", m.path / "u")  # the version it read there: replaced
    assert (root / "u").read_bytes() == b"the mount's"


def test_a_truncate_of_a_directory_file_another_process_changed_is_refused(local):
    """``truncate`` of a file not open through the mount cuts only the version the mount saw
    there (its lookup's, or stored itself); another process's newer version stays whole: ESTALE.
    (The mount looks the files up with ``stat``: a read's release reaches it after ``close()``
    returns, and a truncate while the file is open changes the content in the mount.)"""
    m, root = local
    (root / "t").write_bytes(b"v0: seen through the mount")
    assert os.stat(m.path / "t").st_size == 26
    rewrite(root / "t", b"the other process's")
    with pytest.raises(OSError) as err:
        os.truncate(m.path / "t", 2)
    assert err.value.errno == errno.ESTALE
    assert (root / "t").read_bytes() == b"the other process's"
    assert counts(m.path)["write.conflicts"] == 1
    (root / "u").write_bytes(b"v0")
    assert os.stat(m.path / "u").st_size == 2
    os.truncate(m.path / "u", 1)  # the version it saw there
    os.truncate(m.path / "u", 4)  # the version it made itself
    assert (root / "u").read_bytes() == b"v\0\0\0" and counts(m.path)["write.conflicts"] == 1


def workload(root: Path) -> None:
    """A single writer: new files, chmod-ed, rewritten, appended to, written in place, renamed
    over (a plain temp file, a zarr ``.partial``), one with a second name rewritten, mtimes set
    (the mount's own new versions)."""
    names = [root / f"w{i}" for i in range(20)]
    for n, p in enumerate(names):
        p.write_bytes(b"first %d" % n)
    os.chmod(names[2], 0o600)
    for n, p in enumerate(names):
        p.write_bytes(b"second %d" % n)
        for mode, data in (("ab", b"+"), ("r+b", b"S")):
            with open(p, mode) as f:
                f.write(data)
    partial = root / ("w1." + "0" * 32 + ".partial")
    for tmp, data, dst in ((root / "tmp", b"renamed", names[0]), (partial, b"zarr", names[1])):
        tmp.write_bytes(data)
        os.rename(tmp, dst)
    os.link(names[3], root / "w3-link")
    names[3].write_bytes(b"through a hard link")
    fd = os.open(names[4], os.O_WRONLY | os.O_APPEND)  # its mtime set between two stored writes
    os.write(fd, b"a")
    os.fsync(fd)
    os.utime(fd, ns=(10**15, 10**15))
    os.write(fd, b"b")
    os.close(fd)
    for n in range(2):  # rsync -t: a temp file, its mtime set, renamed over the target, twice
        (root / ".w6.tmp").write_bytes(b"rsync %d" % n)
        os.utime(root / ".w6.tmp", ns=(10**15, 10**15))
        os.rename(root / ".w6.tmp", names[6])


def test_a_single_writer_of_a_directory_never_conflicts(local):
    m, root = local
    workload(m.path)
    assert counts(m.path)["write.conflicts"] == 0
    assert (root / "w0").read_bytes() == b"renamed" and (root / "w1").read_bytes() == b"zarr"
    assert (root / "w5").read_bytes() == b"Second 5+" and (root / "w3-link").read_bytes() == b"through a hard link"
    assert (root / "w4").read_bytes() == b"Second 4+ab" and (root / "w6").read_bytes() == b"rsync 1"
    assert not [p for p in root.iterdir() if "nczfs-conflict" in p.name]


def test_a_directory_mounted_last_writer_wins_replaces_what_is_there(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "f").write_bytes(b"v0")
    with mounted(DirectoryBackend(root), tmp_path / "mnt", "-o", "overwrite=last_writer_wins") as m:
        fa = open(m.path / "f", "r+b")
        fa.write(b"V")
        fa.flush()
        rewrite(root / "f", b"other")
        fa.close()  # no error: the last close wins
        assert counts(m.path)["write.overwrite-checked"] == 0
    assert (root / "f").read_bytes() == b"V0" and not conflicts(root, "f")


@pytest.fixture
def zipped(tmp_path):
    backend = ZipBackend(tmp_path / "ds.zip")
    backend.put_many({"f": b"v0", "g": b"g0"})
    with mounted(backend, tmp_path / "mnt") as m:
        yield m, backend.archive
    assert "Traceback" not in m.log_text(), m.log_text()


def test_a_zip_member_rewritten_by_another_process_refuses_the_stale_close(zipped):
    """The archive is what another process changes: a close over a member it changed fails
    with ESTALE, the writer's data goes beside it (into the archive at the next commit)."""
    m, archive = zipped
    fa = open(m.path / "f", "r+b")
    fa.seek(0, os.SEEK_END)
    fa.write(b" + the mount's")
    fa.flush()
    rewrite_member(archive, "f", b"the other process's")
    close_fails_estale(fa)
    assert counts(m.path)["write.conflicts"] == 1
    assert run_nczfs("sync", str(m.path)).returncode == 0
    members = zip_members(archive)
    assert members["f"] == b"the other process's" and members["g"] == b"g0"
    assert list(conflicts_in(members, "f").values()) == [b"v0 + the mount's"]


def test_a_zip_commit_keeps_another_processs_archive_and_the_mounts_staged_writes(zipped):
    """Closed (staged), not yet committed: another process rewrites the archive, changing ``f``
    and adding ``new``. The commit keeps both: the other's ``f`` and ``new``, the mount's ``g``,
    and the mount's ``f`` beside as ``f.nczfs-conflict-*`` (``zip.conflicts``)."""
    m, archive = zipped
    (m.path / "f").write_bytes(b"the mount's f")
    (m.path / "g").write_bytes(b"the mount's g")
    rewrite_member(archive, "f", b"their f")
    rewrite_member(archive, "new", b"their new")
    assert run_nczfs("sync", str(m.path)).returncode == 0
    members = zip_members(archive)
    assert {k: v for k, v in members.items() if "nczfs-conflict" not in k} == {
        "f": b"their f", "g": b"the mount's g", "new": b"their new"}
    assert list(conflicts_in(members, "f").values()) == [b"the mount's f"]
    assert counts(m.path)["zip.conflicts"] == 1
    assert "another program changed 'f'" in m.log_text()


def conflicts_in(members: dict[str, bytes], name: str) -> dict[str, bytes]:
    return {k: v for k, v in members.items() if k.startswith(f"{name}.nczfs-conflict-")}
