"""The commands that act on a running mount through its control file and socket:
``nczfs umount``, ``sync``, ``stats`` and ``log-level``."""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
import time

from nczfs.daemon import runstate
from nczfs.toolbox import logs
from nczfs.cli.usage import UsageError
from nczfs.fuse.control import NotAnNczfsMount, read_control, read_control_or
from nczfs.toolbox.mounttable import is_fuse_mount, kernel_path
from nczfs.daemon.umount import UnmountError, store_pending, terminal, unmount


def cmd_umount(args: argparse.Namespace) -> int:
    mnt = kernel_path(args.mountpoint)
    control = None
    try:
        control = read_control(mnt)
    except (OSError, NotAnNczfsMount) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOTCONN:
            subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
            return _report_stale(mnt, args.stale_only)
        if args.stale_only:
            return 0
        if not is_fuse_mount(mnt):
            raise UsageError(f"{mnt}: not an nczfs mount point") from None
    if args.stale_only:
        return 0
    try:
        unmount(mnt, control["pid"] if control else None, lazy=args.lazy, timeout=args.timeout,
                progress=terminal(), control=control)
    except UnmountError as exc:
        print(f"nczfs: {exc}", file=sys.stderr)
        return 1
    return 0


def _report_stale(mnt: str, stale_only: bool) -> int:
    """A stale mount was removed: say so, with what its dead daemon left pending and where
    (runstate.py); exit 1 if it left anything, unless only asked to clear the way for a new
    mount (``--stale-only``, which the systemd unit runs before mounting again)."""
    found = runstate.find_dead(mnt)
    pending = runstate.left_behind(*found) if found else []
    if found and not pending:
        runstate.remove_state(found[0], found[1]["pid"])
    if not pending:
        print(f"nczfs: {mnt}: removed a stale mount (its daemon had died)", file=sys.stderr)
        return 0
    print(f"nczfs: {mnt}: removed a stale mount (its daemon had died); it left pending: {'; '.join(pending)}",
          file=sys.stderr)
    return 0 if stale_only else 1


def cmd_sync(args: argparse.Namespace) -> int:
    """Ask the daemon to store every pending write (the same request umount makes first)."""
    mnt = kernel_path(args.mountpoint)
    try:
        control = _control(mnt)
    except UsageError:
        if not _stale(mnt):
            raise
        print(f"nczfs: {mnt}: stale mount (its daemon has died); see 'nczfs umount {mnt}'", file=sys.stderr)
        return 1
    try:
        store_pending(mnt, terminal(), control)
    except UnmountError as exc:
        print(f"nczfs: {exc}; see the log", file=sys.stderr)
        return 1
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    data = _control(args.mountpoint)
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return 0
    about = {k: v for k, v in data.items() if k != "counters" and v is not None}
    counts = data["counters"]
    width = max((len(k) for k in (*counts, *about)), default=0)
    for key in sorted(about):
        print(f"{key:<{width}}  {about[key]}")
    for key in sorted(counts):
        print(f"{key:<{width}}  {counts[key]}")
    return 0


def cmd_log_level(args: argparse.Namespace) -> int:
    """Print the daemon's log level, or set it with the signal the daemon takes for it (logs.py)."""
    data = _control(args.mountpoint)
    if args.level is None:
        print(data.get("log_level", "info"))
        return 0
    os.kill(data["pid"], logs.level_signal(args.level))
    deadline = time.monotonic() + 10
    while _control(args.mountpoint).get("log_level") != args.level:
        if time.monotonic() > deadline:
            print(f"nczfs: {args.mountpoint}: the daemon did not take the new level", file=sys.stderr)
            return 1
        time.sleep(0.05)
    return 0


def _control(mountpoint: str) -> dict:
    return read_control_or(kernel_path(mountpoint), UsageError, "not an nczfs mount point")


def _stale(mnt: str) -> bool:
    """Has the daemon of the mount on ``mnt`` died (the kernel answers ENOTCONN)?"""
    try:
        os.statvfs(mnt)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False
