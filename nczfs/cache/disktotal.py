"""SharedTotal: the byte total of a cache directory, shared by every daemon using it.

The total is kept as decimal digits at the start of ``.lock`` and changes only under the lock
(``flock`` on that file, plus a thread lock inside the process). If the directory is emptied
under the mount (``rm -rf``), the next holder of the lock follows the path to the lock file a
daemon made since then, or makes one, so that all of them count their bytes in one total again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator

#: digits of the shared total at the start of ``.lock``
HELD_WIDTH = 20


class SharedTotal:
    """The lock of a cache directory and the total it guards; ``recount`` counts it afresh."""

    def __init__(self, root: str, recount: Callable[[], int]):
        self.path = os.path.join(root, ".lock")
        self.held = 0  # the shared total as last seen by this process
        self._recount = recount
        self._tlock = threading.Lock()
        self._fd: int | None = None

    def open(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._tlock:
            assert self._fd is not None
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                self._follow()
            except BaseException:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                raise
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def read(self) -> int:
        """(under the lock) The shared total; counted afresh if the file holds no number."""
        assert self._fd is not None
        try:
            return int(os.pread(self._fd, HELD_WIDTH, 0))
        except ValueError:  # empty or damaged
            return self._recount()

    def write(self, n: int) -> None:
        """(under the lock) Record ``n`` (never below 0) as the shared total."""
        assert self._fd is not None
        self.held = max(0, n)
        os.pwrite(self._fd, b"%*d" % (HELD_WIDTH, self.held), 0)

    def _follow(self) -> None:
        """(holding the lock) Take the lock file now at the path if it is not the one held open."""
        assert self._fd is not None
        while True:
            held = os.fstat(self._fd)
            try:
                current = os.stat(self.path)
                if (held.st_ino, held.st_dev) == (current.st_ino, current.st_dev):
                    return
            except FileNotFoundError:
                pass
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = fd
            fcntl.flock(fd, fcntl.LOCK_EX)
