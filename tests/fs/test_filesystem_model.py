"""Filesystem against a tree model: random sequences of POSIX operations, no kernel.

The model is a dict of files and a set of directories, with rename(2)/unlink(2)/rmdir(2)
errno rules. Files may stay open for writing (created, not uploaded) across other
operations; "another client" writes objects straight into the store. After every step the
mount's readdir (with a random buffer size) and reads must match the model, and once every
handle is released the store must hold exactly the model's files.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
import tempfile

import trio
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from nczfs.toolbox.errors import NczfsError, NotADirectory, to_errno
from nczfs.fs.filesystem import Filesystem
from nczfs.fs.inodes import ROOT_INO
from nczfs.fs.options import FsOptions
from nczfs.store.base import SyncStore
from nczfs.store.keys import parent_of
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore

PATHS = ["/".join(p) for n in (1, 2, 3) for p in itertools.product("ab", repeat=n)]
paths = st.sampled_from(PATHS)
data = st.binary(max_size=6)


def name_of(path: str) -> str:
    return path.rpartition("/")[2]


class FilesystemModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.raw = self.make_store()
        self.fs = Filesystem(ThreadedStore(self.raw), self.options())
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = set()
        self.open_handles: list[int] = []

    def make_store(self) -> SyncStore:  # pragma: no cover
        raise NotImplementedError

    def options(self) -> FsOptions:
        return FsOptions(metadata_ttl=0)

    # ------------------------------------------------------------------ model helpers

    def is_dir(self, p: str) -> bool:
        return p == "" or p in self.dirs

    def exists(self, p: str) -> bool:
        return self.is_dir(p) or p in self.files

    def parent_error(self, p: str) -> int | None:
        """errno of resolving ``p``'s parent directory, or None."""
        parts = p.split("/")
        for i in range(1, len(parts)):
            q = "/".join(parts[:i])
            if q in self.files:
                return errno.ENOTDIR
            if q not in self.dirs:
                return errno.ENOENT
        return None

    def children(self, p: str) -> list[str]:
        start = p + "/" if p else ""
        return sorted({x[len(start) :].split("/")[0] for x in [*self.files, *self.dirs] if x.startswith(start)})

    # ------------------------------------------------------------------ driving the filesystem

    async def ino(self, p: str) -> int:
        ino = ROOT_INO
        for n in [x for x in p.split("/") if x]:
            ino = (await self.fs.lookup(ino, n)).ino
        return ino

    async def dir_ino(self, p: str) -> int:
        ino = await self.ino(p)
        if not stat.S_ISDIR((await self.fs.getattr(ino)).mode):
            raise NotADirectory(p)
        return ino

    def expect(self, code: int | None, op) -> None:
        async def run() -> int:
            try:
                await op()
            except NczfsError as exc:
                return to_errno(exc)
            return 0

        got = trio.run(run)
        assert got == (code or 0), f"errno {got}, the model says {code or 0}"

    # ------------------------------------------------------------------ rules

    @rule(p=paths, value=data, keep_open=st.booleans(), trunc=st.booleans())
    def write(self, p, value, keep_open, trunc):
        err = self.parent_error(p) or (errno.EISDIR if p in self.dirs else None)

        async def op():
            flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if trunc else 0)
            fh, _ = await self.fs.create(await self.dir_ino(parent_of(p)), name_of(p), 0o644, flags)
            await self.fs.write(fh, 0, value)
            if keep_open:
                self.open_handles.append(fh)
            else:
                await self.fs.flush(fh)
                await self.fs.release(fh)

        self.expect(err, op)
        if err is None:
            old = b"" if trunc else self.files.get(p, b"")
            self.files[p] = value + old[len(value) :]

    @precondition(lambda self: not self.open_handles)
    @rule(p=paths, value=data)
    def other_client_writes(self, p, value):
        parts = p.split("/")
        ancestors = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if p in self.dirs or any(a in self.files for a in ancestors):
            return  # the store would refuse it (IsADirectory / NotADirectory)
        self.raw.set(p, value)
        self.files[p] = value
        self.dirs.update(ancestors)

    @rule()
    def release_all(self):
        async def op():
            for fh in self.open_handles:
                await self.fs.release(fh)

        trio.run(op)
        self.open_handles = []
        assert self.raw.list_prefix("") == sorted(self.files)
        for key, value in self.files.items():
            assert self.raw.get(key) == value, key

    @rule(p=paths)
    def unlink(self, p):
        err = self.parent_error(p)
        if err is None:
            err = errno.EISDIR if p in self.dirs else None if p in self.files else errno.ENOENT

        async def op():
            await self.fs.unlink(await self.dir_ino(parent_of(p)), name_of(p))

        self.expect(err, op)
        if err is None:
            del self.files[p]

    @rule(p=paths)
    def mkdir(self, p):
        err = self.parent_error(p) or (errno.EEXIST if self.exists(p) else None)

        async def op():
            await self.fs.mkdir(await self.dir_ino(parent_of(p)), name_of(p), 0o755)

        self.expect(err, op)
        if err is None:
            self.dirs.add(p)

    @rule(p=paths)
    def rmdir(self, p):
        err = self.parent_error(p)
        if err is None:
            if p in self.files:
                err = errno.ENOTDIR
            elif p not in self.dirs:
                err = errno.ENOENT
            elif self.children(p):
                err = errno.ENOTEMPTY

        async def op():
            await self.fs.rmdir(await self.dir_ino(parent_of(p)), name_of(p))

        self.expect(err, op)
        if err is None:
            self.dirs.discard(p)

    @rule(src=paths, dst=paths)
    def rename(self, src, dst):
        err = self.parent_error(src) or self.parent_error(dst)
        if err is None and not self.exists(src):
            err = errno.ENOENT
        if err is None and src != dst:
            if src in self.dirs:
                if dst.startswith(src + "/"):
                    err = errno.EINVAL
                elif dst in self.files:
                    err = errno.ENOTDIR
                elif dst in self.dirs and self.children(dst):
                    err = errno.ENOTEMPTY
            elif dst in self.dirs:
                err = errno.EISDIR

        async def op():
            await self.fs.rename(
                await self.dir_ino(parent_of(src)), name_of(src), await self.dir_ino(parent_of(dst)), name_of(dst)
            )

        self.expect(err, op)
        if err is not None or src == dst:
            return
        if src in self.files:
            self.files[dst] = self.files.pop(src)
            return
        self.dirs.discard(dst)

        def moved(x: str) -> str:
            return dst + x[len(src) :] if x == src or x.startswith(src + "/") else x

        self.files = {moved(k): v for k, v in self.files.items()}
        self.dirs = {moved(d) for d in self.dirs}

    # ------------------------------------------------------------------ checks

    @invariant()
    def mount_matches_model(self):
        async def check():
            for i, d in enumerate([""] + sorted(self.dirs)):
                buffer = 1 + (i + len(self.files)) % 4  # a few buffer sizes, resumed at next_id
                fh = await self.fs.opendir(await self.ino(d))
                seen: list[str] = []
                start = 0
                while True:
                    batch: list[tuple[str, int]] = []
                    await self.fs.readdir(fh, start, lambda n, a, nxt: len(batch) < buffer and batch.append((n, nxt)) is None)
                    if not batch:
                        break
                    seen += [n for n, _ in batch]
                    start = batch[-1][1]
                await self.fs.releasedir(fh)
                assert seen == self.children(d), d
            for f, value in self.files.items():
                fh = await self.fs.open(await self.ino(f), os.O_RDONLY)
                assert await self.fs.read(fh, 0, 100) == value, f
                await self.fs.release(fh)

        trio.run(check)


class MemoryFilesystemModel(FilesystemModel):
    def make_store(self) -> SyncStore:
        return MemoryStore("fs-model")


class SpillingFilesystemModel(MemoryFilesystemModel):
    """Files share 1 byte of write memory: nearly every written file moves to a temp file, some
    after a first write kept in memory."""

    def options(self) -> FsOptions:
        return FsOptions(metadata_ttl=0, write_memory=1)

    @invariant()
    def within_write_memory(self) -> None:
        assert self.fs.write_memory.used() <= 1


class DirectoryFilesystemModel(FilesystemModel):
    def make_store(self) -> SyncStore:
        self.root = tempfile.mkdtemp(prefix="nczfs-fs-model-")
        return DirectoryStore(self.root)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


FAST = settings(max_examples=30, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TestMemoryFilesystemModel = MemoryFilesystemModel.TestCase
TestMemoryFilesystemModel.settings = FAST
TestSpillingFilesystemModel = SpillingFilesystemModel.TestCase
TestSpillingFilesystemModel.settings = settings(FAST, max_examples=60)  # most examples write too little to spill
TestDirectoryFilesystemModel = DirectoryFilesystemModel.TestCase
TestDirectoryFilesystemModel.settings = FAST
