"""Store a mount's pending writes and unmount it: ``nczfs sync``, ``nczfs umount``, the Python API.

Storing is one request to the daemon over its control socket (controlsock.py: only root and the
mounting user are answered, whatever the file system answers); while it runs, a terminal
sees what is left to store (the control file's ``write.bytes-pending``) once it has taken more
than :data:`PROGRESS_AFTER` seconds. Errors are :class:`UnmountError` with a one-line message.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Callable, TextIO

from nczfs.daemon import busy, runstate
from nczfs.fuse.control import NotAnNczfsMount, read_control, read_control_or
from nczfs.daemon.controlsock import ControlError, request
from nczfs.toolbox.errors import NczfsError

#: seconds a store of pending writes runs before a terminal is shown what is left
PROGRESS_AFTER = float(os.environ.get("NCZFS_PROGRESS_AFTER", "2"))
#: seconds between two progress lines
PROGRESS_EVERY = 0.5


class UnmountError(NczfsError):
    """Pending writes could not be stored, or the mount could not be removed."""


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _pending(mnt: str) -> int | None:
    try:
        return read_control(mnt)["counters"].get("write.bytes-pending")
    except (OSError, NotAnNczfsMount):
        return None


def store_pending(mnt: str, progress: TextIO | None = None, control: dict | None = None) -> None:
    """Have the daemon store every pending write (zip: commit them), through the control socket
    its control file names (``control``: that file, read already); ``progress``: a terminal
    shown what is left."""
    if control is None:
        control = read_control_or(mnt, UnmountError, "pending writes could not be stored")
    path = control.get("socket")
    if not isinstance(path, str):
        raise UnmountError(f"{mnt}: pending writes could not be stored (the daemon names no control socket)")
    reply = _ask_showing_progress(mnt, lambda: request(path, control["pid"], "sync"), progress)
    if isinstance(reply, ControlError):
        raise UnmountError(f"{mnt}: pending writes could not be stored ({reply})") from None
    if isinstance(reply, BaseException):
        raise reply
    if reply.get("ok") is not True:
        why = reply.get("error") or "the daemon refused"
        raise UnmountError(f"{mnt}: pending writes could not be stored ({why})")


def _ask_showing_progress(mnt: str, ask: Callable[[], dict], progress: TextIO | None) -> BaseException | dict:
    """``ask()`` in a thread of its own, its answer or its exception; meanwhile ``progress`` (a
    terminal) is shown the bytes the mount has left to store, after a while."""
    result: list[BaseException | dict] = []

    def run() -> None:
        try:
            result.append(ask())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            result.append(exc)

    worker = threading.Thread(target=run, name="nczfs sync", daemon=True)
    worker.start()
    started, shown = time.monotonic(), False
    while True:
        worker.join(PROGRESS_AFTER if not shown else PROGRESS_EVERY)
        if not worker.is_alive():
            break
        left = _pending(mnt) if progress is not None else None
        if progress is not None and left is not None:
            progress.write(f"\rnczfs: storing pending writes: {_size(left)} left, {time.monotonic() - started:.0f} s  ")
            progress.flush()
            shown = True
    if shown and progress is not None:
        progress.write("\r\033[K")
        progress.flush()
    return result[0]


def terminal() -> TextIO | None:
    """stderr, if a person watches it."""
    return sys.stderr if sys.stderr.isatty() else None


def unmount(mnt: str, pid: int | None, lazy: bool = False, timeout: float = 60.0,
            progress: TextIO | None = None, control: dict | None = None) -> None:
    """Store pending writes, unmount, wait for daemon ``pid`` to exit (``lazy``: detach even if
    busy, and do not wait: the daemon exits once the last file open there is closed);
    ``control``: the mount's control file, read already."""
    try:
        store_pending(mnt, progress, control)
    except UnmountError as exc:
        if pid is not None:
            raise UnmountError(f"{exc}; not unmounted") from None
    _fusermount(mnt, lazy)
    if not lazy and pid is not None:
        _wait_exit(pid, timeout)


def _fusermount(mnt: str, lazy: bool) -> None:
    """``fusermount3 -u`` (``-z``: lazy); a busy mount's error names the processes using it."""
    res = subprocess.run(["fusermount3", "-u", *(["-z"] if lazy else []), mnt], capture_output=True, text=True)
    if res.returncode == 0:
        return
    users = busy.processes_using(mnt) if "busy" in res.stderr else []
    if users:
        raise UnmountError(f"{mnt}: busy, in use by {busy.describe(users)}; close what they hold there, "
                           f"or 'nczfs umount --lazy {mnt}'")
    raise UnmountError(res.stderr.strip() or "fusermount3 -u failed")


def _wait_exit(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while runstate.alive(pid):
        if time.monotonic() > deadline:
            raise UnmountError(f"daemon {pid} still running after {timeout}s")
        time.sleep(0.05)
