"""Shared pieces of the fault-injection suite: a writer process that records what it was told was
stored, and the checks every fault must pass.

The writer (:data:`WRITER`, run with ``python -c``) writes files into a mount, new ones and
rewrites of earlier ones, each version's bytes a function of its name and version number
(:func:`content`), and appends to a ledger outside the mount ``start NAME V`` before a version and
``ack NAME V`` once its ``close`` (and, with ``fsync``, its ``fsync``) returned 0, flushed and
fsynced. A kill of the daemon, a stopped server or a full disk then meets it at some point; the
checks read the store behind the mount:

- nothing acknowledged is lost: every acknowledged version, or a later one, is what the store holds;
- nothing half-written is visible: every object the store holds is some whole version;
- nothing reported lost appears later: an object whose write the daemon's log calls not stored
  keeps the version it had when the log said so.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

#: a file over 8 MiB is held (``hold`` seconds) once all but this many of its bytes are written
HOLD_SHORT_OF_END = 3 << 20

#: the writer: argv = mount dir, ledger path, sizes (comma list of bytes), files, rewrites every,
#: fsync (0/1), pause seconds between files, hold seconds and HOLD_SHORT_OF_END (files over 8 MiB)
WRITER = r"""
import hashlib, os, sys, time
mnt, ledger, sizes, files, every, do_fsync, pause, hold, hold_at = sys.argv[1:10]
sizes = [int(s) for s in sizes.split(",")]
log = open(ledger, "a")
def note(line):
    log.write(line + "\n"); log.flush(); os.fsync(log.fileno())
def content(name, v, size):
    block = hashlib.sha256(f"{name}:{v}".encode()).digest() * 2048
    return (block * (size // len(block) + 1))[:size]
versions = {}
for i in range(int(files)):
    name = f"f{i:03d}" if i % int(every) else f"f{(i // int(every)) % 3:03d}"  # every Nth: a rewrite
    v = versions.get(name, -1) + 1
    versions[name] = v
    size = sizes[i % len(sizes)]
    note(f"start {name} {v} {size}")
    try:
        with open(os.path.join(mnt, name), "wb") as f:
            data = content(name, v, size)
            for off in range(0, size, 1 << 20):
                f.write(data[off:off + (1 << 20)])
                if size > 8 << 20 and off + (1 << 20) == size - int(hold_at):
                    time.sleep(float(hold))
            if do_fsync == "1":
                f.flush(); os.fsync(f.fileno())
    except OSError as exc:
        note(f"error {name} {v} {exc.errno}")
        sys.exit(0)
    note(f"ack {name} {v} {size}")
    time.sleep(float(pause))
note("done")
"""


def content(name: str, v: int, size: int) -> bytes:
    """The bytes of version ``v`` of ``name`` (as the writer makes them)."""
    block = hashlib.sha256(f"{name}:{v}".encode()).digest() * 2048
    return (block * (size // len(block) + 1))[:size]


def start_writer(mnt: Path, ledger: Path, sizes: list[int], files: int, every: int = 4, fsync: bool = False,
                 pause: float = 0.0, hold: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(mnt), str(ledger), ",".join(map(str, sizes)), str(files), str(every),
         "1" if fsync else "0", str(pause), str(hold), str(HOLD_SHORT_OF_END)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def ledger(path: Path) -> tuple[dict[str, list[tuple[int, int]]], dict[str, int]]:
    """(every version started: name -> [(v, size)], the last version acknowledged: name -> v)."""
    started: dict[str, list[tuple[int, int]]] = {}
    acked: dict[str, int] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        word, *rest = line.split()
        if word == "start":
            started.setdefault(rest[0], []).append((int(rest[1]), int(rest[2])))
        elif word == "ack":
            acked[rest[0]] = max(acked.get(rest[0], -1), int(rest[1]))
    return started, acked


def wait_for_acks(path: Path, n: int, writer: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for line in (path.read_text().splitlines() if path.exists() else []) if line.startswith("ack ")) < n:
        assert writer.poll() is None, f"the writer ended early: {writer.stderr.read().decode() if writer.stderr else ''}"
        assert time.monotonic() < deadline, "the writer acknowledged too little in time"
        time.sleep(0.02)


def version_of(name: str, data: bytes, started: dict[str, list[tuple[int, int]]]) -> int | None:
    """Which started version of ``name`` ``data`` is, whole (None: none of them, or cut short)."""
    for v, size in started.get(name, []):
        if len(data) == size and data == content(name, v, size):
            return v
    return None


def check_store(objects: dict[str, bytes], started: dict[str, list[tuple[int, int]]], acked: dict[str, int],
                before: dict[str, bytes] | None = None) -> list[str]:
    """Problems with what the store holds after a fault ([] if none): see the module's docstring.
    ``before``: objects present before the writer started (kept as they were unless rewritten)."""
    problems = []
    for name, data in objects.items():
        if before is not None and name in before and data == before[name]:
            continue
        v = version_of(name, data, started)
        if v is None:
            problems.append(f"{name}: {len(data)} bytes that are no whole version written (half-written?)")
        elif v < acked.get(name, -1):
            problems.append(f"{name}: holds version {v}, older than the acknowledged {acked[name]}")
    for name, v in acked.items():
        if name not in objects:
            problems.append(f"{name}: version {v} was acknowledged and is gone")
    return problems


#: what the daemon logs for a write it could not store (fs/writeback.py), and for one whose outcome
#: it does not know
NOT_STORED = re.compile(r"'([^']+)': data written through the mount was not stored and is lost")
UNKNOWN = re.compile(r"'([^']+)': data written through the mount may or may not have been stored")


def reported(log_text: str, pattern: re.Pattern) -> set[str]:
    return set(pattern.findall(log_text))


def kill_daemon(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def stale_umount(mnt: Path) -> subprocess.CompletedProcess:
    """``nczfs umount`` of a mount whose daemon is dead (exit 0, or 1 naming what it left)."""
    from tests.helpers import is_mounted, run_nczfs

    res = run_nczfs("umount", str(mnt))
    assert res.returncode in (0, 1) and "removed a stale mount" in res.stderr, res.stderr
    assert not is_mounted(mnt)
    return res
