"""Read the targets of references: local files, ``http(s)://`` and ``s3://`` URLs.

Each reader answers ``size(url)`` and ``read(url, start, end)`` (``end`` exclusive) and
raises nczfs errors naming the URL. All calls block; they run in the store's worker threads.

Local files are confined to *allowed roots* (``--allow-root``; default the reference
file's directory): the path is resolved with ``realpath`` before it is opened, and the
opened descriptor is checked again through ``/proc/self/fd``, so neither ``..`` nor a
symlink (even one swapped in between) reaches a file outside. Only regular files are read,
and they are opened with ``O_NONBLOCK`` so a FIFO cannot hang a worker. Descriptors are kept
open for the mount's life (the first :data:`MAX_OPEN_FILES` targets) and read with ``pread``.

HTTP uses one urllib3 pool manager (connections kept alive per host) with ranged GETs; S3
uses the S3 backend's client (one per mount, made on first use) and its ranged GETs.
"""

from __future__ import annotations

import logging
import os
import re
import stat as stat_mod
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError, PermissionDenied
from nczfs.store.objstore.s3url import parse_s3_url
from nczfs.store.values import ByteRange

if TYPE_CHECKING:
    from nczfs.store.objstore.options import S3Options

log = logging.getLogger(__name__)

#: local targets kept open for reuse; targets past this are opened for each read
MAX_OPEN_FILES = 256


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.lower() if "://" in url else ""


class LocalFiles:
    def __init__(self, allow_roots: list[str], mountpoint: str | None = None):
        self.roots = [os.path.realpath(r) for r in allow_roots]
        #: the mount serving these targets: a target inside it would make the daemon wait on itself
        self.mountpoint = mountpoint
        self._mount_dev: int | None = None
        self._lock = threading.Lock()
        self._open: dict[str, tuple[int, int]] = {}  # path -> (fd, size)

    def allows(self, real: str) -> bool:
        """Whether a resolved path lies below an allowed root."""
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in self.roots)

    def _refuse(self, path: str, real: str) -> PermissionDenied:
        log.warning(
            "refused reference target %s (resolves to %s): outside the allowed roots %s (see --allow-root)",
            path, real, ", ".join(self.roots),
        )
        return PermissionDenied(f"{path}: outside the allowed roots (--allow-root)")

    def _device_of_mount(self) -> int | None:
        # asked on the first read, when the mount is live (stat of its root needs no target)
        if self._mount_dev is None and self.mountpoint is not None:
            self._mount_dev = os.stat(self.mountpoint).st_dev
        return self._mount_dev

    def _resolve(self, path: str) -> str:
        """``realpath``, one component at a time, never stepping into this mount.

        A target inside the mount (directly, by ``..`` or through a symlink) would have the
        daemon serve its own read while waiting for it, so it is refused before any
        component inside the mount is looked up.
        """
        mount_dev = self._device_of_mount()
        todo = [p for p in reversed(path.split("/")) if p not in ("", ".")]
        current, links = "/", 0
        while todo:
            name = todo.pop()
            if name == "..":
                current = os.path.dirname(current)
                continue
            candidate = os.path.join(current, name)
            try:
                st = os.lstat(candidate)
            except OSError:
                return os.path.join(candidate, *reversed(todo))  # missing: open says so
            if st.st_dev == mount_dev:
                log.warning("refused reference target %s: it lies inside this mount (%s)", path, self.mountpoint)
                raise PermissionDenied(f"{path}: a reference target inside the mount itself")
            if stat_mod.S_ISLNK(st.st_mode):
                links += 1
                if links > 40:
                    raise BackendError(f"{path}: too many levels of symbolic links")
                link = os.readlink(candidate)
                todo.extend(p for p in reversed(link.split("/")) if p not in ("", "."))
                if link.startswith("/"):
                    current = "/"
                continue
            current = candidate
        return current

    def _open_checked(self, path: str) -> tuple[int, int]:
        real = self._resolve(path)
        if not self.allows(real):
            raise self._refuse(path, real)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW)
        except OSError as exc:
            raise BackendError(f"{path}: cannot open reference target ({exc.strerror})") from exc
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")
            if not self.allows(opened):  # a symlink swapped in after realpath
                raise self._refuse(path, opened)
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                raise BackendError(f"{path}: reference target is not a regular file")
            return fd, st.st_size
        except BaseException:
            os.close(fd)
            raise

    def _with_fd(self, path: str, use):
        with self._lock:
            held = self._open.get(path)
        if held is not None:
            return use(*held)
        fd, size = self._open_checked(path)
        with self._lock:
            if path not in self._open and len(self._open) < MAX_OPEN_FILES:
                self._open[path] = (fd, size)
                keep = True
            else:
                keep = False
        try:
            return use(fd, size)
        finally:
            if not keep:
                os.close(fd)

    def size(self, url: str) -> int:
        return self._with_fd(url, lambda fd, size: size)

    def read(self, url: str, start: int, end: int) -> bytes:
        def pread(fd: int, size: int) -> bytes:
            try:
                return os.pread(fd, max(0, end - start), start)
            except OSError as exc:
                raise BackendError(f"{url}: read failed ({exc.strerror})") from exc

        return self._with_fd(url, pread)

    def close(self) -> None:
        with self._lock:
            held, self._open = list(self._open.values()), {}
        for fd, _ in held:
            os.close(fd)


