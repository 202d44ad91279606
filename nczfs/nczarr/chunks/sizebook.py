"""SizeBook: the size of each chunk made from a stored one (recoded for a view, re-encoded as
deflate or made into strings for ``NAME.nc4``), kept in the cache directory (``-o cache_dir=``)
so that a remount, or another mount of the same source, knows it without making the chunk again.

A size is known by what made it: the mount's source identity, the stored chunk's key, byte range
and version (ETag), what the chunk was made with (a recode's token), and the versions of the code
whose bytes it is (:data:`FORM`, zlib's, numcodecs', the deflate encoder's
:func:`~nczfs.nczarr.chunks.deflater.encoder`): a changed object, or a library making other bytes,
never matches an old entry. A chunk whose version is unknown (ETag "") is not kept.

One SQLite database, ``made-sizes.sqlite`` at the top of the directory (the block cache's entries
live in two-letter folders: the two never meet), shared by the mounts using the directory (SQLite
locks it); at most a tenth over :data:`MAX_ROWS` rows, the oldest written dropped first (about 60 bytes each:
not counted in ``cache_dir_size``). Calls block: run them off the trio thread. A database that
cannot be opened, read or written is logged once and left alone: the sizes are then made again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import zlib

from nczfs.nczarr.chunks import deflater

log = logging.getLogger(__name__)

#: the form of the bytes this code makes from a stored chunk: raise it when they change
FORM = 1
FILE = "made-sizes.sqlite"
#: rows kept; past this the oldest written go, in steps of a tenth
MAX_ROWS = 1 << 20


def _codec_version() -> str:
    try:
        import numcodecs

        return str(numcodecs.__version__)
    except ImportError:  # pragma: no cover - numcodecs is a dependency
        return ""


class SizeBook:
    """Sizes of made chunks under ``directory``, for the source named by ``identity``."""

    def __init__(self, directory: str, identity: str, max_rows: int = MAX_ROWS):
        self.path = os.path.join(directory, FILE)
        self.max_rows = max_rows
        self._salt = json.dumps([FORM, identity, zlib.ZLIB_RUNTIME_VERSION, _codec_version(), deflater.encoder()])
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._broken = False
        self._writes = 0

    def _key(self, ident: tuple) -> bytes:
        return hashlib.sha256(json.dumps([self._salt, *ident], default=str).encode()).digest()[:20]

    def _open(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            try:
                db = sqlite3.connect(self.path, timeout=10, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("CREATE TABLE IF NOT EXISTS sizes (k BLOB PRIMARY KEY, size INTEGER NOT NULL)")
                self._db = db
                self._trim()
            except (sqlite3.Error, OSError) as exc:
                self._fail("opening", exc)
        return self._db

    def _fail(self, what: str, exc: Exception) -> None:
        if not self._broken:
            log.warning("cache dir %s: %s failed (%s); sizes of made chunks are not kept there",
                        self.path, what, exc)
        self._broken = True
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    def _trim(self) -> None:
        assert self._db is not None
        (rows,) = self._db.execute("SELECT count(*) FROM sizes").fetchone()
        if rows > self.max_rows:
            self._db.execute("DELETE FROM sizes WHERE rowid IN (SELECT rowid FROM sizes ORDER BY rowid LIMIT ?)",
                             (rows - self.max_rows + self.max_rows // 10,))

    def get(self, ident: tuple, etag: str) -> int | None:
        """The size kept for the chunk ``ident`` at version ``etag``, or None."""
        if not etag:
            return None
        with self._lock:
            db = self._open()
            if db is None:
                return None
            try:
                row = db.execute("SELECT size FROM sizes WHERE k = ?", (self._key((*ident, etag)),)).fetchone()
            except sqlite3.Error as exc:
                self._fail("reading", exc)
                return None
        return None if row is None else int(row[0])

    def put(self, ident: tuple, etag: str, size: int) -> None:
        """Keep ``size`` for the chunk ``ident`` at version ``etag``."""
        if not etag:
            return
        with self._lock:
            db = self._open()
            if db is None:
                return
            try:
                db.execute("INSERT OR REPLACE INTO sizes (k, size) VALUES (?, ?)", (self._key((*ident, etag)), size))
                self._writes += 1
                if self._writes % max(1, self.max_rows // 10) == 0:
                    self._trim()
            except sqlite3.Error as exc:
                self._fail("writing", exc)
