"""The floor of a pyfuse3 daemon for small files and big chunks (issue 46): how far is nczfs above it?

    .venv/bin/python bench/bench_floor.py [--files 2000] [--small 1000] [--runs 3]
        [--readers files,zarr] [--passthrough /tmp/passthrough_ll] [--only dir,s3,icechunk,big] [--labels ...]
        [--chunks 4000] [--icechunk-labels ...] [--big-mib 512] [--big-labels ...]

Directory part: N files of 4 KiB (the chunks of a Zarr v2 array, ``small.zarr``, in a folder
on the root disk), read cold by each path in turn: one round per run, every path once a round,
the first round a warm-up; each run a fresh mount, the page cache dropped after the mount and
before the read. The paths:

- ``direct``: the folder itself;
- ``floor``: bench/floorfs.py, a minimal pyfuse3 filesystem serving the files from memory (read
  at its start), FLUSH answered; ``floor-noflush``: the same, FLUSH answered ENOSYS (the kernel
  sends no more); ``floor-plain``: as ``floor-noflush`` on pyfuse3's own trio loop, not nczfs's
  shim; ``floor-disk``: as ``floor-noflush``, each file opened and read from the folder on trio's
  thread (``--labels`` picks among them);
- ``passthrough_ll``: libfuse's C example (its path: ``--passthrough``; skipped without),
  single-threaded (``-s``), ``-o timeout=60,cache=always`` (entries, attributes and pages kept as
  nczfs keeps a directory's);
- ``nczfs``: ``nczfs mount`` of the folder at the defaults; ``nczfs-ro``: ``--read-only``.

The readers (``--readers``): ``files``, one Python thread that opens, reads whole and closes each
chunk file by its name; ``zarr``, zarr-python reading the whole array (as bench_directory.py's
small case). Printed per path and reader: median wall, its ratio to the direct read's (the
target: >= 0.7x), the daemon's CPU per file (utime+stime of the process, /proc/PID/stat), the
reader's (this process's, os.times) and FUSE requests per file (the daemon's own count: floorfs
and nczfs; forgets not counted).

S3 part: ``--small`` objects of 4 KiB (the chunks of ``small.zarr``) in a SeaweedFS bucket
(tests/s3server.py), read cold the same way by ``floor-s3`` (floorfs.py on the bucket: the
listing taken at start answers every lookup, each read is one obstore GET on trio's thread,
FLUSH answered ENOSYS: the least any pyfuse3 daemon that GETs can do), ``floor-s3-thread`` (each
GET in a trio worker thread), ``floor-s3-loop`` (each GET sent with obstore's async API on an
asyncio loop in a thread of its own, the trio task woken through its token), ``s3fs-fuse`` (as bench_s3.py mounts it), ``nczfs`` and
``nczfs-ro``; and ``obstore-get``, no mount: this process GETs each object in turn with obstore
(the ``files`` reader's row only; its CPU shows as the reader's: a GET's own cost). Printed as
above, with s3fs-fuse's wall over each path's (the target: >= 2x), each daemon's CPU over
s3fs-fuse's (the target: <= 0.5x) and SeaweedFS's CPU per file.

``passthrough_ll``: ``example/passthrough_ll.c`` of the libfuse release Debian's libfuse3 is
(``pkg-config --modversion fuse3``), built outside the tree with
``gcc -O2 passthrough_ll.c $(pkg-config fuse3 --cflags --libs) -o /tmp/passthrough_ll``.
Icechunk part (``--only icechunk``): an Icechunk repository (one commit on main) in a SeaweedFS
bucket holding bench/bench_icechunk.py's small array (``--chunks`` chunks of 1,024 float32, 4 KiB,
uncompressed, Zarr v3; its values 0, 1, 2, ... so that a chunk read at the wrong place shows),
read whole by zarr-python (the ``zarr`` reader only) cold by ``icechunk`` (no mount: zarr-python
over icechunk's own store of a fresh Repository, in this process: the peer, its CPU the
reader's), ``floor-icechunk`` (floorfs.py ``--icechunk``: the array's keys and sizes listed at
start, not timed; each READ one ``store.get`` of its range on an asyncio loop in a thread of its
own; FLUSH ENOSYS), ``floor-icechunk-open`` (the same, each chunk fetched whole at OPEN and stored
in the page cache with ``notify_store``, the open answered with ``keep_cache``: no READ),
``floor-icechunk-burst`` (as ``-open``, but an OPEN of a chunk not held fetches it and its next 7
by number in one ``get_partial_values``, held until their own OPEN: one hop to the loop for 8
chunks, as nczfs's bursts; ``floor-icechunk-burst64``: 64; ``floor-icechunk-all``: the first OPEN
fetches every chunk, in the timed run), ``floor-icechunk-memory`` and ``floor-icechunk-memory-open`` (every
chunk fetched at start, not timed; READ, or the OPEN's ``notify_store``, from memory: the
least a pyfuse3 daemon can spend for the reader, no fetch at all) and ``nczfs-icechunk`` (``nczfs mount icechunk+s3://bucket/repo --read-only``). Printed as above
with the peer's wall over each path's (the target: >= 0.8x) and SeaweedFS's CPU per chunk.

Big part (``--only big``): bench_s3.py's workload 1 on the floor: a Zarr v2 array of
``--big-mib`` MiB (default 512) of 8 MiB uncompressed chunks (float32, element i holding
i mod 65,521 so that a chunk read at the wrong place changes its sum) in a SeaweedFS bucket,
read whole by zarr-python (the ``zarr`` reader only; each chunk's sum checked), cold, by
``floor-s3`` (floorfs.py ``--s3``: each READ one ranged obstore GET inline on trio's thread),
``floor-s3-whole`` (``--whole --thread``: an object GET whole in a worker thread at its first
READ, later READs of it from memory: what a caching daemon must do), ``floor-s3-whole-loop``
(``--whole --loop``: that GET with obstore's async API on an asyncio loop in a thread of its
own), ``floor-s3-open`` (``--at-open --thread``: the object GET whole at OPEN in a worker thread
and stored in the page cache with ``notify_store``: no READ), ``floor-s3-memory`` (``--memory``:
every object GET at the daemon's start, not timed, the READs answered from memory: what the FUSE
side alone costs), ``nczfs`` (default mount) and
``s3fs-fuse`` (as bench_s3.py mounts it; skipped with a note when not installed). Every floor
path mounts with nczfs's readahead (``--read-ahead-kb 4096``: READs of 1 MiB) and glibc told to
keep freed big blocks (``--reuse-heap``), as nczfs's daemon does; not by default, as labels:
``floor-s3-loop`` (each READ's ranged GET on the asyncio loop), ``floor-s3-whole-128k`` (the
kernel's 128 KiB readahead), ``floor-s3-whole-mmap`` (glibc's defaults: each 8 MiB object a fresh
mmap) and ``nczfs-ro``. ``obstore-get``: no mount, this process GETs each chunk object whole in turn (the
reader's CPU: the GETs' own client cost). Printed per path: wall, the daemon's CPU in all and per
GiB, the reader's and SeaweedFS's CPU per GiB, FUSE READs and GETs (floorfs's own count) per GiB, FUSE requests, and the
daemon's CPU over s3fs-fuse's (the issue's target: <= 0.6x).

``--warm`` drops no page cache (the smoke test: tests/test_bench_floor.py).

Run it under the bench lock (``flock /tmp/nczfs-bench.lock ...``); it needs root (mounts,
drop_caches). The numbers and what they answer: docs/PERFORMANCE.md ("the floor of a pyfuse3
daemon").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from bench.bench_peers import find_daemon, fuse_umount, wait_mounted  # noqa: E402
from bench.bench_s3 import cpu_seconds  # noqa: E402

NCZFS = [sys.executable, "-m", "nczfs"]
FLOORFS = [sys.executable, str(Path(__file__).resolve().parent / "floorfs.py")]
ARRAY = "small.zarr"
BIG = "big.zarr"  # the big part's array (bench_s3.py's name)
BIG_CHUNK = 2 * 1024 * 1024  # float32 elements: 8 MiB chunks (bench_s3.py's CHUNK)
BIG_MOD = 65521  # element i holds i mod BIG_MOD: each chunk's sum depends on where it sits
ICE_ARRAY = "small"  # the Icechunk part's array (bench_icechunk.py's name)
DIR_LABELS = ("direct", "floor", "floor-noflush", "floor-plain", "floor-disk", "passthrough_ll", "nczfs", "nczfs-ro")
S3_LABELS = ("obstore-get", "floor-s3", "floor-s3-thread", "floor-s3-loop", "s3fs-fuse", "nczfs", "nczfs-ro")
#: floorfs's options of each S3 floor path
S3_FLOORS = {"floor-s3": [], "floor-s3-thread": ["--thread"], "floor-s3-loop": ["--loop"],
             "floor-s3-whole": ["--whole", "--thread"], "floor-s3-whole-loop": ["--whole", "--loop"]}
#: the big part's floor paths: nczfs's readahead (4 MiB: READs of 1 MiB) and glibc's freed blocks
#: kept, as nczfs's daemon does, but ``-128k`` (the kernel's 128 KiB) and ``-mmap`` (glibc's defaults)
BIG_FLOORS = {label: [*extra, *(["--read-ahead-kb", "4096"] if not label.endswith("-128k") else []),
                      *(["--reuse-heap"] if not label.endswith("-mmap") else [])]
              for label, extra in {"floor-s3": [], "floor-s3-loop": ["--loop"],
                                   "floor-s3-whole": ["--whole", "--thread"],
                                   "floor-s3-whole-loop": ["--whole", "--loop"],
                                   "floor-s3-open": ["--at-open", "--thread"],
                                   "floor-s3-memory": ["--memory"],
                                   "floor-s3-whole-128k": ["--whole", "--thread"],
                                   "floor-s3-whole-mmap": ["--whole", "--thread"]}.items()}
BIG_LABELS = ("obstore-get", *BIG_FLOORS, "nczfs", "nczfs-ro", "s3fs-fuse")
DEFAULT_BIG = "obstore-get,floor-s3,floor-s3-whole,floor-s3-whole-loop,floor-s3-open,floor-s3-memory,nczfs,s3fs-fuse"
DEFAULT_DIR = "direct,floor,floor-noflush,floor-plain,floor-disk,passthrough_ll,nczfs,nczfs-ro"
DEFAULT_S3 = ",".join(S3_LABELS)
ICECHUNK_LABELS = ("icechunk", "floor-icechunk", "floor-icechunk-open", "floor-icechunk-burst",
                   "floor-icechunk-burst64", "floor-icechunk-all", "floor-icechunk-memory", "floor-icechunk-memory-open", "nczfs-icechunk")
#: floorfs's options of each Icechunk floor path
ICECHUNK_FLOORS = {"floor-icechunk": [], "floor-icechunk-open": ["--at-open"], "floor-icechunk-burst": ["--burst", "8"],
                   "floor-icechunk-burst64": ["--burst", "64"],
                   "floor-icechunk-memory": ["--memory"], "floor-icechunk-memory-open": ["--memory", "--at-open"]}
#: the FUSE requests counted per file (forgets come in batches, when the kernel drops inodes)
REQUESTS = ("lookup", "getattr", "open", "read", "flush", "release", "opendir", "readdir", "releasedir")


class Run(NamedTuple):
    wall: float
    daemon: float
    reader: float
    server: float
    requests: float  # FUSE requests the daemon counted (nan: not countable)
    by_op: dict  # and "get": the GETs floorfs's READs sent


@dataclass
class Mount:
    """One path: how to mount it and find its daemon; ``start`` None: no mount (the direct read)."""

    label: str
    root: Path  # where the reader finds small.zarr
    start: Callable[[], subprocess.Popen | None] | None = None
    counts: Path | None = None
    proc: subprocess.Popen | None = None
    pid: int | None = None
    extra: dict = field(default_factory=dict)
    #: what this path's reader does instead of reading files (no mount): ``obstore-get``'s GETs
    read: Callable[[int], None] | None = None
    #: the reader whose row ``read`` takes
    read_as: str = "files"

    def mount(self) -> None:
        if self.start is None:
            return
        if self.counts is not None:
            self.counts.unlink(missing_ok=True)
        self.proc = self.start()
        wait_mounted(self.root, self.label)
        os.stat(self.root)  # answered: the daemon serves
        if self.label.startswith("nczfs"):
            from nczfs.fuse.control import read_control

            self.pid = read_control(str(self.root))["pid"]
        elif self.proc is not None:
            self.pid = self.proc.pid
        else:
            self.pid = find_daemon(self.extra["program"], self.root)

    def requests(self) -> dict:
        """Requests counted so far by the daemon (nczfs: read now; floorfs: at its end)."""
        if self.label.startswith("nczfs"):
            from nczfs.fuse.control import read_control

            c = read_control(str(self.root))["counters"]
            return {op: c.get(f"fuse.{op}", 0) for op in REQUESTS}
        return {}

    def umount(self) -> dict:
        counted = self.requests()
        if self.start is None:
            return counted
        if self.label.startswith("nczfs"):
            subprocess.run([*NCZFS, "umount", str(self.root)], check=True)
        else:
            fuse_umount(self.root)
        if self.proc is not None:
            self.proc.wait(timeout=60)
        if self.counts is not None and self.counts.exists():
            counted = json.loads(self.counts.read_text())
        return counted


def read_files(root: Path, n: int) -> None:
    """Open, read whole, close each chunk file by its name, one thread."""
    folder = root / ARRAY
    for i in range(n):
        fd = os.open(folder / str(i), os.O_RDONLY)
        try:
            assert len(os.read(fd, 65536)) == 4096
        finally:
            os.close(fd)


def read_zarr(root: Path, n: int) -> None:
    import zarr

    a = zarr.open_array(zarr.storage.LocalStore(root / ARRAY, read_only=True), mode="r")
    assert a.size == n * 1024 and float(a[:].sum()) == a.size


def read_icechunk_array(array, n: int) -> None:
    """The whole array, checked value by value (chunk i holds i * 1024 ... i * 1024 + 1023)."""
    import numpy as np

    assert array.shape == (n * 1024,), array.shape
    values = array[:]
    if not np.array_equal(values, np.arange(n * 1024, dtype="f4")):
        wrong = int(np.flatnonzero(values != np.arange(n * 1024, dtype="f4"))[0])
        raise AssertionError(f"{ICE_ARRAY}: element {wrong} (chunk {wrong // 1024}) is {values[wrong]}")


def read_zarr_v3(root: Path, n: int) -> None:
    import zarr

    read_icechunk_array(zarr.open_array(zarr.storage.LocalStore(root / ICE_ARRAY, read_only=True), mode="r"), n)


READERS = {"files": read_files, "zarr": read_zarr}


def timed(m: Mount, reader: Callable[[Path, int], None], n: int, server_pid: int | None, cold: bool = True) -> Run:
    m.mount()
    try:
        if cold:
            drop_caches()
        time.sleep(0.2)  # the forgets the drop sends answered before the clock starts
        before = m.requests()
        d0 = cpu_seconds(m.pid) if m.pid else 0.0
        s0 = cpu_seconds(server_pid) if server_pid else 0.0
        r0, t0 = os.times(), time.perf_counter()
        m.read(n) if m.read is not None else reader(m.root, n)
        wall = time.perf_counter() - t0
        r1 = os.times()
        daemon = cpu_seconds(m.pid) - d0 if m.pid else 0.0
        server = cpu_seconds(server_pid) - s0 if server_pid else 0.0
    finally:
        after = m.umount()
    by_op = {op: after.get(op, 0) - before.get(op, 0) for op in (*REQUESTS, "get")}
    total = float(sum(by_op[op] for op in REQUESTS)) if after else float("nan")
    return Run(wall, daemon, r1.user - r0.user + r1.system - r0.system, server, total, by_op)


def floor_mount(label: str, work: Path, src: Path | None, extra: list[str]) -> Mount:
    mnt = work / f"mnt-{label}"
    mnt.mkdir(exist_ok=True)
    counts = work / f"counts-{label}.json"
    argv = [*FLOORFS, *([str(src)] if src else []), str(mnt), "--counts", str(counts), *extra]
    return Mount(label, mnt, lambda: subprocess.Popen(argv), counts=counts)


def nczfs_mount(label: str, work: Path, source: str, extra: list[str], env: dict | None = None) -> Mount:
    mnt = work / f"mnt-{label}"
    mnt.mkdir(exist_ok=True)
    argv = [*NCZFS, "mount", source, str(mnt), *(["--read-only"] if label.endswith("-ro") else []), *extra]
    return Mount(label, mnt, lambda: subprocess.run(argv, check=True, env=env) and None)


def directory_mounts(labels: list[str], work: Path, src: Path, passthrough: str | None) -> list[Mount]:
    out = []
    for label in labels:
        if label == "direct":
            out.append(Mount(label, src))
        elif label.startswith("floor"):
            extra = {"floor": [], "floor-noflush": ["--no-flush"], "floor-plain": ["--no-flush", "--plain-loop"],
                     "floor-disk": ["--no-flush", "--mode", "disk"]}[label]
            out.append(floor_mount(label, work, src, extra))
        elif label == "passthrough_ll":
            if not passthrough:
                print("note: no --passthrough PATH: libfuse's passthrough_ll is skipped", file=sys.stderr)
                continue
            mnt = work / "mnt-passthrough_ll"
            mnt.mkdir(exist_ok=True)
            argv = [passthrough, "-f", "-s", "-o", f"source={src},timeout=60,cache=always", str(mnt)]
            out.append(Mount(label, mnt, lambda argv=argv: subprocess.Popen(argv)))
        else:
            out.append(nczfs_mount(label, work, str(src), []))
    return out


@dataclass
class S3:
    """A SeaweedFS with one bucket holding ``small.zarr``'s ``n`` chunks of 4 KiB."""

    work: Path
    n: int
    server: object = None
    bucket: str = ""
    floors: dict = field(default_factory=lambda: S3_FLOORS)  # floorfs's options of each floor path
    env: dict = field(default_factory=dict)  # nczfs's environment: the server's credentials

    def start(self) -> None:
        from tests.s3server import SeaweedS3

        self.server = SeaweedS3(self.work / "weed")
        self.env = os.environ | self.server.write_aws_files(self.work / "aws")
        self.server.start()
        self.bucket = self.server.new_bucket("floor")
        self.put()

    def store(self):
        from obstore.store import S3Store
        from tests.s3server import ADMIN

        return S3Store(self.bucket, endpoint=self.server.endpoint, access_key_id=ADMIN[0],
                       secret_access_key=ADMIN[1], region="us-east-1", client_options={"allow_http": True})

    def get_each(self, n: int) -> None:
        """One obstore GET of each chunk in turn, in this process: a GET's own cost, no FUSE."""
        import obstore

        store = self.store()
        for i in range(n):
            assert len(obstore.get_range(store, f"{ARRAY}/{i}", start=0, end=4096)) == 4096

    def put(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np
        import obstore

        store = self.store()
        zarray = {"zarr_format": 2, "shape": [self.n * 1024], "chunks": [1024], "dtype": "<f4", "compressor": None,
                  "fill_value": 0.0, "order": "C", "filters": None, "dimension_separator": "."}
        obstore.put(store, f"{ARRAY}/.zarray", json.dumps(zarray).encode())
        chunk = np.ones(1024, "<f4").tobytes()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: obstore.put(store, f"{ARRAY}/{i}", chunk), range(self.n)))

    def mounts(self, labels: list[str]) -> list[Mount]:
        from tests.s3server import ADMIN

        out = []
        endpoint = self.server.endpoint
        for label in labels:
            if label == "obstore-get":
                out.append(Mount(label, self.work, read=self.get_each))
            elif label.startswith("floor-s3"):
                extra = ["--s3", self.bucket, "--endpoint", endpoint, "--key", ADMIN[0], "--secret", ADMIN[1],
                         "--no-flush", *self.floors[label]]
                out.append(floor_mount(label, self.work, None, extra))
            elif label == "s3fs-fuse":
                if not shutil.which("s3fs"):
                    print("note: s3fs not installed: s3fs-fuse is skipped", file=sys.stderr)
                    continue
                mnt = self.work / "mnt-s3fs"
                mnt.mkdir(exist_ok=True)
                passwd = self.work / "passwd-s3fs"
                passwd.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
                passwd.chmod(0o600)
                argv = ["s3fs", self.bucket, str(mnt), "-o", f"passwd_file={passwd}", "-o", f"url={endpoint}",
                        "-o", "use_path_request_style"]
                out.append(Mount(label, mnt, lambda argv=argv: subprocess.run(argv, check=True) and None,
                                 extra={"program": "s3fs"}))
            else:
                out.append(nczfs_mount(label, self.work, f"s3://{self.bucket}", ["--endpoint-url", endpoint], self.env))
        return out


