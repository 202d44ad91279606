"""Shared helpers for real-mount tests: start ``nczfs mount`` as a user would, always unmount.

A *backend* is where the bytes live (a directory now; zip and S3 later). Each offers
``source`` (the SOURCE argument) and backdoor access to the medium (``read``, ``keys``),
so tests check what reached the store, not just what the mount says.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

NCZFS = [sys.executable, "-m", "nczfs"]


def keyed_differences(a: dict, b: dict, same=lambda x, y: x == y) -> Iterator[tuple[str, object]]:
    """How two mappings differ, key by key in order: ("missing", k) only in ``a``, ("extra", k)
    only in ``b``, ("changed", k) in both but not ``same``."""
    for k in sorted(set(a) | set(b)):
        if k not in b:
            yield "missing", k
        elif k not in a:
            yield "extra", k
        elif not same(a[k], b[k]):
            yield "changed", k


def as_user(user, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``cmd`` as ``user`` (a pwd entry) with no supplementary groups."""
    return subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *cmd],
        capture_output=True, text=True, timeout=timeout,
    )


def run_nczfs(*args: str, timeout: float = 60, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([*NCZFS, *args], capture_output=True, text=True, timeout=timeout, check=check)


def is_mounted(path: str | os.PathLike) -> bool:
    path = os.path.abspath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f if len(line.split()) > 2)


