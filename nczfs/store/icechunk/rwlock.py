"""Locks of an Icechunk session: writes share one that a commit takes alone; listings and writes
take turns."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class SharedExclusive:
    """Writes share it; a commit has it alone."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class Apart:
    """Listings of a session and its writes (and commits) never at the same time: any number of
    either kind at once; while one kind waits, more of the other do not start, and when the last
    holder leaves the waiting kind's turn comes (those waiting then go in).

    Icechunk 1.1 deadlocks its session otherwise: ``list_dir`` of a group holds the session's
    read lock while it takes it again, and a write queued in between (tokio's lock is fair)
    waits for the first, which waits for the second, forever; a chunk-coordinates stream holds
    the read lock between the batches it yields. (``tests/store/test_icechunk_apart.py``)
    """

    LISTING, WRITING = 0, 1

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holding = [0, 0]
        self._waiting = [0, 0]
        #: the kind whose turn it is while the other waits, and how many of it may still start
        self._turn = self.LISTING
        self._admit = 0

    def _may_start(self, kind: int) -> bool:
        other = 1 - kind
        return not self._holding[other] and (not self._waiting[other] or (self._turn == kind and self._admit > 0))

    @contextlib.contextmanager
    def _side(self, kind: int) -> Iterator[None]:
        other = 1 - kind
        with self._cond:
            self._waiting[kind] += 1
            self._cond.wait_for(lambda: self._may_start(kind))
            self._waiting[kind] -= 1
            self._holding[kind] += 1
            if self._turn == kind and self._admit > 0:
                self._admit -= 1
        try:
            yield
        finally:
            with self._cond:
                self._holding[kind] -= 1
                if not self._holding[kind] and self._waiting[other]:
                    self._turn, self._admit = other, self._waiting[other]
                self._cond.notify_all()

    def listing(self) -> contextlib.AbstractContextManager[None]:
        return self._side(self.LISTING)

    def writing(self) -> contextlib.AbstractContextManager[None]:
        return self._side(self.WRITING)