@dataclass
class Icechunk:
    """An Icechunk repository (``repo`` in a SeaweedFS bucket) holding ``small``: ``n`` chunks of
    4 KiB, as bench_icechunk.py writes it but with the values 0, 1, 2, ..."""

    work: Path
    n: int
    s3: S3 = None  # type: ignore[assignment]
    paths: object = None  # bench_icechunk.Paths: its storage and in-process array

    def start(self) -> None:
        from bench.bench_icechunk import Paths
        from tests.s3server import SeaweedS3

        self.s3 = S3(self.work, self.n)
        self.s3.server = server = SeaweedS3(self.work / "weed")
        self.s3.env = os.environ | server.write_aws_files(self.work / "aws")
        server.start()
        self.s3.bucket = server.new_bucket("floorice")
        self.paths = Paths(server, self.s3.bucket, self.work)
        self.write()

    def write(self) -> None:
        import icechunk
        import numpy as np
        import zarr

        session = icechunk.Repository.create(self.paths.storage()).writable_session("main")
        a = zarr.create_array(session.store, name=ICE_ARRAY, shape=(self.n * 1024,), chunks=(1024,), dtype="f4",
                              compressors=None, zarr_format=3)
        a[:] = np.arange(self.n * 1024, dtype="f4")
        session.commit("bench_floor data")

    def in_process(self, n: int) -> None:
        read_icechunk_array(self.paths.array("icechunk", ICE_ARRAY), n)

    def mounts(self, labels: list[str]) -> list[Mount]:
        from tests.s3server import ADMIN

        endpoint = self.s3.server.endpoint
        out = []
        for label in labels:
            if label == "icechunk":
                out.append(Mount(label, self.work, read=self.in_process, read_as="zarr"))
            elif label.startswith("floor-icechunk"):
                extra = ["--icechunk", f"{self.s3.bucket}/repo", "--array", ICE_ARRAY, "--endpoint", endpoint,
                         "--key", ADMIN[0], "--secret", ADMIN[1], "--no-flush",
                         *ICECHUNK_FLOORS.get(label, ["--burst", str(self.n)])]
                out.append(floor_mount(label, self.work, None, extra))
            else:
                out.append(nczfs_mount(label, self.work, f"icechunk+s3://{self.s3.bucket}/repo",
                                       ["--read-only", "--endpoint-url", endpoint], self.s3.env))
        return out


