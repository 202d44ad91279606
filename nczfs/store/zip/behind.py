"""Another program changing the archive while the zip store has it open: found, and not overwritten.

Every call compares the archive's ``stat`` (inode, size, mtime) with the one read; a commit also
compares the bytes of its central directory (a rewrite in place that keeps the size within one
tick of the file clock). Found changed, the index is read again and the staged changes are
moved onto it (:mod:`.rebase`): those of members the other program did not touch apply as they
are; the mount's version of a member it changed too is kept beside it as
``NAME.nczfs-conflict-<UTC time>``, logged, and counted (``zip.conflicts``). Writes take
``if_version`` (``checks_writes``): a member's version is the CRC-32 and size of its bytes
(:func:`~nczfs.store.zip.entries.content_version`), so the mount's own commit changes none.
:class:`Behind` is a part of :class:`~nczfs.store.zip.store.ZipStore`.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
from typing import Any

from nczfs.toolbox.errors import BackendError, Conflict, NczfsError
from nczfs.store.values import ABSENT
from nczfs.store.zip.rebase import rebased

log = logging.getLogger(__name__)

#: commits tried while another program keeps changing the archive before the sync fails (ESTALE)
COMMIT_ATTEMPTS = 3


class Behind:
    """(Uses Archive's ``_load`` and ``_archive_ident``, Tree's ``_apply``.)"""

    path: str
    staging: Any
    _ident: Any
    _archived: dict[str, str]
    _files: dict[str, Any]
    #: the archive's central directory as read: where it starts, a digest of its bytes
    _cd: tuple[int, bytes] | None = None
    _conflicts_kept: int = 0
    checks_writes: bool
    _lock: Any
    _commit: Any  # ZipStore's: write the new archive and rename it over the old one (False: it changed)

    def _note_central_directory(self, fd: int, start: int) -> None:
        self._cd = (start, _digest(fd, start))

    def _unchanged(self, path: str | None = None) -> bool:
        """Is the archive (or the file at ``path``: the archive swapped out by a commit) still the
        one read: its ``stat``, and its central directory's bytes?"""
        if self._archive_ident(path) != self._ident:
            return False
        if self._ident is None or self._cd is None:
            return True
        try:
            fd = os.open(path or self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            return _digest(fd, self._cd[0]) == self._cd[1]
        finally:
            os.close(fd)

    def _check_archive(self) -> None:
        """If another program replaced or rewrote the archive: its index read again, the staged
        changes moved on top (:mod:`.rebase`)."""
        if self._archive_ident() != self._ident:
            self._rebase()

    def _rebase(self) -> None:
        records = list(self.staging.records) if self.staging is not None else []
        before = self._archived
        log.info("%s: the archive changed behind the mount; reloading its index (%d staged changes "
                 "moved on top)", self.path, len(records))
        self._load()
        if self.staging is None:
            return
        changed = ({k for k in before.keys() | self._archived.keys() if before.get(k) != self._archived.get(k)}
                   if self.checks_writes else set())  # -o overwrite=last_writer_wins: the mount's apply on top
        moved = rebased(records, changed, known=set(before))
        try:
            for record in moved.records:
                self._apply(record)
        except (NczfsError, KeyError) as exc:
            self.staging.orphan(f"they conflict with the archive's new contents: {exc}")
            self._load()
            return
        self.staging.rebase(self._ident, moved.records)
        for key, kept in moved.kept:
            self._conflicts_kept += 1
            log.error("%s: another program changed %r in the archive since this mount read it: the mount's "
                      "version (staged, not yet committed) is kept beside it as %r", self.path, key, kept)
        for key, op in moved.dropped:
            log.error("%s: another program changed %r in the archive since this mount read it: the mount's "
                      "%s of it is dropped, the other program's version stays", self.path, key,
                      {"del": "removal", "meta": "change of attributes", "mvdir": "move with its directory"}.get(
                          op, f"{op} of the version it read"))

    def _check_version(self, key: str, if_version: str | None) -> None:
        """Conflict unless the object ``key`` is version ``if_version`` (ABSENT: none; None: any)."""
        if if_version is None:
            return
        found = self._files.get(key)
        now = found.etag if found is not None else ""
        if (found is None) if if_version == ABSENT else now == if_version:
            return
        raise Conflict(key, if_version, now)

    def sync(self) -> None:
        """Commit staged changes: a new archive, fsynced, atomically renamed over the old one, only
        while the old one is still the archive read (:mod:`.behind`); else the staged changes are
        moved onto the archive another program made and the commit tried again."""
        with self._lock:
            for _ in range(COMMIT_ATTEMPTS):
                if self.staging is None or not self.staging.dirty:
                    return
                if not self._unchanged():
                    self._rebase()
                    continue
                if self._commit():
                    return
            err = BackendError(f"{self.path}: another program kept changing the archive during {COMMIT_ATTEMPTS} "
                               f"commits; not committed, the staged writes are kept in {self.staging.dir}")
            err.errno = errno.ESTALE
            raise err

    def counters(self) -> dict[str, int]:
        return {"zip.conflicts": self._conflicts_kept}


def _digest(fd: int, start: int) -> bytes:
    """A digest of the bytes from ``start`` (the central directory) to the end of the file."""
    size = os.fstat(fd).st_size
    h = hashlib.blake2b(digest_size=16)
    while start < size:
        piece = os.pread(fd, min(size - start, 8 << 20), start)
        if not piece:
            break
        h.update(piece)
        start += len(piece)
    return h.digest()
