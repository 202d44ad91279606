"""Differential test: one seeded random sequence of file operations, applied to the mount and to a
plain directory; every outcome (value or errno) and, regularly, the whole tree must agree.

The plain directory is the reference (``link`` makes a hard link there and, for the mount's life,
on every backend: docs/SEMANTICS.md). Operations are generated from the state
of the plain directory, so a seed always yields the same sequence. On failure the seed and the op
log are printed; replay one seed with ``NCZFS_DIFF_SEEDS=7 pytest tests/mount/test_differential.py``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.mount.trees import as_stored, backend_snapshot, diff_summary, snapshot

pytestmark = pytest.mark.fuse

SEEDS = [int(s) for s in os.environ.get("NCZFS_DIFF_SEEDS", "1,2,3").split(",")]
N_OPS = int(os.environ.get("NCZFS_DIFF_OPS", "150"))
CHECK_EVERY = 20
FILE_NAMES = ("a", "b", "c", "d")
DIR_NAMES = ("x", "y", "z")
MAX_DEPTH = 3
SLOTS = (0, 1, 2)

WRITE_FLAGS = {
    "creat": os.O_CREAT | os.O_WRONLY,
    "trunc": os.O_CREAT | os.O_WRONLY | os.O_TRUNC,
    "excl": os.O_CREAT | os.O_EXCL | os.O_WRONLY,
    "rdwr": os.O_RDWR,  # rewrite in place, no truncation
}
KEEP_FLAGS = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY,
    "rw": os.O_RDWR,
    "creat": os.O_CREAT | os.O_RDWR,
    "trunc": os.O_RDWR | os.O_TRUNC,
    "append": os.O_WRONLY | os.O_APPEND,
}


@dataclass(frozen=True)
class Op:
    kind: str
    args: tuple

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(_short(a) for a in self.args)})"


def _short(v: object) -> str:
    if isinstance(v, bytes):
        return f"<{len(v)} bytes {hashlib.sha1(v).hexdigest()[:8]}>" if len(v) > 16 else repr(v)
    return repr(v)


def _outcome(v: object) -> str:
    if isinstance(v, tuple) and v and v[0] == "ok":
        return f"ok {_short(v[1])}"
    return f"{v[0]} {v[1]}" if isinstance(v, tuple) else repr(v)


class Side:
    """One directory the ops run on, with its held-open descriptors."""

    def __init__(self, root: Path):
        self.root = root
        self.fds: dict[int, int] = {}

    def p(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else str(self.root)

    def run(self, op: Op) -> tuple:
        try:
            return ("ok", getattr(self, f"op_{op.kind}")(*op.args))
        except OSError as exc:
            return ("err", errno.errorcode.get(exc.errno, str(exc.errno)))

    def close_all(self) -> None:
        for slot in list(self.fds):
            os.close(self.fds.pop(slot))

    # path operations (open, do, close)
    def op_write(self, path: str, how: str, offset: int, data: bytes) -> int:
        fd = os.open(self.p(path), WRITE_FLAGS[how], 0o644)
        try:
            return os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def op_append(self, path: str, data: bytes) -> int:
        fd = os.open(self.p(path), os.O_WRONLY | os.O_APPEND)
        try:
            return os.write(fd, data)
        finally:
            os.close(fd)

    def op_truncate(self, path: str, size: int) -> None:
        os.truncate(self.p(path), size)

    def op_read(self, path: str, offset: int, size: int) -> bytes:
        fd = os.open(self.p(path), os.O_RDONLY)
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def op_stat(self, path: str) -> tuple[str, int]:
        st = os.stat(self.p(path))
        return ("dir", 0) if os.path.isdir(self.p(path)) else ("file", st.st_size)

    def op_listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(self.p(path)))

    def op_unlink(self, path: str) -> None:
        os.unlink(self.p(path))

    def op_mkdir(self, path: str) -> None:
        os.mkdir(self.p(path))

    def op_rmdir(self, path: str) -> None:
        os.rmdir(self.p(path))

    def op_rename(self, src: str, dst: str) -> None:
        os.rename(self.p(src), self.p(dst))

    def op_link(self, src: str, dst: str) -> None:
        os.link(self.p(src), self.p(dst))

    def op_open(self, slot: int, path: str, how: str) -> None:
        assert slot not in self.fds
        self.fds[slot] = os.open(self.p(path), KEEP_FLAGS[how], 0o644)

    def op_fd_write(self, slot: int, offset: int, data: bytes) -> int:
        return os.pwrite(self.fds[slot], data, offset)

    def op_fd_append(self, slot: int, data: bytes) -> int:
        return os.write(self.fds[slot], data)

    def op_fd_read(self, slot: int, offset: int, size: int) -> bytes:
        return os.pread(self.fds[slot], size, offset)

    def op_fd_truncate(self, slot: int, size: int) -> None:
        os.ftruncate(self.fds[slot], size)

    def op_fd_size(self, slot: int) -> int | str:
        st = os.fstat(self.fds[slot])
        return "dir" if stat.S_ISDIR(st.st_mode) else st.st_size  # directory sizes differ by design

    def op_fd_fsync(self, slot: int) -> None:
        os.fsync(self.fds[slot])

    def op_fd_close(self, slot: int) -> None:
        os.close(self.fds.pop(slot))


class Generator:
    """Picks the next op from the reference directory's current state (mostly valid, some not)."""

    WEIGHTS = {
        "write": 22, "append": 6, "truncate": 5, "read": 8, "stat": 3, "listdir": 3,
        "unlink": 5, "mkdir": 5, "rmdir": 3, "rename": 12, "link": 5, "open": 6,
        "fd_write": 8, "fd_append": 2, "fd_read": 4, "fd_truncate": 2, "fd_size": 2, "fd_fsync": 1,
        "fd_close": 4,
    }

    def __init__(self, seed: int, ref: Side):
        self.rng = random.Random(seed)
        self.ref = ref

    def _tree(self) -> tuple[list[str], list[str]]:
        files, dirs = [], []
        for dirpath, dirnames, filenames in os.walk(self.ref.root):
            rel = os.path.relpath(dirpath, self.ref.root)
            rel = "" if rel == "." else rel + "/"
            dirs += [rel + d for d in dirnames]
            files += [rel + f for f in filenames]
        return sorted(files), sorted(dirs)

    def _size(self, path: str) -> int:
        try:
            return os.stat(self.ref.p(path)).st_size
        except OSError:
            return 0

    def _new(self, dirs: list[str], kind: str = "file") -> str:
        """A path in an existing directory (rarely in a missing one); mostly new, it may exist."""
        parents = [""] + [d for d in dirs if d.count("/") < MAX_DEPTH - 1]
        parent = self.rng.choice(parents)
        if self.rng.random() < 0.05:
            parent = "nodir" if not parent else parent + "/nodir"  # a missing parent
        names = FILE_NAMES if (kind == "file") != (self.rng.random() < 0.1) else DIR_NAMES
        name = self.rng.choice(names)
        return f"{parent}/{name}" if parent else name

    def _path(self, files: list[str], dirs: list[str], prefer: str) -> str:
        pool = {"file": files, "dir": dirs, "any": files + dirs}[prefer]
        r = self.rng.random()
        if r < 0.75:
            return self.rng.choice(pool) if pool else self._new(dirs, "dir" if prefer == "dir" else "file")
        if files + dirs and r < 0.85:
            return self.rng.choice(files + dirs)
        return self._new(dirs, "dir" if prefer == "dir" else "file")

    def _data(self) -> bytes:
        r = self.rng.random()
        n = 0 if r < 0.05 else self.rng.randint(1, 64) if r < 0.5 else self.rng.randint(65, 6000) if r < 0.95 else self.rng.randint(40_000, 120_000)
        return self.rng.randbytes(n)

    def _offset(self, path_size: int) -> int:
        return self.rng.choice([0, 0, path_size, self.rng.randint(0, path_size + 10), self.rng.randint(0, path_size + 9000)])

    def next(self) -> Op:
        rng = self.rng
        files, dirs = self._tree()
        open_slots = sorted(self.ref.fds)
        free_slots = [s for s in SLOTS if s not in self.ref.fds]
        kinds = [k for k in self.WEIGHTS if (not k.startswith("fd_") or open_slots) and (k != "open" or free_slots)]
        kind = rng.choices(kinds, [self.WEIGHTS[k] for k in kinds])[0]
        if kind == "write":
            path = self._path(files, dirs, "file")
            exists = os.path.exists(self.ref.p(path))
            how = rng.choice(["creat", "trunc", "excl", "rdwr", "rdwr"] if exists else ["creat", "creat", "trunc", "excl", "rdwr"])
            return Op(kind, (path, how, self._offset(self._size(path)), self._data()))
        if kind == "append":
            return Op(kind, (self._path(files, dirs, "file"), self._data()))
        if kind == "truncate":
            path = self._path(files, dirs, "file")
            return Op(kind, (path, rng.choice([0, rng.randint(0, self._size(path) + 10), self._size(path) + rng.randint(1, 5000)])))
        if kind == "read":
            path = self._path(files, dirs, "file")
            return Op(kind, (path, self._offset(self._size(path)), rng.choice([1, 100, 10_000, 200_000])))
        if kind in ("stat", "listdir"):
            return Op(kind, (self._path(files, dirs, "any" if kind == "stat" else "dir"),))
        if kind == "unlink":
            return Op(kind, (self._path(files, dirs, "file"),))
        if kind == "mkdir":
            return Op(kind, (self._new(dirs, "dir") if rng.random() < 0.85 else self._path(files, dirs, "any"),))
        if kind == "rmdir":
            return Op(kind, (self._path(files, dirs, "dir"),))
        if kind in ("rename", "link"):
            src = self._path(files, dirs, "any" if kind == "rename" else "file")
            r = rng.random()
            if r < 0.4:
                dst = self._new(dirs, "dir" if src in dirs else "file")
            elif r < 0.8:
                dst = self._path(files, dirs, "any")
            else:  # into its own subtree, or next to itself
                dst = f"{src}/{rng.choice(DIR_NAMES)}" if r < 0.85 else self._path(files, dirs, "file")
            return Op(kind, (src, dst))
        if kind == "open":
            how = rng.choice(list(KEEP_FLAGS))
            path = self._new(dirs) if how == "creat" and rng.random() < 0.5 else self._path(files, dirs, "file")
            return Op(kind, (rng.choice(free_slots), path, how))
        slot = rng.choice(open_slots)
        if kind == "fd_write":
            return Op(kind, (slot, rng.randint(0, 9000), self._data()))
        if kind == "fd_append":
            return Op(kind, (slot, self._data()))
        if kind == "fd_read":
            return Op(kind, (slot, rng.randint(0, 9000), rng.choice([10, 10_000, 200_000])))
        if kind == "fd_truncate":
            return Op(kind, (slot, rng.randint(0, 9000)))
        return Op(kind, (slot,))


