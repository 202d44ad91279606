"""What a branch mount's writes add to the session's tree as it shows it: files Icechunk does not
take (yet), which wait here, and the etag and mtime of each object written in the session (its
etag names the snapshot and a write counter, so that the cache is keyed by the write)."""

from __future__ import annotations

import threading
import time
from typing import Callable

from nczfs.store.keys import join
from nczfs.store.values import DirEntry, ObjectInfo


class WriteOverlay:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: files written in the session that Icechunk does not take (yet): key -> (bytes, info)
        self.waiting: dict[str, tuple[bytes, ObjectInfo]] = {}
        #: etag and mtime of objects written in this session
        self._written: dict[str, tuple[str, int]] = {}
        self._writes = 0

    # ------------------------------------------------------------------ writes

    def note(self, key: str, size: int, snapshot: str) -> ObjectInfo:
        """What ``key``, ``size`` bytes just written over ``snapshot``, shows."""
        with self._lock:
            self._writes += 1
            etag, mtime = f"{snapshot}.w{self._writes}", time.time_ns()
            self._written[key] = (etag, mtime)
        return ObjectInfo(key, size, mtime, etag)

    def forget(self, key: str) -> None:
        """``key`` was deleted."""
        self.waiting.pop(key, None)
        self._written.pop(key, None)

    def committed(self) -> None:
        """The session's writes are a snapshot now: their objects show its etag."""
        with self._lock:
            self._written.clear()

    def waiting_below(self, prefix: str) -> list[str]:
        """The waiting files below ``prefix`` (every one: ``""``)."""
        start = prefix + "/" if prefix else ""
        return [k for k in self.waiting if k.startswith(start)]

    # ------------------------------------------------------------------ reads

    def info(self, key: str, in_tree: Callable[[str], ObjectInfo | None]) -> ObjectInfo | None:
        """``key``'s attributes: a waiting file's, or the tree's (``in_tree``) with its write's etag."""
        waiting = self.waiting.get(key)
        if waiting is not None:
            return waiting[1]
        info = in_tree(key)
        if info is not None and key in self._written:
            etag, mtime = self._written[key]
            info = ObjectInfo(key, info.size, mtime, etag)
        return info

    def listed(self, prefix: str, entries: list[DirEntry]) -> list[DirEntry]:
        """The tree's listing of ``prefix`` with the writes' etags, and the waiting files below it
        (and the directories they imply)."""
        shown: dict[str, DirEntry] = {}
        for e in entries:
            written = self._written.get(join(prefix, e.name)) if e.info is not None else None
            shown[e.name] = e if written is None else DirEntry(e.name, False, ObjectInfo(e.info.key, e.info.size, written[1], written[0]))  # type: ignore[union-attr]  # written: e.info is set
        start = prefix + "/" if prefix else ""
        for key in self.waiting_below(prefix):
            name, _, rest = key[len(start):].partition("/")
            if rest:
                shown[name] = DirEntry(name, True)
            elif name not in shown:
                shown[name] = DirEntry(name, False, self.waiting[key][1])
        return [shown[n] for n in sorted(shown)]