@dataclass
class Big(S3):
    """A SeaweedFS with one bucket holding ``big.zarr``: ``n`` chunks of 8 MiB."""

    expected: tuple = ()  # the sum of each chunk's values
    floors: dict = field(default_factory=lambda: BIG_FLOORS)

    def put(self) -> None:
        import zarr

        self.write(zarr.storage.ObjectStore(self.store(), read_only=False))

    def write(self, store) -> None:
        """``big.zarr`` into the zarr ``store``, its values' sum kept."""
        import numpy as np
        import zarr

        size = self.n * BIG_CHUNK
        values = (np.arange(size, dtype="i8") % BIG_MOD).astype("f4")
        self.expected = tuple(values.reshape(self.n, BIG_CHUNK).sum(axis=1, dtype="f8").tolist())
        a = zarr.create_array(store, name=BIG, shape=(size,), chunks=(BIG_CHUNK,), dtype="f4", compressors=None,
                              zarr_format=2, fill_value=0.0)
        a[:] = values

    def mounts(self, labels: list[str]) -> list[Mount]:
        out = []
        for label in labels:
            if label == "obstore-get":  # no mount: the chunks GET whole by this process
                out.append(Mount(label, self.work, read=self.get_whole, read_as="zarr"))
            else:
                out += super().mounts([label])
        return out

    def get_whole(self, n: int) -> None:
        """Each chunk object GET whole in turn by this process, no FUSE: the GETs' own cost."""
        import numpy as np
        import obstore

        store = self.store()
        self.check([float(np.frombuffer(obstore.get(store, f"{BIG}/{i}").bytes(), "<f4").sum(dtype="f8"))
                    for i in range(n)], f"obstore {BIG}")

    def read(self, root: Path, n: int) -> None:
        """zarr-python reads the whole array through the mount; each chunk's sum checked."""
        import zarr

        a = zarr.open_array(zarr.storage.LocalStore(root / BIG, read_only=True), mode="r")
        assert a.shape == (n * BIG_CHUNK,), a.shape
        self.check(a[:].reshape(n, BIG_CHUNK).sum(axis=1, dtype="f8").tolist(), str(root / BIG))

    def check(self, got: list[float], where: str) -> None:
        """Each chunk's sum read against the one written."""
        assert len(got) == len(self.expected), (where, len(got))
        for i, (sum_read, written) in enumerate(zip(got, self.expected)):
            if sum_read != written:
                raise AssertionError(f"{where}/{i}: its values sum to {sum_read}, not {written}")


