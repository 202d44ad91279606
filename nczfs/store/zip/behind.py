"""Another program changing the archive while the zip store has it open: found, and not overwritten.

Every call compares the archive's ``stat`` (inode, size, mtime) with the one read; a commit also
compares the bytes of its central directory (a rewrite in place that keeps the size within one
tick of the file clock). Found changed, the index is read again and the staged changes are
moved onto it (:mod:`.rebase`): those of members the other program did not touch apply as they
are; the mount's version of a member it changed too is kept beside it as
``NAME.nczfs-conflict-<UTC time>``, logged, and counted (``zip.conflicts``) — unless the layer
above told the store how to merge it (:meth:`Behind.merge_with`: consolidated metadata): then the
merge of the other program's version, the mount's and the one both started from (read from the
archive as it was) takes its place, counted as ``zip.merged``. Writes take
``if_version`` (``checks_writes``): a member's version is the CRC-32 and size of its bytes
(:func:`~nczfs.store.zip.entries.content_version`), so the mount's own commit changes none.
:class:`Behind` is a part of :class:`~nczfs.store.zip.store.ZipStore`.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import logging
import os
import time
import zipfile
import zlib
from typing import TYPE_CHECKING, Any, Callable

from nczfs.store.capabilities import Capabilities
from nczfs.store.capabilities import Merge
from nczfs.toolbox import metrics
from nczfs.toolbox.errors import BackendError, Conflict, NczfsError
from nczfs.store.values import ABSENT
from nczfs.store.zip.archive import inflate
from nczfs.store.zip.entries import Member, meta_record
from nczfs.store.zip.rebase import Rebased, rebased

log = logging.getLogger(__name__)

#: commits tried while another program keeps changing the archive before the sync fails (ESTALE)
COMMIT_ATTEMPTS = 3

metrics.declare({  # Behind.counters()
    "zip.conflicts": ("counter", "", "Staged zip members another program changed in the archive first (kept beside at the commit)"),
    "zip.merged": ("counter", "", "Staged zip members another program changed in the archive first, merged (consolidated metadata)"),
})


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
    _conflicts_merged: int = 0
    _merge: Merge | None = None
    _merge_wants: Callable[[str], bool]
    _read_entry: Any  # ZipStore's: an entry's bytes
    _zf: zipfile.ZipFile | None
    _fd: int | None
    top: str
    capabilities: Capabilities
    _lock: Any
    _commit: Any  # ZipStore's: write the new archive and rename it over the old one (False: it changed)

    if TYPE_CHECKING:  # Archive's and Tree's, declared for the type checker alone
        def _archive_ident(self, path: str | None = None) -> tuple[int, int, int] | None: ...
        def _load(self) -> None: ...
        def _apply(self, rec: dict) -> None: ...

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

    def merge_with(self, merge: Merge, wants: Callable[[str], bool]) -> None:
        """An object ``wants`` names that another program changed while the mount's change of it
        was staged is ``merge(key, theirs, ours, base)`` (None: kept beside, as any other)."""
        self._merge, self._merge_wants = merge, wants

    def _rebase(self) -> None:
        records = list(self.staging.records) if self.staging is not None else []
        before = self._archived
        log.info("%s: the archive changed behind the mount; reloading its index (%d staged changes "
                 "moved on top)", self.path, len(records))
        old = (self._zf, self._fd, self.top)  # the archive as read: the base of a merge
        self._zf = self._fd = None
        try:
            self._load()
            if self.staging is not None:
                self._move_staged(records, before, old)
        finally:
            if old[0] is not None:
                old[0].close()
            if old[1] is not None:
                os.close(old[1])

    def _move_staged(self, records: list[dict], before: dict[str, str], old: tuple) -> None:
        changed = ({k for k in before.keys() | self._archived.keys() if before.get(k) != self._archived.get(k)}
                   if self.capabilities.checks_writes else set())  # -o overwrite=last_writer_wins: the mount's apply on top
        moved = rebased(records, changed, known=set(before))
        try:
            for record in moved.records:
                self._apply(record)
            merged = self._merge_kept(moved, before, old)
        except (NczfsError, KeyError) as exc:
            self.staging.orphan(f"they conflict with the archive's new contents: {exc}")
            self._load()
            return
        self.staging.rebase(self._ident, moved.records)
        for key in merged:
            self._conflicts_merged += 1
            log.info("%s: another program changed %r in the archive since this mount read it: the mount's "
                     "changes of it (staged, not yet committed) are merged into its version", self.path, key)
        for key, kept in moved.kept:
            self._conflicts_kept += 1
            log.error("%s: another program changed %r in the archive since this mount read it: the mount's "
                      "version (staged, not yet committed) is kept beside it as %r", self.path, key, kept)
        for key, op in moved.dropped:
            log.error("%s: another program changed %r in the archive since this mount read it: the mount's "
                      "%s of it is dropped, the other program's version stays", self.path, key,
                      {"del": "removal", "meta": "change of attributes", "mvdir": "move with its directory"}.get(
                          op, f"{op} of the version it read"))

    def _merge_kept(self, moved: Rebased, before: dict[str, str], old: tuple) -> list[str]:
        """The objects kept beside (applied) that ``merge_with``'s merge answers for, merged
        instead: a record removing the one beside, one storing the merge. Their keys."""
        done: list[str] = []
        merge = self._merge
        if merge is None:
            return done
        for key, beside in list(moved.kept):
            if not self._merge_wants(key):
                continue
            try:
                recs = self._merged(merge, key, beside, old if key in before else None)
            except (OSError, NczfsError) as exc:
                log.warning("%s: %r: the merge could not be made (%s): kept beside", self.path, key, exc)
                continue
            if recs is None:
                continue
            for rec in recs:
                self._apply(rec)
            moved.records.extend(recs)
            moved.kept.remove((key, beside))
            done.append(key)
        return done

    def _merged(self, merge: Merge, key: str, beside: str, old: tuple | None) -> list[dict] | None:
        """The records replacing the other program's ``key`` with its merge with the mount's
        (now ``beside``) and the archive's as read (``old``; None: it had none); None: no merge."""
        theirs, ours = self._files.get(key), self._files.get(beside)
        if not isinstance(theirs, Member) or ours is None:
            return None  # the other program removed it, or the mount's is a directory
        base = _base(old, key) if old is not None else None
        if old is not None and base is None:
            return None
        data = merge(key, self._read_entry(key, theirs, 0, theirs.size),
                     self._read_entry(beside, ours, 0, ours.size), base)
        if data is None:
            return None
        name, size = self.staging.store([data])
        rec = {"op": "set", "key": key, "file": name, "size": size, "mtime": time.time_ns(), "crc": zlib.crc32(data)}
        if theirs.meta is not None:
            rec["meta"] = meta_record(dataclasses.replace(theirs.meta, mtime_ns=None))
        # the one beside removed first: a later rebase may send the merge beside under the same name
        return [{"op": "del", "key": beside}, rec]

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
        return {"zip.conflicts": self._conflicts_kept, "zip.merged": self._conflicts_merged}


def _base(old: tuple, key: str) -> bytes | None:
    """``key``'s bytes in the archive as it was read (``old``: its ZipFile, descriptor, top
    directory); None where they cannot be read any more (it was rewritten in place)."""
    zf, _, top = old
    try:
        return inflate(zf, key, zf.getinfo((top + "/" if top else "") + key))
    except (KeyError, BackendError):  # not there, or refused as a read of it would be
        return None


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
