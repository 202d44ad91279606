"""The staging directory of a writable zip mount: staged object data, a journal, crash recovery.

Beside ``NAME.zip`` lives ``.NAME.zip.nczfs/`` holding

- ``lock``: flock'ed while a read/write mount owns the archive (a second one is refused);
- ``journal``: a header line naming the archive the changes apply to (inode, size, mtime),
  then one JSON line per change (set, del, mv, cp, mkdir, rmdir, mvdir), appended with one
  ``write`` each so a killed daemon leaves whole lines;
- ``obj-N``: the bytes of staged objects;
- during a commit ``new.zip`` (the archive being written) and, once it is fsynced,
  ``committing`` (the identity of ``new.zip``), then ``new.zip`` is swapped with the archive
  (``renameat2(RENAME_EXCHANGE)``; where that is missing, renamed over it right after the
  archive is checked once more) and the old archive, now ``new.zip``, removed once it is found to
  be the one read (:func:`~nczfs.store.fileversions.replace_checked`).

At the next mount: a ``committing`` marker matching the archive means the commit finished
(the journal is spent; a ``new.zip`` left is the archive swapped out: removed if it is the one
the journal names, else another program's, moved aside and reported); otherwise ``new.zip``
is thrown away, and a journal whose header still matches the archive is replayed. A journal that fits no archive any more is moved aside to
``.NAME.zip.nczfs-orphaned-TIME`` and reported, never applied to the wrong archive.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from typing import BinaryIO, Callable, Iterable

from nczfs.toolbox.errors import Conflict, SourceError
from nczfs.store.fileversions import replace_checked

log = logging.getLogger(__name__)

Ident = tuple[int, int, int] | None


def staging_dir(archive: str) -> str:
    d, name = os.path.split(archive)
    return os.path.join(d, f".{name}.nczfs")


def staged_changes(directory: str) -> int:
    """How many changes the journal in the staging directory ``directory`` holds (0: none)."""
    try:
        with open(os.path.join(directory, "journal"), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except OSError:
        return 0
    return sum(1 for line in lines[1:] if line.strip())


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Staging:
    def __init__(self, archive: str, lock_fd: int, base: Ident):
        self.archive = archive
        #: identity of the archive the journal's changes apply to
        self._base = base
        self.dir = staging_dir(archive)
        self._lock_fd = lock_fd
        self._journal: int | None = None
        self._next = 1
        #: the journal's records: changes made since the last commit
        self.records: list[dict] = []
        #: a fault hook for tests: run with the archive's path between a commit's last check and its swap
        self.before_replace: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ opening, recovery

    @classmethod
    def acquire(cls, archive: str, ident: Ident) -> Staging:
        d = staging_dir(archive)
        try:
            os.makedirs(d, exist_ok=True)
            fd = os.open(os.path.join(d, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SourceError(f"{archive}: cannot create the staging directory {d} ({exc.strerror})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise SourceError(f"{archive}: already mounted read/write by another nczfs") from None
        return cls(archive, fd, ident)

    @staticmethod
    def report_leftovers(archive: str) -> None:
        if os.path.exists(os.path.join(staging_dir(archive), "journal")):
            log.warning("%s: %s holds staged writes of an interrupted mount; a read/write mount "
                        "recovers them (this read-only mount shows the archive without them)",
                        archive, staging_dir(archive))

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def recover(self, ident: Ident) -> list[dict]:
        """Finish or undo an interrupted commit; the journal records to replay (maybe none)."""
        marker = self._path("committing")
        if os.path.exists(marker):
            with open(marker) as f:
                done = tuple(json.load(f)) == ident
            if done:  # the rename happened: the archive already holds the staged changes
                log.warning("%s: an interrupted commit had finished; cleaning up", self.archive)
                self._keep_swapped_out()
                self.committed(ident)
                return []
            os.unlink(marker)
        if os.path.exists(self._path("new.zip")):
            os.unlink(self._path("new.zip"))
        journal = self._path("journal")
        if not os.path.exists(journal):
            self._clear()
            return []
        with open(journal, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        try:
            base = json.loads(lines[0])["base"]
        except (ValueError, KeyError, TypeError):
            self.orphan("the journal is damaged")
            return []
        body = [line for line in lines[1:] if line]
        records = []
        for i, line in enumerate(body):
            try:
                records.append(json.loads(line))
            except ValueError:
                if i < len(body) - 1:
                    self.orphan("the journal is damaged")
                    return []
                # a kill during the last append leaves a torn line: that change was never acknowledged
                log.warning("%s: the journal's last line is torn; ignored", self.archive)
        if (tuple(base) if base is not None else None) != ident:
            self.orphan("they were made on another version of the archive")
            return []
        for name in os.listdir(self.dir):
            if name.startswith("obj-"):
                self._next = max(self._next, int(name[4:]) + 1)
        self._journal = os.open(journal, os.O_WRONLY | os.O_APPEND)
        self.records = records
        return records

    def _keep_swapped_out(self) -> None:
        """A commit killed right after its swap leaves the archive swapped out as ``new.zip``:
        the archive the journal's changes were made on (removed with the rest), or one another
        program put in its place between the commit's last check and the swap: that one is moved
        aside to ``.NAME.zip.nczfs-orphaned-TIME/`` and reported, never removed."""
        out = self._path("new.zip")
        try:
            st = os.stat(out)
            with open(self._path("journal"), encoding="utf-8", errors="replace") as f:
                base = json.loads(f.readline())["base"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        if base is not None and tuple(base) == (st.st_ino, st.st_size, st.st_mtime_ns):
            return
        dest = f"{self.dir}-orphaned-{time.strftime('%Y%m%dT%H%M%S')}"
        os.makedirs(dest, exist_ok=True)
        os.rename(out, os.path.join(dest, os.path.basename(self.archive)))
        log.error("%s: an interrupted commit replaced an archive another program had written "
                  "meanwhile; that archive is kept in %s", self.archive, dest)

    def orphan(self, why: str) -> None:
        """Move staged writes that cannot be applied aside, and say so."""
        dest = f"{self.dir}-orphaned-{time.strftime('%Y%m%dT%H%M%S')}"
        os.makedirs(dest, exist_ok=True)
        self._close_journal()
        for name in os.listdir(self.dir):
            if name != "lock":
                os.rename(self._path(name), os.path.join(dest, name))
        self.records = []
        log.error("%s: staged writes of an interrupted mount were NOT applied (%s); kept in %s",
                  self.archive, why, dest)

    def drop_unreferenced(self, referenced: set[str]) -> None:
        missing = referenced - self.files()
        if missing:
            raise SourceError(f"{self.archive}: staged data {sorted(missing)[0]} is missing from {self.dir}")
        self.release(self.files() - referenced)

    # ------------------------------------------------------------------ staged data and journal

    def files(self) -> set[str]:
        return {n for n in os.listdir(self.dir) if n.startswith("obj-")}

    def store(self, chunks: Iterable[bytes | bytearray | memoryview]) -> tuple[str, int]:
        """Write an object's bytes to a new staged file: (its name, bytes written)."""
        name = f"obj-{self._next}"
        self._next += 1
        written = 0
        try:
            with open(self._path(name), "wb") as f:
                for chunk in chunks:
                    written += f.write(chunk)
        except BaseException:
            self.release({name})
            raise
        return name, written

    def read(self, name: str, start: int, size: int) -> bytes:
        with open(self._path(name), "rb") as f:
            return os.pread(f.fileno(), size, start)

    def open_data(self, name: str) -> BinaryIO:
        return open(self._path(name), "rb")

    def release(self, names: set[str]) -> None:
        for name in names:
            try:
                os.unlink(self._path(name))
            except FileNotFoundError:
                pass

    def append(self, record: dict) -> None:
        if self._journal is None:
            path = self._path("journal")
            self._journal = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
            self._write({"nczfs_journal": 1, "archive": self.archive, "base": self._base})
        self._write(record)
        self.records.append(record)

    @property
    def dirty(self) -> bool:
        return bool(self.records)

    def rebase(self, base: Ident, records: list[dict]) -> None:
        """The archive was replaced by another program: the staged changes (now ``records``)
        apply to ``base``."""
        self._base = base
        self.records = list(records)
        if not self.records:
            return
        self._close_journal()
        tmp = self._path("journal.new")
        self._journal = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        self._write({"nczfs_journal": 1, "archive": self.archive, "base": base})
        for record in self.records:
            self._write(record)
        os.replace(tmp, self._path("journal"))

    def _close_journal(self) -> None:
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None

    def _write(self, obj: dict) -> None:
        assert self._journal is not None
        line = (json.dumps(obj) + "\n").encode()
        if os.write(self._journal, line) != len(line):
            raise OSError("short write to the staging journal")

    # ------------------------------------------------------------------ commit

    def new_archive_path(self) -> str:
        return self._path("new.zip")

    def discard_new_archive(self) -> None:
        try:
            os.unlink(self._path("new.zip"))
        except FileNotFoundError:
            pass

    def install(self, tmp: str, archive: str, unchanged: Callable[[str], bool], absent: bool = False) -> bool:
        """Put the fsynced new archive in the old one's place, leaving a marker for recovery: only
        while the old one is ``unchanged`` (is the archive read: the file at the path given; with
        ``absent``, only while there is none), as :func:`~nczfs.store.fileversions.replace_checked`
        replaces a file: swapped in one step and the one swapped out checked (swapped back if it
        changed: False); where the swap is missing, checked right before a plain rename."""
        st = os.stat(tmp)
        marker = self._path("committing")
        with open(marker, "w") as f:
            json.dump([st.st_ino, st.st_size, st.st_mtime_ns], f)
            f.flush()
            os.fsync(f.fileno())

        def check(path: str, _dir_fd: int | None) -> None:
            if not unchanged(path):
                raise Conflict(archive, "the archive read", "another")
        try:
            replace_checked(archive, lambda call: call(tmp, archive), check, absent, self.before_replace)
        except (Conflict, FileExistsError):
            os.unlink(marker)
            return False
        _fsync_dir(os.path.dirname(archive))
        return True

    def committed(self, ident: Ident) -> None:
        """The archive holds every staged change: start afresh on top of it."""
        self._base = ident
        self._clear()

    def _clear(self) -> None:
        self._close_journal()
        for name in os.listdir(self.dir):
            if name != "lock":
                path = self._path(name)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        self.records = []

    def close(self) -> None:
        """End of the mount: remove the staging directory unless it still holds changes."""
        self._close_journal()
        if not self.dirty:
            shutil.rmtree(self.dir, ignore_errors=True)
        os.close(self._lock_fd)