def compare_trees(mount, ref: Side, log: list[str], seed: int, where: str, *, backend: bool) -> None:
    want = snapshot(ref.root)
    got = snapshot(mount.path)
    assert got == want, failure(seed, log, f"{where}: mount differs from the reference:\n" + diff_summary(want, got, ("reference", "mount")))
    if backend:
        stored = backend_snapshot(mount.backend)
        want_stored = as_stored(want, mount.backend)
        assert stored == want_stored, failure(
            seed, log, f"{where}: backend differs from the reference:\n" + diff_summary(want_stored, stored, ("reference", "backend"))
        )


def failure(seed: int, log: list[str], msg: str) -> str:
    text = f"\n{msg}\nseed={seed} (replay: NCZFS_DIFF_SEEDS={seed} NCZFS_DIFF_OPS={N_OPS} pytest {__file__})\nop log:\n" + "\n".join(log)
    print(text)
    return text


@pytest.mark.parametrize("seed", SEEDS)
def test_random_ops_match_a_plain_directory(mount, tmp_path, seed):
    ref_root = tmp_path / "reference"
    ref_root.mkdir()
    ref = Side(ref_root)
    mnt = Side(mount.path)
    gen = Generator(seed, ref)
    log: list[str] = []
    kinds_ok: set[str] = set()
    errors_seen: set[str] = set()
    try:
        for i in range(N_OPS):
            op = gen.next()
            want = ref.run(op)
            got = mnt.run(op)
            log.append(f"{i:4d} {op}  -> {_outcome(want)}" + ("" if got == want else f"   MOUNT: {_outcome(got)}"))
            assert got == want, failure(seed, log, f"op {i} {op}: reference {_outcome(want)}, mount {_outcome(got)}")
            if want[0] == "ok":
                kinds_ok.add(op.kind)
            else:
                errors_seen.add(want[1])
            if (i + 1) % CHECK_EVERY == 0:
                compare_trees(mount, ref, log, seed, f"after op {i}", backend=not ref.fds)
        ref.close_all()
        mnt.close_all()
        log.append("     close all descriptors")
        compare_trees(mount, ref, log, seed, "at the end", backend=True)
    finally:
        ref.close_all()
        mnt.close_all()
    # the sequence exercised what it is meant to (else the generator is broken)
    if N_OPS >= 100:
        assert {"write", "rename", "unlink", "mkdir", "open"} <= kinds_ok, failure(
            seed, log, f"too few kinds of ops succeeded: {sorted(kinds_ok)}"
        )
        assert len(errors_seen) >= 2, failure(seed, log, f"too few kinds of errors: {sorted(errors_seen)}")