class HttpFiles:
    """Ranged GETs over keep-alive connections; sizes from HEAD (or a one-byte ranged GET)."""

    def __init__(self, max_connections: int = 8):
        import urllib3

        self._urllib3 = urllib3
        self.pool = urllib3.PoolManager(
            num_pools=32,
            maxsize=max_connections,
            timeout=urllib3.Timeout(connect=10.0, read=30.0),
            retries=urllib3.Retry(
                total=2, backoff_factor=0.2, status_forcelist=(500, 502, 503, 504),
                allowed_methods=frozenset({"GET", "HEAD"}), raise_on_status=False,
            ),
        )

    def _request(self, method: str, url: str, headers: dict[str, str] | None = None, preload: bool = True):
        try:
            return self.pool.request(method, url, headers=headers, preload_content=preload)
        except self._urllib3.exceptions.HTTPError as exc:
            raise BackendError(f"{url}: {method} failed ({exc})") from exc

    def size(self, url: str) -> int:
        r = self._request("HEAD", url)
        length = r.headers.get("Content-Length")
        if r.status == 200 and length is not None and length.isdigit():
            return int(length)
        r = self._request("GET", url, {"Range": "bytes=0-0"})
        m = re.fullmatch(r"bytes\s+(?:\d+-\d+|\*)/(\d+)", r.headers.get("Content-Range", "").strip())
        if r.status in (206, 416) and m:
            return int(m.group(1))
        if r.status == 200:
            return len(r.data)
        raise BackendError(f"{url}: cannot size the target (HTTP {r.status})")

    def read(self, url: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        r = self._request("GET", url, {"Range": f"bytes={start}-{end - 1}"}, preload=False)
        try:
            if r.status == 206:
                return r.read(end - start)
            if r.status == 200:  # the server ignored Range: read no further than needed
                return r.read(end)[start:]
            if r.status == 416:
                return b""  # wholly past the end; the caller reports the short read
            raise BackendError(f"{url}: GET bytes {start}-{end - 1} failed (HTTP {r.status})")
        except self._urllib3.exceptions.HTTPError as exc:
            raise BackendError(f"{url}: GET bytes {start}-{end - 1} failed ({exc})") from exc
        finally:
            if r.length_remaining != 0:  # body left unread (or of unknown length): drop the connection
                r.close()
            else:
                r.release_conn()

    def close(self) -> None:
        self.pool.clear()


class S3Files:
    """``s3://bucket/key`` targets through the S3 backend: its client, built from the mount's S3
    options (``--endpoint-url``, ``--profile``, ``--region``, ...), and its ranged GETs."""

    def __init__(self, options: S3Options, first_url: str):
        from nczfs.store.objstore.client import make_client

        try:
            self.client = make_client(options, parse_s3_url(first_url))
        except NczfsError as exc:
            raise BackendError(f"{first_url}: no S3 client for reference targets ({exc})") from exc
        self._options = options
        self._stores: dict[str, object] = {}
        self._lock = threading.Lock()

    def _object(self, url: str):
        try:
            loc = parse_s3_url(url)
        except NczfsError as exc:
            raise BackendError(f"{url}: not a usable S3 URL ({exc})") from exc
        if not loc.prefix:
            raise BackendError(f"{url}: names a bucket, not an object")
        with self._lock:
            store = self._stores.get(loc.bucket)
            if store is None:
                from nczfs.store.objstore.store import S3Store

                store = self._stores[loc.bucket] = S3Store(self.client, loc.bucket, "", read_only=True,
                                                           options=self._options)
        return store, loc.prefix

    def size(self, url: str) -> int:
        store, key = self._object(url)
        try:
            return store.stat(key).size
        except KeyNotFound as exc:
            raise BackendError(f"{url}: no such S3 object") from exc

    def read(self, url: str, start: int, end: int) -> bytes:
        store, key = self._object(url)
        try:
            return store.get(key, ByteRange(start, end))
        except KeyNotFound as exc:
            raise BackendError(f"{url}: no such S3 object") from exc

    def close(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:  # each has its own pool of lean-GET connections
            store.close()  # type: ignore[attr-defined]  # an obstore HTTPStore (untyped here)
        self.client.close()


class Targets:
    """Dispatch by URL scheme; readers are made on first use."""

    def __init__(self, allow_roots: list[str], mountpoint: str | None = None, s3: S3Options | None = None):
        #: the S3 options s3:// targets are read with (the mount's)
        self.s3_options = s3
        self.local = LocalFiles(allow_roots, mountpoint or None)
        self._http: HttpFiles | None = None
        self._s3: S3Files | None = None
        self._lock = threading.Lock()

    def reader(self, url: str):
        scheme = _scheme(url)
        if scheme == "":
            return self.local
        with self._lock:
            if scheme in ("http", "https"):
                if self._http is None:
                    self._http = HttpFiles()
                return self._http
            if scheme == "s3":
                if self._s3 is None:
                    if self.s3_options is None:
                        raise BackendError(f"{url}: s3 targets need the mount's S3 options")
                    self._s3 = S3Files(self.s3_options, url)
                return self._s3
        raise BackendError(f"{url}: unsupported target scheme {scheme!r}")

    def close(self) -> None:
        self.local.close()
        if self._http is not None:
            self._http.close()
        if self._s3 is not None:
            self._s3.close()
