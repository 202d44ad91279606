"""Daemon CPU per FUSE request: nczfs against a do-nothing pyfuse3 filesystem, in one run.

    .venv/bin/python bench/bench_requests.py [--ops 5000] [--runs 3]

What a small-chunk read costs the daemon is mostly requests: lookup, open, read, flush and
release for every chunk file. This measures the floor the binding sets (pyfuse3 + trio, the
"bare" filesystem below: one 4 KiB file, every handler returns at once; it runs pyfuse3 on
nczfs's lock and wait for the device, as nczfs does (nczfs/fuse/trio_loop.py), and "bare-plain"
on trio's own) and
what nczfs adds on a directory mount of the same file, read-write and read-only
(``--read-only`` answers the first flush with ENOSYS, so the kernel sends no more). Each case:
a fresh mount, one warm-up read, then ``--ops`` open+close and ``--ops`` open+read+close (the
page stays in the kernel's cache, so the read is not sent); the daemon's CPU time (user +
system, /proc/PID/stat) over the loop, divided by ``--ops``. Medians of ``--runs`` mounts. Not
part of CI.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NCZFS = [sys.executable, "-m", "nczfs"]
SIZE = 4096


def serve_bare(mnt: str, no_flush: bool, plain: bool) -> None:
    """The do-nothing filesystem: a root holding one file ``f`` of SIZE bytes."""
    import pyfuse3
    import trio

    class Bare(pyfuse3.Operations):
        def _attr(self, ino: int) -> pyfuse3.EntryAttributes:
            e = pyfuse3.EntryAttributes()
            e.st_ino = ino
            e.entry_timeout = e.attr_timeout = 60
            e.st_mode = (stat.S_IFDIR | 0o755) if ino == pyfuse3.ROOT_INODE else (stat.S_IFREG | 0o644)
            e.st_size = 0 if ino == pyfuse3.ROOT_INODE else SIZE
            return e

        async def getattr(self, inode, ctx=None):
            return self._attr(inode)

        async def lookup(self, parent_inode, name, ctx=None):
            if name != b"f":
                raise pyfuse3.FUSEError(errno.ENOENT)
            return self._attr(2)

        async def open(self, inode, flags, ctx):
            return pyfuse3.FileInfo(fh=inode, keep_cache=True)

        async def read(self, fh, off, size):
            return b"x" * max(0, min(size, SIZE - off))

        async def flush(self, fh):
            if no_flush:
                raise pyfuse3.FUSEError(errno.ENOSYS)

        async def release(self, fh):
            pass

    options = set(pyfuse3.default_options) | {"fsname=bare"}
    pyfuse3.init(Bare(), mnt, options)
    if not plain:
        sys.path.insert(0, str(ROOT))
        from nczfs.fuse.trio_loop import install

        install()
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Mounted:
    def __init__(self, kind: str, work: Path):
        self.kind, self.mnt = kind, work / f"mnt-{kind}"
        self.mnt.mkdir(exist_ok=True)
        self.proc: subprocess.Popen | None = None
        if kind.startswith("bare"):
            self.proc = subprocess.Popen([sys.executable, __file__, "--serve-bare", str(self.mnt)]
                                         + (["--no-flush"] if kind == "bare-noflush" else [])
                                         + (["--plain"] if kind == "bare-plain" else []))
            deadline = time.monotonic() + 20
            while not os.path.ismount(self.mnt):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the bare filesystem did not mount")
                time.sleep(0.05)
            self.pid = self.proc.pid
        else:
            extra = ["--read-only"] if kind == "nczfs-ro" else []
            subprocess.run([*NCZFS, "mount", str(work / "data"), str(self.mnt), *extra], check=True, cwd=ROOT)
            self.pid = json.loads((self.mnt / ".nczfs").read_text())["pid"]

    def close(self) -> None:
        if self.proc is not None:
            subprocess.run(["fusermount3", "-u", str(self.mnt)], check=True)
            self.proc.wait(timeout=20)
        else:
            subprocess.run([*NCZFS, "umount", str(self.mnt)], check=True, cwd=ROOT)


def per_op(pid: int, ops: int, fn) -> tuple[float, float]:
    """Microseconds of daemon CPU and of wall time per call of ``fn``."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    for _ in range(ops):
        fn()
    return 1e6 * (cpu_seconds(pid) - c0) / ops, 1e6 * (time.perf_counter() - t0) / ops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--serve-bare", metavar="MNT", help=argparse.SUPPRESS)
    ap.add_argument("--no-flush", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare, args.no_flush, args.plain)
        return
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-requests-"))
    (work / "data").mkdir()
    (work / "data" / "f").write_bytes(b"x" * SIZE)
    kinds = ["bare-plain", "bare", "nczfs", "bare-noflush", "nczfs-ro"]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for _ in range(args.runs):
            for kind in kinds:  # interleaved, so that a busy moment hits all of them alike
                m = Mounted(kind, work)
                try:
                    path = m.mnt / "f"
                    assert path.read_bytes() == b"x" * SIZE
                    results.setdefault((kind, "open+close"), []).append(
                        per_op(m.pid, args.ops, lambda: os.close(os.open(path, os.O_RDONLY))))
                    results.setdefault((kind, "open+read+close"), []).append(
                        per_op(m.pid, args.ops, lambda: path.read_bytes()))
                finally:
                    m.close()
    finally:
        for kind in kinds:
            subprocess.run(["fusermount3", "-u", "-z", str(work / f"mnt-{kind}")], capture_output=True)
        subprocess.run(["rm", "-rf", str(work)])
    print(f"| loop of {args.ops:,} (median of {args.runs} mounts) | daemon CPU us/op | wall us/op | CPU vs its bare peer |")
    print("|---|---:|---:|---:|")
    for what in ("open+close", "open+read+close"):
        for kind in kinds:
            cpu = statistics.median(c for c, _ in results[(kind, what)])
            wall = statistics.median(w for _, w in results[(kind, what)])
            peer = "bare-noflush" if kind == "nczfs-ro" else "bare"
            ratio = cpu / statistics.median(c for c, _ in results[(peer, what)]) if kind.startswith("nczfs") else None
            print(f"| {what}, {kind} | {cpu:.0f} | {wall:.0f} | {f'{ratio:.2f}' if ratio else ''} |")


if __name__ == "__main__":
    main()
