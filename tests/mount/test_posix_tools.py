"""Ordinary POSIX tools (cp, diff, rsync, find, du, tar, mv) on a real mount, with real datasets.

Every test checks both what the mount shows and what reached the backend, byte for byte.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.mount.trees import DIR, as_stored, backend_snapshot, diff_summary, snapshot

pytestmark = pytest.mark.fuse

DATASETS = ("handmade", "netcdf-c")


def run(*cmd: str, cwd: str | os.PathLike | None = None, shell: bool = False) -> str:
    res = subprocess.run(
        cmd[0] if shell else list(cmd), cwd=cwd, shell=shell, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, f"{cmd} failed ({res.returncode}):\nstdout: {res.stdout}\nstderr: {res.stderr}"
    return res.stdout


def diff_r(a: Path, b: Path) -> None:
    res = subprocess.run(["diff", "-r", str(a), str(b)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"diff -r {a} {b}:\n{res.stdout}{res.stderr}"


def prefixed(snap: dict, prefix: str) -> dict:
    return {f"{prefix}/{k}": v for k, v in snap.items()} | {prefix: DIR}


@pytest.fixture
def sources(corpus) -> list[Path]:
    return [corpus / name for name in DATASETS]


@pytest.fixture
def source_tree(sources) -> dict:
    """The datasets as they should appear at the top of the mount."""
    out: dict = {}
    for src in sources:
        out |= prefixed(snapshot(src), src.name)
    return out


def put_datasets(mount, sources) -> None:
    """Write the datasets straight into the medium (as another writer of the store would)."""
    for src in sources:
        for p in src.rglob("*"):
            if p.is_file():
                mount.backend.put(f"{src.name}/{p.relative_to(src)}", p.read_bytes())


def check_backend(mount, expected: dict) -> None:
    got = backend_snapshot(mount.backend)
    want = as_stored(expected, mount.backend)
    assert got == want, diff_summary(want, got, ("expected", "backend"))


def test_cp_r_into_mount_matches_source_in_mount_and_backend(mount, sources, source_tree):
    for src in sources:
        run("cp", "-r", str(src), str(mount.path))
    for src in sources:
        diff_r(src, mount.path / src.name)
        if mount.backend.name == "directory":  # the backing tree itself (zip: check_backend below)
            diff_r(src, mount.backend.root / src.name)
    assert snapshot(mount.path) == source_tree
    check_backend(mount, source_tree)


def test_cp_r_out_of_mount_matches_source(mount, sources, source_tree, tmp_path):
    put_datasets(mount, sources)
    out = tmp_path / "out"
    out.mkdir()
    for src in sources:
        run("cp", "-r", str(mount.path / src.name), str(out))
        diff_r(src, out / src.name)
    assert snapshot(out) == source_tree


def test_rsync_a_in_and_out_and_again(mount, sources, source_tree, tmp_path):
    dst = mount.path / "r"
    for src in sources:
        run("rsync", "-a", f"{src}", f"{dst}/")
    for src in sources:
        diff_r(src, dst / src.name)
    want = prefixed(source_tree, "r")
    assert snapshot(mount.path) == want
    check_backend(mount, want)  # no rsync temp files (.name.XXXXXX) left behind
    # rsync -a kept times and modes (in memory): a file's mtime and mode match its source
    for src in sources:
        for p in src.rglob("*"):
            st_src, st_mnt = p.stat(), (dst / src.name / p.relative_to(src)).stat()
            assert int(st_mnt.st_mtime) == int(st_src.st_mtime), p
            assert st_mnt.st_mode == st_src.st_mode, p

    # a second run finds nothing to do: sizes and times match
    for src in sources:
        changes = run("rsync", "-a", "--itemize-changes", f"{src}", f"{dst}/")
        assert changes == "", f"second rsync into the mount changed:\n{changes}"
    assert snapshot(mount.path) == want

    out = tmp_path / "out"
    run("rsync", "-a", f"{dst}/", f"{out}/")
    for src in sources:
        diff_r(src, out / src.name)
    assert snapshot(out) == source_tree
    changes = run("rsync", "-a", "--itemize-changes", f"{dst}/", f"{out}/")
    assert changes == "", f"second rsync out of the mount changed:\n{changes}"


def test_rsync_a_updates_a_changed_file(mount, sources, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(sources[0], src)
    run("rsync", "-a", f"{src}/", f"{mount.path}/")
    victim = next(p for p in sorted(src.rglob("*")) if p.is_file() and p.stat().st_size > 10)
    rel = str(victim.relative_to(src))
    victim.chmod(0o644)
    victim.write_bytes(b"changed " + victim.read_bytes()[::-1])
    os.utime(victim, (1_600_000_000, 1_600_000_000))
    changes = run("rsync", "-a", "--itemize-changes", f"{src}/", f"{mount.path}/")
    assert changes.split() == [">f.st......", rel] or changes.split() == [">f.stp.....", rel], changes
    assert (mount.path / rel).read_bytes() == victim.read_bytes()
    assert mount.backend.read(rel) == victim.read_bytes()
    diff_r(src, mount.path)


def test_find_lists_exactly_the_expected_paths(mount, sources, source_tree):
    for src in sources:
        run("cp", "-r", str(src), str(mount.path))
    listed = run("find", str(mount.path), "-mindepth", "1", "-printf", "%y %P\\n").splitlines()
    want = sorted(f"{'d' if v == DIR else 'f'} {k}" for k, v in source_tree.items())
    assert sorted(listed) == want
    assert len(listed) == len(set(listed))
    files = run("find", str(mount.path), "-type", "f", "-name", ".zarray").split()
    assert sorted(os.path.relpath(f, mount.path) for f in files) == sorted(
        k for k in source_tree if k.rsplit("/", 1)[-1] == ".zarray"
    )


def test_du_gives_the_expected_totals(mount, sources, source_tree):
    for src in sources:
        run("cp", "-r", str(src), str(mount.path))
    sizes = [len(v) for v in source_tree.values() if v != DIR]
    assert sizes and sum(sizes) > 0
    # apparent size: files only, directories have size 0 in nczfs
    total = int(run("du", "-sb", str(mount.path)).split()[0])
    assert total == sum(sizes)
    # allocated size: st_blocks = ceil(size / 512) per file; du -s prints KiB, rounded up
    blocks_512 = sum((s + 511) // 512 for s in sizes)
    kib = int(run("du", "-s", str(mount.path)).split()[0])
    assert kib == (blocks_512 * 512 + 1023) // 1024
    for src in sources:
        want = sum(len(v) for k, v in source_tree.items() if v != DIR and k.startswith(src.name + "/"))
        assert int(run("du", "-sb", str(mount.path / src.name)).split()[0]) == want


def test_tar_into_and_out_of_mount(mount, corpus, sources, source_tree, tmp_path):
    q = shlex.quote
    names = " ".join(DATASETS)
    run(f"tar -C {q(str(corpus))} -cf - {names} | tar -C {q(str(mount.path))} -xf -", shell=True)
    for src in sources:
        diff_r(src, mount.path / src.name)
    assert snapshot(mount.path) == source_tree
    check_backend(mount, source_tree)

    out = tmp_path / "out"
    out.mkdir()
    run(f"tar -C {q(str(mount.path))} -cf - . | tar -C {q(str(out))} -xf -", shell=True)
    assert snapshot(out) == source_tree
    # tar kept mtimes when extracting into the mount, and carried them out again
    for src in sources:
        for p in src.rglob("*"):
            if p.is_file():
                assert int((out / src.name / p.relative_to(src)).stat().st_mtime) == int(p.stat().st_mtime)


def test_tar_archive_made_in_mount_round_trips(mount, sources, source_tree, tmp_path):
    put_datasets(mount, sources)
    archive = mount.path / "all.tar"
    run("tar", "-C", str(mount.path), "-cf", str(archive), *DATASETS)
    assert mount.backend.read("all.tar") == archive.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    run("tar", "-C", str(out), "-xf", str(archive))
    assert snapshot(out) == source_tree


def test_mv_files_and_directories_within_mount(mount, sources, source_tree):
    put_datasets(mount, sources)
    m = mount.path
    tree = dict(source_tree)

    def moved(old: str, new: str) -> None:
        for k in sorted(tree):
            if k == old or k.startswith(old + "/"):
                tree[new + k[len(old):]] = tree.pop(k)

    # a file within its directory
    run("mv", str(m / "handmade/README.md"), str(m / "handmade/README.txt"))
    moved("handmade/README.md", "handmade/README.txt")
    # a file into another directory
    run("mv", str(m / "handmade/README.txt"), str(m / "netcdf-c"))
    moved("handmade/README.txt", "netcdf-c/README.txt")
    # a file over an existing file
    victim = next(k for k in sorted(tree) if k.startswith("netcdf-c/") and tree[k] != DIR and k != "netcdf-c/README.txt")
    run("mv", "-f", str(m / "netcdf-c/README.txt"), str(m / victim))
    tree.pop(victim)
    moved("netcdf-c/README.txt", victim)
    # a directory (with subdirectories) renamed in place
    sub = next(k for k in sorted(tree) if k.startswith("handmade/") and tree[k] == DIR and "/" not in k[9:])
    run("mv", str(m / sub), str(m / "handmade/renamed"))
    moved(sub, "handmade/renamed")
    # a directory into another directory
    run("mv", str(m / "handmade/renamed"), str(m / "netcdf-c"))
    moved("handmade/renamed", "netcdf-c/renamed")
    # a whole dataset into a new directory made with mkdir
    os.mkdir(m / "moved")
    tree["moved"] = DIR
    run("mv", str(m / "handmade"), str(m / "moved/"))
    moved("handmade", "moved/handmade")

    assert snapshot(m) == tree
    check_backend(mount, tree)
    assert not mount.backend.exists("handmade/README.md")


def test_mv_across_filesystems_in_and_out(mount, sources, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(sources[1], work)
    want = snapshot(work)
    run("mv", str(work), str(mount.path / "in"))
    assert not work.exists()
    assert snapshot(mount.path / "in") == want
    check_backend(mount, prefixed(want, "in"))
    back = tmp_path / "back"
    run("mv", str(mount.path / "in"), str(back))
    assert snapshot(back) == want
    assert os.listdir(mount.path) == []
    assert backend_snapshot(mount.backend) == {}


def test_xattr_and_acl_preserving_tools_work_without_xattrs(mount, sources, tmp_path):
    """``ls -l``, ``cp -a``, ``rsync -aXA`` and ``tar --xattrs`` in and out of the mount (``--acls`` out
    of it), with no error or warning: the mount has no xattrs (getxattr EOPNOTSUPP, listxattr
    empty). ``tar --acls`` extracting into the mount warns that it cannot set ACLs (setxattr ENOTSUP)."""
    src = sources[0]
    want = snapshot(src)

    def quiet(cmd: str) -> None:
        res = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and res.stderr == "", f"{cmd}: {res.returncode}\n{res.stderr}"

    q = shlex.quote
    m, out = q(str(mount.path)), q(str(tmp_path / "out"))
    quiet(f"cp -a {q(str(src))} {m}/cp && cp -a {m}/cp {out}-cp")
    quiet(f"rsync -aXA {q(str(src))}/ {m}/rsync/ && rsync -aXA {m}/rsync/ {out}-rsync/")
    quiet(f"mkdir {m}/tar {out}-tar && tar --xattrs -C {q(str(src))} -cf - . | tar --xattrs -C {m}/tar -xf -"
          f" && tar --xattrs --acls -C {m}/tar -cf - . | tar --xattrs --acls -C {out}-tar -xf -")
    quiet(f"ls -lR {m} > /dev/null")
    for name in ("cp", "rsync", "tar"):
        assert snapshot(mount.path / name) == want, name
        assert snapshot(tmp_path / f"out-{name}") == want, name
    check_backend(mount, prefixed(want, "cp") | prefixed(want, "rsync") | prefixed(want, "tar"))