def measure(mounts: list[Mount], readers: list[str], n: int, runs: int, server_pid: int | None,
            cold: bool = True, read: dict | None = None) -> dict:
    """{(reader, label): [Run]}: ``runs`` rounds after a warm-up, every path once a round."""
    out: dict[tuple[str, str], list[Run]] = {}
    for i in range(runs + 1):
        for reader in readers:
            for m in mounts:
                if m.read is not None and reader != m.read_as:
                    continue  # no reader of its own: once, with the files
                run = timed(m, (read or READERS)[reader], n, server_pid, cold)
                print(f"{reader} {m.label}: {run.wall:.3f} s, daemon {run.daemon:.2f} s, reader {run.reader:.2f} s, "
                      f"requests {run.requests:.0f}{' (warm-up)' if not i else ''}", file=sys.stderr)
                if i:
                    out.setdefault((reader, m.label), []).append(run)
    return out


def median(runs: list[Run]) -> Run:
    ops = {op: statistics.median(r.by_op.get(op, 0) for r in runs) for op in (*REQUESTS, "get")}
    return Run(*(statistics.median(getattr(r, f) for r in runs) for f in Run._fields[:5]), ops)


def print_big_table(title: str, results: dict, gib: float, peer: str) -> None:
    """The big part's medians: CPU per GiB, READs and GETs per GiB, daemon CPU over ``peer``'s."""
    print(f"\n{title}")
    head = ("| path | wall s | daemon CPU s | daemon CPU s/GiB | reader CPU s/GiB | server CPU s/GiB | "
            f"FUSE READs/GiB | GETs/GiB | FUSE requests | daemon CPU / {peer}'s |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    ref = results.get(("zarr", peer))
    for (_, label), runs in results.items():
        r = median(runs)
        known = r.requests == r.requests
        mounted = label != "obstore-get"
        cells = [label, f"{r.wall:.3f}", *([f"{r.daemon:.2f}", f"{r.daemon / gib:.2f}"] if mounted else ["-", "-"]),
                 f"{r.reader / gib:.2f}", f"{r.server / gib:.2f}", f"{r.by_op['read'] / gib:.0f}" if known else "-",
                 f"{r.by_op['get'] / gib:.0f}" if label.startswith("floor") else "-",
                 f"{r.requests:.0f}" if known else "-",
                 f"{r.daemon / median(ref).daemon:.2f}" if mounted and ref and median(ref).daemon else "-"]
        print("| " + " | ".join(cells) + " |")


def per_file_us(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e6:.0f}"


def print_table(title: str, results: dict, n: int, direct: str | None, peer: str | None) -> None:
    print(f"\n{title}")
    head = "| reader | path | wall s | "
    head += "direct/path (wall) | " if direct else f"{peer}/path (wall) | " if peer else ""
    head += "daemon CPU s | daemon us/file | reader us/file | "
    head += f"daemon CPU / {peer}'s | server us/file | " if peer else ""
    head += "FUSE requests/file | requests by op |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for (reader, label), runs in results.items():
        r = median(runs)
        ref = results.get((reader, direct or peer))
        cells = [reader, label, f"{r.wall:.3f}"]
        if ref:
            cells.append(f"{median(ref).wall / r.wall:.2f}x")
        elif direct or peer:
            cells.append("-")
        cells += [f"{r.daemon:.2f}", per_file_us(r.daemon, n), per_file_us(r.reader, n)]
        if peer:
            cells += [f"{r.daemon / median(ref).daemon:.2f}" if ref and median(ref).daemon else "-",
                      per_file_us(r.server, n)]
        known = r.requests == r.requests
        cells.append(f"{r.requests / n:.2f}" if known else "-")
        cells.append(" ".join(f"{op[:4]} {v / n:.2f}" for op, v in r.by_op.items() if v) if known else "-")
        print("| " + " | ".join(cells) + " |")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000, help="directory part: files of 4 KiB (default 2000)")
    ap.add_argument("--small", type=int, default=1000, help="S3 part: objects of 4 KiB (default 1000)")
    ap.add_argument("--chunks", type=int, default=4000, help="Icechunk part: chunks of 4 KiB (default 4000)")
    ap.add_argument("--big-mib", type=int, default=512,
                    help="big part: the array's MiB, in chunks of 8 MiB (default 512)")
    ap.add_argument("--runs", type=int, default=3, help="cold runs per path and reader, after a warm-up")
    ap.add_argument("--readers", default="files,zarr", help="files, zarr (comma list)")
    ap.add_argument("--only", default="dir,s3", help="the parts to run: dir, s3, icechunk, big (comma list)")
    ap.add_argument("--labels", default=DEFAULT_DIR, help=f"directory part's paths, of {', '.join(DIR_LABELS)}")
    ap.add_argument("--s3-labels", default=DEFAULT_S3, help=f"S3 part's paths, of {', '.join(S3_LABELS)}")
    ap.add_argument("--icechunk-labels", default=",".join(ICECHUNK_LABELS),
                    help=f"Icechunk part's paths, of {', '.join(ICECHUNK_LABELS)} (the zarr reader only)")
    ap.add_argument("--big-labels", default=DEFAULT_BIG,
                    help=f"big part's paths, of {', '.join(BIG_LABELS)} (the zarr reader only)")
    ap.add_argument("--passthrough", help="libfuse's passthrough_ll binary (example/passthrough_ll.c of the "
                    "libfuse3 installed, built with `gcc ... $(pkg-config fuse3 --cflags --libs)`)")
    ap.add_argument("--warm", action="store_true", help="do not drop the page cache (a smoke test's runs: "
                    "the machine's other benchmarks undisturbed)")
    args = ap.parse_args(argv)
    for what, given, known in (("--readers", args.readers, READERS), ("--only", args.only, ("dir", "s3", "icechunk", "big")),
                               ("--labels", args.labels, DIR_LABELS), ("--s3-labels", args.s3_labels, S3_LABELS),
                               ("--icechunk-labels", args.icechunk_labels, ICECHUNK_LABELS),
                               ("--big-labels", args.big_labels, BIG_LABELS)):
        unknown = set(given.split(",")) - set(known)
        if unknown:
            ap.error(f"{what}: unknown {sorted(unknown)} (known: {', '.join(known)})")
    if args.big_mib < 8 or args.big_mib % 8:
        ap.error(f"--big-mib {args.big_mib}: not a whole number of 8 MiB chunks")
    return args


