"""The control file ``MOUNTPOINT/.nczfs``: how ``nczfs umount`` and ``nczfs stats`` read the daemon.

A virtual, read-only regular file at the mount root (as JuiceFS's ``.stats``): never listed by
readdir, served by the FUSE adapter (fuse/ops.py) without reaching the store, and shadowing a store
object of the same name at the root. Opening it takes a snapshot of ``{"pid": ..., "counters":
{...}, "socket": PATH}`` as JSON (the socket: where the daemon takes requests to store pending
writes, controlsock.py); its size shows as 0 (the adapter opens it with direct_io, so reads are
not cut at the size). It replaced the ``user.nczfs.pid``/``user.nczfs.stats`` xattrs. Nothing here
imports pyfuse3.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Callable

from nczfs.fs.names import CONTROL_NAME as NAME

#: its inode number: the inode table (fs/inodes.py) counts up by one from 2 and never reuses a
#: number, so it would take 2**63 allocations to reach this one
INO = 1 << 63


class NotAnNczfsMount(Exception):
    """``read_control`` found no daemon's control file at the path."""


#: more about the daemon, shown by ``nczfs stats`` (the metrics address: metrics.py)
ABOUT: dict[str, object] = {}


def snapshot(counters: dict[str, int], socket: str | None = None) -> bytes:
    """The control file's content at an open: this daemon's pid, where and at which level it
    logs, its request counters and the path of its control socket."""
    from nczfs.toolbox import logs

    about = {"pid": os.getpid(), "log": logs.STATE.get("log"), "log_level": logs.current_level(), **ABOUT}
    return json.dumps({**about, "counters": counters, "socket": socket}, sort_keys=True).encode()


def read_control(mountpoint: str) -> dict:
    """``{"pid": int, "counters": {name: int}, "socket": str}`` read from a running nczfs mount.

    Raises NotAnNczfsMount if ``mountpoint`` is not the root of an nczfs mount; an OSError from
    opening the file goes through as it is (ENOTCONN: the mount's daemon has died).
    """
    path = os.path.join(mountpoint, NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES):
            raise NotAnNczfsMount(f"{mountpoint}: not an nczfs mount point (no control file {NAME})") from None
        raise
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_ino != INO:  # a plain file of that name, not the daemon's
            raise NotAnNczfsMount(f"{mountpoint}: not an nczfs mount point ({path} is not its control file)")
        raw = f.read()
    try:
        data = json.loads(raw)
        if isinstance(data, dict) and isinstance(data["pid"], int) and isinstance(data["counters"], dict):
            return data
    except (ValueError, KeyError):
        pass
    raise NotAnNczfsMount(f"{path}: not the JSON an nczfs daemon writes")


def read_control_or(mountpoint: str, error: Callable[[str], Exception], failed: str) -> dict:
    """:func:`read_control`, with what goes wrong raised as ``error(message)``: a path that is
    no nczfs mount as NotAnNczfsMount says it, an OSError as ``MOUNTPOINT: FAILED (reason)``."""
    try:
        return read_control(mountpoint)
    except NotAnNczfsMount as exc:
        raise error(str(exc)) from None
    except OSError as exc:
        raise error(f"{mountpoint}: {failed} ({exc.strerror})") from None
