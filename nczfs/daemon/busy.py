"""Which processes keep a mount busy (what ``fuser -m`` shows), for ``nczfs umount``'s error.

A process uses a mount when its working or root directory, its executable, one of its open
files or one of its mapped files lies in it. Only ``/proc`` is read (links and maps name the
path; nothing in the mount itself is looked at, which would ask its daemon).
"""

from __future__ import annotations

import os


def _inside(path: str, mountpoint: str) -> bool:
    path = path.removesuffix(" (deleted)")
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def _uses(pid: str, mountpoint: str) -> bool:
    base = f"/proc/{pid}"
    links = [f"{base}/cwd", f"{base}/root", f"{base}/exe"]
    try:
        links += [f"{base}/fd/{fd}" for fd in os.listdir(f"{base}/fd")]
    except OSError:
        pass
    for link in links:
        try:
            if _inside(os.readlink(link), mountpoint):
                return True
        except OSError:
            continue
    try:
        with open(f"{base}/maps", encoding="utf-8", errors="surrogateescape") as f:
            return any(_inside(line.split(maxsplit=5)[5].rstrip("\n"), mountpoint)
                       for line in f if len(line.split(maxsplit=5)) == 6)
    except OSError:
        return False


def processes_using(mountpoint: str) -> list[tuple[int, str]]:
    """``(pid, command name)`` of every process using ``mountpoint`` (the kernel's path of it)."""
    out = []
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        if int(pid) == os.getpid() or not _uses(pid, mountpoint):
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
        except OSError:
            name = "?"
        out.append((int(pid), name))
    return out


def describe(users: list[tuple[int, str]], most: int = 8) -> str:
    shown = ", ".join(f"{pid} ({name})" for pid, name in users[:most])
    return shown + (f" and {len(users) - most} more" if len(users) > most else "")