def make_array(src: Path, n: int) -> None:
    import numpy as np
    import zarr

    a = zarr.create_array(zarr.storage.LocalStore(src / ARRAY), shape=(n * 1024,), chunks=(1024,), dtype="f4",
                          compressors=None, zarr_format=2)
    a[:] = np.ones(n * 1024, "f4")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    readers, parts = args.readers.split(","), args.only.split(",")
    work = Path(tempfile.mkdtemp(prefix="nczfs-floor-", dir="/var/tmp"))
    s3 = ice = big = None
    try:
        if "dir" in parts:
            src = work / "src"
            make_array(src, args.files)
            mounts = directory_mounts(args.labels.split(","), work, src, args.passthrough)
            results = measure(mounts, readers, args.files, args.runs, None, not args.warm)
            print_table(f"Directory: {args.files:,} files of 4 KiB, cold, median of {args.runs} "
                        f"(load {os.getloadavg()[0]:.1f})", results, args.files, "direct", None)
        if "s3" in parts:
            s3 = S3(work, args.small)
            s3.start()
            results = measure(s3.mounts(args.s3_labels.split(",")), readers, args.small, args.runs, s3.server.proc.pid,
                              not args.warm)
            print_table(f"S3 (SeaweedFS on loopback): {args.small:,} objects of 4 KiB, cold, median of {args.runs} "
                        f"(load {os.getloadavg()[0]:.1f})", results, args.small, None, "s3fs-fuse")
        if "icechunk" in parts:
            ice = Icechunk(work, args.chunks)
            ice.start()
            load = os.getloadavg()[0]
            results = measure(ice.mounts(args.icechunk_labels.split(",")), ["zarr"], args.chunks, args.runs,
                              ice.s3.server.proc.pid, not args.warm, {"zarr": read_zarr_v3})
            print_table(f"Icechunk (SeaweedFS on loopback): {args.chunks:,} chunks of 4 KiB read by zarr-python, "
                        f"cold, median of {args.runs} (load {load:.1f} -> {os.getloadavg()[0]:.1f})", results,
                        args.chunks, None, "icechunk")
        if "big" in parts:
            big = Big(work, args.big_mib // 8)
            big.start()
            load = os.getloadavg()[0]
            results = measure(big.mounts(args.big_labels.split(",")), ["zarr"], big.n, args.runs,
                              big.server.proc.pid, not args.warm, {"zarr": big.read})
            print_big_table(f"Big (SeaweedFS on loopback): a {args.big_mib} MiB array of 8 MiB chunks read whole by "
                            f"zarr-python, {'warm' if args.warm else 'cold'}, median of {args.runs} "
                            f"(load {load:.1f} -> {os.getloadavg()[0]:.1f})", results, args.big_mib / 1024, "s3fs-fuse")
    finally:
        for m in work.glob("mnt-*"):
            subprocess.run(["fusermount3", "-u", "-z", str(m)], capture_output=True)
        for part in (s3, ice and ice.s3, big):
            if part is not None and part.server is not None:
                part.server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
