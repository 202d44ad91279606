"""Does a process still hold a file of this mount open? Read from ``/proc`` (Linux).

The kernel sends FUSE a FLUSH for every close() of a descriptor, including the copies a child
process inherited: a multi-threaded program that starts a subprocess while it writes a file
(fork, then exec closing the descriptors marked close-on-exec), or a shell whose commands
inherit its redirection, closes the file many times while it is still being written. Each
such close would store the half-written file where every other client sees it. libfuse tells
which process closes, but pyfuse3 does not pass it on; what the daemon can see is whether the
process that opened the file still holds it (a descriptor for each description of the file it
opened: its own close takes the descriptor out of its table before the kernel sends the
FLUSH): then this close was someone else's (or a duplicate's), and the opener's own close
stores the file.

A process's descriptors are read from ``/proc/PID/fdinfo/N`` (``mnt_id`` and ``ino``, which
name the mount and the inode without asking the file system anything). Whatever cannot be
read (the process gone, another user's process, another PID namespace) answers "the
opener's": the close stores the file, as every close did before.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from nczfs.toolbox.mounttable import MOUNTINFO, kernel_path, topmost

#: descriptors of one process looked at, at most (a close that finds more stores the file)
MAX_FDS = 4096


def process_of(tid: int, proc: str = "/proc") -> int | None:
    """The process (thread group) of thread ``tid``, or None if it cannot be read."""
    try:
        f = os.open(f"{proc}/{tid}/status", os.O_RDONLY)
        try:
            status = os.read(f, 4096)
        finally:
            os.close(f)
        at = status.index(b"\nTgid:") + 6
        return int(status[at : status.index(b"\n", at)])
    except (OSError, ValueError):
        return None


def descriptors_on(pid: int, mnt: int, ino: int, under: str | None = None, proc: str = "/proc") -> int | None:
    """How many descriptors process ``pid`` has open on inode ``ino`` of mount ``mnt`` (None:
    cannot be read). ``under``: the mount's path; descriptors whose path (as this process sees
    it) is not below it are passed over without reading their fdinfo (3 us a descriptor, not 17)."""
    want_mnt, want_ino = f"\nmnt_id:\t{mnt}\n".encode(), f"\nino:\t{ino}\n".encode()  # whole lines
    prefix = None if under is None else under.rstrip("/") + "/"
    try:
        fds = os.listdir(f"{proc}/{pid}/fd")
    except OSError:
        return None
    if len(fds) > MAX_FDS:
        return None
    n = 0
    for fd in fds:
        try:
            if prefix is not None and not os.readlink(f"{proc}/{pid}/fd/{fd}").startswith(prefix):
                continue
            f = os.open(f"{proc}/{pid}/fdinfo/{fd}", os.O_RDONLY)
            try:
                info = os.read(f, 4096)
            finally:
                os.close(f)
        except OSError:
            continue  # closed meanwhile
        if want_ino in info and want_mnt in info:
            n += 1
    return n


def someone_elses_close(opener: int, mnt: int, ino: int, openers: list[int], under: str | None = None,
                        proc: str = "/proc") -> bool:
    """Is a close (FLUSH) of a descriptor that thread ``opener`` opened someone else's? ``openers``:
    the threads that opened the inode's descriptions not yet released, this one included. The
    opener's own close took its descriptor out of its table before the FLUSH was sent: if its
    process still holds at least one descriptor for each description it opened, the closed one
    was a copy (a child's, inherited) or a duplicate. Unknown (a thread or process gone, /proc
    not readable): False, the close stores the file."""
    process: dict[int, int | None] = {}

    def of(tid: int) -> int | None:
        if tid not in process:
            process[tid] = process_of(tid, proc) if tid > 0 else None
        return process[tid]

    tgid = of(opener)
    if tgid is None:
        return False
    opened = sum(1 for t in openers if of(t) == tgid)
    held = descriptors_on(tgid, mnt, ino, under, proc)
    return held is not None and held >= opened


def checker(mountpoint: str, mountinfo: str = MOUNTINFO) -> Callable[[int, int, list[int]], bool] | None:
    """``someone_elses_close(opener, ino, openers)`` for the mount on ``mountpoint``, or None if
    its id cannot be found. The mount is found by the path the kernel names it by (mounttable.py:
    symlinks resolved, the mount itself not looked at)."""
    path = kernel_path(mountpoint, mountinfo)
    found = topmost(path, mountinfo)
    if found is None:
        return None
    mnt = found.id
    return lambda opener, ino, openers: someone_elses_close(opener, mnt, ino, openers, path)