@dataclass
class DirectoryBackend:
    """The bytes live in a local directory."""

    root: Path
    name: str = "directory"

    @property
    def source(self) -> str:
        return str(self.root)

    def read(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def exists(self, key: str) -> bool:
        return (self.root / key).is_file()

    def keys(self, prefix: str = "") -> list[str]:
        base = self.root / prefix if prefix else self.root
        return sorted(str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())

    def put(self, key: str, data: bytes) -> None:
        p = self.root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def put_many(self, items: dict[str, bytes]) -> None:
        for key, data in items.items():
            self.put(key, data)

    def mkdir(self, key: str) -> None:
        (self.root / key).mkdir(parents=True)

    def attrs(self, key: str):
        """The POSIX attributes the medium keeps for ``key`` (a Meta), or None."""
        from nczfs.store.directory.store import meta_of

        return meta_of(os.lstat(self.root / key))


@dataclass
class ZipBackend:
    """The bytes live in a zip archive plus, while mounted, its staging directory (read both)."""

    archive: Path
    layout: str = "netcdf"
    name: str = "zip"

    @property
    def source(self) -> str:
        return str(self.archive)

    def _members(self) -> dict[str, bytes]:
        from tests.ziputil import medium_tree

        return medium_tree(self.archive, self.layout)[0]

    @property
    def staging_dir(self) -> Path:
        return self.archive.parent / f".{self.archive.name}.nczfs"

    def dirs(self) -> set[str]:
        from tests.ziputil import medium_tree

        return medium_tree(self.archive, self.layout)[1]

    def read(self, key: str) -> bytes:
        return self._members()[key]

    def exists(self, key: str) -> bool:
        return key in self._members()

    def keys(self, prefix: str = "") -> list[str]:
        start = prefix + "/" if prefix else ""
        return sorted(k for k in self._members() if k.startswith(start))

    def put(self, key: str, data: bytes) -> None:
        from tests.ziputil import rewrite_zip

        rewrite_zip(self.archive, {key: data}, default_layout=self.layout)

    def put_many(self, items: dict[str, bytes]) -> None:
        from tests.ziputil import rewrite_zip

        rewrite_zip(self.archive, items, default_layout=self.layout)

    def mkdir(self, key: str) -> None:
        from tests.ziputil import rewrite_zip

        rewrite_zip(self.archive, mkdirs={key}, default_layout=self.layout)

    def attrs(self, key: str):
        """The attributes the archive's entry for ``key`` carries (a Meta), or None; staged
        changes are not looked at: unmount (or sync) first."""
        import zipfile

        from nczfs.store.zip.entries import member_meta
        from tests.ziputil import dataset_prefix

        start = dataset_prefix(self.archive, self.layout)
        with zipfile.ZipFile(self.archive) as zf:
            for name in (start + key, start + key + "/"):
                if name in zf.NameToInfo:
                    return member_meta(zf.getinfo(name))
        raise KeyError(key)


@dataclass
class S3Backend:
    """The bytes live under a prefix of a bucket on the test session's SeaweedFS server."""

    server: object  # tests.s3server.SeaweedS3
    bucket: str
    prefix: str = "data"
    name: str = "s3"

    @property
    def source(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def mount_args(self) -> list[str]:
        return ["--endpoint-url", self.server.endpoint]

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def read(self, key: str) -> bytes:
        return self.server.client().get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()

    def exists(self, key: str) -> bool:
        return key in self.keys()

    def keys(self, prefix: str = "") -> list[str]:
        base = self._key(prefix) + "/" if prefix else (self.prefix + "/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        pages = self.server.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base)
        return sorted(o["Key"][strip:] for page in pages for o in page.get("Contents", ()))

    def put(self, key: str, data: bytes) -> None:
        self.server.client().put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def delete(self, key: str) -> None:
        self.server.client().delete_object(Bucket=self.bucket, Key=self._key(key))

    def etag(self, key: str) -> str:
        """The object's version as the mount names it: its ETag, without quotes."""
        return self.server.client().head_object(Bucket=self.bucket, Key=self._key(key))["ETag"].strip('"')

    def metadata(self, key: str) -> dict[str, str]:
        """The object's user metadata (``x-amz-meta-*``, names without the prefix)."""
        return self.server.client().head_object(Bucket=self.bucket, Key=self._key(key))["Metadata"]

    def attrs(self, key: str):
        """The POSIX attributes the object's metadata holds (a Meta), or None."""
        from nczfs.store.objstore.meta import meta_of

        return meta_of(self.metadata(key))

    def put_many(self, items: dict[str, bytes]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        client = self.server.client()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda kv: client.put_object(Bucket=self.bucket, Key=self._key(kv[0]), Body=kv[1]), items.items()))


@dataclass
class Mount:
    path: Path
    backend: DirectoryBackend
    log: Path
    extra_args: list[str] = field(default_factory=list)

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@contextlib.contextmanager
def mounted(backend, mnt: Path, *args: str, log: Path | None = None, source: str | None = None) -> Iterator[Mount]:
    """Mount ``backend`` on ``mnt`` with ``nczfs mount`` (daemonised), unmount on exit, even on failure."""
    mnt.mkdir(parents=True, exist_ok=True)
    log = log or mnt.parent / f"{mnt.name}.log"
    extra = getattr(backend, "mount_args", [])
    res = run_nczfs("mount", source or backend.source, str(mnt), "--log-file", str(log), *extra, *args)
    assert res.returncode == 0, f"mount failed ({res.returncode}): {res.stderr}\nlog:\n{log.read_text() if log.exists() else ''}"
    assert is_mounted(mnt), "nczfs mount returned 0 but nothing is mounted"
    m = Mount(mnt, backend, log, list(args))
    try:
        yield m
    finally:
        unmount(mnt)


def counts(mnt: Path) -> dict[str, int]:
    """The running daemon's request counters (``nczfs stats``), read from the root's control file."""
    from nczfs.fuse.control import read_control

    return read_control(str(mnt))["counters"]


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that changed between two ``counts`` readings, by how much."""
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def pages_in_memory(fd: int) -> bytes:
    """One byte per page of the open file, 1 where the kernel's page cache holds that page
    (mincore(2) over a read-only mapping; mapping reads nothing). Takes a descriptor already open:
    on FUSE, opening a file without keep_cache is what empties its page cache."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = os.fstat(fd).st_size
    if size == 0:
        return b""
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        vec = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
        if libc.mincore(addr, size, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return bytes(b & 1 for b in vec)
    finally:
        libc.munmap(addr, size)


def _umount_command(mnt: Path, timeout: float = 60) -> str:
    """``nczfs umount MNT`` run in this process (the command's own code, its output kept; a
    process of its own would cost a Python start and the CLI's imports at every mount's end):
    "" when it unmounted, else why not."""
    import io
    import threading

    from nczfs.cli import main

    out: list[str] = []

    def run() -> None:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                rc = main(["umount", str(mnt)])
        except BaseException as exc:  # noqa: BLE001 - reported as the command's failure
            rc = f"{type(exc).__name__}: {exc}"
        out.append("" if rc == 0 and not is_mounted(mnt) else f"({rc}): {err.getvalue()}")

    worker = threading.Thread(target=run, name="nczfs umount", daemon=True)
    worker.start()
    worker.join(timeout)
    return out[0] if out else "(timed out)"


def unmount(mnt: Path) -> None:
    """``nczfs umount``; if that fails or times out (a daemon stuck), the daemon is killed and the
    mount detached, so that nothing is left behind, and the failure is raised."""
    if not is_mounted(mnt):
        return
    failure = _umount_command(mnt)
    if failure:
        _kill_daemon_of(mnt)
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
        deadline = time.monotonic() + 10
        while is_mounted(mnt) and time.monotonic() < deadline:
            time.sleep(0.1)
        raise AssertionError(f"nczfs umount failed {failure}")


def _kill_daemon_of(mnt: Path) -> None:
    """SIGKILL the ``nczfs mount`` processes serving ``mnt`` (found by their command line)."""
    target = os.fsencode(os.path.abspath(mnt))
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"nczfs" in b" ".join(argv[:3]) and b"mount" in argv and target in argv:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(proc.name), signal.SIGKILL)



@dataclass
class CloudBackend:
    """The bytes live under a prefix of a bucket (container) on the session's fake-gcs-server
    (tests/gcsserver.py, ``gs``) or Azurite (tests/azurite.py, ``az``), reached by the mount
    with ``mount_args`` (credentials as users give them); the test reads the medium directly."""

    server: object  # tests.gcsserver.FakeGCS or tests.azurite.Azurite: get/put/keys(bucket, ...)
    bucket: str
    scheme: str
    mount_args: list[str]
    prefix: str = "data"

    @property
    def name(self) -> str:
        return {"gs": "gcs", "az": "azure"}[self.scheme]

    @property
    def source(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix}"

    def read(self, key: str) -> bytes:
        data = self.server.get(self.bucket, f"{self.prefix}/{key}")
        if data is None:
            raise KeyError(key)
        return data

    def keys(self, prefix: str = "") -> list[str]:
        base = f"{self.prefix}/{prefix}/" if prefix else f"{self.prefix}/"
        return [k[len(self.prefix) + 1:] for k in self.server.keys(self.bucket, base)]

    def put(self, key: str, data: bytes) -> None:
        self.server.put(self.bucket, f"{self.prefix}/{key}", data)

    def exists(self, key: str) -> bool:
        return self.server.get(self.bucket, f"{self.prefix}/{key}") is not None

    def etag(self, key: str) -> str:
        """The object's version as the mount names it: its ETag, without quotes."""
        full = f"{self.prefix}/{key}"
        if self.scheme == "gs":
            status, headers, _ = self.server.upstream("HEAD", f"/{self.bucket}/{full}")
            assert status == 200, status
            return headers["etag"].strip('"')
        return self.server.service().get_blob_client(self.bucket, full).get_blob_properties().etag.strip('"')
